//! How often the kernel's maps are drained: as seldom as they allow.
//!
//! Each drain costs a walk of every bucket of the count map, and of the stack map when
//! it reads it too (the kernel's batch read visits them all, full or empty), and it
//! wakes the daemon. Draining seldom costs
//! room instead: a map that fills up refuses new keys or stacks, whose samples are
//! then counted as lost. (Stacks are named by their hash in a hash map with chained
//! buckets, so a stack is never refused for a collision, only for a full map.)
//!
//! So the period follows the load: halved (down to [`DRAIN_PERIOD_MIN`]) when a drain
//! found either map over a quarter full, doubled (up to a longest period) when both
//! were four times below that. A machine in steady state, whose few stacks recur, is
//! drained at the longest period; one starting processes all the time, more often as
//! its new stacks need.
//!
//! The longest period is as long as the maps hold the sampling rate at its worst,
//! every sample a new key and two new stacks ([`DrainSchedule::new`]): then even a
//! burst that starts right after a drain fits until the next one. It is at least
//! [`DRAIN_PERIOD_MAX_FLOOR`] (a machine whose maps hold less still loses nothing in
//! steady state, only in a burst the schedule has not caught up with yet) and at most
//! [`DRAIN_PERIOD_MAX`] (the process watch's ring buffer, read at each drain and each
//! side-band wake-up, holds about 800 exec and exit events: 4 s of a hundred processes
//! started and ended a second). Each drain walks every bucket of the count map (and of
//! the stack map when [`DrainSchedule::stacks_due`] says, or at the interval's end), so
//! on two harts at 999 Hz, the guest benchmark's machine, the two-second period it
//! allows halves the drains of the one-second period this schedule had before.

use std::time::Duration;

/// The shortest period: ten drains a second.
pub const DRAIN_PERIOD_MIN: Duration = Duration::from_millis(100);

/// The longest period any machine is given: one drain every four seconds.
pub const DRAIN_PERIOD_MAX: Duration = Duration::from_secs(4);

/// The longest period is never shorter than this, however small the maps are for the
/// sampling rate.
pub const DRAIN_PERIOD_MAX_FLOOR: Duration = Duration::from_secs(1);

/// What one drain found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainLoad {
    /// (process, user stack, kernel stack) keys read from the count map.
    pub keys: usize,
    /// Stacks in the kernel's stack map: those the drain read (emptying it), or, when
    /// it did not read it, the distinct stacks counts named since its last read (about
    /// what it holds).
    pub stacks_held: usize,
}

/// The maps' sizes (their `max_entries`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapCapacity {
    pub keys: usize,
    pub stacks: usize,
}

/// How full either map may be at a drain before the period is halved: a fraction
/// `1 / divisor` of its entries. A quarter leaves room for a burst four times the
/// last period's before the next drain.
const BUSY_DIVISOR: usize = 4;
/// How far below the busy mark both maps must be before the period is doubled.
const QUIET_FACTOR: usize = 4;

/// The drain period, adapted after every drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainSchedule {
    period: Duration,
    longest: Duration,
    capacity: MapCapacity,
}

impl DrainSchedule {
    /// For maps of `capacity` filled by at most `samples_per_second` (all CPUs').
    /// Starts at the shortest period: nothing is known of the load yet.
    pub fn new(capacity: MapCapacity, samples_per_second: u64) -> Self {
        // How long each map holds the worst case: a new key, and a new user and kernel
        // stack, every sample.
        let holds = |entries: usize, per_sample: u64| {
            let entries = u64::try_from(entries).unwrap_or(u64::MAX);
            match samples_per_second.saturating_mul(per_sample) {
                0 => DRAIN_PERIOD_MAX,
                rate => Duration::from_millis(entries.saturating_mul(1_000) / rate),
            }
        };
        let longest = holds(capacity.keys, 1)
            .min(holds(capacity.stacks, 2))
            .clamp(DRAIN_PERIOD_MAX_FLOOR, DRAIN_PERIOD_MAX);
        DrainSchedule {
            period: DRAIN_PERIOD_MIN,
            longest,
            capacity,
        }
    }

    /// The longest period this schedule gives.
    pub fn longest(&self) -> Duration {
        self.longest
    }

    /// The time from one drain to the next.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Whether a drain should read the stack map too, `named` distinct stacks having
    /// been named by counts since its last read (about what it holds): once they are
    /// over the busy mark. Until then the stacks wait in the map for the interval's
    /// end, and a drain walks only the count map's buckets.
    pub fn stacks_due(&self, named: usize) -> bool {
        named.saturating_mul(BUSY_DIVISOR) > self.capacity.stacks
    }

    /// Adapts the period to what a drain found.
    pub fn after_drain(&mut self, load: DrainLoad) {
        // Compared multiplied out: no rounding of small capacities to a zero mark.
        let stacks_over =
            |divisor: usize| load.stacks_held.saturating_mul(divisor) > self.capacity.stacks;
        let keys_over = |divisor: usize| load.keys.saturating_mul(divisor) > self.capacity.keys;
        if stacks_over(BUSY_DIVISOR) || keys_over(BUSY_DIVISOR) {
            self.period = (self.period / 2).max(DRAIN_PERIOD_MIN);
        } else if !stacks_over(BUSY_DIVISOR * QUIET_FACTOR)
            && !keys_over(BUSY_DIVISOR * QUIET_FACTOR)
        {
            self.period = (self.period * 2).min(self.longest);
        }
    }
}

/// The smallest count map [`key_capacity_for`] sizes.
pub const KEY_CAPACITY_MIN: u32 = 4_096;

/// The count map's size for `cpus` CPUs sampled `frequency` times a second: the most
/// keys one shortest period can bring (every sample a new key), times the busy
/// divisor, so that even then a drain finds the map no fuller than the mark at which
/// the schedule shortens the period; at least [`KEY_CAPACITY_MIN`], and a power of two
/// (the kernel rounds a hash map's buckets up to one). Every drain's batch read walks
/// every bucket, so a map sized for the machine rather than for the largest one costs
/// a fraction of the walk (4,096 buckets instead of 16,384 on two CPUs at 999 Hz).
pub fn key_capacity_for(cpus: usize, frequency: u64) -> u32 {
    capacity_for(cpus, frequency, 1, KEY_CAPACITY_MIN)
}

/// The smallest stack map [`stack_capacity_for`] sizes: the object's default.
pub const STACK_CAPACITY_MIN: u32 = aya_probes_common::STACK_TRACES_DEFAULT_MAX_ENTRIES;

/// The stack map's size for `cpus` CPUs sampled `frequency` times a second: as
/// [`key_capacity_for`], with two stacks a sample (user and kernel), and at least
/// [`STACK_CAPACITY_MIN`] (about 9 MiB of kernel memory, which the kernel
/// preallocates: about 1 KiB a stack).
pub fn stack_capacity_for(cpus: usize, frequency: u64) -> u32 {
    capacity_for(cpus, frequency, 2, STACK_CAPACITY_MIN)
}

/// A map's size: the entries `cpus` CPUs sampled `frequency` times a second bring in
/// the shortest period, `per_sample` a sample, times the busy divisor; at least
/// `minimum`, rounded up to a power of two, at most 2^31 (the largest a u32 holds).
fn capacity_for(cpus: usize, frequency: u64, per_sample: u64, minimum: u32) -> u32 {
    let period_millis = u64::try_from(DRAIN_PERIOD_MIN.as_millis()).unwrap_or(u64::MAX);
    let entries_per_period = frequency
        .saturating_mul(u64::try_from(cpus).unwrap_or(u64::MAX))
        .saturating_mul(per_sample)
        .saturating_mul(period_millis)
        / 1_000;
    let capacity = entries_per_period
        .saturating_mul(BUSY_DIVISOR as u64)
        .max(u64::from(minimum));
    u32::try_from(capacity.checked_next_power_of_two().unwrap_or(u64::MAX)).unwrap_or(1 << 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Maps of 16,384 keys and 8,192 stacks.
    const DEFAULT: MapCapacity = MapCapacity {
        keys: 16_384,
        stacks: 8_192,
    };
    /// Two CPUs at 999 Hz.
    const RATE: u64 = 1_998;

    fn load(keys: usize, stacks_held: usize) -> DrainLoad {
        DrainLoad { keys, stacks_held }
    }

    #[test]
    fn a_quiet_machine_is_drained_as_seldom_as_its_maps_allow() {
        let mut schedule = DrainSchedule::new(DEFAULT, RATE);
        assert_eq!(schedule.period(), DRAIN_PERIOD_MIN);
        let mut periods = Vec::new();
        for _ in 0..7 {
            schedule.after_drain(load(20, 30));
            periods.push(schedule.period().as_millis());
        }
        // 8,192 stacks hold 2.05 s of 1,998 samples a second, two stacks each.
        assert_eq!(periods, [200, 400, 800, 1600, 2050, 2050, 2050]);
    }

    #[test]
    fn the_longest_period_is_how_long_the_maps_hold_the_worst_rate() {
        let longest = |keys, stacks, rate| {
            DrainSchedule::new(MapCapacity { keys, stacks }, rate)
                .longest()
                .as_millis()
        };
        // The daemon's maps on two CPUs at 999 Hz: the keys hold 2.05 s, the stacks too.
        assert_eq!(longest(4_096, 8_192, 1_998), 2_050);
        // The count map the smaller: 2,000 keys of 1,000 samples a second.
        assert_eq!(longest(2_000, 8_192, 1_000), 2_000);
        // At 99 Hz the maps hold 20 s: the ring buffer's bound.
        assert_eq!(longest(4_096, 8_192, 198), 4_000);
        assert_eq!(longest(4_096, 8_192, 0), 4_000);
        // Maps too small for the rate (a user's --max-stack-traces): never below 1 s.
        assert_eq!(longest(4_096, 2, 1_998), 1_000);
    }

    #[test]
    fn new_stacks_shorten_the_period_to_the_minimum() {
        let mut schedule = DrainSchedule::new(DEFAULT, RATE);
        for _ in 0..5 {
            schedule.after_drain(load(10, 10));
        }
        assert_eq!(schedule.period(), schedule.longest());
        let mut periods = Vec::new();
        for _ in 0..6 {
            // 8,192 / 4 = 2,048 stacks is the mark: 2,049 is over it.
            schedule.after_drain(load(200, 2_049));
            periods.push(schedule.period().as_millis());
        }
        assert_eq!(periods, [1025, 512, 256, 128, 100, 100]);
    }

    #[test]
    fn a_filling_count_map_shortens_the_period_too() {
        let mut schedule = DrainSchedule::new(DEFAULT, RATE);
        schedule.after_drain(load(0, 0));
        assert_eq!(schedule.period().as_millis(), 200);
        // A quarter of 16,384 keys is the mark, with few stacks (one process, many
        // pids, say).
        schedule.after_drain(load(4_097, 10));
        assert_eq!(schedule.period().as_millis(), 100);
    }

    #[test]
    fn between_the_marks_the_period_stays() {
        let mut schedule = DrainSchedule::new(DEFAULT, RATE);
        schedule.after_drain(load(0, 0));
        schedule.after_drain(load(0, 0));
        assert_eq!(schedule.period().as_millis(), 400);
        // Over a quarter of the busy mark (2,048 / 4 = 512 stacks), under the mark
        // itself.
        for stacks_held in [513, 1_024, 2_048] {
            schedule.after_drain(load(100, stacks_held));
            assert_eq!(schedule.period().as_millis(), 400, "{stacks_held} stacks");
        }
    }

    #[test]
    fn the_stack_map_is_read_once_a_quarter_of_it_waits() {
        let schedule = DrainSchedule::new(DEFAULT, RATE);
        // 8,192 / 4 = 2,048.
        assert!(!schedule.stacks_due(0));
        assert!(!schedule.stacks_due(2_048));
        assert!(schedule.stacks_due(2_049));
        // A two-stack map: every stack waiting is due.
        let tiny = DrainSchedule::new(MapCapacity { keys: 2, stacks: 2 }, RATE);
        assert!(!tiny.stacks_due(0));
        assert!(tiny.stacks_due(1));
    }

    #[test]
    fn tiny_maps_are_drained_as_often_as_allowed() {
        // Two-entry maps (the overflow test's): one stack is already over a quarter.
        let mut schedule = DrainSchedule::new(MapCapacity { keys: 2, stacks: 2 }, RATE);
        schedule.after_drain(load(1, 1));
        assert_eq!(schedule.period(), DRAIN_PERIOD_MIN);
        // Even empty, a drain of them doubles it only when nothing was held.
        schedule.after_drain(load(0, 0));
        assert_eq!(schedule.period().as_millis(), 200);
    }

    #[test]
    fn the_count_map_is_sized_for_the_machine() {
        // Two CPUs at 999 Hz bring at most 200 keys in 100 ms: the minimum holds them.
        assert_eq!(key_capacity_for(2, 999), 4_096);
        // 64 CPUs: 6,394 keys per period, four times over, rounded up.
        assert_eq!(key_capacity_for(64, 999), 32_768);
        assert_eq!(key_capacity_for(usize::MAX, u64::MAX), 1 << 31);
    }

    #[test]
    fn the_stack_map_is_sized_for_the_machine() {
        // Two CPUs at 999 Hz bring at most 400 stacks in 100 ms: the minimum holds them.
        assert_eq!(stack_capacity_for(2, 999), 8_192);
        // 64 CPUs: 12,787 stacks per period, four times over, rounded up.
        assert_eq!(stack_capacity_for(64, 999), 65_536);
        assert_eq!(stack_capacity_for(usize::MAX, u64::MAX), 1 << 31);
    }
}
