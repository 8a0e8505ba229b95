//! rvperf's eBPF programs for an always-on profiler (see aya-probes/README.md):
//!
//! - `sample_stacks` (`perf_event`): on every sample of a sampling perf event,
//!   takes the user and kernel stacks, names each by the hash of its addresses,
//!   records the ones `STACK_TRACES` does not hold yet, and counts the
//!   (process, user stack, kernel stack) in `STACK_COUNTS`;
//! - `sched_process_exec` and `sched_process_exit` (tracepoints): tell
//!   userland through the `PROCESS_EVENTS` ring buffer when a process starts
//!   running a new file or ends, so it can refresh or drop what it knows of
//!   its mappings.
//!
//! - `name_kernel_addresses` (raw tracepoint, never attached): run by userland
//!   through `BPF_PROG_TEST_RUN`, it has the kernel name the addresses userland
//!   wrote into `KERNEL_SYMBOLS` (`%pS` through `bpf_snprintf`), so the daemon
//!   names kernel frames without reading `/proc/kallsyms`.
//!
//! Every loss is counted in `COUNTERS`. The programs read only tracepoint
//! fields and call only helpers: the guest kernel has no BTF, so there is no
//! CO-RE and no `task_struct` access.

#![no_std]
#![no_main]
// For `atomic_add`: BPF inline assembly is still unstable in Rust (aya-ebpf
// itself needs the same feature; aya-probes/build.sh allows both crates to
// use it on Debian's stable rustc with RUSTC_BOOTSTRAP).
#![feature(asm_experimental_arch)]

use core::ffi::c_void;

use aya_ebpf::{
    bindings::{BPF_F_USER_STACK, BPF_NOEXIST},
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_stack, bpf_ktime_get_ns, bpf_loop,
        bpf_probe_read_kernel_str_bytes, bpf_snprintf,
    },
    macros::{map, perf_event, raw_tracepoint, tracepoint},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::{PerfEventContext, RawTracePointContext, TracePointContext},
    EbpfContext,
};
use aya_probes_common::{
    config_flag, process_event_kind, stack_hash_finish, stack_hash_step, Config, Counter,
    KernelSymbolBatch, KernelSymbolSlot, ProcessEvent, StackFrames, StackKey, CONFIG_INDEX,
    CONFIG_MAX_ENTRIES, KERNEL_SYMBOLS_INDEX, KERNEL_SYMBOL_BATCH, KERNEL_SYMBOL_TEXT,
    PROCESS_EVENTS_DEFAULT_BYTES, STACK_COUNTS_DEFAULT_MAX_ENTRIES, STACK_DEPTH, STACK_HASH_SEED,
    STACK_NOT_COLLECTED, STACK_RECORDED, STACK_TRACES_DEFAULT_MAX_ENTRIES, TASK_COMM_LENGTH,
};

/// The kernel requires a GPL-compatible license for `bpf_get_stack` and
/// `bpf_probe_read_kernel_str`; our code is MIT (or Apache-2.0), and MIT is
/// GPL-compatible. The kernel reads it NUL-terminated.
#[unsafe(no_mangle)]
#[unsafe(link_section = "license")]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

// The map statics' names are the map names userland looks up: keep them equal
// to `aya_probes_common::map_name`. Sizes are defaults the loader may change
// with `EbpfLoader::map_max_entries` before load.

#[map]
static STACK_COUNTS: HashMap<StackKey, u64> =
    HashMap::with_max_entries(STACK_COUNTS_DEFAULT_MAX_ENTRIES, 0);

#[map]
static STACK_TRACES: HashMap<u64, StackFrames> =
    HashMap::with_max_entries(STACK_TRACES_DEFAULT_MAX_ENTRIES, 0);

#[map]
static STACK_SCRATCH: PerCpuArray<StackFrames> = PerCpuArray::with_max_entries(1, 0);

#[map]
static PROCESS_EVENTS: RingBuf = RingBuf::with_byte_size(PROCESS_EVENTS_DEFAULT_BYTES, 0);

#[map]
static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(Counter::COUNT, 0);

#[map]
static CONFIG: Array<Config> = Array::with_max_entries(CONFIG_MAX_ENTRIES, 0);

#[map]
static KERNEL_SYMBOLS: Array<KernelSymbolBatch> = Array::with_max_entries(1, 0);

/// `bpf_snprintf`'s format for a kernel address: `function+0xoffset/0xsize`, then
/// ` [module]` for a module's. The verifier wants the format in a read-only map,
/// which this static's `.rodata` is (aya freezes it at load).
static SYMBOL_FORMAT: [u8; 4] = *b"%pS\0";

/// `EFAULT` from `include/uapi/asm-generic/errno-base.h`: `bpf_get_stack`
/// found no stack to walk.
const EFAULT: i32 = 14;

/// `ENOENT` from `include/uapi/asm-generic/errno-base.h`: no scratch entry.
const ENOENT: i32 = 2;

/// Bytes of a stack's addresses, `bpf_get_stack`'s room.
const STACK_BYTES: u32 = (STACK_DEPTH * core::mem::size_of::<u64>()) as u32;

/// `EEXIST` from `include/uapi/asm-generic/errno-base.h`: a `BPF_NOEXIST`
/// insert found the key already there.
const EEXIST: i32 = 17;

/// Flags of `bpf_get_stack` for the kernel stack: none (the default is the
/// kernel stack of the interrupted context).
const KERNEL_STACK_FLAGS: u64 = 0;

/// Flags of `bpf_loop`: none are defined.
const BPF_LOOP_FLAGS: u64 = 0;

/// Flags of `bpf_ringbuf_reserve`, `_submit` and `_discard`: none (submit
/// wakes userland up as the kernel sees fit).
const RING_BUFFER_FLAGS: u64 = 0;

/// Bit shift of the tgid (process id) in `bpf_get_current_pid_tgid()`; the
/// low 32 bits are the kernel pid (thread id).
const TGID_SHIFT: u32 = 32;

// Tracepoint record layouts. A tracepoint program's context is the raw record
// the kernel writes for the event: `struct trace_entry` (common_type u16,
// common_flags u8, common_preempt_count u8, common_pid i32: 8 bytes, from
// include/linux/trace_events.h) and then the event's fields in the order of
// its TP_STRUCT__entry in include/trace/events/sched.h. The offsets are those
// of /sys/kernel/tracing/events/sched/<event>/format read on Linux 6.18
// (x86_64). They follow from field types and order alone, which are the same
// on riscv64; sched_process_exec's fields have not changed since Linux 3.4,
// and sched_process_exit's only grew `group_dead` at the end, so the guest's
// 7.3 has the same offsets (to be confirmed there with the format files).

/// sched_process_exec: `field:__data_loc char[] filename; offset:8; size:4;`
const EXEC_FILENAME_DATA_LOCATION_OFFSET: usize = 8;
/// sched_process_exec: `field:pid_t pid; offset:12; size:4;` (thread id after exec)
const EXEC_PID_OFFSET: usize = 12;
/// sched_process_exec: `field:pid_t old_pid; offset:16; size:4;`
const EXEC_OLD_PID_OFFSET: usize = 16;
/// sched_process_exit: `field:char comm[16]; offset:8; size:16;`
const EXIT_COMM_OFFSET: usize = 8;
/// sched_process_exit: `field:pid_t pid; offset:24; size:4;`
const EXIT_PID_OFFSET: usize = 24;
/// sched_process_exit: `field:bool group_dead; offset:32; size:1;` Added to
/// the tracepoint in 2025 (present in 6.18 here and in the guest's 7.3); on
/// an older kernel this offset is past the record.
const EXIT_GROUP_DEAD_OFFSET: usize = 32;

/// A `__data_loc` field is a u32: the low 16 bits are the offset of the data
/// from the start of the record, the high 16 bits its length
/// (include/trace/stages/stage5_get_offsets.h).
const DATA_LOCATION_OFFSET_MASK: u32 = 0xffff;

/// Counts one sample of the current task's stacks.
///
/// The idle task (pid 0) is counted too: its samples are real CPU time, the
/// time no task ran.
#[perf_event]
pub fn sample_stacks(context: PerfEventContext) -> u32 {
    let config = read_config();
    let pid = (bpf_get_current_pid_tgid() >> TGID_SHIFT) as u32;
    if config.flags & config_flag::TARGET_PID_ONLY != 0 && pid != config.target_pid {
        return 0;
    }
    increment_counter(Counter::SamplesSeen);

    let user = if config.flags & config_flag::SKIP_USER_STACKS != 0 {
        RecordedStack::absent(STACK_NOT_COLLECTED)
    } else {
        record_stack(
            &context,
            u64::from(BPF_F_USER_STACK),
            Counter::UserStackErrors,
        )
    };
    let kernel = if config.flags & config_flag::SKIP_KERNEL_STACKS != 0 {
        RecordedStack::absent(STACK_NOT_COLLECTED)
    } else {
        record_stack(&context, KERNEL_STACK_FLAGS, Counter::KernelStackErrors)
    };

    count_sample(&StackKey {
        pid,
        user_stack_status: user.status,
        kernel_stack_status: kernel.status,
        reserved: 0,
        user_stack: user.hash,
        kernel_stack: kernel.hash,
    });
    0
}

/// What [`record_stack`] found: a [`StackKey`] status and hash.
struct RecordedStack {
    status: i32,
    hash: u64,
}

impl RecordedStack {
    #[inline(always)]
    fn absent(status: i32) -> Self {
        RecordedStack { status, hash: 0 }
    }
}

/// Takes one of the current stacks, names it by its hash and makes sure
/// `STACK_TRACES` holds it (inserted before the sample is counted, so a
/// count userland reads always names a stack that was in the map). On
/// failure, the status is the negative error code, so the sample is still
/// counted, under "no stack" and with the reason.
///
/// `-EFAULT` is not counted in `error_counter`: it means there was no stack
/// in that mode to walk, the normal case for the kernel stack of a sample
/// that interrupted user code and for the user stack of a kernel thread.
#[inline(always)]
fn record_stack(context: &PerfEventContext, flags: u64, error_counter: Counter) -> RecordedStack {
    let failed = |code: i32| {
        if code != -EFAULT {
            increment_counter(error_counter);
        }
        RecordedStack::absent(code)
    };
    // The scratch entry is this CPU's: a sample does not interrupt another
    // sample's program on the same CPU (perf_event programs do not nest).
    let Some(frames) = STACK_SCRATCH.get_ptr_mut(0) else {
        // Not expected (the array's one entry always exists); counted, unlike -EFAULT.
        return failed(-ENOENT);
    };
    // SAFETY: a live per-CPU map value of type StackFrames, this CPU's own.
    let frames = unsafe { &mut *frames };
    // SAFETY: the buffer is the entry's `addresses`, STACK_BYTES writable
    // bytes; the helper writes at most that many and returns how many.
    let written = unsafe {
        bpf_get_stack(
            context.as_ptr(),
            frames.addresses.as_mut_ptr().cast(),
            STACK_BYTES,
            flags,
        )
    };
    if written < 0 {
        return failed(written as i32);
    }
    let depth = (written as u64) / core::mem::size_of::<u64>() as u64;
    if depth == 0 {
        return failed(-EFAULT);
    }
    frames.depth = depth;
    let mut walk = StackHashWalk {
        frames: &*frames,
        depth,
        hash: STACK_HASH_SEED,
    };
    // `bpf_loop` rather than a loop in this program: the verifier checks the
    // callback once, where it follows a bounded loop through every one of its
    // STACK_DEPTH iterations and each iteration's early end, for both stacks
    // (the guest's kernel verified 5,519 instructions of this program with the
    // loop, 805 with `bpf_loop`; its time was the largest part of a start-up
    // there). Its return is the number of steps taken: never an error for
    // these arguments.
    // SAFETY: `hash_stack_step` has bpf_loop's callback signature and reads
    // the walk it is given; `walk` outlives the call.
    unsafe {
        bpf_loop(
            depth as u32,
            hash_stack_step as *mut c_void,
            (&raw mut walk).cast(),
            BPF_LOOP_FLAGS,
        )
    };
    let hash = stack_hash_finish(walk.hash, depth);
    if STACK_TRACES.get_ptr(hash).is_none() {
        // BPF_NOEXIST: another CPU may have inserted the same stack since the
        // lookup; theirs is the same addresses (barring a hash collision).
        match STACK_TRACES.insert(hash, &*frames, u64::from(BPF_NOEXIST)) {
            Ok(()) => {}
            Err(code) if code == -EEXIST => {}
            // Full (-E2BIG) or out of memory.
            Err(code) => return failed(code),
        }
    }
    RecordedStack {
        status: STACK_RECORDED,
        hash,
    }
}

/// The state of one stack's hash, walked by `bpf_loop`.
struct StackHashWalk {
    frames: *const StackFrames,
    /// Addresses to hash, at most [`STACK_DEPTH`].
    depth: u64,
    hash: u64,
}

/// `bpf_loop`'s callback: mixes the address at `index` into the walk's hash.
/// Returns 0 to go on, 1 to stop (past the stack's room, which `depth`
/// never is; the verifier wants the bound).
#[inline(never)]
extern "C" fn hash_stack_step(index: u64, walk: *mut c_void) -> i64 {
    // SAFETY: `walk` is the StackHashWalk `record_stack` passed to bpf_loop,
    // on its stack for the whole loop.
    let walk = unsafe { &mut *walk.cast::<StackHashWalk>() };
    let Ok(index) = usize::try_from(index) else {
        return 1;
    };
    if index >= STACK_DEPTH || index as u64 >= walk.depth {
        return 1;
    }
    // SAFETY: `frames` is this CPU's live scratch entry (record_stack's),
    // and `index` is within its addresses.
    let address = unsafe { (*walk.frames).addresses[index] };
    walk.hash = stack_hash_step(walk.hash, address);
    0
}

/// Adds one to `key`'s count, inserting it at 1 if it is new. A sample that
/// cannot be counted is counted in `SamplesDropped` instead.
#[inline(always)]
fn count_sample(key: &StackKey) {
    if let Some(count) = STACK_COUNTS.get_ptr_mut(key) {
        // SAFETY: a live map value of type u64, 8-byte aligned by the kernel.
        unsafe { atomic_add(count, 1) };
        return;
    }
    // BPF_NOEXIST: another CPU may insert the same key between our lookup and
    // this insert; overwriting it would lose its count.
    match STACK_COUNTS.insert(key, 1_u64, u64::from(BPF_NOEXIST)) {
        Ok(()) => {}
        Err(code) if code == -EEXIST => match STACK_COUNTS.get_ptr_mut(key) {
            // SAFETY: as above.
            Some(count) => unsafe { atomic_add(count, 1) },
            // Userland deleted the key (draining the map) in between.
            None => increment_counter(Counter::SamplesDropped),
        },
        // Full (-E2BIG) or out of memory: the map must be drained faster or
        // made larger; the count says by how much.
        Err(_) => increment_counter(Counter::SamplesDropped),
    }
}

/// Tells userland that a process now runs a new file.
#[tracepoint(category = "sched", name = "sched_process_exec")]
pub fn sched_process_exec(context: TracePointContext) -> u32 {
    send_process_event(|event| fill_exec_event(&context, event));
    0
}

#[inline(always)]
fn fill_exec_event(context: &TracePointContext, event: &mut ProcessEvent) -> Result<(), i32> {
    let filename_location: u32 = read_field(context, EXEC_FILENAME_DATA_LOCATION_OFFSET)?;
    let pid: i32 = read_field(context, EXEC_PID_OFFSET)?;
    let old_pid: i32 = read_field(context, EXEC_OLD_PID_OFFSET)?;

    let filename_offset = (filename_location & DATA_LOCATION_OFFSET_MASK) as usize;
    // SAFETY: the __data_loc offset points inside this record, where the
    // kernel copied the NUL-terminated path; the helper reads at most
    // `filename.len()` bytes, checks the source address and always
    // NUL-terminates.
    let filename_length = unsafe {
        bpf_probe_read_kernel_str_bytes(
            context.as_ptr().cast::<u8>().add(filename_offset),
            &mut event.filename,
        )
    }?
    .len();

    event.kind = process_event_kind::EXEC;
    // At most FILENAME_CAPACITY - 1.
    event.filename_length = filename_length as u32;
    event.pid = pid as u32;
    event.old_pid = old_pid as u32;
    event.tgid = (bpf_get_current_pid_tgid() >> TGID_SHIFT) as u32;
    event.timestamp_ns = monotonic_time_ns();
    // After exec the task already bears the new file's name.
    event.comm = bpf_get_current_comm()?;
    Ok(())
}

/// Tells userland that a process ended. Only the exit of a process's last
/// thread (`group_dead`) is sent: thread exits change nothing userland keeps.
#[tracepoint(category = "sched", name = "sched_process_exit")]
pub fn sched_process_exit(context: TracePointContext) -> u32 {
    match read_field::<u8>(&context, EXIT_GROUP_DEAD_OFFSET) {
        Ok(0) => {}
        Ok(_) => send_process_event(|event| fill_exit_event(&context, event)),
        Err(_) => increment_counter(Counter::ProcessEventsLost),
    }
    0
}

#[inline(always)]
fn fill_exit_event(context: &TracePointContext, event: &mut ProcessEvent) -> Result<(), i32> {
    let comm: [u8; TASK_COMM_LENGTH] = read_field(context, EXIT_COMM_OFFSET)?;
    let pid: i32 = read_field(context, EXIT_PID_OFFSET)?;

    event.kind = process_event_kind::EXIT;
    event.pid = pid as u32;
    // The exiting task is the current one (do_exit runs in its context).
    event.tgid = (bpf_get_current_pid_tgid() >> TGID_SHIFT) as u32;
    event.timestamp_ns = monotonic_time_ns();
    event.comm = comm;
    Ok(())
}

/// Reserves a zeroed `ProcessEvent` in `PROCESS_EVENTS`, lets `fill` write
/// it, and submits it; if there is no room or `fill` fails, counts the event
/// in `ProcessEventsLost` instead.
#[inline(always)]
fn send_process_event(fill: impl FnOnce(&mut ProcessEvent) -> Result<(), i32>) {
    let Some(mut entry) = PROCESS_EVENTS.reserve::<ProcessEvent>(RING_BUFFER_FLAGS) else {
        increment_counter(Counter::ProcessEventsLost);
        return;
    };
    // Zeroed so that no byte userland reads is left over from an older
    // record (the ring buffer's memory is reused).
    // SAFETY: the reservation is size_of::<ProcessEvent>() writable bytes,
    // suitably aligned (ring buffer records are 8-byte aligned, and
    // `reserve` checks the type needs no more), ours until submit or
    // discard; all-zero bytes are a valid ProcessEvent.
    let event = unsafe {
        let event = entry.as_mut_ptr();
        core::ptr::write_bytes(event, 0, 1);
        &mut *event
    };
    match fill(event) {
        Ok(()) => entry.submit(RING_BUFFER_FLAGS),
        Err(_) => {
            entry.discard(RING_BUFFER_FLAGS);
            increment_counter(Counter::ProcessEventsLost);
        }
    }
}

/// Types of which any bytes are a valid value: the only ones `read_field`
/// may return, since it copies whatever bytes are at the offset.
trait PlainField: Copy {}
impl PlainField for u8 {}
impl PlainField for i32 {}
impl PlainField for u32 {}
impl<const LENGTH: usize> PlainField for [u8; LENGTH] {}

/// Reads the tracepoint field of type `T` at `offset` in the record.
#[inline(always)]
fn read_field<T: PlainField>(context: &TracePointContext, offset: usize) -> Result<T, i32> {
    // SAFETY: `read_at` copies with bpf_probe_read_kernel, which checks the
    // address and fails rather than fault; any bytes are a valid `T`
    // (`PlainField`); callers pass the offset constants above, each inside
    // its event's record.
    unsafe { context.read_at(offset) }
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
#[inline(always)]
fn monotonic_time_ns() -> u64 {
    // SAFETY: the helper takes no argument and only reads the clock; aya
    // marks every raw helper binding unsafe.
    unsafe { bpf_ktime_get_ns() }
}

/// The configuration userland wrote, or the default (all zero: profile
/// everything) if it wrote none.
#[inline(always)]
fn read_config() -> Config {
    CONFIG.get(CONFIG_INDEX).copied().unwrap_or_default()
}

/// Adds one to this CPU's slot of `counter`.
#[inline(always)]
fn increment_counter(counter: Counter) {
    if let Some(value) = COUNTERS.get_ptr_mut(counter.index()) {
        // Atomic although the slot is per-CPU: a perf_event sample can
        // interrupt a tracepoint program on the same CPU mid-update.
        // SAFETY: a live per-CPU map value of type u64, 8-byte aligned.
        unsafe { atomic_add(value, 1) };
    }
}

/// Adds `amount` to `*target` atomically with the BPF atomic add instruction
/// (`BPF_STX | BPF_ATOMIC | BPF_DW`, `BPF_ADD`, the former `XADD`, valid on
/// every kernel).
///
/// Inline assembly because `AtomicU64::fetch_add` does not exist on this
/// target: the BPF target spec has no compare-and-swap, so Rust does not set
/// `target_has_atomic = "64"` and core offers only atomic loads and stores.
///
/// # Safety
///
/// `target` must be valid for writes and 8-byte aligned.
#[inline(always)]
unsafe fn atomic_add(target: *mut u64, amount: u64) {
    // SAFETY: the caller guarantees `target`; the instruction touches only
    // those 8 bytes and no stack.
    unsafe {
        core::arch::asm!(
            "lock *(u64 *)({target} + 0) += {amount}",
            target = in(reg) target,
            amount = in(reg) amount,
            options(nostack, preserves_flags),
        );
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_information: &core::panic::PanicInfo<'_>) -> ! {
    // Nothing here ever runs: the verifier refuses any program that could
    // reach this loop, so only panic-free code can be loaded at all.
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Names the first `count` (argument 0) addresses of the `KERNEL_SYMBOLS` batch,
/// each written beside its address. Userland runs it through `BPF_PROG_TEST_RUN`;
/// it is never attached. Returns how many it named.
#[raw_tracepoint]
pub fn name_kernel_addresses(context: RawTracePointContext) -> i32 {
    let count: u64 = context.arg(0);
    let Some(batch) = KERNEL_SYMBOLS.get_ptr_mut(KERNEL_SYMBOLS_INDEX) else {
        return 0;
    };
    let mut named = 0;
    for index in 0..KERNEL_SYMBOL_BATCH {
        if u64::from(index) >= count {
            break;
        }
        // SAFETY: `batch` points at the `KERNEL_SYMBOLS` value, which the kernel
        // keeps while the program runs, and `index` is below its
        // `KERNEL_SYMBOL_BATCH` slots (the verifier checks the offset too); the
        // format is a NUL-terminated string in a read-only map, and `arguments` is
        // one initialised `u64`, as `%pS` takes.
        let written = unsafe {
            let slot = core::ptr::addr_of_mut!((*batch).slots)
                .cast::<KernelSymbolSlot>()
                .add(index as usize);
            let mut arguments = [(*slot).address];
            bpf_snprintf(
                (*slot).text.as_mut_ptr().cast(),
                KERNEL_SYMBOL_TEXT as u32,
                SYMBOL_FORMAT.as_ptr().cast(),
                arguments.as_mut_ptr(),
                core::mem::size_of_val(&arguments) as u32,
            )
        };
        if written > 0 {
            named += 1;
        }
    }
    named
}
