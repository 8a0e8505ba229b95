//! `perf_event_mmap_page`'s conversion of a hardware counter to perf time: what
//! `perf-ring` reads from a ring's metadata page and what an N-Trace recording keeps
//! (`ntrace::NtraceInfo`) to place the trace's timestamps among the side-band.

/// The `time_shift`, `time_mult`, `time_zero` (and, with `cap_user_time_short`,
/// `time_cycles` and `time_mask`) of a metadata page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeConversion {
    pub shift: u16,
    pub mult: u32,
    pub zero: u64,
    /// With a short counter (`cap_user_time_short`): the counter value `cycles` and the
    /// counter's `mask`; otherwise 0 and all ones.
    pub cycles: u64,
    pub mask: u64,
}

impl TimeConversion {
    /// Perf time (nanoseconds of the kernel's perf clock) of counter value `counter`,
    /// as perf_event.h's comment computes it: a short counter is first extended from
    /// `cycles`, and the quotient and remainder are scaled apart so that nothing
    /// overflows.
    pub fn perf_time(&self, counter: u64) -> u64 {
        let counter = if self.mask == u64::MAX {
            counter
        } else {
            self.cycles
                .wrapping_add(counter.wrapping_sub(self.cycles) & self.mask)
        };
        let shift = u32::from(self.shift.min(63));
        let quotient = counter >> shift;
        let remainder = counter & ((1u64 << shift) - 1);
        let mult = u64::from(self.mult);
        self.zero
            .wrapping_add(quotient.wrapping_mul(mult))
            .wrapping_add(remainder.wrapping_mul(mult) >> shift)
    }
}
