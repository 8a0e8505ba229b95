//! Building `perf_event_attr` from an [`EventSpec`] and recording options, and
//! converting it to and from the bytes that perf.data and the syscall hold.

use std::mem::size_of;

use perf_event_open_sys::bindings::{self as b, perf_event_attr};

use crate::EventSpec;

/// How often the event samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// Count only; no samples are written.
    Counting,
    /// One sample every N events (N nanoseconds for the clock events).
    Period(u64),
    /// About N samples per second; the kernel adjusts the period.
    Frequency(u64),
}

/// When the kernel wakes a poll(2)er on the ring buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// After this many samples (0 behaves like 1).
    Events(u32),
    /// After this many bytes of records.
    Watermark(u32),
}

/// Everything of `perf_event_attr` that is not the event itself.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrOptions {
    pub sampling: Sampling,
    /// `PERF_SAMPLE_*` bits; CALLCHAIN and BRANCH_STACK are added by the
    /// fields below.
    pub sample_type: u64,
    pub callchain: bool,
    /// `PERF_SAMPLE_BRANCH_*` bits; non-zero also sets PERF_SAMPLE_BRANCH_STACK.
    pub branch_sample_type: u64,
    pub exclude_kernel: bool,
    pub exclude_user: bool,
    pub inherit: bool,
    pub disabled: bool,
    pub enable_on_exec: bool,
    pub sample_id_all: bool,
    pub mmap: bool,
    pub mmap2: bool,
    pub comm: bool,
    pub task: bool,
    pub context_switch: bool,
    pub wakeup: Wakeup,
    pub aux_watermark: u32,
    /// `PERF_FORMAT_*` bits.
    pub read_format: u64,
    /// 0..=3, perf's `:p` count.
    pub precise_ip: u8,
}

impl Default for AttrOptions {
    /// perf record's defaults: 4000 Hz, ip/tid/time/period, starts disabled,
    /// sample_id_all so side-band records carry pid/tid/time.
    fn default() -> Self {
        Self {
            sampling: Sampling::Frequency(4000),
            sample_type: u64::from(
                b::PERF_SAMPLE_IP
                    | b::PERF_SAMPLE_TID
                    | b::PERF_SAMPLE_TIME
                    | b::PERF_SAMPLE_PERIOD,
            ),
            callchain: false,
            branch_sample_type: 0,
            exclude_kernel: false,
            exclude_user: false,
            inherit: false,
            disabled: true,
            enable_on_exec: false,
            sample_id_all: true,
            mmap: false,
            mmap2: false,
            comm: false,
            task: false,
            context_switch: false,
            wakeup: Wakeup::Events(1),
            aux_watermark: 0,
            read_format: 0,
            precise_ip: 0,
        }
    }
}

/// Combines an event and options into the attr handed to perf_event_open.
pub fn build_attr(spec: &EventSpec, options: &AttrOptions) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: spec.pmu_type,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: spec.config,
        ..Default::default()
    };
    attr.config1 = spec.config1;
    attr.config2 = spec.config2;

    let mut sample_type = options.sample_type;
    if options.callchain {
        sample_type |= u64::from(b::PERF_SAMPLE_CALLCHAIN);
    }
    if options.branch_sample_type != 0 {
        sample_type |= u64::from(b::PERF_SAMPLE_BRANCH_STACK);
    }
    attr.sample_type = sample_type;
    attr.branch_sample_type = options.branch_sample_type;
    attr.read_format = options.read_format;
    match options.sampling {
        Sampling::Counting => attr.sample_period = 0,
        Sampling::Period(period) => attr.sample_period = period,
        Sampling::Frequency(hz) => {
            attr.sample_freq = hz;
            attr.set_freq(1);
        }
    }
    match options.wakeup {
        Wakeup::Events(count) => attr.wakeup_events = count,
        Wakeup::Watermark(bytes) => {
            attr.wakeup_watermark = bytes;
            attr.set_watermark(1);
        }
    }
    attr.aux_watermark = options.aux_watermark;
    attr.set_disabled(options.disabled.into());
    attr.set_inherit(options.inherit.into());
    attr.set_exclude_kernel(options.exclude_kernel.into());
    attr.set_exclude_user(options.exclude_user.into());
    attr.set_enable_on_exec(options.enable_on_exec.into());
    attr.set_sample_id_all(options.sample_id_all.into());
    attr.set_mmap(options.mmap.into());
    attr.set_mmap2(options.mmap2.into());
    attr.set_comm(options.comm.into());
    attr.set_task(options.task.into());
    attr.set_context_switch(options.context_switch.into());
    attr.set_precise_ip(u64::from(options.precise_ip.min(3)));
    attr
}

/// `sizeof(struct perf_event_attr)` as this build knows it (PERF_ATTR_SIZE_VER9).
pub const ATTR_SIZE: usize = size_of::<perf_event_attr>();

/// `PERF_ATTR_SIZE_VER0`: the first published attr, the shortest there is.
pub const ATTR_SIZE_VER0: usize = b::PERF_ATTR_SIZE_VER0 as usize;

// `attr_bytes` and `attr_from_bytes` rely on the struct being exactly the uapi
// layout of this size; a newer perf-event-open-sys must be looked at, not absorbed.
const _: () = assert!(ATTR_SIZE == b::PERF_ATTR_SIZE_VER9 as usize);

/// Why bytes are not a `perf_event_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttrBytesError {
    /// Shorter than PERF_ATTR_SIZE_VER0, which every attr has at least.
    #[error("perf_event_attr of {len} bytes is shorter than PERF_ATTR_SIZE_VER0 (64 bytes)")]
    TooShort { len: usize },
    /// Sets a byte past the struct this build knows: a field newer than rvperf, which
    /// it cannot keep and must not drop silently.
    #[error(
        "perf_event_attr of {len} bytes sets byte {offset}, past the {ATTR_SIZE} bytes \
         of the fields rvperf knows"
    )]
    UnknownField { len: usize, offset: usize },
}

/// The attr's bytes in native byte order, as perf_event_open(2) reads them and perf
/// writes them into a perf.data of this machine's byte order.
pub fn attr_bytes(attr: &perf_event_attr) -> &[u8] {
    // SAFETY: the pointer is to a live `perf_event_attr` of ATTR_SIZE bytes, borrowed
    // for the slice's lifetime, and u8 has no alignment. Every one of those bytes is
    // initialized: the struct is `repr(C)` and the uapi declares it without holes
    // (each field naturally aligned after the previous one, reserved space as
    // explicit fields), and each union's members are all as large as the union, so
    // no byte is padding (the test `every_byte_belongs_to_a_field` checks it).
    unsafe { std::slice::from_raw_parts((attr as *const perf_event_attr).cast::<u8>(), ATTR_SIZE) }
}

/// Reads an attr of any size, in native byte order, as a perf.data file holds it (its
/// `size` field is kept as read): at least PERF_ATTR_SIZE_VER0 bytes; the fields
/// past the end of a shorter (older) attr are zero; the bytes past the fields this
/// build knows, in a longer (newer) one, must be zero.
pub fn attr_from_bytes(bytes: &[u8]) -> Result<perf_event_attr, AttrBytesError> {
    let len = bytes.len();
    if len < ATTR_SIZE_VER0 {
        return Err(AttrBytesError::TooShort { len });
    }
    if let Some(at) = bytes.iter().skip(ATTR_SIZE).position(|&byte| byte != 0) {
        return Err(AttrBytesError::UnknownField {
            len,
            offset: ATTR_SIZE + at,
        });
    }
    let mut attr = perf_event_attr::default();
    let known = len.min(ATTR_SIZE);
    // SAFETY: `known` <= ATTR_SIZE bytes are copied from `bytes` (which has at least
    // that many) into the start of the local `attr`, which cannot overlap a borrowed
    // slice. Any bytes make a valid `perf_event_attr`: its fields are integers, unions
    // of integers and bitfield byte arrays, for which every bit pattern is a value.
    unsafe {
        std::ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            (&mut attr as *mut perf_event_attr).cast::<u8>(),
            known,
        );
    }
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu_clock() -> EventSpec {
        EventSpec {
            name: "cpu-clock".into(),
            pmu_type: b::PERF_TYPE_SOFTWARE,
            config: u64::from(b::PERF_COUNT_SW_CPU_CLOCK),
            config1: 1,
            config2: 2,
        }
    }

    #[test]
    fn defaults_match_perf_record() {
        let attr = build_attr(&cpu_clock(), &AttrOptions::default());
        assert_eq!(attr.type_, b::PERF_TYPE_SOFTWARE);
        assert_eq!(attr.size as usize, std::mem::size_of::<perf_event_attr>());
        assert_eq!(attr.sample_freq, 4000);
        assert_eq!((attr.config1, attr.config2), (1, 2));
        assert_eq!(
            (attr.freq(), attr.disabled(), attr.sample_id_all()),
            (1, 1, 1)
        );
        assert_eq!(attr.mmap(), 0);
    }

    #[test]
    #[expect(
        clippy::field_reassign_with_default,
        reason = "field-by-field assignment is how callers outside the crate must fill a \
                  #[non_exhaustive] struct, so the test does the same"
    )]
    fn every_option_reaches_its_field() {
        let mut options = AttrOptions::default();
        options.sampling = Sampling::Period(10_000);
        options.callchain = true;
        options.branch_sample_type = u64::from(b::PERF_SAMPLE_BRANCH_ANY);
        options.exclude_kernel = true;
        options.exclude_user = true;
        options.inherit = true;
        options.disabled = false;
        options.enable_on_exec = true;
        options.sample_id_all = false;
        options.mmap = true;
        options.mmap2 = true;
        options.comm = true;
        options.task = true;
        options.context_switch = true;
        options.wakeup = Wakeup::Watermark(8192);
        options.aux_watermark = 4096;
        options.read_format = u64::from(b::PERF_FORMAT_ID);
        options.precise_ip = 2;
        let attr = build_attr(&cpu_clock(), &options);
        assert_eq!(attr.sample_period, 10_000);
        assert_eq!(attr.freq(), 0);
        assert_ne!(attr.sample_type & u64::from(b::PERF_SAMPLE_CALLCHAIN), 0);
        assert_ne!(attr.sample_type & u64::from(b::PERF_SAMPLE_BRANCH_STACK), 0);
        assert_eq!(
            attr.branch_sample_type,
            u64::from(b::PERF_SAMPLE_BRANCH_ANY)
        );
        assert_eq!(
            (attr.exclude_kernel(), attr.exclude_user(), attr.inherit()),
            (1, 1, 1)
        );
        assert_eq!(
            (attr.disabled(), attr.enable_on_exec(), attr.sample_id_all()),
            (0, 1, 0)
        );
        assert_eq!(
            (attr.mmap(), attr.mmap2(), attr.comm(), attr.task()),
            (1, 1, 1, 1)
        );
        assert_eq!(attr.context_switch(), 1);
        assert_eq!(attr.wakeup_watermark, 8192);
        assert_eq!(attr.watermark(), 1);
        assert_eq!(attr.aux_watermark, 4096);
        assert_eq!(attr.read_format, u64::from(b::PERF_FORMAT_ID));
        assert_eq!(attr.precise_ip(), 2);
    }

    /// Every field of the struct, named (a field added by a newer binding fails to
    /// compile here), set to all ones: no byte of `attr_bytes` is left as padding.
    #[test]
    fn every_byte_belongs_to_a_field() {
        let attr = perf_event_attr {
            type_: u32::MAX,
            size: u32::MAX,
            config: u64::MAX,
            __bindgen_anon_1: b::perf_event_attr__bindgen_ty_1 {
                sample_period: u64::MAX,
            },
            sample_type: u64::MAX,
            read_format: u64::MAX,
            _bitfield_align_1: [],
            _bitfield_1: b::__BindgenBitfieldUnit::new([0xff; 8]),
            __bindgen_anon_2: b::perf_event_attr__bindgen_ty_2 {
                wakeup_events: u32::MAX,
            },
            bp_type: u32::MAX,
            __bindgen_anon_3: b::perf_event_attr__bindgen_ty_3 { config1: u64::MAX },
            __bindgen_anon_4: b::perf_event_attr__bindgen_ty_4 { config2: u64::MAX },
            branch_sample_type: u64::MAX,
            sample_regs_user: u64::MAX,
            sample_stack_user: u32::MAX,
            clockid: -1,
            sample_regs_intr: u64::MAX,
            aux_watermark: u32::MAX,
            sample_max_stack: u16::MAX,
            __reserved_2: u16::MAX,
            aux_sample_size: u32::MAX,
            __bindgen_anon_5: b::perf_event_attr__bindgen_ty_5 {
                aux_action: u32::MAX,
            },
            sig_data: u64::MAX,
            config3: u64::MAX,
            config4: u64::MAX,
        };
        let bytes = attr_bytes(&attr);
        assert_eq!(bytes.len(), ATTR_SIZE);
        assert_eq!(bytes.iter().position(|&byte| byte != 0xff), None);
        let zero = attr_bytes(&perf_event_attr::default()).to_vec();
        assert_eq!(zero, vec![0; ATTR_SIZE]);
    }

    #[test]
    fn bytes_read_back_as_the_attr_they_came_from() {
        let options = AttrOptions {
            precise_ip: 2,
            exclude_kernel: true,
            wakeup: Wakeup::Watermark(4096),
            ..AttrOptions::default()
        };
        let mut attr = build_attr(&cpu_clock(), &options);
        attr.config3 = 3;
        let bytes = attr_bytes(&attr).to_vec();
        // The uapi offsets, spelled out: the bytes are the kernel's layout.
        assert_eq!(bytes[..4], b::PERF_TYPE_SOFTWARE.to_ne_bytes());
        assert_eq!(bytes[16..24], 4000u64.to_ne_bytes());
        assert_eq!(bytes[56..64], 1u64.to_ne_bytes());
        assert_eq!(bytes[64..72], 2u64.to_ne_bytes());
        assert_eq!(bytes[128..136], 3u64.to_ne_bytes());
        let read = attr_from_bytes(&bytes).unwrap();
        assert_eq!(attr_bytes(&read), &bytes[..]);
        assert_eq!(
            (read.precise_ip(), read.exclude_kernel(), read.watermark()),
            (2, 1, 1)
        );
    }

    #[test]
    fn a_short_attr_reads_with_the_fields_past_its_end_zero() {
        let mut attr = build_attr(&cpu_clock(), &AttrOptions::default());
        attr.branch_sample_type = u64::from(b::PERF_SAMPLE_BRANCH_ANY);
        attr.size = b::PERF_ATTR_SIZE_VER0;
        let bytes = attr_bytes(&attr);
        let read = attr_from_bytes(&bytes[..ATTR_SIZE_VER0]).unwrap();
        // config1 ends at 64 and is kept; branch_sample_type (at 72) is not there.
        assert_eq!((read.config1, read.branch_sample_type), (1, 0));
        assert_eq!(read.size, b::PERF_ATTR_SIZE_VER0);
        assert_eq!(read.sample_freq, 4000);
        assert_eq!(attr_bytes(&read)[..ATTR_SIZE_VER0], bytes[..ATTR_SIZE_VER0]);
        assert!(attr_bytes(&read)[ATTR_SIZE_VER0..]
            .iter()
            .all(|&byte| byte == 0));
    }

    #[test]
    fn shorter_than_ver0_is_refused() {
        assert_eq!(
            attr_from_bytes(&[0; 63]).unwrap_err(),
            AttrBytesError::TooShort { len: 63 }
        );
        assert!(attr_from_bytes(&[]).is_err());
    }

    #[test]
    fn a_longer_attr_reads_when_its_unknown_bytes_are_zero() {
        let attr = build_attr(&cpu_clock(), &AttrOptions::default());
        let mut bytes = attr_bytes(&attr).to_vec();
        bytes.resize(ATTR_SIZE + 16, 0);
        let read = attr_from_bytes(&bytes).unwrap();
        assert_eq!(attr_bytes(&read), &bytes[..ATTR_SIZE]);
        bytes[ATTR_SIZE + 5] = 1;
        bytes[ATTR_SIZE + 9] = 1;
        assert_eq!(
            attr_from_bytes(&bytes).unwrap_err(),
            AttrBytesError::UnknownField {
                len: ATTR_SIZE + 16,
                offset: ATTR_SIZE + 5
            }
        );
    }
}
