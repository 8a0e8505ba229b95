//! Numbers of the perf.data format that the perf tool defines (tools/perf/util/header.h,
//! tools/lib/perf/include/perf/event.h), not the kernel: the kernel's record types,
//! sample and misc bits and attr are `perf_abi::sys::bindings`.

/// First record type of the perf tool (records it synthesizes, not the kernel's).
pub const PERF_RECORD_USER_TYPE_START: u32 = 64;
/// `PERF_RECORD_HEADER_ATTR`: pipe mode's attr of an event, with its ids.
pub const PERF_RECORD_HEADER_ATTR: u32 = 64;
/// `PERF_RECORD_HEADER_EVENT_TYPE`: pipe mode's event names before EVENT_UPDATE.
pub const PERF_RECORD_HEADER_EVENT_TYPE: u32 = 65;
/// `PERF_RECORD_FINISHED_ROUND`: records before it may be time-sorted before any after it.
pub const PERF_RECORD_FINISHED_ROUND: u32 = 68;
/// `PERF_RECORD_AUXTRACE_INFO`: which decoder the AUXTRACE data needs.
pub const PERF_RECORD_AUXTRACE_INFO: u32 = 70;
/// `PERF_RECORD_AUXTRACE`: a chunk of AUX data, which follows the record.
pub const PERF_RECORD_AUXTRACE: u32 = 71;
/// `PERF_RECORD_EVENT_UPDATE`: pipe mode's event names (and other updates).
pub const PERF_RECORD_EVENT_UPDATE: u32 = 78;
/// `PERF_RECORD_HEADER_FEATURE`: pipe mode's header feature sections.
pub const PERF_RECORD_HEADER_FEATURE: u32 = 80;
/// `PERF_EVENT_UPDATE__NAME`, the name payload of an EVENT_UPDATE record.
pub const PERF_EVENT_UPDATE__NAME: u64 = 2;
/// `sizeof(struct perf_record_auxtrace)`: header, size, offset, reference, idx, tid, cpu,
/// reserved. The trace data follows the record, outside its `header.size`.
pub const AUXTRACE_RECORD_SIZE: u64 = 48;
/// `PERF_RECORD_MISC_BUILD_ID_SIZE` of a HEADER_BUILD_ID entry: its size byte is valid.
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
pub const PERF_ATTR_SIZE: usize = perf_abi::sys::bindings::PERF_ATTR_SIZE_VER7 as usize;
/// `sizeof(struct perf_file_header)`: magic, size, attr_size, 3 sections, 256-bit feature map.
pub const PERF_FILE_HEADER_SIZE: usize = 104;
/// `sizeof(struct perf_pipe_file_header)`: magic and size; pipe mode has nothing else.
pub const PERF_PIPE_HEADER_SIZE: usize = 16;
/// `sizeof(struct perf_file_section)`: offset and size.
pub const PERF_FILE_SECTION_SIZE: usize = 16;
