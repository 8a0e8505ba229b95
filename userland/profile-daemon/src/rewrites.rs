//! When the merged profile is rewritten: every few intervals while it is small, less
//! often while it grows faster than its stacks recur, so that its rewrites cost a
//! bounded share of the run however long the run is.
//!
//! Rewriting the merged profile costs in proportion to its distinct stacks; an
//! interval's own profile and folded file cost in proportion to the interval's. Where
//! stacks recur (a machine in steady state), the merged profile stays about one
//! interval's size and is rewritten every `every` intervals. Where they do not
//! (processes started all the time, each bringing new stacks), it grows with the run,
//! and a fixed period would make the daemon's running cost grow with the run too: each
//! rewrite would cost more than the last. So a rewrite also waits until the intervals
//! since the last one have brought at least half as many stacks as the merged profile
//! holds ([`INTERVAL_STACKS_PER_MERGED_STACK`]): a rewrite then costs at most about
//! twice what those intervals wrote themselves. While the profile grows, the rewrites
//! are spaced further and further apart; at its cap (`--max-merged-stacks`), evenly.

/// The merged profile is rewritten once the intervals since its last rewrite brought
/// at least one stack for every this many of its stacks.
pub const INTERVAL_STACKS_PER_MERGED_STACK: usize = 2;

/// Decides, interval by interval, when the merged profile is rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergedRewrites {
    every: u64,
    intervals_since: u64,
    stacks_since: usize,
}

impl MergedRewrites {
    /// At most every `every` intervals (at least 1).
    pub fn new(every: u64) -> Self {
        MergedRewrites {
            every: every.max(1),
            intervals_since: 0,
            stacks_since: 0,
        }
    }

    /// After an interval of `interval_stacks` distinct stacks, with the merged profile
    /// at `merged_stacks`: whether to rewrite it now. Always after the run's `last`.
    pub fn after_interval(
        &mut self,
        interval_stacks: usize,
        merged_stacks: usize,
        last: bool,
    ) -> bool {
        self.intervals_since = self.intervals_since.saturating_add(1);
        self.stacks_since = self.stacks_since.saturating_add(interval_stacks);
        let due = last
            || (self.intervals_since >= self.every
                && self
                    .stacks_since
                    .saturating_mul(INTERVAL_STACKS_PER_MERGED_STACK)
                    >= merged_stacks);
        if due {
            self.intervals_since = 0;
            self.stacks_since = 0;
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The intervals after which the merged profile is rewritten over `intervals`
    /// intervals, given each interval's stacks and the merged profile's after it.
    fn rewrites(every: u64, intervals: u64, sizes: impl Fn(u64) -> (usize, usize)) -> Vec<u64> {
        let mut schedule = MergedRewrites::new(every);
        (1..=intervals)
            .filter(|&number| {
                let (interval, merged) = sizes(number);
                schedule.after_interval(interval, merged, number == intervals)
            })
            .collect()
    }

    #[test]
    fn recurring_stacks_are_rewritten_every_few_intervals() {
        // 300 stacks an interval, mostly the same: the run's total creeps up to 900.
        let steady = |number: u64| (300, (300 + 50 * number as usize).min(900));
        assert_eq!(rewrites(6, 40, steady), [6, 12, 18, 24, 30, 36, 40]);
        assert_eq!(rewrites(1, 3, steady), [1, 2, 3]);
    }

    #[test]
    fn a_growing_profile_is_rewritten_less_and_less_often() {
        // Every interval 3,000 stacks, 2,000 of them new to the run (the guest
        // benchmark's churn): the rewrites are spaced by half as many intervals again
        // as the run has had, not every 6 (8 rewrites in 100 intervals where a fixed
        // period makes 17, each larger than the last).
        let churn = |number: u64| (3_000, 2_000 * number as usize);
        assert_eq!(rewrites(6, 100, churn), [6, 12, 18, 27, 41, 62, 93, 100]);
        // What the rewrites hold in all: a geometric series (each rewrite about 1.5
        // times the last), so under four times the run's final size, where a fixed
        // period of 6 writes it over nine times (the sum grows with the square of the
        // run's length).
        let written =
            |schedule: &[u64]| -> usize { schedule.iter().map(|&number| churn(number).1).sum() };
        let amortized = written(&rewrites(6, 100, churn));
        let fixed: Vec<u64> = (1..=100)
            .filter(|number| number % 6 == 0 || *number == 100)
            .collect();
        assert!(amortized < 4 * churn(100).1, "{amortized}");
        assert!(written(&fixed) > 9 * churn(100).1);
    }

    #[test]
    fn a_capped_profile_is_rewritten_evenly() {
        // The cap of 100,000 stacks reached at interval 50: from there, every 17
        // intervals (100,000 / 2 / 3,000 = 16.7).
        let capped = |number: u64| (3_000, (2_000 * number as usize).min(100_000));
        let late: Vec<u64> = rewrites(6, 200, capped)
            .into_iter()
            .filter(|&number| number > 60)
            .collect();
        let spacing: Vec<u64> = late.windows(2).map(|pair| pair[1] - pair[0]).collect();
        assert!(
            spacing[..spacing.len() - 1].iter().all(|&gap| gap == 17),
            "{late:?}"
        );
    }

    #[test]
    fn the_last_interval_is_always_rewritten() {
        let churn = |number: u64| (3_000, 2_000 * number as usize);
        assert_eq!(rewrites(6, 1, churn), [1]);
        assert_eq!(rewrites(6, 20, churn), [6, 12, 18, 20]);
    }
}
