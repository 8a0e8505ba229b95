//! Building `perf_event_attr` from an [`EventSpec`] and recording options.

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
    // Field-by-field assignment is how callers outside the crate must fill a
    // #[non_exhaustive] struct, so the test does the same.
    #[allow(clippy::field_reassign_with_default)]
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
}
