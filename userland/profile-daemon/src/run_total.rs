//! The whole run's profile, kept interval by interval in both of the forms the daemon
//! writes: pprof samples (`merged.pb.gz`) and folded stacks (`merged.folded`).
//!
//! Each interval's samples are folded once, for the interval's own `.folded` file, and
//! the same lines are added to the run's folded stacks. A rewrite of `merged.folded`
//! then only prints them: before, each rewrite folded every stack of the run again, a
//! cost that grew with the run. Both forms are capped alike: a new stack beyond the cap
//! is counted under [`MERGED_PROFILE_FULL`] with its command in the samples, and its
//! line is folded there in the folded stacks.

use perf_session::StackProfile;
use pprof::{PprofError, Samples};
use profiles::folded::push_frame;
use profiles::FoldedStacks;

/// The frame under which samples beyond the run's cap on distinct stacks are merged.
pub const MERGED_PROFILE_FULL: &str = "[merged profile full]";

/// The run's samples and their folded stacks.
#[derive(Debug)]
pub struct RunTotal {
    samples: Samples,
    folded: FoldedStacks,
}

/// What [`RunTotal::add_interval`] made of an interval.
#[derive(Debug)]
pub struct AddedInterval {
    /// The interval's own folded stacks (never capped).
    pub folded: FoldedStacks,
    /// The samples of the interval counted under [`MERGED_PROFILE_FULL`], not under
    /// their own stacks (value column 0).
    pub over_cap: u64,
}

impl RunTotal {
    /// An empty total of `profile`'s samples, holding at most `stacks` distinct
    /// (stack, labels) samples.
    pub fn new(profile: &mut StackProfile, stacks: usize) -> Result<RunTotal, PprofError> {
        let full = profile.placeholder_location(MERGED_PROFILE_FULL)?;
        let mut samples = profile.new_samples();
        samples.set_limit(stacks, full);
        Ok(RunTotal {
            samples,
            folded: FoldedStacks::new(),
        })
    }

    /// Adds an interval's samples (taken from `profile`) to the run's, and folds them:
    /// once for the interval's own folded stacks, the same lines into the run's.
    pub fn add_interval(
        &mut self,
        profile: &mut StackProfile,
        interval: &Samples,
    ) -> Result<AddedInterval, PprofError> {
        let over_cap_before = self.over_cap();
        let capped = self.samples.absorb(interval)?;
        let mut folded = FoldedStacks::with_capacity(interval.len());
        let run_folded = &mut self.folded;
        let mut capped = capped.into_iter().peekable();
        let mut stand_in = String::new();
        profile.fold_each(interval, 0, |index, line, weight| {
            folded.add_line(line.text(), weight);
            if capped.next_if_eq(&index).is_some() {
                // As the stand-in's own sample folds: its command, then the stand-in.
                stand_in.clear();
                if let Some(command) = line.command_frame() {
                    stand_in.push_str(command);
                    stand_in.push(';');
                }
                push_frame(&mut stand_in, MERGED_PROFILE_FULL);
                run_folded.add_line(&stand_in, weight);
            } else {
                run_folded.add_line(line.text(), weight);
            }
        })?;
        Ok(AddedInterval {
            folded,
            over_cap: self.over_cap().saturating_sub(over_cap_before),
        })
    }

    /// The run's samples.
    pub fn samples(&self) -> &Samples {
        &self.samples
    }

    /// The run's folded stacks.
    pub fn folded(&self) -> &FoldedStacks {
        &self.folded
    }

    /// The distinct (stack, labels) samples of the run.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Samples (value column 0) counted under [`MERGED_PROFILE_FULL`] so far.
    fn over_cap(&self) -> u64 {
        let count = self.samples.over_limit().first().copied().unwrap_or(0);
        u64::try_from(count).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use perf_session::{sample_labels, Processes, SampleLabels, StackFrame, SymbolOptions};
    use pprof::{MappingSymbols, ProfileMetadata};

    use super::*;

    const NAMES: [&str; 6] = ["main", "parse", "read", "a;b", "write", "exit"];

    /// `count` samples of stack `frames` (indices into [`NAMES`], leaf first) in
    /// process `pid` named `command`.
    struct Stack {
        pid: i32,
        command: &'static str,
        frames: &'static [usize],
        count: i64,
    }

    const fn stack(pid: i32, command: &'static str, frames: &'static [usize], count: i64) -> Stack {
        Stack {
            pid,
            command,
            frames,
            count,
        }
    }

    fn add(profile: &mut StackProfile, processes: &mut Processes, stack: &Stack) {
        let labels = sample_labels(SampleLabels::Command, stack.pid, stack.pid, stack.command);
        profile
            .add_stack(
                processes,
                stack.pid as u32,
                stack
                    .frames
                    .iter()
                    .map(|&index| StackFrame::Placeholder(NAMES[index])),
                &[stack.count, stack.count * 1_000],
                &labels,
            )
            .unwrap();
    }

    /// The run's folded stacks, kept interval by interval, are what folding the run's
    /// samples afresh gives (the daemon's earlier rewrite), the cap's stand-in
    /// included; each interval's are its samples' own.
    #[test]
    fn the_run_folded_interval_by_interval_is_the_run_folded_at_once() {
        let mut processes = Processes::new(SymbolOptions::default());
        let mut profile = StackProfile::new(
            &crate::SAMPLE_TYPES,
            None,
            HashMap::new(),
            MappingSymbols::Functions,
        );
        // Room for four distinct (stack, command) samples.
        let mut run = RunTotal::new(&mut profile, 4).unwrap();
        let intervals: [&[Stack]; 4] = [
            &[stack(1, "shell", &[0], 3), stack(2, "cc", &[1, 0], 2)],
            // Recurring stacks, and a third and fourth distinct.
            &[
                stack(1, "shell", &[0], 1),
                stack(3, "ld", &[2, 0], 5),
                stack(2, "cc", &[3, 0], 1),
            ],
            // Over the cap: new stacks of known and new commands.
            &[
                stack(2, "cc", &[4, 0], 7),
                stack(2, "cc", &[1, 0], 1),
                stack(4, "as;x", &[5], 2),
            ],
            &[stack(4, "as;x", &[5], 1), stack(1, "shell", &[4], 4)],
        ];
        let mut over_cap = 0;
        for (number, interval) in intervals.iter().enumerate() {
            for stack in interval.iter() {
                add(&mut profile, &mut processes, stack);
            }
            let taken = profile.take_interval(&ProfileMetadata::default()).unwrap();
            let added = run.add_interval(&mut profile, &taken.samples).unwrap();
            assert_eq!(
                added.folded.to_text(),
                profile.folded_of(&taken.samples, 0).unwrap().to_text(),
                "interval {number}"
            );
            assert_eq!(
                run.folded().to_text(),
                profile.folded_of(run.samples(), 0).unwrap().to_text(),
                "after interval {number}"
            );
            over_cap += added.over_cap;
        }
        // cc's write (7), as's exit (2 + 1), shell's write (4).
        assert_eq!(over_cap, 14);
        assert_eq!(
            run.folded().to_text(),
            "as:x;[merged profile full] 3\n\
             cc;[merged profile full] 7\n\
             cc;main;a:b 1\n\
             cc;main;parse 3\n\
             ld;main;read 5\n\
             shell;[merged profile full] 4\n\
             shell;main 4\n"
        );
    }
}
