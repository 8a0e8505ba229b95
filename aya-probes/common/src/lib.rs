//! What rvperf's eBPF programs (`aya-probes-ebpf`) and their userland loader
//! must agree on: the layout of every map key, value and event, the map and
//! program names, and the default map sizes.
//!
//! Everything here is `#[repr(C)]` with no implicit padding, so the bytes the
//! kernel writes are exactly the bytes userland reads, and a hash key never
//! carries uninitialised padding that would split one logical key in two.
//! The sizes are pinned by compile-time assertions below: a change here must
//! be made on both sides (rebuild the eBPF object and the loader together).
//!
//! With the `user` feature the types implement `aya::Pod`, which aya's
//! userland map accessors require.

#![no_std]

/// Deepest stack the kernel records: `PERF_MAX_STACK_DEPTH` in
/// `include/uapi/linux/perf_event.h`. A `STACK_TRACES` value is this many
/// `u64` instruction addresses, unused slots zero (aya-ebpf's `StackTrace`
/// map fixes its value size to this).
pub const STACK_DEPTH: usize = 127;

/// Length of a task's `comm` (`TASK_COMM_LEN` in `include/linux/sched.h`),
/// NUL-padded.
pub const TASK_COMM_LENGTH: usize = 16;

/// Bytes kept of an exec'd file's path, NUL included. Longer paths are cut
/// (see [`ProcessEvent::filename_length`]); 256 keeps a whole event well
/// inside one ring-buffer page.
pub const FILENAME_CAPACITY: usize = 256;

/// Names of the maps in the eBPF object, for `Ebpf::map_mut` and
/// `EbpfLoader::map_max_entries`. They are the names of the statics in
/// `aya-probes/ebpf/src/main.rs`.
pub mod map_name {
    /// `HashMap<StackKey, u64>`: how many samples hit each (process, user
    /// stack, kernel stack).
    pub const STACK_COUNTS: &str = "STACK_COUNTS";
    /// `StackTrace`: stack id → [`STACK_DEPTH`](crate::STACK_DEPTH) addresses,
    /// user and kernel stacks alike.
    pub const STACK_TRACES: &str = "STACK_TRACES";
    /// `RingBuf` of [`ProcessEvent`](crate::ProcessEvent)s.
    pub const PROCESS_EVENTS: &str = "PROCESS_EVENTS";
    /// `PerCpuArray<u64>` indexed by [`Counter`](crate::Counter).
    pub const COUNTERS: &str = "COUNTERS";
    /// `Array<Config>` with one entry, index
    /// [`CONFIG_INDEX`](crate::CONFIG_INDEX).
    pub const CONFIG: &str = "CONFIG";
}

/// Names of the programs in the eBPF object, for `Ebpf::program_mut`.
pub mod program_name {
    /// `perf_event` program: attach to a sampling perf event on every CPU.
    pub const SAMPLE_STACKS: &str = "sample_stacks";
    /// Tracepoint program for `sched:sched_process_exec`.
    pub const SCHED_PROCESS_EXEC: &str = "sched_process_exec";
    /// Tracepoint program for `sched:sched_process_exit`.
    pub const SCHED_PROCESS_EXIT: &str = "sched_process_exit";
}

/// Default number of distinct [`StackKey`]s counted between two drains by
/// userland. The loader may change it before load with
/// `EbpfLoader::map_max_entries(map_name::STACK_COUNTS, n)` (`rvperf daemon`
/// sizes it for the machine's CPUs and sampling frequency); when it is
/// full, new keys are counted in [`Counter::SamplesDropped`].
pub const STACK_COUNTS_DEFAULT_MAX_ENTRIES: u32 = 16_384;

/// Default number of distinct stacks kept. The kernel preallocates every
/// entry (about 1 KiB each: [`STACK_DEPTH`] × 8 bytes), so 8192 is about
/// 8 MiB; it also rounds the count up to a power of two. When it is full,
/// `bpf_get_stackid` fails with `-EEXIST` and the sample keeps that code in
/// its [`StackKey`].
pub const STACK_TRACES_DEFAULT_MAX_ENTRIES: u32 = 8_192;

/// Default size of the `PROCESS_EVENTS` ring buffer in bytes: a power of two
/// and a multiple of the page size, as the kernel requires. About 800
/// [`ProcessEvent`]s fit before userland must read.
pub const PROCESS_EVENTS_DEFAULT_BYTES: u32 = 256 * 1024;

/// The one index of the `CONFIG` array.
pub const CONFIG_INDEX: u32 = 0;

/// Entries in the `CONFIG` array.
pub const CONFIG_MAX_ENTRIES: u32 = 1;

/// Stack id stored in a [`StackKey`] when [`Config`] asked not to collect
/// that stack. Distinct from every `-errno` `bpf_get_stackid` returns.
pub const STACK_ID_NOT_COLLECTED: i32 = i32::MIN;

/// Key of the `STACK_COUNTS` map: one per distinct (process, user stack,
/// kernel stack).
///
/// A stack id `>= 0` is a key of `STACK_TRACES`. A negative id means there is
/// no stack: either [`STACK_ID_NOT_COLLECTED`] or the `-errno` that
/// `bpf_get_stackid` returned, kept so userland can tell why: `-EFAULT` (14)
/// when there is no stack to walk (a kernel thread or the idle task have no
/// user stack), `-EEXIST` (17) when `STACK_TRACES` already holds a different
/// stack in that bucket (a hash collision, or the map is full).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackKey {
    /// Process id (the kernel's tgid) of the sampled task; 0 for the idle
    /// task, whose samples are real CPU time and are counted like any other.
    pub pid: u32,
    /// `STACK_TRACES` key of the user-space stack, or a negative reason.
    pub user_stack_id: i32,
    /// `STACK_TRACES` key of the kernel stack, or a negative reason.
    pub kernel_stack_id: i32,
}

/// Why a [`ProcessEvent`] was sent.
pub mod process_event_kind {
    /// A task called exec (`sched:sched_process_exec`): the process now runs
    /// a new file, so its old mappings and symbols are gone.
    pub const EXEC: u32 = 1;
    /// The last task of a process exited (`sched:sched_process_exit` with
    /// `group_dead`): the process id may be reused from now on.
    pub const EXIT: u32 = 2;
}

/// One record of the `PROCESS_EVENTS` ring buffer.
///
/// There is no parent process id: the tracepoints do not carry one, and
/// reading it from `task_struct` needs kernel BTF, which the guest kernel
/// does not have (see aya-probes/README.md). Userland reads it from
/// `/proc/<pid>/stat` when it needs it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessEvent {
    /// One of [`process_event_kind`].
    pub kind: u32,
    /// Kernel pid, that is the thread id, of the task that exec'd or exited.
    pub pid: u32,
    /// Process id (the kernel's tgid): the [`StackKey::pid`] of its samples.
    pub tgid: u32,
    /// For exec, the thread id the task had before exec: it differs from
    /// `pid` when a thread other than the leader called exec and took over
    /// the leader's id. 0 for exit.
    pub old_pid: u32,
    /// `bpf_ktime_get_ns()` when the event happened (`CLOCK_MONOTONIC`).
    pub timestamp_ns: u64,
    /// Bytes of `filename` before its NUL; 0 for exit. Equal to
    /// `FILENAME_CAPACITY - 1` when the path may have been cut.
    pub filename_length: u32,
    /// Always 0; makes the padding before `comm` explicit.
    pub reserved: u32,
    /// The task's `comm` (its new name after exec), NUL-padded.
    pub comm: [u8; TASK_COMM_LENGTH],
    /// For exec, the path given to exec, NUL-terminated; zero for exit.
    pub filename: [u8; FILENAME_CAPACITY],
}

/// Counters of the `COUNTERS` per-CPU array, by index. Userland sums the
/// per-CPU values. They make every loss visible: a sample or event that is
/// not recorded is counted here.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Counter {
    /// Samples taken by `sample_stacks` (after the [`Config`] filter).
    SamplesSeen = 0,
    /// Samples lost because `STACK_COUNTS` refused a new key: it was full
    /// (`-E2BIG`) or the kernel was out of memory.
    SamplesDropped = 1,
    /// Samples whose user stack could not be recorded for a reason other
    /// than `-EFAULT`, which means there was none (a kernel thread or the
    /// idle task) and stays visible in [`StackKey::user_stack_id`] only. In
    /// practice `-EEXIST`: `STACK_TRACES` is full or two stacks collided.
    UserStackErrors = 2,
    /// As [`Counter::UserStackErrors`] for kernel stacks. `-EFAULT`, not
    /// counted, is every sample that interrupted user code.
    KernelStackErrors = 3,
    /// Process events not sent because `PROCESS_EVENTS` was full, or a
    /// tracepoint field could not be read.
    ProcessEventsLost = 4,
}

impl Counter {
    /// Entries in the `COUNTERS` array.
    pub const COUNT: u32 = 5;

    /// Every counter, in index order.
    pub const ALL: [Self; Self::COUNT as usize] = [
        Self::SamplesSeen,
        Self::SamplesDropped,
        Self::UserStackErrors,
        Self::KernelStackErrors,
        Self::ProcessEventsLost,
    ];

    /// The counter's index in `COUNTERS`.
    pub const fn index(self) -> u32 {
        self as u32
    }

    /// A short name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SamplesSeen => "samples seen",
            Self::SamplesDropped => "samples dropped (stack counts map full)",
            Self::UserStackErrors => "user stack errors (besides no stack)",
            Self::KernelStackErrors => "kernel stack errors (besides no stack)",
            Self::ProcessEventsLost => "process events lost",
        }
    }
}

/// Bits of [`Config::flags`]. All zero, the state of a `CONFIG` entry that
/// userland never wrote, means: profile everything, both stacks.
pub mod config_flag {
    /// Do not walk user stacks (their id is `STACK_ID_NOT_COLLECTED`).
    pub const SKIP_USER_STACKS: u32 = 1 << 0;
    /// Do not walk kernel stacks (their id is `STACK_ID_NOT_COLLECTED`).
    pub const SKIP_KERNEL_STACKS: u32 = 1 << 1;
    /// Count only the samples of process [`Config::target_pid`](crate::Config::target_pid).
    pub const TARGET_PID_ONLY: u32 = 1 << 2;
}

/// The one entry of the `CONFIG` array, written by userland at any time
/// (after load too: the programs read it on every sample).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// [`config_flag`] bits.
    pub flags: u32,
    /// The process id (tgid) to profile when `TARGET_PID_ONLY` is set.
    pub target_pid: u32,
}

// The layouts both sides depend on: a change breaks the eBPF/userland ABI.
const _: () = assert!(core::mem::size_of::<StackKey>() == 12);
const _: () = assert!(core::mem::size_of::<ProcessEvent>() == 304);
const _: () = assert!(core::mem::size_of::<ProcessEvent>() % 8 == 0);
const _: () = assert!(core::mem::size_of::<Config>() == 8);
const _: () = assert!(Counter::ALL.len() == Counter::COUNT as usize);
const _: () = assert!(PROCESS_EVENTS_DEFAULT_BYTES.is_power_of_two());

#[cfg(feature = "user")]
mod user {
    use super::{Config, ProcessEvent, StackKey};

    // SAFETY: `#[repr(C)]`, `Copy`, only integer fields with no implicit
    // padding (sizes asserted above), so every bit pattern is a valid value
    // and every byte is initialised.
    unsafe impl aya::Pod for StackKey {}

    // SAFETY: as for `StackKey`: integers and byte arrays, padding made an
    // explicit `reserved` field.
    unsafe impl aya::Pod for ProcessEvent {}

    // SAFETY: as for `StackKey`: two `u32`s.
    unsafe impl aya::Pod for Config {}
}
