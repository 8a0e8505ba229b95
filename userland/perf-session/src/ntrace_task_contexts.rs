//! An N-Trace recording's trace split by the thread that ran it, by the task contexts
//! the trace itself reports: with `feature::CONTEXT_TASK` the `rvtrace` driver writes
//! the running task (`perf_abi::ntrace::task_context`: a tid and its exec generation)
//! into each traced hart's context register at every context switch and exec, and the
//! encoder reports it in an Ownership message there (and after every synchronisation).
//! Unlike the split at synchronisations (`crate::ntrace_attribution`), this is exact for a
//! trace that follows the kernel too: a stretch between two periodic synchronisations
//! that spans a context switch goes to both threads, each at its own instructions.
//!
//! Two steps:
//!
//! * [`NtraceRecording::task_contexts`]: a cheap pass over the messages (no code) finds
//!   each distinct context value and the time its hart first reported it, and maps it
//!   to its thread: the tid it names, that tid's pid in the side-band, and the program
//!   the pid ran then ([`NtraceRecording::program_run_at`]). A value that names no task
//!   (not written yet, [`task_context::UNKNOWN`]) or a tid the side-band never mentions
//!   is kept, as a context of no thread, for its elements to be counted.
//! * [`decode_by_context`]: each piece of the trace (between two gaps) is decoded once,
//!   by one [`FlowDecoder::with_contexts`] holding every context's code (an Ownership
//!   message does not restart address compression: the byte stream cannot be cut
//!   there). Each element goes to the thread of its hart's current context, as the
//!   decoder's `ContextChange` elements say; a decode error stays with the thread it
//!   happened in, as a gap with its cause.
//!
//! Memory: the decoded elements of every thread are held (in [`ThreadElements`]) until
//! the caller drops them: about `size_of::<TraceElement>()` bytes per element, one per
//! instruction range, which [`ContextDecode::elements_held`] counts. A consumer that
//! wants a bounded footprint reads each thread's elements and drops them before the next.

use std::collections::HashMap;

use ntrace_flow::{ContextCode, DecoderOptions, FlowDecoder, FlowError, FlowStatistics, Recovery};
use ntrace_message::{Body, MessageOptions, ProcessFormat};
use perf_abi::ntrace::{feature, task_context};
use trace_elements::{Context, ElementKind, GapReason, TraceElement};

use crate::ntrace_attribution::{ProgramRun, IDLE_COMM};
use crate::ntrace_recording::{NtraceRecording, TracePiece};
use crate::timed_messages::{TimedMessage, TimedMessages};

/// Why a recording's trace is not split by the task contexts it reports (the split at
/// synchronisations is the fallback).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskContextsUnavailable {
    #[error("the recording's contexts do not name tasks (no CONTEXT and CONTEXT_TASK features)")]
    NotRecorded,
    #[error("the trace has no timestamps (a context's program is found by its time)")]
    NoTimestamps,
    #[error(
        "the recording has no conversion of the trace's time to perf time (the kernel gave none)"
    )]
    NoTimeConversion,
}

/// A thread a context names, as the side-band knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextThread {
    pub run: ProgramRun,
    pub tid: u32,
    /// Its command name while it ran this program.
    pub comm: String,
}

/// Whose a context value is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextOwner {
    Thread(ContextThread),
    /// [`task_context::UNKNOWN`] (the hart had not switched since tracing started), or a
    /// value no driver writes.
    NoTask,
    /// A tid the side-band never mentions (no switch, fork or comm of it).
    UnknownTid {
        tid: u32,
    },
    /// No report of the value came with a known time (each came before its hart's
    /// first timestamp): which of the pid's programs ran is unknown.
    NoTime {
        tid: u32,
    },
}

/// A context value the trace reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskContext {
    pub value: u64,
    /// Ownership messages that reported it.
    pub reports: u64,
    /// Perf time of its first report with a known time.
    pub first_time: Option<u64>,
    pub owner: ContextOwner,
}

/// The context values of a trace, in order of first report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskContexts {
    pub contexts: Vec<TaskContext>,
    /// Messages the pass could not read (each costs every hart its time until its next
    /// synchronisation).
    pub unreadable_messages: u64,
}

impl TaskContexts {
    /// The distinct threads the contexts name, in order of first report, and for each
    /// context value the index of its thread.
    pub fn threads(&self) -> (Vec<ContextThread>, HashMap<u64, usize>) {
        let mut threads: Vec<ContextThread> = Vec::new();
        let mut index_of = HashMap::new();
        for context in &self.contexts {
            let ContextOwner::Thread(thread) = &context.owner else {
                continue;
            };
            // Two values of one thread and program (an exec generation seen twice
            // modulo 1024, say) are one thread's.
            let index = match threads
                .iter()
                .position(|known| known.run == thread.run && known.tid == thread.tid)
            {
                Some(index) => index,
                None => {
                    threads.push(thread.clone());
                    threads.len() - 1
                }
            };
            index_of.insert(context.value, index);
        }
        (threads, index_of)
    }
}

impl NtraceRecording {
    /// The context values the trace's Ownership messages report, each with its thread
    /// (see the module). `options` are the wire options.
    pub fn task_contexts(
        &self,
        options: MessageOptions,
    ) -> Result<TaskContexts, TaskContextsUnavailable> {
        if !self.info.has(feature::CONTEXT) || !self.info.has(feature::CONTEXT_TASK) {
            return Err(TaskContextsUnavailable::NotRecorded);
        }
        if !self.info.has(feature::TIMESTAMPS) {
            return Err(TaskContextsUnavailable::NoTimestamps);
        }
        if self.info.time.is_none() {
            return Err(TaskContextsUnavailable::NoTimeConversion);
        }
        let mut found = TaskContexts::default();
        let mut index_of: HashMap<u64, usize> = HashMap::new();
        for piece in &self.pieces {
            for timed in TimedMessages::new(&piece.bytes, options) {
                let (message, time) = match timed {
                    TimedMessage::Read { message, time } => (message, time),
                    TimedMessage::Unreadable => {
                        found.unreadable_messages += 1;
                        continue;
                    }
                };
                let Body::Ownership { process } = message.body else {
                    continue;
                };
                if process.format != ProcessFormat::Scontext {
                    continue;
                }
                let time = time.and_then(|stamp| self.info.perf_time_of_timestamp(stamp));
                let index = *index_of.entry(process.context).or_insert_with(|| {
                    found.contexts.push(TaskContext {
                        value: process.context,
                        reports: 0,
                        first_time: None,
                        owner: ContextOwner::NoTask,
                    });
                    found.contexts.len() - 1
                });
                let context = &mut found.contexts[index];
                context.reports += 1;
                if context.first_time.is_none() {
                    context.first_time = time;
                }
            }
        }
        let pids = self.pids_of_tids();
        for context in &mut found.contexts {
            context.owner = self.owner_of(context, &pids);
        }
        Ok(found)
    }

    /// Each tid's pid, from every record of the side-band that names both.
    fn pids_of_tids(&self) -> HashMap<u32, u32> {
        let mut pids = HashMap::new();
        let tasks = self
            .switches
            .iter()
            .flat_map(|switch| [switch.previous, switch.next])
            .flatten()
            .chain(self.forks.iter().flat_map(|fork| [fork.parent, fork.child]))
            .chain(self.comms.iter().map(|comm| comm.task));
        for task in tasks {
            pids.entry(task.tid).or_insert(task.pid);
        }
        pids
    }

    fn owner_of(&self, context: &TaskContext, pids: &HashMap<u32, u32>) -> ContextOwner {
        let Some(tid) = task_context::tid(context.value) else {
            return ContextOwner::NoTask;
        };
        if tid == 0 {
            // The idle task of every CPU (perf's `swapper`): kernel code only.
            return ContextOwner::Thread(ContextThread {
                run: ProgramRun { pid: 0, execs: 0 },
                tid: 0,
                comm: IDLE_COMM.to_owned(),
            });
        }
        let Some(&pid) = pids.get(&tid) else {
            return ContextOwner::UnknownTid { tid };
        };
        let Some(time) = context.first_time else {
            return ContextOwner::NoTime { tid };
        };
        let run = self.program_run_at(pid, time);
        ContextOwner::Thread(ContextThread {
            run,
            tid,
            comm: self.comm_of(run),
        })
    }
}

/// The decoded trace of one thread.
#[derive(Debug, Clone)]
pub struct ThreadElements {
    pub thread: ContextThread,
    /// Its elements, in the order its harts ran them (interleaved as the trace
    /// interleaves harts). Offsets are byte offsets in the element's piece.
    pub elements: Vec<TraceElement>,
    /// The error behind each decode-error gap of `elements`, by the gap's index there.
    pub errors: Vec<(usize, FlowError)>,
    /// Instructions of its ranges.
    pub instructions: u64,
}

/// What of the decode no thread is given, and why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnattributedElements {
    /// Elements of a hart before its first context (at the start of a piece, until the
    /// Ownership message after its first synchronisation), beyond what is held for
    /// that context, or when the piece ended first.
    pub before_context_elements: u64,
    pub before_context_instructions: u64,
    /// Elements of contexts of no thread ([`ContextOwner`] other than `Thread`).
    pub no_thread_elements: u64,
    pub no_thread_instructions: u64,
    /// Errors the decoder returned rather than reported as gaps (it resumed after each).
    pub returned_errors: u64,
}

/// The trace decoded with every context's code, split by thread.
#[derive(Debug, Clone)]
pub struct ContextDecode {
    /// As [`TaskContexts::threads`] gives them; a thread with no element has none.
    pub threads: Vec<ThreadElements>,
    pub unattributed: UnattributedElements,
    /// The decoders' counters, summed over the pieces.
    pub statistics: FlowStatistics,
    /// Elements held in `threads`, for the caller to say what the split costs.
    pub elements_held: u64,
}

/// Elements a hart may produce between a synchronisation and the Ownership message
/// after it (a trace-on, a timestamp) that are held for the context that message
/// reports. More means the encoder reports no context there: they are counted, not held.
const HELD_BEFORE_CONTEXT: usize = 64;

/// Where a hart's elements go.
#[derive(Debug)]
enum Route {
    /// No context reported since the piece started or the hart lost its flow: held
    /// until one is (they belong to the context the synchronisation's Ownership names).
    Waiting(Vec<(TraceElement, Option<FlowError>)>),
    Thread(usize),
    NoThread,
}

/// Whether a thread's decoded elements are kept for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElementsKept {
    /// Kept in its [`ThreadElements`].
    Kept,
    /// Counted (its instructions) and dropped: the caller does not want this thread,
    /// and holding every thread's elements costs memory in proportion to the trace.
    Counted,
}

/// Decodes `pieces` (each alone: a gap resets every hart) with `code`, which must have
/// the code of each context `threads` maps (context value -> index into `threads`),
/// and gives each element to the thread of its hart's context, which keeps it or
/// counts it as `kept` says. `options` are made to report every range and recover from
/// errors as gaps.
pub fn decode_by_context(
    pieces: &[TracePiece],
    code: &ContextCode<'_>,
    threads: &[ContextThread],
    thread_of_context: &HashMap<u64, usize>,
    kept: impl Fn(&ContextThread) -> ElementsKept,
    options: DecoderOptions,
) -> ContextDecode {
    let kept: Vec<ElementsKept> = threads.iter().map(kept).collect();
    let options = options
        .with_instruction_ranges(true)
        .with_recovery(Recovery::Resync);
    let mut decoded = ContextDecode {
        threads: threads
            .iter()
            .map(|thread| ThreadElements {
                thread: thread.clone(),
                elements: Vec::new(),
                errors: Vec::new(),
                instructions: 0,
            })
            .collect(),
        unattributed: UnattributedElements::default(),
        statistics: FlowStatistics::default(),
        elements_held: 0,
    };
    for piece in pieces {
        let mut decoder = FlowDecoder::with_contexts(&piece.bytes, code.clone(), options);
        let mut routes: HashMap<u16, Route> = HashMap::new();
        loop {
            let element = match decoder.next_element() {
                Ok(Some(element)) => element,
                Ok(None) => break,
                Err(_) => {
                    // Not with Recovery::Resync; should it happen, the decoder resumes
                    // at the next synchronisation when called again.
                    decoded.unattributed.returned_errors += 1;
                    continue;
                }
            };
            let cause = match element.kind {
                ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } => decoder.last_recovered_error().cloned(),
                _ => None,
            };
            route(
                &mut decoded,
                &mut routes,
                thread_of_context,
                &kept,
                element,
                cause,
            );
        }
        // What still waits for a context never got one.
        for route in routes.into_values() {
            if let Route::Waiting(held) = route {
                for (element, _) in held {
                    count_before_context(&mut decoded.unattributed, &element);
                }
            }
        }
        add_statistics(&mut decoded.statistics, &decoder.statistics());
    }
    decoded.elements_held = decoded
        .threads
        .iter()
        .map(|thread| thread.elements.len() as u64)
        .sum();
    decoded
}

/// Gives `element` (with the error behind it, for a decode-error gap) to its hart's
/// thread, and follows the hart's context.
fn route(
    decoded: &mut ContextDecode,
    routes: &mut HashMap<u16, Route>,
    thread_of_context: &HashMap<u64, usize>,
    kept: &[ElementsKept],
    element: TraceElement,
    cause: Option<FlowError>,
) {
    let route = routes
        .entry(element.hart)
        .or_insert_with(|| Route::Waiting(Vec::new()));
    if let ElementKind::ContextChange {
        context: Some(Context::Process(value)),
        ..
    } = element.kind
    {
        let next = match thread_of_context.get(&value) {
            Some(&index) => Route::Thread(index),
            None => Route::NoThread,
        };
        // What waited is the new context's: the synchronisation before its report.
        if let Route::Waiting(held) = std::mem::replace(route, next) {
            for (element, cause) in held {
                deliver(decoded, route, kept, element, cause);
            }
        }
    }
    let lost_flow = matches!(element.kind, ElementKind::Gap { .. });
    match route {
        Route::Waiting(held) if held.len() < HELD_BEFORE_CONTEXT => held.push((element, cause)),
        Route::Waiting(_) => count_before_context(&mut decoded.unattributed, &element),
        _ => deliver(decoded, route, kept, element, cause),
    }
    // After a gap the hart synchronises anew, and the Ownership message after that
    // names who runs then: the gap may have hidden a switch.
    if lost_flow {
        *route = Route::Waiting(Vec::new());
    }
}

fn deliver(
    decoded: &mut ContextDecode,
    route: &Route,
    kept: &[ElementsKept],
    element: TraceElement,
    cause: Option<FlowError>,
) {
    let instructions = instructions_of(&element);
    match *route {
        Route::Thread(index) => {
            let Some(thread) = decoded.threads.get_mut(index) else {
                return;
            };
            if kept.get(index) != Some(&ElementsKept::Kept) {
                thread.instructions = thread.instructions.saturating_add(instructions);
                return;
            }
            if let Some(cause) = cause {
                thread.errors.push((thread.elements.len(), cause));
            }
            thread.elements.push(element);
            thread.instructions = thread.instructions.saturating_add(instructions);
        }
        Route::NoThread => {
            decoded.unattributed.no_thread_elements += 1;
            decoded.unattributed.no_thread_instructions = decoded
                .unattributed
                .no_thread_instructions
                .saturating_add(instructions);
        }
        Route::Waiting(_) => count_before_context(&mut decoded.unattributed, &element),
    }
}

fn count_before_context(unattributed: &mut UnattributedElements, element: &TraceElement) {
    unattributed.before_context_elements += 1;
    unattributed.before_context_instructions = unattributed
        .before_context_instructions
        .saturating_add(instructions_of(element));
}

fn instructions_of(element: &TraceElement) -> u64 {
    match element.kind {
        ElementKind::InstructionRange { instructions, .. } => u64::from(instructions),
        _ => 0,
    }
}

/// `total` plus one piece's decoder's counters.
fn add_statistics(total: &mut FlowStatistics, piece: &FlowStatistics) {
    total.instructions = total.instructions.saturating_add(piece.instructions);
    total.messages = total.messages.saturating_add(piece.messages);
    total.sync_messages = total.sync_messages.saturating_add(piece.sync_messages);
    total.messages_before_sync = total
        .messages_before_sync
        .saturating_add(piece.messages_before_sync);
    total.gaps = total.gaps.saturating_add(piece.gaps);
    total.trace_stops = total.trace_stops.saturating_add(piece.trace_stops);
    total.restarts = total.restarts.saturating_add(piece.restarts);
    total.recovered_errors = total
        .recovered_errors
        .saturating_add(piece.recovered_errors);
    total.vendor_or_reserved_messages = total
        .vendor_or_reserved_messages
        .saturating_add(piece.vendor_or_reserved_messages);
    total.unresolved_units_at_end = total
        .unresolved_units_at_end
        .saturating_add(piece.unresolved_units_at_end);
    total.blocks_decoded = total.blocks_decoded.saturating_add(piece.blocks_decoded);
    total.skipped_units = total.skipped_units.saturating_add(piece.skipped_units);
}
