//! An encoder's timestamp counter (`docs/trace-device.md`, "Timestamps"): the hart's
//! `time` CSR divided by 4^trTsPrescale, counted from a base that trTsReset and stopping
//! and restarting the count move.

use trace_control::timestamp::{control, PRESCALE_SHIFT_PER_STEP};

use crate::encoder::TIMESTAMP_WIDTH;

/// Counter values wrap at trTsWidth bits.
const COUNTER_MASK: u64 = (1 << TIMESTAMP_WIDTH) - 1;

/// The counter of one encoder's timestamp unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TimestampCounter {
    /// trTsActive of an active encoder.
    active: bool,
    /// trTsCount.
    counting: bool,
    /// trTsPrescale.
    prescale: u32,
    /// While counting, the counter is `base_value` + (`time` − `base_time`) /
    /// 4^prescale.
    base_value: u64,
    base_time: u64,
    /// The counter while not counting.
    frozen: u64,
    /// Reset and never counted since: starting to count takes `time` as it is (base 0 at
    /// time 0), so that timestamps relate to Linux's clock until software resets the
    /// counter.
    fresh: bool,
    /// The value at the last `time` seen.
    value: u64,
    /// The last `time` the hart reported.
    time: u64,
}

impl TimestampCounter {
    /// A unit in reset.
    pub(crate) fn new() -> TimestampCounter {
        TimestampCounter {
            fresh: true,
            ..TimestampCounter::default()
        }
    }

    /// The counter at `time`. A `time` before `base_time` counts as `base_time`: the
    /// base may come from another hart's `time`, a little ahead of this hart's.
    fn value_at(&self, time: u64) -> u64 {
        if !self.active {
            0
        } else if self.counting {
            let elapsed =
                time.saturating_sub(self.base_time) >> (PRESCALE_SHIFT_PER_STEP * self.prescale);
            self.base_value.wrapping_add(elapsed) & COUNTER_MASK
        } else {
            self.frozen
        }
    }

    /// The hart's `time` is now `time`: the counter's value.
    pub(crate) fn sample(&mut self, time: u64) -> u64 {
        self.time = time;
        let value = self.value_at(time);
        // A counter never goes back. The `time` a hart reports can: under -icount, QEMU
        // counts a block's instructions when the block starts, and gives back those it
        // did not run when one of them traps, so a block after a trap can see an
        // earlier time than the one before it.
        self.value = if self.active && self.counting {
            value.max(self.value)
        } else {
            value
        };
        self.value
    }

    /// The value at the last sample or change.
    pub(crate) fn value(&self) -> u64 {
        self.value
    }

    /// The last `time` the hart reported.
    pub(crate) fn time(&self) -> u64 {
        self.time
    }

    /// trTsControl went from `old` to `new` (legal values; `new` inactive when the
    /// encoder is in reset) at `now`, with trTsReset written if `reset`.
    pub(crate) fn control_changed(&mut self, old: u32, new: u32, reset: bool, now: u64) {
        let active = control::ACTIVE.is_set(new);
        if !active || !control::ACTIVE.is_set(old) {
            // Into or out of reset: the counter reads 0 and has never counted.
            *self = TimestampCounter {
                active,
                time: self.time,
                ..TimestampCounter::new()
            };
            return;
        }
        let value = self.value_at(now);
        let counting = control::COUNT.is_set(new);
        if self.counting && !counting {
            self.frozen = value;
        }
        if reset {
            self.frozen = 0;
            self.fresh = false;
            (self.base_value, self.base_time) = (0, now);
        }
        if !self.counting && counting {
            (self.base_value, self.base_time) = if self.fresh {
                (0, 0)
            } else {
                (self.frozen, now)
            };
            self.fresh = false;
        }
        // A new prescale applies to all the time counted since the base: the counter may
        // jump, but a counter that is `time` stays `time` / 4^prescale.
        self.prescale = control::PRESCALE.extract(new);
        self.counting = counting;
        self.value = self.value_at(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder::timestamp_reset;

    fn control(count: bool, prescale: u32) -> u32 {
        let value = control::COUNT.with(timestamp_reset(true), count);
        control::PRESCALE.insert(value, prescale)
    }

    #[test]
    fn counts_time_from_reset_so_timestamps_relate_to_the_clock() {
        let mut counter = TimestampCounter::new();
        assert_eq!(counter.sample(1000), 0);
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 1000);
        assert_eq!(counter.sample(1100), 0, "active but not counting");
        counter.control_changed(control(false, 0), control(true, 0), false, 1100);
        assert_eq!(counter.sample(1200), 1200);
        counter.control_changed(control(true, 0), control(true, 1), false, 1200);
        assert_eq!(counter.sample(1600), 400, "time / 4");
    }

    #[test]
    fn a_time_that_goes_back_does_not_take_the_counter_back() {
        let mut counter = TimestampCounter::new();
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 0);
        counter.control_changed(control(false, 0), control(true, 0), false, 0);
        assert_eq!(counter.sample(1000), 1000);
        assert_eq!(counter.sample(995), 1000, "held");
        assert_eq!(counter.sample(1010), 1010);
    }

    #[test]
    fn reset_counts_from_zero_and_stop_freezes() {
        let mut counter = TimestampCounter::new();
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 0);
        counter.control_changed(control(false, 0), control(true, 0), false, 500);
        counter.sample(700);
        counter.control_changed(control(true, 0), control(true, 0), true, 700);
        assert_eq!(counter.value(), 0);
        assert_eq!(counter.sample(750), 50);
        counter.control_changed(control(true, 0), control(false, 0), false, 800);
        assert_eq!(
            counter.sample(5000),
            100,
            "frozen at the value when it stopped"
        );
        counter.control_changed(control(false, 0), control(true, 2), false, 6000);
        assert_eq!(
            counter.sample(6000 + 16 * 5),
            105,
            "resumes from the frozen value at time / 16"
        );
        // Reset while stopped: 0, and counting restarts from 0.
        counter.control_changed(control(true, 2), control(false, 2), false, 7000);
        counter.control_changed(control(false, 2), control(false, 2), true, 7000);
        assert_eq!(counter.sample(8000), 0);
        counter.control_changed(control(false, 2), control(true, 2), false, 8000);
        assert_eq!(counter.sample(8000 + 32), 2);
    }

    #[test]
    fn deactivation_reads_zero_and_forgets_the_offset() {
        let mut counter = TimestampCounter::new();
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 0);
        counter.control_changed(control(false, 0), control(true, 0), false, 10);
        counter.control_changed(control(true, 0), control(true, 0), true, 20);
        counter.control_changed(control(true, 0), timestamp_reset(false), false, 30);
        assert_eq!(counter.sample(40), 0);
        assert_eq!(counter.time(), 40);
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 40);
        counter.control_changed(control(false, 0), control(true, 0), false, 50);
        assert_eq!(counter.sample(60), 60, "fresh again: the counter is time");
    }

    #[test]
    fn the_counter_wraps_at_its_width() {
        let mut counter = TimestampCounter::new();
        counter.control_changed(timestamp_reset(false), timestamp_reset(true), false, 0);
        counter.control_changed(control(false, 0), control(true, 0), false, 0);
        assert_eq!(counter.sample(u64::MAX), COUNTER_MASK);
    }
}
