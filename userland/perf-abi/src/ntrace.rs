//! The PERF_RECORD_AUXTRACE_INFO of an N-Trace recording (`rvperf trace record`): what a
//! decoder needs to read the AUXTRACE data with no flags (the encoders' configuration)
//! and to place it in perf time (the kernel's conversion of the `time` counter).
//!
//! Private words, little-endian u64, in this order (layout version 1):
//!
//! | word | field |
//! | --- | --- |
//! | 0 | layout version, 1 |
//! | 1 | trTeInstMode: 3 BTM, 6 HTM |
//! | 2 | `rvtrace_config.features` (`RVTRACE_FEATURE_*`) |
//! | 3 | privilege filter (`RVTRACE_PRIVILEGE_*`; 0: every level) |
//! | 4 | periodic sync: trTeInstSyncMax, or `u32::MAX` for none |
//! | 5 | SRC bits in messages |
//! | 6 | the encoders' return stack depth |
//! | 7 | the traced harts (bit i: hart i) |
//! | 8 | bytes of sink buffer |
//! | 9 | time conversion present (1) or not (0) |
//! | 10 | time_shift |
//! | 11 | time_mult |
//! | 12 | time_zero |
//! | 13 | time_cycles (short counters; else 0) |
//! | 14 | time_mask (short counters; else all ones) |
//! | 15 | timestamp prescaler (timestamps count `time` / 4^prescale) |
//! | 16 | optional: N, the harts whose Linux CPU is known (at most 64) |
//! | 17 .. 17 + N | the CPU number of hart 0, 1, ... (all ones: the hart is no CPU) |
//!
//! Messages name their hart by SRC, the hart's index; perf's side-band names CPUs, which
//! Linux numbers in its own order (the boot hart is CPU 0): words 16.. map one to the
//! other. Without them (a recording of an older rvperf), hart i is CPU i.
//!
//! Each PERF_RECORD_AUXTRACE holds bytes of the sink's stream: `offset` is the position
//! of its first byte in everything the sink wrote since the start, `reference` the
//! number of trace bytes in it (the rest, to 8 bytes, is N-Trace idle padding, 0xff),
//! `idx` 0 (one sink), `cpu` and `tid` all ones. A chunk whose offset is past the end of
//! the one before is a gap: the sink overwrote those bytes before they were read.

pub use crate::TimeConversion;

/// The `auxtrace_type` of an N-Trace recording ("RVNT"; far from Linux perf's 1..8, as
/// [`crate::ctr::RVPERF_AUXTRACE_CTR`]).
pub const RVPERF_AUXTRACE_NTRACE: u32 = 0x5256_4e54;

/// The layout version this crate writes and reads.
pub const NTRACE_INFO_VERSION: u64 = 1;

const WORDS: usize = 16;

/// The most harts whose CPUs the words can hold (the traced harts are a 64-bit mask).
pub const MAX_HARTS: usize = 64;

/// `rvtrace_config.privileges` bits (`RVTRACE_PRIV_*`; 0 traces every level), checked
/// against the header as [`feature`]'s are.
pub mod privilege {
    pub const USER: u32 = 1 << 0;
    pub const SUPERVISOR: u32 = 1 << 1;
    pub const MACHINE: u32 = 1 << 3;
}

/// `rvtrace_config.features` bits (`RVTRACE_FEATURE_*` of the driver's uapi header;
/// `userland/trace-device/tests/uapi_layout.rs` checks they are the header's).
pub mod feature {
    pub const IMPLICIT_RETURN: u64 = 1 << 0;
    pub const REPEATED_HISTORY: u64 = 1 << 1;
    pub const ALL_JUMPS: u64 = 1 << 2;
    pub const SEQUENTIAL_JUMPS: u64 = 1 << 3;
    pub const MSB_EXTENSION: u64 = 1 << 4;
    pub const TIMESTAMPS: u64 = 1 << 5;
    pub const CONTEXT: u64 = 1 << 6;
    pub const STOP_ON_WRAP: u64 = 1 << 7;
    /// The driver writes the running task to each traced hart's context at every
    /// context switch and exec ([`task_context`]): Ownership messages (with
    /// [`CONTEXT`]) name the thread that runs from there on.
    pub const CONTEXT_TASK: u64 = 1 << 8;
}

/// The context value the `rvtrace` driver writes with [`feature::CONTEXT_TASK`]
/// (`RVTRACE_CONTEXT_*` of the uapi header): 32 bits, as `scontext`'s data field has,
/// that tell a thread and which of its programs it runs.
///
/// | bits | field |
/// | --- | --- |
/// | 21:0 | the thread's id (Linux's tids are below 2^22, `PID_MAX_LIMIT`) |
/// | 31:22 | its generation, 1 to 1023: a new one at its fork and at every exec while the trace runs (0: it ran before the trace started and has not exec'd since), so that one context value is one program |
///
/// All ones ([`task_context::UNKNOWN`]) until the driver saw the hart switch.
pub mod task_context {
    /// No task written yet (tracing started, the hart has not switched since).
    pub const UNKNOWN: u64 = 0xffff_ffff;
    /// Bits of the thread id.
    pub const TID_BITS: u32 = 22;
    /// Bits of the exec generation above them.
    pub const EXEC_BITS: u32 = 10;

    /// The thread a context value names; `None` for [`UNKNOWN`] and for values no driver
    /// writes (above 32 bits).
    pub fn tid(context: u64) -> Option<u32> {
        if context == UNKNOWN || context >> (TID_BITS + EXEC_BITS) != 0 {
            return None;
        }
        Some((context & ((1 << TID_BITS) - 1)) as u32)
    }

    /// The generation a context value holds (see the module).
    pub fn exec_generation(context: u64) -> u32 {
        ((context >> TID_BITS) & ((1 << EXEC_BITS) - 1)) as u32
    }

    /// The value for thread `tid` in generation `generation` (taken modulo
    /// 2^[`EXEC_BITS`]); `None` for a tid of more than [`TID_BITS`] bits.
    pub fn value(tid: u32, generation: u64) -> Option<u64> {
        if tid >> TID_BITS != 0 {
            return None;
        }
        Some(((generation & ((1 << EXEC_BITS) - 1)) << TID_BITS) | u64::from(tid))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_value_holds_its_tid_and_generation() {
            let context = value(4_194_303 - 1, 1025).unwrap();
            assert_eq!(tid(context), Some(4_194_302));
            assert_eq!(exec_generation(context), 1);
            assert_eq!(value(1 << 22, 0), None);
            assert_eq!(tid(UNKNOWN), None);
            assert_eq!(tid(1 << 32), None);
            assert_eq!(tid(value(0, 0).unwrap()), Some(0), "the idle task");
        }
    }
}

/// The configuration an N-Trace recording ran with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NtraceInfo {
    /// 3 (BTM) or 6 (HTM).
    pub mode: u32,
    pub features: u64,
    pub privileges: u32,
    /// trTeInstSyncMax, `None` without periodic synchronisation.
    pub sync_max: Option<u32>,
    pub src_bits: u8,
    pub return_stack_depth: u32,
    pub harts: u64,
    pub buffer_bytes: u64,
    pub time: Option<TimeConversion>,
    pub timestamp_prescale: u32,
    /// The Linux CPU of each hart, by hart index (`None`: the hart is no CPU); empty
    /// when the recording does not say.
    pub hart_cpus: Vec<Option<u32>>,
}

/// Why an AUXTRACE_INFO's words are not an N-Trace recording's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NtraceInfoError {
    #[error("N-Trace AUXTRACE_INFO has {found} words, layout 1 needs {WORDS}")]
    Truncated { found: usize },
    #[error("N-Trace AUXTRACE_INFO layout version {version}; this rvperf reads 1")]
    Version { version: u64 },
    #[error("N-Trace AUXTRACE_INFO word {word} ({name}) holds {value:#x}, out of range")]
    OutOfRange {
        word: usize,
        name: &'static str,
        value: u64,
    },
}

impl NtraceInfo {
    pub fn has(&self, feature: u64) -> bool {
        self.features & feature != 0
    }

    /// Whether the trace follows the kernel (supervisor mode), whose code a decode
    /// needs besides the processes'.
    pub fn traces_kernel(&self) -> bool {
        self.privileges == 0 || self.privileges & privilege::SUPERVISOR != 0
    }

    /// The perf time of a trace timestamp (which counts `time` / 4^prescale), when the
    /// recording has the kernel's conversion.
    pub fn perf_time_of_timestamp(&self, timestamp: u64) -> Option<u64> {
        let cycles = timestamp.checked_shl(2 * self.timestamp_prescale)?;
        Some(self.time?.perf_time(cycles))
    }

    /// The Linux CPU hart `hart` is (hart i is CPU i when the recording does not say).
    pub fn cpu_of_hart(&self, hart: u16) -> Option<u32> {
        if self.hart_cpus.is_empty() {
            return Some(u32::from(hart));
        }
        self.hart_cpus.get(usize::from(hart)).copied().flatten()
    }

    /// The private words of the AUXTRACE_INFO.
    pub fn to_words(&self) -> Vec<u64> {
        let time = self.time;
        let mut words = vec![
            NTRACE_INFO_VERSION,
            u64::from(self.mode),
            self.features,
            u64::from(self.privileges),
            u64::from(self.sync_max.unwrap_or(u32::MAX)),
            u64::from(self.src_bits),
            u64::from(self.return_stack_depth),
            self.harts,
            self.buffer_bytes,
            u64::from(time.is_some()),
            time.map_or(0, |time| u64::from(time.shift)),
            time.map_or(0, |time| u64::from(time.mult)),
            time.map_or(0, |time| time.zero),
            time.map_or(0, |time| time.cycles),
            time.map_or(u64::MAX, |time| time.mask),
            u64::from(self.timestamp_prescale),
        ];
        if !self.hart_cpus.is_empty() {
            let harts = &self.hart_cpus[..self.hart_cpus.len().min(MAX_HARTS)];
            words.push(harts.len() as u64);
            words.extend(harts.iter().map(|cpu| cpu.map_or(u64::MAX, u64::from)));
        }
        words
    }

    /// Reads the private words (after the type and its padding).
    pub fn from_words(words: &[u64]) -> Result<NtraceInfo, NtraceInfoError> {
        if words
            .first()
            .is_some_and(|&version| version != NTRACE_INFO_VERSION)
        {
            return Err(NtraceInfoError::Version { version: words[0] });
        }
        if words.len() < WORDS {
            return Err(NtraceInfoError::Truncated { found: words.len() });
        }
        let narrow = |word: usize, name: &'static str, max: u64| -> Result<u64, NtraceInfoError> {
            let value = words[word];
            if value > max {
                return Err(NtraceInfoError::OutOfRange { word, name, value });
            }
            Ok(value)
        };
        let mode = narrow(1, "mode", u64::from(u32::MAX))? as u32;
        if mode != 3 && mode != 6 {
            return Err(NtraceInfoError::OutOfRange {
                word: 1,
                name: "mode",
                value: words[1],
            });
        }
        let sync_max = narrow(4, "sync_max", u64::from(u32::MAX))? as u32;
        let time = (narrow(9, "time conversion present", 1)? == 1).then(|| TimeConversion {
            shift: words[10].min(63) as u16,
            mult: words[11] as u32,
            zero: words[12],
            cycles: words[13],
            mask: words[14],
        });
        Ok(NtraceInfo {
            mode,
            features: words[2],
            privileges: narrow(3, "privileges", 0xff)? as u32,
            sync_max: (sync_max != u32::MAX).then_some(sync_max),
            src_bits: narrow(5, "src_bits", 12)? as u8,
            return_stack_depth: narrow(6, "return_stack_depth", 1024)? as u32,
            harts: words[7],
            buffer_bytes: words[8],
            time,
            timestamp_prescale: narrow(15, "timestamp_prescale", 3)? as u32,
            hart_cpus: match words.get(WORDS) {
                None => Vec::new(),
                Some(_) => {
                    let count = narrow(WORDS, "harts with CPUs", MAX_HARTS as u64)? as usize;
                    let cpus = words
                        .get(WORDS + 1..WORDS + 1 + count)
                        .ok_or(NtraceInfoError::Truncated { found: words.len() })?;
                    cpus.iter().map(|&cpu| u32::try_from(cpu).ok()).collect()
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> NtraceInfo {
        NtraceInfo {
            mode: 6,
            features: feature::IMPLICIT_RETURN | feature::TIMESTAMPS,
            privileges: 1,
            sync_max: Some(4),
            src_bits: 1,
            return_stack_depth: 32,
            harts: 0b11,
            buffer_bytes: 16 << 20,
            time: Some(TimeConversion {
                shift: 21,
                mult: 209_715_200,
                zero: 12_345,
                cycles: 0,
                mask: u64::MAX,
            }),
            timestamp_prescale: 0,
            hart_cpus: vec![Some(1), Some(0)],
        }
    }

    #[test]
    fn words_round_trip() {
        let words = info().to_words();
        assert_eq!(words.len(), WORDS + 3);
        assert_eq!(NtraceInfo::from_words(&words), Ok(info()));
        assert_eq!(info().cpu_of_hart(0), Some(1));
        assert_eq!(info().cpu_of_hart(2), None);
        // An older recording's 16 words: hart i is CPU i.
        let unmapped = NtraceInfo::from_words(&words[..WORDS]).unwrap();
        assert!(unmapped.hart_cpus.is_empty());
        assert_eq!(unmapped.cpu_of_hart(3), Some(3));
        let untimed = NtraceInfo {
            time: None,
            sync_max: None,
            ..info()
        };
        assert_eq!(NtraceInfo::from_words(&untimed.to_words()), Ok(untimed));
    }

    #[test]
    fn timestamps_convert_to_perf_time() {
        // 10 MHz: 100 ns a tick (mult / 2^shift = 100).
        let time = TimeConversion {
            shift: 21,
            mult: 209_715_200,
            zero: 12_345,
            cycles: 0,
            mask: u64::MAX,
        };
        assert_eq!(time.perf_time(0), 12_345);
        assert_eq!(time.perf_time(10_000_000), 12_345 + 1_000_000_000);
        // No overflow for a counter of years: the quotient and remainder are scaled apart.
        let years = 10_000_000u64 * 86_400 * 365 * 50;
        assert_eq!(time.perf_time(years), 12_345 + years * 100);
        let info = NtraceInfo {
            timestamp_prescale: 1,
            ..info()
        };
        assert_eq!(info.perf_time_of_timestamp(25), Some(12_345 + 10_000));
        // A short counter is extended from time_cycles.
        let short = TimeConversion {
            cycles: 0x1_0000_0000,
            mask: 0xffff_ffff,
            ..time
        };
        assert_eq!(short.perf_time(5), 12_345 + (0x1_0000_0005u64) * 100);
    }

    #[test]
    fn bad_words_name_the_word() {
        let mut words = info().to_words();
        words[5] = 13;
        assert_eq!(
            NtraceInfo::from_words(&words),
            Err(NtraceInfoError::OutOfRange {
                word: 5,
                name: "src_bits",
                value: 13
            })
        );
        assert_eq!(
            NtraceInfo::from_words(&words[..3]),
            Err(NtraceInfoError::Truncated { found: 3 })
        );
        assert_eq!(
            NtraceInfo::from_words(&info().to_words()[..WORDS + 2]),
            Err(NtraceInfoError::Truncated { found: WORDS + 2 })
        );
        words[0] = 2;
        assert_eq!(
            NtraceInfo::from_words(&words),
            Err(NtraceInfoError::Version { version: 2 })
        );
    }
}
