//! An N-Trace recording's trace split by the process that ran it. The hardware traces
//! every hart whoever runs there; the recording's side-band says who ran where and when
//! (PERF_RECORD_SWITCH_CPU_WIDE, COMM with exec, FORK) in perf time, and the trace says
//! when each hart started anew (a synchronisation message carries a full timestamp,
//! converted to perf time with the kernel's conversion kept in the AUXTRACE_INFO), as
//! perf attributes Intel PT by its TSC packets. Every message from one synchronisation
//! of a hart to its next belongs to the process that ran on the hart's CPU at the
//! synchronisation's time.
//!
//! That is exact when every context switch starts the trace anew on the hart: a trace
//! of user mode alone (the privilege filter stops the trace at every entry into the
//! kernel and synchronises at every return to user mode, after any switch). A trace
//! that also follows the kernel is attributed at its synchronisations (periodic ones,
//! with `trTeInstSyncMax`) unless it reports the task at each switch: Linux writes no
//! `scontext`, but the `rvtrace` driver does when asked (`feature::CONTEXT_TASK`), and
//! such a recording is split at its context switches instead
//! (`crate::ntrace_task_contexts`).
//!
//! Each thread's messages form an N-Trace stream of their own (the messages whole, in
//! their order, SRC fields kept), decoded against its process's code alone: two
//! programs at the same addresses (two non-PIE executables) are each decoded with their
//! own file, and a thread's call stack is its own. A process is a pid from one exec to
//! the next: before its first exec, a forked child runs its parent's program.

use std::collections::HashMap;

use ntrace_message::MessageOptions;

use crate::ntrace_recording::{
    place_files, ExecutableMapping, NtraceRecording, PlacementProblem, Task, TaskSwitch,
};
use crate::timed_messages::{TimedMessage, TimedMessages};

/// The idle task's name (perf's; the side-band has no COMM for it).
pub const IDLE_COMM: &str = "swapper";

/// A process as the trace is split by: a pid, and how many execs it had made when it
/// ran this (0: the program it was forked running, or ran when the recording began).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgramRun {
    pub pid: u32,
    pub execs: u32,
}

/// The trace of one thread of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadTrace {
    pub run: ProgramRun,
    pub tid: u32,
    /// Its command name while it ran this program.
    pub comm: String,
    /// Its messages, an N-Trace stream of their own.
    pub trace: Vec<u8>,
    pub messages: u64,
    /// Synchronisations that started a stretch of its trace.
    pub stretches: u64,
}

/// What could not be attributed to a process, and why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unattributed {
    /// Messages of a hart before its first synchronisation, or after a gap or an
    /// unreadable message and before its next (the decoder would skip them as well).
    pub unsynchronised_messages: u64,
    /// Messages of stretches whose time falls where the side-band names no task for the
    /// hart's CPU (before the CPU's first context switch), or in the idle task of a
    /// user-mode trace (of a trace that follows the kernel, it is a thread).
    pub no_task_messages: u64,
    /// Messages of a hart that is no Linux CPU.
    pub unknown_hart_messages: u64,
    /// Unreadable messages.
    pub unreadable_messages: u64,
}

/// The trace split by thread, in order of each thread's first stretch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attribution {
    pub threads: Vec<ThreadTrace>,
    pub unattributed: Unattributed,
}

/// Why a recording's trace cannot be split by process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributionError {
    #[error("the trace has no timestamps (record with timestamps to tell processes apart)")]
    NoTimestamps,
    #[error(
        "the recording has no conversion of the trace's time to perf time (the kernel gave none)"
    )]
    NoTimeConversion,
    #[error("the recording has no context switches (PERF_RECORD_SWITCH_CPU_WIDE)")]
    NoContextSwitches,
}

/// Who ran on each CPU when, from the context switches.
struct Schedule {
    /// Per CPU, the switches in time order.
    by_cpu: HashMap<u32, Vec<TaskSwitch>>,
}

impl Schedule {
    fn new(switches: &[TaskSwitch]) -> Self {
        let mut by_cpu: HashMap<u32, Vec<TaskSwitch>> = HashMap::new();
        for switch in switches {
            by_cpu.entry(switch.cpu).or_default().push(*switch);
        }
        for list in by_cpu.values_mut() {
            list.sort_by_key(|switch| switch.time);
        }
        Self { by_cpu }
    }

    /// The task that ran on `cpu` at perf time `time`.
    fn task_at(&self, cpu: u32, time: u64) -> Option<Task> {
        let list = self.by_cpu.get(&cpu)?;
        let after = list.partition_point(|switch| switch.time <= time);
        match after.checked_sub(1) {
            Some(last) => list[last].next,
            // Before the CPU's first switch: what that switch took off it.
            None => list.first()?.previous,
        }
    }
}

impl NtraceRecording {
    /// Which program `pid` ran at perf time `time`: the execs it made by then.
    pub fn program_run_at(&self, pid: u32, time: u64) -> ProgramRun {
        let execs = self
            .comms
            .iter()
            .filter(|comm| comm.exec && comm.task.pid == pid && comm.time <= time)
            .count();
        ProgramRun {
            pid,
            execs: u32::try_from(execs).unwrap_or(u32::MAX),
        }
    }

    /// The perf times `run` ran in: from its exec (0 for a program run from the start
    /// or a fork's) to the pid's next exec (`u64::MAX` without one).
    fn span_of(&self, run: ProgramRun) -> std::ops::Range<u64> {
        let execs = self.execs_of(run.pid);
        let index = usize::try_from(run.execs).unwrap_or(usize::MAX);
        let start = index
            .checked_sub(1)
            .and_then(|previous| execs.get(previous))
            .copied()
            .unwrap_or(0);
        let end = execs.get(index).copied().unwrap_or(u64::MAX);
        start..end
    }

    /// The times of `pid`'s execs, in order.
    fn execs_of(&self, pid: u32) -> Vec<u64> {
        let mut times: Vec<u64> = self
            .comms
            .iter()
            .filter(|comm| comm.exec && comm.task.pid == pid)
            .map(|comm| comm.time)
            .collect();
        times.sort_unstable();
        times
    }

    /// The command name of `run`: its exec's, or the latest the pid had before it ran
    /// another program (a fork's is its parent's).
    pub fn comm_of(&self, run: ProgramRun) -> String {
        if run.pid == 0 {
            return IDLE_COMM.to_owned();
        }
        let span = self.span_of(run);
        let own = self
            .comms
            .iter()
            .filter(|comm| comm.task.pid == run.pid && span.contains(&comm.time))
            .max_by_key(|comm| comm.time)
            .map(|comm| comm.comm.clone());
        own.or_else(|| {
            let parent = self.parent_run(run)?;
            Some(self.comm_of(parent))
        })
        .unwrap_or_else(|| format!(":{}", run.pid))
    }

    /// The program the parent of a forked `run` (one with no exec yet) ran at the fork.
    fn parent_run(&self, run: ProgramRun) -> Option<ProgramRun> {
        if run.execs != 0 {
            return None;
        }
        let fork = self
            .forks
            .iter()
            .find(|fork| fork.child.pid == run.pid && fork.child.tid == run.pid)?;
        (fork.parent.pid != run.pid).then(|| self.program_run_at(fork.parent.pid, fork.time))
    }

    /// The executable mappings of `run`: those the pid made while running it, and a
    /// forked run's parent's before the fork.
    pub fn mappings_of(&self, run: ProgramRun) -> Vec<&ExecutableMapping> {
        let span = self.span_of(run);
        let mut mappings: Vec<&ExecutableMapping> = Vec::new();
        let mut ancestor = run;
        // A chain of forks without exec (bounded: each step is an older fork).
        for _ in 0..64 {
            let Some(parent) = self.parent_run(ancestor) else {
                break;
            };
            let fork_time = self
                .forks
                .iter()
                .find(|fork| fork.child.pid == ancestor.pid)
                .map_or(0, |fork| fork.time);
            let parent_start = self.span_of(parent).start;
            // The parent's mappings come first: the child's own are later.
            let inherited = self.mappings.iter().filter(|mapping| {
                mapping.pid == parent.pid
                    && mapping.time >= parent_start
                    && mapping.time <= fork_time
            });
            mappings.splice(0..0, inherited);
            ancestor = parent;
        }
        mappings.extend(
            self.mappings
                .iter()
                .filter(|mapping| mapping.pid == run.pid && span.contains(&mapping.time)),
        );
        mappings
    }

    /// The ELF files of `run`'s mappings, placed (see [`place_files`]).
    pub fn placed_files_of<B: AsRef<[u8]>>(
        &self,
        run: ProgramRun,
        read: impl Fn(&str, Option<&[u8]>) -> std::io::Result<(std::path::PathBuf, B)>,
    ) -> (Vec<crate::PlacedElf>, Vec<PlacementProblem>) {
        place_files(&self.mappings_of(run), read)
    }

    /// The trace split by the thread that ran it. `options` are the wire options
    /// (the recording's SRC bits and timestamps, the code's address width).
    pub fn attribute(&self, options: MessageOptions) -> Result<Attribution, AttributionError> {
        if !self.info.has(perf_abi::ntrace::feature::TIMESTAMPS) {
            return Err(AttributionError::NoTimestamps);
        }
        if self.info.time.is_none() {
            return Err(AttributionError::NoTimeConversion);
        }
        if self.switches.is_empty() {
            return Err(AttributionError::NoContextSwitches);
        }
        let schedule = Schedule::new(&self.switches);
        let mut threads: Vec<ThreadTrace> = Vec::new();
        let mut index_of: HashMap<(ProgramRun, u32), usize> = HashMap::new();
        let mut unattributed = Unattributed::default();
        /// Where a hart's messages go until its next synchronisation.
        #[derive(Clone, Copy)]
        enum Destination {
            Unsynchronised,
            NoTask,
            UnknownHart,
            Thread(usize),
        }
        for piece in &self.pieces {
            // Before a piece (after a gap) no hart is synchronised.
            let mut destinations: HashMap<u16, Destination> = HashMap::new();
            for timed in TimedMessages::new(&piece.bytes, options) {
                let (message, time) = match timed {
                    TimedMessage::Read { message, time } => (message, time),
                    TimedMessage::Unreadable => {
                        // Whose it was is unknown: every hart waits for its next sync.
                        unattributed.unreadable_messages += 1;
                        destinations.clear();
                        continue;
                    }
                };
                let hart = message.src;
                if message.is_sync() {
                    // A synchronisation's time is its own timestamp (without one, the
                    // hart's time from before is no time of this one).
                    let destination = match message.timestamp.and(time) {
                        None => Destination::Unsynchronised,
                        Some(timestamp) => match self.info.cpu_of_hart(hart) {
                            None => Destination::UnknownHart,
                            Some(cpu) => {
                                let time = self
                                    .info
                                    .perf_time_of_timestamp(timestamp)
                                    .unwrap_or(u64::MAX);
                                match schedule.task_at(cpu, time) {
                                    // The idle task runs kernel code only: a thread
                                    // of a trace that follows the kernel (perf's
                                    // `swapper`), nobody's in a user-mode trace.
                                    Some(task) if task.pid != 0 || self.info.traces_kernel() => {
                                        let run = self.program_run_at(task.pid, time);
                                        let index =
                                            *index_of.entry((run, task.tid)).or_insert_with(|| {
                                                threads.push(ThreadTrace {
                                                    run,
                                                    tid: task.tid,
                                                    comm: self.comm_of(run),
                                                    trace: Vec::new(),
                                                    messages: 0,
                                                    stretches: 0,
                                                });
                                                threads.len() - 1
                                            });
                                        threads[index].stretches += 1;
                                        Destination::Thread(index)
                                    }
                                    _ => Destination::NoTask,
                                }
                            }
                        },
                    };
                    destinations.insert(hart, destination);
                }
                let destination = destinations
                    .get(&hart)
                    .copied()
                    .unwrap_or(Destination::Unsynchronised);
                match destination {
                    Destination::Unsynchronised => unattributed.unsynchronised_messages += 1,
                    Destination::NoTask => unattributed.no_task_messages += 1,
                    Destination::UnknownHart => unattributed.unknown_hart_messages += 1,
                    Destination::Thread(index) => {
                        let start = usize::try_from(message.offset).unwrap_or(usize::MAX);
                        let end = start.saturating_add(message.length as usize);
                        // The decoder read these bytes: they are in the piece.
                        if let Some(bytes) = piece.bytes.get(start..end) {
                            let thread = &mut threads[index];
                            thread.trace.extend_from_slice(bytes);
                            thread.messages += 1;
                        }
                    }
                }
            }
        }
        Ok(Attribution {
            threads,
            unattributed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn switch(time: u64, cpu: u32, previous: u32, next: u32) -> TaskSwitch {
        let task = |pid| Task { pid, tid: pid };
        TaskSwitch {
            time,
            cpu,
            previous: Some(task(previous)),
            next: Some(task(next)),
        }
    }

    #[test]
    fn the_schedule_names_who_ran_when() {
        let schedule = Schedule::new(&[
            switch(200, 0, 10, 20),
            switch(100, 0, 30, 10),
            switch(150, 1, 40, 0),
        ]);
        let pid = |cpu, time| schedule.task_at(cpu, time).map(|task| task.pid);
        assert_eq!(
            pid(0, 50),
            Some(30),
            "before the first switch: who it took off"
        );
        assert_eq!(pid(0, 100), Some(10));
        assert_eq!(pid(0, 199), Some(10));
        assert_eq!(pid(0, 200), Some(20));
        assert_eq!(pid(1, 151), Some(0));
        assert_eq!(pid(2, 151), None);
    }
}
