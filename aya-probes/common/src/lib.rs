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

#[cfg(test)]
extern crate std;

/// Deepest stack the kernel records: `PERF_MAX_STACK_DEPTH` in
/// `include/uapi/linux/perf_event.h`, the room of a [`StackFrames`].
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
    /// `HashMap<u64, StackFrames>`: a stack's hash ([`stack_hash`](crate::stack_hash))
    /// → its addresses, user and kernel stacks alike.
    pub const STACK_TRACES: &str = "STACK_TRACES";
    /// `PerCpuArray<StackFrames>` of one entry: where `sample_stacks` takes a
    /// stack before hashing it (a stack is twice the BPF stack's 512 bytes).
    pub const STACK_SCRATCH: &str = "STACK_SCRATCH";
    /// `RingBuf` of [`ProcessEvent`](crate::ProcessEvent)s.
    pub const PROCESS_EVENTS: &str = "PROCESS_EVENTS";
    /// `PerCpuArray<u64>` indexed by [`Counter`](crate::Counter).
    pub const COUNTERS: &str = "COUNTERS";
    /// `Array<Config>` with one entry, index
    /// [`CONFIG_INDEX`](crate::CONFIG_INDEX).
    pub const CONFIG: &str = "CONFIG";
    /// `Array<KernelSymbolBatch>` of one entry: the kernel addresses userland asks
    /// `name_kernel_addresses` to name, and the names it writes beside them. One
    /// entry of [`KERNEL_SYMBOL_BATCH`](crate::KERNEL_SYMBOL_BATCH) slots, not an
    /// entry per slot: a batch is then one map write and one map read, not 64 of each
    /// (2,200 `bpf` calls in a host churn's first two intervals, each a system call).
    pub const KERNEL_SYMBOLS: &str = "KERNEL_SYMBOLS";
}

/// Names of the programs in the eBPF object, for `Ebpf::program_mut`.
pub mod program_name {
    /// `perf_event` program: attach to a sampling perf event on every CPU.
    pub const SAMPLE_STACKS: &str = "sample_stacks";
    /// Tracepoint program for `sched:sched_process_exec`.
    pub const SCHED_PROCESS_EXEC: &str = "sched_process_exec";
    /// Tracepoint program for `sched:sched_process_exit`.
    pub const SCHED_PROCESS_EXIT: &str = "sched_process_exit";
    /// Raw tracepoint program never attached: userland runs it through
    /// `BPF_PROG_TEST_RUN` to have the kernel name the addresses of `KERNEL_SYMBOLS`.
    pub const NAME_KERNEL_ADDRESSES: &str = "name_kernel_addresses";
}

/// Default number of distinct [`StackKey`]s counted between two drains by
/// userland. The loader may change it before load with
/// `EbpfLoader::map_max_entries(map_name::STACK_COUNTS, n)` (`rvperf daemon`
/// sizes it for the machine's CPUs and sampling frequency); when it is
/// full, new keys are counted in [`Counter::SamplesDropped`].
pub const STACK_COUNTS_DEFAULT_MAX_ENTRIES: u32 = 16_384;

/// Default number of distinct stacks kept between two drains. The kernel
/// preallocates every entry (about 1 KiB each: a [`StackFrames`]), so 8192 is
/// about 9 MiB. When it is full, a new stack cannot be inserted: the sample
/// keeps the insert's error code (`-E2BIG`) as its stack's [`StackKey`] status
/// and is counted in [`Counter::UserStackErrors`] or
/// [`Counter::KernelStackErrors`].
pub const STACK_TRACES_DEFAULT_MAX_ENTRIES: u32 = 8_192;

/// Default size of the `PROCESS_EVENTS` ring buffer in bytes: a power of two
/// and a multiple of the page size, as the kernel requires. About 800
/// [`ProcessEvent`]s fit before userland must read.
pub const PROCESS_EVENTS_DEFAULT_BYTES: u32 = 256 * 1024;

/// The one index of the `CONFIG` array.
pub const CONFIG_INDEX: u32 = 0;

/// Entries in the `CONFIG` array.
pub const CONFIG_MAX_ENTRIES: u32 = 1;

/// A [`StackKey`] status: the stack was recorded, its hash is a key of
/// `STACK_TRACES`.
pub const STACK_RECORDED: i32 = 0;

/// A [`StackKey`] status: [`Config`] asked not to collect that stack.
/// Distinct from every `-errno` the kernel returns.
pub const STACK_NOT_COLLECTED: i32 = i32::MIN;

/// Key of the `STACK_COUNTS` map: one per distinct (process, user stack,
/// kernel stack).
///
/// A stack is named by its contents' hash ([`stack_hash`]), not by a slot of
/// the kernel's stack map, so a stack keeps its name for the whole run:
/// userland reads a stack once and knows it from then on whenever a sample
/// names it, and the kernel never refuses a stack because another one took its
/// bucket (as `bpf_get_stackid`'s `STACK_TRACE` map does).
///
/// A status [`STACK_RECORDED`] means the hash is a key of `STACK_TRACES`
/// (unless userland removed it since: it keeps what it read). A negative
/// status means there is no stack and says why: [`STACK_NOT_COLLECTED`], or
/// the `-errno` of `bpf_get_stack` or of the insert into `STACK_TRACES`:
/// `-EFAULT` (14) when there is no stack to walk (a kernel thread or the idle
/// task have no user stack; a sample of user code has no kernel stack),
/// `-E2BIG` (7) when `STACK_TRACES` is full. The hash is then 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackKey {
    /// Process id (the kernel's tgid) of the sampled task; 0 for the idle
    /// task, whose samples are real CPU time and are counted like any other.
    pub pid: u32,
    /// [`STACK_RECORDED`] or a negative reason, for the user-space stack.
    pub user_stack_status: i32,
    /// [`STACK_RECORDED`] or a negative reason, for the kernel stack.
    pub kernel_stack_status: i32,
    /// Always 0; makes the padding before the hashes explicit (a hash key's
    /// every byte is compared).
    pub reserved: u32,
    /// The user-space stack's [`stack_hash`], or 0.
    pub user_stack: u64,
    /// The kernel stack's [`stack_hash`], or 0.
    pub kernel_stack: u64,
}

/// A `STACK_TRACES` value: a stack's addresses, leaf first.
///
/// Only the first `depth` addresses are the stack's; the rest of the array is
/// whatever the per-CPU scratch entry held before (zeroing 1 KiB on every
/// sample would cost more than it protects).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackFrames {
    /// Addresses used, at most [`STACK_DEPTH`].
    pub depth: u64,
    pub addresses: [u64; STACK_DEPTH],
}

impl StackFrames {
    /// The stack's addresses: the first `depth`, at most all of them.
    pub fn used(&self) -> &[u64] {
        let depth = usize::try_from(self.depth)
            .unwrap_or(STACK_DEPTH)
            .min(STACK_DEPTH);
        &self.addresses[..depth]
    }
}

/// The start of a [`stack_hash`]: any constant would do; this one is
/// 2^64 / φ, whose bits are well mixed.
pub const STACK_HASH_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// Mixes one address into a [`stack_hash`] under way.
///
/// Each step is a bijection of the running hash for a given address (an xor,
/// a multiplication by an odd constant, an xor-shift), so two stacks that
/// differ in their last address only never collide; the final mix
/// ([`stack_hash_finish`]) spreads every difference over all 64 bits. Two
/// distinct stacks share a hash with a chance of about 2^-64 each: a run of a
/// million distinct stacks has about one chance in 10^7 of any one
/// collision, whose samples would be counted under the other stack.
#[inline(always)]
pub const fn stack_hash_step(hash: u64, address: u64) -> u64 {
    let mixed = (hash ^ address).wrapping_mul(0xff51_afd7_ed55_8ccd);
    mixed ^ (mixed >> 29)
}

/// Ends a [`stack_hash`] of `depth` addresses: mixes in the depth (a stack
/// and its prefix differ) and avalanches the result (MurmurHash3's 64-bit
/// finaliser). Never 0, the hash of "no stack" in a [`StackKey`].
#[inline(always)]
pub const fn stack_hash_finish(hash: u64, depth: u64) -> u64 {
    let mut mixed = hash ^ depth;
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xff51_afd7_ed55_8ccd);
    mixed ^= mixed >> 33;
    mixed = mixed.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    mixed ^= mixed >> 33;
    if mixed == 0 {
        1
    } else {
        mixed
    }
}

/// The hash by which `sample_stacks` names a stack (`addresses`, leaf first):
/// [`stack_hash_step`] over every address from [`STACK_HASH_SEED`], then
/// [`stack_hash_finish`]. The eBPF program runs the same steps, one
/// `bpf_loop` callback each; userland checks every new stack it reads with
/// this.
pub fn stack_hash(addresses: &[u64]) -> u64 {
    let hash = addresses.iter().fold(STACK_HASH_SEED, |hash, &address| {
        stack_hash_step(hash, address)
    });
    stack_hash_finish(hash, addresses.len() as u64)
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
    /// idle task) and stays visible in [`StackKey::user_stack_status`] only.
    /// In practice `-E2BIG`: `STACK_TRACES` is full.
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
    /// Do not walk user stacks (their status is `STACK_NOT_COLLECTED`).
    pub const SKIP_USER_STACKS: u32 = 1 << 0;
    /// Do not walk kernel stacks (their status is `STACK_NOT_COLLECTED`).
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

/// Kernel addresses named by one run of `name_kernel_addresses`.
pub const KERNEL_SYMBOL_BATCH: u32 = 64;

/// Bytes of a [`KernelSymbolSlot`]'s text: the kernel's `%pS` of an address,
/// `function+0xoffset/0xsize [module]`, NUL-terminated. A kernel symbol name is
/// at most `KSYM_NAME_LEN` (512) bytes, but the kernel's own are far shorter; a
/// longer text is cut, and userland refuses a text without its offset and size.
pub const KERNEL_SYMBOL_TEXT: usize = 248;

/// A `KERNEL_SYMBOLS` entry: an address userland writes, and the kernel's name
/// for it (`%pS` through `bpf_snprintf`), which `name_kernel_addresses` writes.
/// This names the kernel's functions without `/proc/kallsyms`, whose every read
/// has the kernel format all its lines (50,000 in the riscv64 guest: 0.2 to 0.5 s
/// of a start-up there), and names only the addresses sampled.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelSymbolSlot {
    pub address: u64,
    pub text: [u8; KERNEL_SYMBOL_TEXT],
}

/// The one `KERNEL_SYMBOLS` entry: a batch of addresses to name, the first
/// `count` of them used (the program's argument 0).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelSymbolBatch {
    pub slots: [KernelSymbolSlot; KERNEL_SYMBOL_BATCH as usize],
}

impl KernelSymbolBatch {
    /// A batch of no addresses, every text empty.
    pub const EMPTY: KernelSymbolBatch = KernelSymbolBatch {
        slots: [KernelSymbolSlot {
            address: 0,
            text: [0; KERNEL_SYMBOL_TEXT],
        }; KERNEL_SYMBOL_BATCH as usize],
    };
}

/// The index of the one `KERNEL_SYMBOLS` entry.
pub const KERNEL_SYMBOLS_INDEX: u32 = 0;

// The layouts both sides depend on: a change breaks the eBPF/userland ABI.
const _: () = assert!(core::mem::size_of::<KernelSymbolSlot>() == 256);
const _: () = assert!(core::mem::size_of::<KernelSymbolBatch>() == 256 * 64);
const _: () = assert!(core::mem::size_of::<StackKey>() == 32);
const _: () = assert!(core::mem::size_of::<StackFrames>() == 1024);
const _: () = assert!(core::mem::size_of::<ProcessEvent>() == 304);
const _: () = assert!(core::mem::size_of::<ProcessEvent>() % 8 == 0);
const _: () = assert!(core::mem::size_of::<Config>() == 8);
const _: () = assert!(Counter::ALL.len() == Counter::COUNT as usize);
const _: () = assert!(PROCESS_EVENTS_DEFAULT_BYTES.is_power_of_two());

#[cfg(feature = "user")]
mod user {
    use super::{Config, KernelSymbolBatch, ProcessEvent, StackFrames, StackKey};

    // SAFETY: `#[repr(C)]`, `Copy`, only integer fields with no implicit
    // padding (sizes asserted above), so every bit pattern is a valid value
    // and every byte is initialised.
    unsafe impl aya::Pod for StackKey {}

    // SAFETY: as for `StackKey`: integers and byte arrays, padding made an
    // explicit `reserved` field.
    unsafe impl aya::Pod for ProcessEvent {}

    // SAFETY: as for `StackKey`: two `u32`s.
    unsafe impl aya::Pod for Config {}

    // SAFETY: as for `StackKey`: a `u64` and an array of them.
    unsafe impl aya::Pod for StackFrames {}

    // SAFETY: as for `StackKey`: an array of slots, each a `u64` and a byte
    // array, no padding (both sizes are asserted above).
    unsafe impl aya::Pod for KernelSymbolBatch {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The eBPF program's walk: `bpf_loop` calls `hash_stack_step` for each
    /// index below the depth, and a step stops the walk at the stack's room, as
    /// `record_stack` runs them.
    fn hash_as_the_probe_does(frames: &StackFrames) -> u64 {
        let mut hash = STACK_HASH_SEED;
        for index in 0..frames.depth {
            let Ok(index) = usize::try_from(index) else {
                break;
            };
            if index >= STACK_DEPTH {
                break;
            }
            hash = stack_hash_step(hash, frames.addresses[index]);
        }
        stack_hash_finish(hash, frames.depth)
    }

    #[test]
    fn the_probes_hash_is_the_hash_of_the_used_addresses() {
        // The unused tail holds an older, deeper stack: it must not count.
        let mut frames = StackFrames {
            depth: 3,
            addresses: [0xdead_beef; STACK_DEPTH],
        };
        frames.addresses[..3].copy_from_slice(&[0x1000, 0x2000, 0x3000]);
        assert_eq!(frames.used(), &[0x1000, 0x2000, 0x3000]);
        assert_eq!(
            hash_as_the_probe_does(&frames),
            stack_hash(&[0x1000, 0x2000, 0x3000])
        );
        // A depth past the array (a corrupt value) reads no further than it.
        frames.depth = u64::MAX;
        assert_eq!(frames.used().len(), STACK_DEPTH);
    }

    #[test]
    fn stacks_that_differ_anywhere_hash_apart() {
        let stack: [u64; 6] = [
            0xffff_ffff_8000_1234,
            0xffff_ffff_8000_5678,
            0xffff_ffff_8010_0000,
            0x10_0a2c,
            0x10_0b00,
            0x10_0400,
        ];
        let mut hashes = std::vec![stack_hash(&stack)];
        // Every prefix (a stack and its caller's differ only by their depth).
        for depth in 0..stack.len() {
            hashes.push(stack_hash(&stack[..depth]));
        }
        // Every single address changed, by one bit or by a swap with its neighbour.
        for index in 0..stack.len() {
            let mut changed = stack;
            changed[index] ^= 1;
            hashes.push(stack_hash(&changed));
            if index + 1 < stack.len() {
                let mut swapped = stack;
                swapped.swap(index, index + 1);
                hashes.push(stack_hash(&swapped));
            }
        }
        let distinct: std::collections::BTreeSet<u64> = hashes.iter().copied().collect();
        assert_eq!(distinct.len(), hashes.len(), "{hashes:x?}");
        // 0 means "no stack" in a StackKey.
        assert!(!hashes.contains(&0));
    }

    #[test]
    fn a_hundred_thousand_nearby_stacks_share_no_hash() {
        // Kernel stacks under churn: the same callers, leaves a few bytes apart.
        let mut seen = std::collections::HashSet::new();
        for leaf in 0..100_000_u64 {
            let stack = [
                0xffff_ffff_8000_0000 + leaf * 2,
                0xffff_ffff_8001_0000,
                0xffff_ffff_8002_0000,
            ];
            assert!(seen.insert(stack_hash(&stack)), "collision at leaf {leaf}");
        }
    }
}
