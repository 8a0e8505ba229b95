//! The ABI of `/dev/rvtrace`, as `kmod-shim/include/uapi/rvtrace.h` defines it (the
//! driver's Rust types are generated from that header; `tests/uapi_layout.rs` checks
//! these against it with a C compiler).

/// `RVTRACE_ABI_VERSION`.
pub const ABI_VERSION: u32 = 1;

/// Instruction trace modes (`RVTRACE_MODE_*`, the values of trTeInstMode).
pub mod mode {
    pub const BTM: u32 = 3;
    pub const HTM: u32 = 6;
}

/// Privilege levels to trace (`RVTRACE_PRIVILEGE_*`); none set: every level.
pub mod privilege {
    pub const USER: u32 = 1 << 0;
    pub const SUPERVISOR: u32 = 1 << 1;
    pub const MACHINE: u32 = 1 << 3;
}

/// Encoder features (`RVTRACE_FEATURE_*`).
pub mod feature {
    pub const IMPLICIT_RETURN: u32 = 1 << 0;
    pub const REPEATED_HISTORY: u32 = 1 << 1;
    pub const ALL_JUMPS: u32 = 1 << 2;
    pub const SEQUENTIAL_JUMPS: u32 = 1 << 3;
    pub const MSB_EXTENSION: u32 = 1 << 4;
    pub const TIMESTAMPS: u32 = 1 << 5;
    pub const CONTEXT: u32 = 1 << 6;
    pub const STOP_ON_WRAP: u32 = 1 << 7;
    /// The driver writes the running task to each hart's context (`RVTRACE_CONTEXT_*`,
    /// `perf_abi::ntrace::task_context`); implies [`CONTEXT`].
    pub const CONTEXT_TASK: u32 = 1 << 8;
    pub const ALL: u32 = 0x1ff;
}

/// `RVTRACE_SYNC_NONE`: no periodic synchronisation.
pub const SYNC_NONE: u32 = u32::MAX;

/// Block flags (`RVTRACE_INFO_*`).
pub mod info_flag {
    /// The sink counts its wraps: `bytes_written` is exact however rarely it is read.
    pub const WRAP_COUNT: u32 = 1 << 0;
    /// Every encoder has rvperf's stand-in context register, which the driver writes
    /// for [`feature::CONTEXT_TASK`](super::feature::CONTEXT_TASK).
    pub const CONTEXT_REGISTER: u32 = 1 << 1;
}

/// Status flags (`RVTRACE_STATUS_*`).
pub mod status_flag {
    pub const CONFIGURED: u32 = 1 << 0;
    pub const RUNNING: u32 = 1 << 1;
    pub const WRAPPED: u32 = 1 << 2;
    pub const STOPPED_ON_WRAP: u32 = 1 << 3;
}

/// `struct rvtrace_config`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub size: u32,
    pub mode: u32,
    pub features: u32,
    pub privileges: u32,
    pub sync_max: u32,
    pub timestamp_prescale: u32,
    pub harts: u64,
    pub buffer_bytes: u64,
    pub reserved: [u64; 4],
}

/// `struct rvtrace_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub size: u32,
    pub abi_version: u32,
    pub encoders: u32,
    pub return_stack_depth: u32,
    pub harts: u64,
    pub sink_size: u64,
    pub encoder_impl: u32,
    pub funnel_impl: u32,
    pub sink_impl: u32,
    pub flags: u32,
    pub reserved: [u64; 4],
}

/// `struct rvtrace_status`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Status {
    pub size: u32,
    pub flags: u32,
    pub buffer_offset: u64,
    pub buffer_bytes: u64,
    pub write_offset: u64,
    pub bytes_written: u64,
    pub wraps: u64,
    pub overflow_harts: u64,
    pub src_bits: u32,
    pub reserved0: u32,
    pub reserved: [u64; 3],
}

/// `struct rvtrace_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wait {
    pub size: u32,
    pub timeout_ms: u32,
    pub until_bytes: u64,
    pub status: Status,
}

/// `RVTRACE_IOC_MAGIC` and the command numbers (`RVTRACE_NR_*`).
pub const IOC_MAGIC: u8 = 0xb7;
pub mod number {
    pub const GET_INFO: u8 = 0x01;
    pub const CONFIGURE: u8 = 0x02;
    pub const START: u8 = 0x03;
    pub const STOP: u8 = 0x04;
    pub const GET_STATUS: u8 = 0x05;
    pub const WAIT: u8 = 0x06;
}

/// The ioctl request numbers (`RVTRACE_IOC_*`), as the header's `_IOR`/`_IOW`/`_IO`/
/// `_IOWR` compute them. (nix's request type is the C library's: `c_ulong` on glibc,
/// `c_int` on musl; the casts make them one type.)
#[allow(clippy::unnecessary_cast)]
pub mod request {
    use super::{number, Config, Info, Status, Wait, IOC_MAGIC};
    use nix::{request_code_none, request_code_read, request_code_readwrite, request_code_write};

    pub const GET_INFO: u64 =
        request_code_read!(IOC_MAGIC, number::GET_INFO, size_of::<Info>()) as u64;
    pub const CONFIGURE: u64 =
        request_code_write!(IOC_MAGIC, number::CONFIGURE, size_of::<Config>()) as u64;
    pub const START: u64 = request_code_none!(IOC_MAGIC, number::START) as u64;
    pub const STOP: u64 = request_code_none!(IOC_MAGIC, number::STOP) as u64;
    pub const GET_STATUS: u64 =
        request_code_read!(IOC_MAGIC, number::GET_STATUS, size_of::<Status>()) as u64;
    pub const WAIT: u64 =
        request_code_readwrite!(IOC_MAGIC, number::WAIT, size_of::<Wait>()) as u64;
}

impl Config {
    /// A configuration with its `size` set and everything else at its default (BTM is
    /// not a default: `mode` 0 is refused, so a caller always says which mode).
    pub fn new(mode: u32) -> Config {
        Config {
            size: size_of::<Config>() as u32,
            mode,
            sync_max: SYNC_NONE,
            ..Config::default()
        }
    }
}
