//! Constants of the perf ABI (include/uapi/linux/perf_event.h and tools/perf/util/header.h)
//! that callers of this crate need to build attrs and interpret records.

/// `PERF_TYPE_SOFTWARE`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CPU_CLOCK`.
pub const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;

/// `perf_event_sample_format` bits.
pub const PERF_SAMPLE_IP: u64 = 1 << 0;
pub const PERF_SAMPLE_TID: u64 = 1 << 1;
pub const PERF_SAMPLE_TIME: u64 = 1 << 2;
pub const PERF_SAMPLE_ADDR: u64 = 1 << 3;
pub const PERF_SAMPLE_READ: u64 = 1 << 4;
pub const PERF_SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const PERF_SAMPLE_ID: u64 = 1 << 6;
pub const PERF_SAMPLE_CPU: u64 = 1 << 7;
pub const PERF_SAMPLE_PERIOD: u64 = 1 << 8;
pub const PERF_SAMPLE_STREAM_ID: u64 = 1 << 9;
pub const PERF_SAMPLE_RAW: u64 = 1 << 10;
pub const PERF_SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub const PERF_SAMPLE_IDENTIFIER: u64 = 1 << 16;

/// `perf_branch_sample_type` bits.
pub const PERF_SAMPLE_BRANCH_USER: u64 = 1 << 0;
pub const PERF_SAMPLE_BRANCH_KERNEL: u64 = 1 << 1;
pub const PERF_SAMPLE_BRANCH_HV: u64 = 1 << 2;
pub const PERF_SAMPLE_BRANCH_ANY: u64 = 1 << 3;
pub const PERF_SAMPLE_BRANCH_TYPE_SAVE: u64 = 1 << 16;
pub const PERF_SAMPLE_BRANCH_HW_INDEX: u64 = 1 << 17;

/// `perf_event_type` values.
pub const PERF_RECORD_MMAP: u32 = 1;
pub const PERF_RECORD_LOST: u32 = 2;
pub const PERF_RECORD_COMM: u32 = 3;
pub const PERF_RECORD_EXIT: u32 = 4;
pub const PERF_RECORD_THROTTLE: u32 = 5;
pub const PERF_RECORD_UNTHROTTLE: u32 = 6;
pub const PERF_RECORD_FORK: u32 = 7;
pub const PERF_RECORD_SAMPLE: u32 = 9;
pub const PERF_RECORD_MMAP2: u32 = 10;
/// First user-space (synthesized by the perf tool) record type.
pub const PERF_RECORD_USER_TYPE_START: u32 = 64;
pub const PERF_RECORD_HEADER_ATTR: u32 = 64;
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;
pub const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
pub const PERF_RECORD_AUXTRACE: u32 = 71;
pub const PERF_RECORD_EVENT_UPDATE: u32 = 78;
pub const PERF_RECORD_HEADER_FEATURE: u32 = 80;
/// `PERF_EVENT_UPDATE__NAME`, the name payload of an EVENT_UPDATE record.
pub const PERF_EVENT_UPDATE__NAME: u64 = 2;
/// `sizeof(struct perf_record_auxtrace)`: header, size, offset, reference, idx, tid, cpu,
/// reserved. The trace data follows the record, outside its `header.size`.
pub const AUXTRACE_RECORD_SIZE: u64 = 48;

/// `perf_event_header.misc` bits: the CPU mode (a value under this mask), then flags.
pub const PERF_RECORD_MISC_CPUMODE_MASK: u16 = 7;
pub const PERF_RECORD_MISC_KERNEL: u16 = 1;
pub const PERF_RECORD_MISC_USER: u16 = 2;
pub const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
pub const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
pub const PERF_RECORD_MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// Feature bits of the perf.data header (`enum HEADER_FEAT` in tools/perf/util/header.h).
pub const HEADER_TRACING_DATA: u32 = 1;
pub const HEADER_BUILD_ID: u32 = 2;
pub const HEADER_HOSTNAME: u32 = 3;
pub const HEADER_OSRELEASE: u32 = 4;
pub const HEADER_VERSION: u32 = 5;
pub const HEADER_ARCH: u32 = 6;
pub const HEADER_NRCPUS: u32 = 7;
pub const HEADER_CPUDESC: u32 = 8;
pub const HEADER_CPUID: u32 = 9;
pub const HEADER_TOTAL_MEM: u32 = 10;
pub const HEADER_CMDLINE: u32 = 11;
pub const HEADER_EVENT_DESC: u32 = 12;
pub const HEADER_BRANCH_STACK: u32 = 15;
pub const HEADER_AUXTRACE: u32 = 18;

/// `sizeof(struct perf_event_attr)` as of PERF_ATTR_SIZE_VER7, the attr perf.data files
/// written here hold: perf before 6.3 (6.1 is bookworm's) knows no larger one, and perf
/// refuses a file whose attr is larger than the struct it was built with.
pub const PERF_ATTR_SIZE: usize = 128;
/// `sizeof(struct perf_file_header)`: magic, size, attr_size, 3 sections, 256-bit feature map.
pub const PERF_FILE_HEADER_SIZE: usize = 104;
/// `sizeof(struct perf_pipe_file_header)`: magic and size; pipe mode has nothing else.
pub const PERF_PIPE_HEADER_SIZE: usize = 16;
/// `sizeof(struct perf_event_header)`.
pub const PERF_EVENT_HEADER_SIZE: usize = 8;
