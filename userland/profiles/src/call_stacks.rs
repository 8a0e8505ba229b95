//! Call stacks reconstructed from an instruction trace, for flame graphs: what a
//! sampling profiler would see with perfect unwinding at every instruction.
//!
//! The trace gives every call, return, trap and trap return ([`TraceElement`]s of any
//! protocol), so each hart's stack is kept as it runs: a call pushes a frame (its call
//! site), a return pops to the frame it returns to, a trap pushes a frame at the
//! interrupted instruction and a trap return pops it. Each instruction range is weighed
//! (instructions retired, or time between timestamps) to the stack it ran under. Stacks
//! are kept as nodes of a tree (a stack is a node: its call site and its parent), so
//! the weight of a range is one hash update whatever the depth.
//!
//! What the trace cannot say is not invented:
//! * Frames already on the stack when the trace started (or resumed after a gap) were
//!   never seen being called: they all hang under one `[unknown caller]` root. A trace
//!   that starts at a known stack root (a program's entry point,
//!   [`CallStackOptions::stack_roots`]) has no unknown caller.
//! * A return that matches no open call (a `longjmp`, a return address rewritten) pops
//!   to the newest frame whose calling function the return lands in; if there is none
//!   the stack is unknown from there on (`[unknown caller]` again), counted in
//!   [`CallStackStatistics::unmatched_returns`].
//!
//! Like a perf callchain, a frame is an address in its function: the leaf is where a
//! range started, a caller is its call instruction. Naming is the caller's, through
//! [`StackCollapser`]'s [`StackSymbols`] at the end: tail calls (a jump to another
//! function) therefore show as the function they jumped to, under the caller that
//! made the call.

use rustc_hash::FxHashMap;
use trace_elements::{Context, ElementKind, RangeEnd, TraceElement};

use crate::collapse::{StackCollapser, StackSymbols};

/// What a stack's width counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StackWeight {
    /// Instructions retired under the stack.
    #[default]
    Instructions,
    /// Trace time units between timestamps, shared among the stacks that ran between
    /// two timestamps in proportion to their instructions. Execution before a hart's
    /// first timestamp or after its last has no time and is left out (counted).
    Time,
}

/// What a trace stop (a TraceOff, then a TraceOn) does to a hart's stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StopsKeepStacks {
    /// The stack is unknown after it: whatever ran meanwhile is not in the trace.
    #[default]
    No,
    /// The stack is kept: the trace is one thread's, stopped by a privilege filter
    /// while its thread was in the kernel (a system call, an interrupt, a fault), which
    /// returns to where it left, or delivers a signal whose handler runs on top.
    Yes,
}

/// Options of [`CallStacks`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallStackOptions {
    pub weight: StackWeight,
    /// Addresses where a stack starts empty (a program's entry point): a trace that
    /// starts there has no unknown caller.
    pub stack_roots: Vec<u64>,
    pub stops: StopsKeepStacks,
}

impl CallStackOptions {
    pub fn new(weight: StackWeight, stack_roots: Vec<u64>) -> Self {
        Self {
            weight,
            stack_roots,
            stops: StopsKeepStacks::No,
        }
    }

    /// The same, with trace stops keeping the stack as `stops` says.
    pub fn with_stops(mut self, stops: StopsKeepStacks) -> Self {
        self.stops = stops;
        self
    }
}

/// Which function an address is in: the reconstruction asks only when a return
/// matches no open call.
pub trait FunctionOf {
    /// The start of the function containing `address`, `None` when unknown.
    fn function_of(&mut self, address: u64) -> Option<u64>;
}

impl<F: FnMut(u64) -> Option<u64>> FunctionOf for F {
    fn function_of(&mut self, address: u64) -> Option<u64> {
        self(address)
    }
}

/// What the reconstruction met, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallStackStatistics {
    /// Instructions of every range seen.
    pub instructions: u64,
    /// The summed weight of all stacks (instructions, or time units).
    pub weight: u64,
    /// Instructions without a time (before a hart's first timestamp, after its last,
    /// or before a gap): with [`StackWeight::Time`], left out.
    pub instructions_without_time: u64,
    pub calls: u64,
    pub returns: u64,
    /// Returns that matched no open call: the stack was cut to what the return
    /// reveals.
    pub unmatched_returns: u64,
    pub traps: u64,
    /// Gaps and trace stops: the stack after them starts unknown.
    pub stack_losses: u64,
    /// Trace stops the stack was kept across ([`StopsKeepStacks::Yes`]).
    pub stops_kept: u64,
}

/// A stack: its newest call site and the stack it was made from.
type NodeId = u32;

/// Stacks whose oldest frames were not seen: `[unknown caller]` at the root.
const UNKNOWN_ROOT: NodeId = 0;
/// Stacks that started at a stack root: nothing above them.
const KNOWN_ROOT: NodeId = 1;

/// The name of the root of stacks whose callers the trace did not see.
pub const UNKNOWN_CALLER: &str = "[unknown caller]";

#[derive(Debug, Clone, Copy)]
struct Node {
    parent: NodeId,
    /// The call instruction (or trapped instruction) of the newest frame.
    site: u64,
}

/// What made a frame, which decides the returns that end it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    /// A call: a return to just after it (2 or 4 bytes on) ends it.
    Call,
    /// A trap: a trap return to the instruction itself (an exception or interrupt) or
    /// after it (`ecall`) ends it.
    Trap,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    site: u64,
    kind: FrameKind,
    /// The stack with this frame on top.
    node: NodeId,
}

impl Frame {
    fn returns_to(&self, target: u64) -> bool {
        let distance = target.wrapping_sub(self.site);
        match self.kind {
            FrameKind::Call => distance == 2 || distance == 4,
            FrameKind::Trap => distance == 0 || distance == 2 || distance == 4,
        }
    }
}

/// A place a range ran: the stack and the range's first address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Place {
    node: NodeId,
    leaf: u64,
}

/// One thread of execution: a hart in one context (process or VM).
#[derive(Debug, Clone, Default)]
struct Thread {
    root: NodeId,
    frames: Vec<Frame>,
    /// Where the last range went next, for a trap that does not say where it was taken.
    position: Option<u64>,
    /// With time weights: the hart's last timestamp and the instructions run under
    /// each place since.
    last_time: Option<u64>,
    pending: FxHashMap<Place, u64>,
    /// Time that passed while no instruction was placed (a message's timestamp can
    /// come before the instructions it reports are walked): it goes to the next
    /// instructions, so no time is lost.
    carried_time: u64,
}

impl Thread {
    fn node(&self) -> NodeId {
        self.frames.last().map_or(self.root, |frame| frame.node)
    }

    fn lose_stack(&mut self) {
        self.frames.clear();
        self.root = UNKNOWN_ROOT;
    }
}

/// The weight of each place: a map, with a direct-mapped cache of recent places in
/// front of it (a trace's ranges come back to the same few thousand places again and
/// again, and one hash-map update per range was most of a trace fold's time).
#[derive(Debug)]
struct Weights {
    totals: FxHashMap<Place, u64>,
    recent: Box<[Option<(Place, u64)>]>,
}

/// Slots of [`Weights::recent`].
const RECENT_PLACES: usize = 1 << 12;

impl Default for Weights {
    fn default() -> Self {
        Self {
            totals: FxHashMap::default(),
            recent: vec![None; RECENT_PLACES].into_boxed_slice(),
        }
    }
}

impl Weights {
    #[inline]
    fn add(&mut self, place: Place, weight: u64) {
        let hash = (place.leaf ^ u64::from(place.node).rotate_left(40))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = &mut self.recent[(hash >> (64 - RECENT_PLACES.trailing_zeros())) as usize];
        match slot {
            Some((cached, total)) if *cached == place => add(total, weight),
            _ => {
                if let Some((evicted, total)) = slot.replace((place, weight)) {
                    add(self.totals.entry(evicted).or_default(), total);
                }
            }
        }
    }

    /// Every place's total weight.
    fn into_totals(mut self) -> FxHashMap<Place, u64> {
        for (place, total) in self.recent.iter().flatten() {
            add(self.totals.entry(*place).or_default(), *total);
        }
        self.totals
    }
}

/// Which thread a hart runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct ThreadKey {
    hart: u16,
    context: Option<Context>,
}

/// The threads by key, with the last one looked up at hand: a trace runs one thread
/// for long stretches, and every range looks its thread up.
#[derive(Debug, Default)]
struct Threads {
    list: Vec<Thread>,
    index: FxHashMap<ThreadKey, usize>,
    last: Option<(ThreadKey, usize)>,
}

impl Threads {
    fn position(&mut self, key: ThreadKey) -> Option<usize> {
        if let Some((last, position)) = self.last {
            if last == key {
                return Some(position);
            }
        }
        let position = *self.index.get(&key)?;
        self.last = Some((key, position));
        Some(position)
    }

    fn entry(&mut self, key: ThreadKey) -> &mut Thread {
        let position = match self.position(key) {
            Some(position) => position,
            None => {
                self.list.push(Thread::default());
                let position = self.list.len() - 1;
                self.index.insert(key, position);
                self.last = Some((key, position));
                position
            }
        };
        &mut self.list[position]
    }

    fn get_mut(&mut self, key: ThreadKey) -> Option<&mut Thread> {
        let position = self.position(key)?;
        self.list.get_mut(position)
    }

    fn contains_key(&self, key: ThreadKey) -> bool {
        self.index.contains_key(&key)
    }

    /// The thread of `from` is `to`'s from now on.
    fn rekey(&mut self, from: ThreadKey, to: ThreadKey) {
        if let Some(position) = self.index.remove(&from) {
            self.index.insert(to, position);
            self.last = None;
        }
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Thread> {
        self.list.iter_mut()
    }
}

/// Call stacks of a trace and the weight each ran with.
#[derive(Debug)]
pub struct CallStacks {
    options: CallStackOptions,
    nodes: Vec<Node>,
    children: FxHashMap<(NodeId, u64), NodeId>,
    weights: Weights,
    threads: Threads,
    /// The context each hart runs now, and the last hart's at hand.
    contexts: FxHashMap<u16, Option<Context>>,
    last_context: Option<(u16, Option<Context>)>,
    statistics: CallStackStatistics,
}

impl CallStacks {
    pub fn new(options: CallStackOptions) -> Self {
        let roots = [UNKNOWN_ROOT, KNOWN_ROOT].map(|node| Node {
            parent: node,
            site: 0,
        });
        Self {
            options,
            nodes: roots.to_vec(),
            children: FxHashMap::default(),
            weights: Weights::default(),
            threads: Threads::default(),
            contexts: FxHashMap::default(),
            last_context: None,
            statistics: CallStackStatistics::default(),
        }
    }

    pub fn statistics(&self) -> CallStackStatistics {
        self.statistics
    }

    /// Takes the next element of the trace. `functions` is asked only about returns
    /// that match no open call.
    pub fn push(&mut self, element: &TraceElement, functions: &mut impl FunctionOf) {
        let hart = element.hart;
        let key = ThreadKey {
            hart,
            context: self.context_of(hart),
        };
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions,
                end,
                next,
            } => {
                let thread = self.threads.entry(key);
                let place = Place {
                    node: thread.node(),
                    leaf: start,
                };
                let instructions = u64::from(instructions);
                self.statistics.instructions =
                    self.statistics.instructions.saturating_add(instructions);
                match self.options.weight {
                    StackWeight::Instructions => {
                        self.weights.add(place, instructions);
                        self.statistics.weight =
                            self.statistics.weight.saturating_add(instructions);
                    }
                    StackWeight::Time => {
                        add(thread.pending.entry(place).or_default(), instructions)
                    }
                }
                thread.position = next;
                self.end_range(key, last, end, next, functions);
            }
            ElementKind::Trap { from, .. } => {
                self.statistics.traps += 1;
                let thread = self.threads.entry(key);
                if let Some(site) = from.or(thread.position) {
                    self.push_frame(key, site, FrameKind::Trap);
                } else {
                    thread.lose_stack();
                }
            }
            ElementKind::TraceOn { address, .. } => {
                let known_root = self.options.stack_roots.contains(&address);
                let thread = self.threads.entry(key);
                if thread.frames.is_empty() && thread.position.is_none() {
                    thread.root = if known_root { KNOWN_ROOT } else { UNKNOWN_ROOT };
                }
                thread.position = Some(address);
            }
            ElementKind::Gap { .. } | ElementKind::TraceOff { .. } => {
                let keep = self.options.stops == StopsKeepStacks::Yes
                    && matches!(element.kind, ElementKind::TraceOff { .. });
                let thread = self.threads.entry(key);
                if keep {
                    // Execution resumes with the next TraceOn, on this stack.
                    self.statistics.stops_kept += 1;
                } else {
                    self.statistics.stack_losses += 1;
                    thread.lose_stack();
                }
                thread.position = None;
                // The time to the next timestamp includes what the stop or gap lost.
                let unattributed: u64 = thread.pending.drain().map(|(_, count)| count).sum();
                thread.last_time = None;
                thread.carried_time = 0;
                add(&mut self.statistics.instructions_without_time, unattributed);
            }
            ElementKind::ContextChange { context, .. } => {
                if let Some(context) = context {
                    let new_key = ThreadKey {
                        hart,
                        context: Some(context),
                    };
                    // The first context a hart reports is the one it ran so far.
                    if key.context.is_none() && !self.threads.contains_key(new_key) {
                        self.threads.rekey(key, new_key);
                    }
                    self.contexts.insert(hart, Some(context));
                    self.last_context = None;
                }
            }
            ElementKind::Timestamp { time } => self.timestamp(key, time),
            ElementKind::RegisterWrite { .. }
            | ElementKind::MemoryAccess { .. }
            | ElementKind::Unhandled { .. } => {}
        }
    }

    /// The context `hart` runs now.
    #[inline]
    fn context_of(&mut self, hart: u16) -> Option<Context> {
        if let Some((last, context)) = self.last_context {
            if last == hart {
                return context;
            }
        }
        let context = self.contexts.get(&hart).copied().flatten();
        self.last_context = Some((hart, context));
        context
    }

    fn end_range(
        &mut self,
        key: ThreadKey,
        last: u64,
        end: RangeEnd,
        next: Option<u64>,
        functions: &mut impl FunctionOf,
    ) {
        match end {
            RangeEnd::Call | RangeEnd::IndirectCall => {
                self.statistics.calls += 1;
                self.push_frame(key, last, FrameKind::Call);
            }
            RangeEnd::Return => {
                self.statistics.returns += 1;
                self.pop_to(key, next, FrameKind::Call, functions);
            }
            RangeEnd::TrapReturn => {
                self.statistics.returns += 1;
                self.pop_to(key, next, FrameKind::Trap, functions);
            }
            RangeEnd::CoroutineSwap => {
                // Both a return (to whoever called the other side) and a call.
                self.statistics.returns += 1;
                self.statistics.calls += 1;
                if let Some(thread) = self.threads.get_mut(key) {
                    thread.frames.pop();
                }
                self.push_frame(key, last, FrameKind::Call);
            }
            RangeEnd::Sequential
            | RangeEnd::BranchTaken
            | RangeEnd::BranchNotTaken
            | RangeEnd::Jump
            | RangeEnd::IndirectJump
            | RangeEnd::EnvironmentCall => {}
        }
    }

    fn push_frame(&mut self, key: ThreadKey, site: u64, kind: FrameKind) {
        let Some(thread) = self.threads.get_mut(key) else {
            return;
        };
        let parent = thread.node();
        let next_id = NodeId::try_from(self.nodes.len()).unwrap_or(NodeId::MAX);
        let node = *self.children.entry((parent, site)).or_insert(next_id);
        if node == next_id {
            self.nodes.push(Node { parent, site });
        }
        thread.frames.push(Frame { site, kind, node });
    }

    fn pop_to(
        &mut self,
        key: ThreadKey,
        target: Option<u64>,
        kind: FrameKind,
        functions: &mut impl FunctionOf,
    ) {
        let Some(thread) = self.threads.get_mut(key) else {
            return;
        };
        let Some(target) = target else {
            // Returned somewhere the trace does not say: nothing is known above.
            thread.lose_stack();
            return;
        };
        if let Some(index) = thread
            .frames
            .iter()
            .rposition(|frame| frame.kind == kind && frame.returns_to(target))
        {
            thread.frames.truncate(index);
            return;
        }
        if thread.frames.is_empty() {
            // Returned into a caller from before the trace began.
            thread.root = UNKNOWN_ROOT;
            return;
        }
        self.statistics.unmatched_returns += 1;
        // A longjmp returns into the function that made an older call: pop to there.
        let landing = functions.function_of(target);
        let caller = landing.and_then(|landing| {
            thread
                .frames
                .iter()
                .rposition(|frame| functions.function_of(frame.site) == Some(landing))
        });
        match caller {
            Some(index) => thread.frames.truncate(index),
            None => thread.lose_stack(),
        }
    }

    fn timestamp(&mut self, key: ThreadKey, time: u64) {
        if self.options.weight != StackWeight::Time {
            return;
        }
        let thread = self.threads.entry(key);
        let pending: Vec<(Place, u64)> = thread.pending.drain().collect();
        let previous = thread.last_time.replace(time);
        let total: u64 = pending.iter().map(|&(_, count)| count).sum();
        let Some(previous) = previous else {
            add(&mut self.statistics.instructions_without_time, total);
            return;
        };
        let elapsed = time
            .saturating_sub(previous)
            .saturating_add(std::mem::take(&mut thread.carried_time));
        if total == 0 {
            thread.carried_time = elapsed;
            return;
        }
        if elapsed == 0 {
            return;
        }
        // Shares in proportion to instructions; what rounding leaves goes to the
        // largest share, so the stacks sum to the elapsed time exactly.
        let mut given = 0u64;
        let mut largest: Option<(Place, u64)> = None;
        for (place, count) in pending {
            let share = u64::try_from(u128::from(elapsed) * u128::from(count) / u128::from(total))
                .unwrap_or(u64::MAX);
            given = given.saturating_add(share);
            self.weights.add(place, share);
            if largest.is_none_or(|(_, most)| count > most) {
                largest = Some((place, count));
            }
        }
        if let Some((place, _)) = largest {
            self.weights.add(place, elapsed.saturating_sub(given));
        }
        self.statistics.weight = self.statistics.weight.saturating_add(elapsed);
    }

    /// Ends the trace: with time weights, execution after each hart's last timestamp
    /// is counted as without time.
    fn finish_time(&mut self) {
        for thread in self.threads.values_mut() {
            let unattributed: u64 = thread.pending.drain().map(|(_, count)| count).sum();
            add(&mut self.statistics.instructions_without_time, unattributed);
        }
    }

    /// Adds every stack to `collapser` (leaf first: the leaf's address, then each call
    /// site, then `[unknown caller]` where callers were not seen), all in process
    /// `pid`'s address space. The caller then names them with
    /// [`StackCollapser::finish`].
    pub fn collapse_into<S: StackSymbols>(
        mut self,
        collapser: &mut StackCollapser<S::Location>,
        symbols: &mut S,
        pid: u32,
    ) -> CallStackStatistics {
        self.finish_time();
        let mut weights: Vec<(Place, u64)> = self.weights.into_totals().into_iter().collect();
        // Symbol lookups in address order, and the same folded output every run.
        weights.sort_unstable_by_key(|&(place, _)| (place.leaf, place.node));
        for (place, weight) in weights {
            if weight == 0 {
                continue;
            }
            collapser.push_address(symbols, pid, place.leaf);
            let mut node = place.node;
            while node != UNKNOWN_ROOT && node != KNOWN_ROOT {
                let Node { parent, site } = self.nodes[node as usize];
                collapser.push_address(symbols, pid, site);
                node = parent;
            }
            if node == UNKNOWN_ROOT {
                collapser.push_name(UNKNOWN_CALLER);
            }
            collapser.end_stack(weight);
        }
        self.statistics
    }
}

fn add(total: &mut u64, count: u64) {
    *total = total.saturating_add(count);
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_elements::{GapReason, TraceOnReason};

    /// Each address is its own location, named `f` + the address's 0x100 block
    /// (0x1xx is f1, 0x2xx is f2, ...).
    struct Names;

    impl StackSymbols for Names {
        type Location = u64;
        fn locate(&mut self, _pid: u32, address: u64) -> Option<u64> {
            Some(address)
        }
        fn located_frames(&mut self, location: &u64, frame: &mut dyn FnMut(&str)) {
            frame(&format!("f{:x}", location >> 8));
        }
        fn unlocated_frames(&mut self, _: u64, _: u64, _: &mut dyn FnMut(&str)) {}
    }

    fn functions(address: u64) -> Option<u64> {
        Some(address & !0xff)
    }

    fn range(start: u64, last: u64, instructions: u32, end: RangeEnd, next: u64) -> ElementKind {
        ElementKind::InstructionRange {
            start,
            last,
            instructions,
            end,
            next: Some(next),
        }
    }

    fn fold(options: CallStackOptions, kinds: &[ElementKind]) -> (String, CallStackStatistics) {
        let mut stacks = CallStacks::new(options);
        for (index, &kind) in kinds.iter().enumerate() {
            let element = TraceElement {
                hart: 0,
                offset: index as u64,
                kind,
            };
            stacks.push(&element, &mut functions);
        }
        let mut collapser = StackCollapser::new();
        let statistics = stacks.collapse_into(&mut collapser, &mut Names, 0);
        (collapser.finish(&mut Names).to_text(), statistics)
    }

    fn trace_on(address: u64) -> ElementKind {
        ElementKind::TraceOn {
            address,
            reason: TraceOnReason::Start,
        }
    }

    #[test]
    fn calls_and_returns_nest_and_unseen_callers_share_one_root() {
        let (folded, statistics) = fold(
            CallStackOptions::default(),
            &[
                trace_on(0x100),
                // f1 calls f2, which calls f3; f3 and f2 return; f1 returns to an
                // unseen caller in f5.
                range(0x100, 0x108, 3, RangeEnd::Call, 0x200),
                range(0x200, 0x204, 2, RangeEnd::Call, 0x300),
                range(0x300, 0x30c, 4, RangeEnd::Return, 0x208),
                range(0x208, 0x20c, 2, RangeEnd::Return, 0x10c),
                range(0x10c, 0x110, 2, RangeEnd::Return, 0x504),
                range(0x504, 0x504, 1, RangeEnd::Sequential, 0x508),
            ],
        );
        assert_eq!(
            folded,
            "[unknown caller];f1 5\n\
             [unknown caller];f1;f2 4\n\
             [unknown caller];f1;f2;f3 4\n\
             [unknown caller];f5 1\n"
        );
        assert_eq!(statistics.instructions, 14);
        assert_eq!(statistics.weight, 14);
        assert_eq!(statistics.unmatched_returns, 0);
    }

    #[test]
    fn a_trace_from_a_stack_root_has_no_unknown_caller() {
        let options = CallStackOptions::new(StackWeight::Instructions, vec![0x100]);
        let (folded, _) = fold(
            options,
            &[
                trace_on(0x100),
                range(0x100, 0x104, 2, RangeEnd::Call, 0x200),
                range(0x200, 0x200, 1, RangeEnd::Return, 0x108),
                range(0x108, 0x108, 1, RangeEnd::Sequential, 0x10c),
            ],
        );
        assert_eq!(folded, "f1 3\nf1;f2 1\n");
    }

    #[test]
    fn traps_push_and_trap_returns_pop() {
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Instructions, vec![0x100]),
            &[
                trace_on(0x100),
                range(0x100, 0x104, 2, RangeEnd::Sequential, 0x108),
                ElementKind::Trap {
                    from: Some(0x108),
                    handler: 0x800,
                    kind: trace_elements::TrapKind::Interrupt,
                },
                range(0x800, 0x810, 5, RangeEnd::TrapReturn, 0x108),
                range(0x108, 0x10c, 2, RangeEnd::Sequential, 0x110),
            ],
        );
        assert_eq!(folded, "f1 4\nf1;f8 5\n");
        assert_eq!(statistics.traps, 1);
    }

    #[test]
    fn a_longjmp_pops_to_the_function_it_lands_in() {
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Instructions, vec![0x100]),
            &[
                trace_on(0x100),
                // f1 -> f2 -> f3 -> f4 (longjmp), which "returns" into f1's body.
                range(0x100, 0x104, 2, RangeEnd::Call, 0x200),
                range(0x200, 0x204, 2, RangeEnd::Call, 0x300),
                range(0x300, 0x304, 2, RangeEnd::Call, 0x400),
                range(0x400, 0x404, 2, RangeEnd::Return, 0x140),
                range(0x140, 0x144, 2, RangeEnd::Sequential, 0x148),
            ],
        );
        assert_eq!(folded, "f1 4\nf1;f2 2\nf1;f2;f3 2\nf1;f2;f3;f4 2\n");
        assert_eq!(statistics.unmatched_returns, 1);
    }

    #[test]
    fn a_gap_loses_the_stack() {
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Instructions, vec![0x100]),
            &[
                trace_on(0x100),
                range(0x100, 0x104, 2, RangeEnd::Call, 0x200),
                ElementKind::Gap {
                    reason: GapReason::EncoderOverflow {
                        error_type: 0,
                        error_code: 0,
                    },
                },
                ElementKind::TraceOn {
                    address: 0x210,
                    reason: TraceOnReason::Restart,
                },
                range(0x210, 0x214, 2, RangeEnd::Return, 0x108),
                range(0x108, 0x108, 1, RangeEnd::Sequential, 0x10c),
            ],
        );
        assert_eq!(
            folded,
            "[unknown caller];f1 1\n[unknown caller];f2 2\nf1 2\n"
        );
        assert_eq!(statistics.stack_losses, 1);
    }

    #[test]
    fn a_trace_stop_keeps_the_stack_only_when_asked() {
        // f1 calls f2, which enters the kernel (the trace stops) and resumes where it
        // left, then returns to f1.
        let kinds = [
            trace_on(0x100),
            range(0x100, 0x104, 2, RangeEnd::Call, 0x200),
            range(0x200, 0x204, 2, RangeEnd::Sequential, 0x208),
            ElementKind::TraceOff {
                last_address: Some(0x204),
                reason: trace_elements::TraceOffReason::Disabled,
            },
            ElementKind::TraceOn {
                address: 0x208,
                reason: TraceOnReason::Restart,
            },
            range(0x208, 0x20c, 2, RangeEnd::Return, 0x108),
            range(0x108, 0x108, 1, RangeEnd::Sequential, 0x10c),
        ];
        let kept = CallStackOptions::new(StackWeight::Instructions, vec![0x100])
            .with_stops(StopsKeepStacks::Yes);
        let (folded, statistics) = fold(kept, &kinds);
        assert_eq!(folded, "f1 3\nf1;f2 4\n");
        assert_eq!((statistics.stops_kept, statistics.stack_losses), (1, 0));
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Instructions, vec![0x100]),
            &kinds,
        );
        assert_eq!(
            folded,
            "[unknown caller];f1 1\n[unknown caller];f2 2\nf1 2\nf1;f2 2\n"
        );
        assert_eq!((statistics.stops_kept, statistics.stack_losses), (0, 1));
    }

    #[test]
    fn each_hart_and_context_keeps_its_own_stack() {
        let mut stacks = CallStacks::new(CallStackOptions::new(
            StackWeight::Instructions,
            vec![0x100, 0x500],
        ));
        let on = |hart, kind| TraceElement {
            hart,
            offset: 0,
            kind,
        };
        let context = |id| ElementKind::ContextChange {
            privilege: 0,
            virtualized: false,
            context: Some(Context::Process(id)),
        };
        for element in [
            on(0, trace_on(0x100)),
            on(1, trace_on(0x500)),
            // Hart 0 calls f2 while hart 1 calls f6; their returns interleave.
            on(0, range(0x100, 0x104, 2, RangeEnd::Call, 0x200)),
            on(1, range(0x500, 0x504, 2, RangeEnd::Call, 0x600)),
            on(0, range(0x200, 0x200, 1, RangeEnd::Return, 0x108)),
            on(1, range(0x600, 0x600, 1, RangeEnd::Sequential, 0x602)),
            // Hart 1 reports its process (0) late, switches to process 7, which runs
            // f3 from an unseen caller, and back: its stack in f6 is still there.
            on(1, context(0)),
            on(1, context(7)),
            on(1, range(0x300, 0x300, 1, RangeEnd::Sequential, 0x304)),
            on(1, context(0)),
            on(1, range(0x602, 0x602, 1, RangeEnd::Return, 0x508)),
        ] {
            stacks.push(&element, &mut functions);
        }
        let mut collapser = StackCollapser::new();
        stacks.collapse_into(&mut collapser, &mut Names, 0);
        assert_eq!(
            collapser.finish(&mut Names).to_text(),
            "[unknown caller];f3 1\nf1 2\nf1;f2 1\nf5 2\nf5;f6 2\n"
        );
    }

    #[test]
    fn time_with_no_instructions_goes_to_the_next_ones() {
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Time, vec![0x100]),
            &[
                trace_on(0x100),
                ElementKind::Timestamp { time: 1000 },
                ElementKind::Timestamp { time: 1040 },
                range(0x100, 0x104, 2, RangeEnd::Sequential, 0x108),
                ElementKind::Timestamp { time: 1100 },
            ],
        );
        assert_eq!(folded, "f1 100\n");
        assert_eq!(statistics.weight, 100);
    }

    #[test]
    fn time_is_shared_by_instructions_between_timestamps() {
        let (folded, statistics) = fold(
            CallStackOptions::new(StackWeight::Time, vec![0x100]),
            &[
                trace_on(0x100),
                range(0x100, 0x100, 1, RangeEnd::Sequential, 0x104),
                ElementKind::Timestamp { time: 1000 },
                range(0x104, 0x108, 1, RangeEnd::Call, 0x200),
                range(0x200, 0x204, 2, RangeEnd::Return, 0x10c),
                ElementKind::Timestamp { time: 1100 },
                range(0x10c, 0x10c, 1, RangeEnd::Sequential, 0x110),
            ],
        );
        // 100 time units over 3 instructions: 33 and 66, the rounding's 1 to the
        // larger share.
        assert_eq!(folded, "f1 33\nf1;f2 67\n");
        assert_eq!(statistics.weight, 100);
        assert_eq!(statistics.instructions_without_time, 2);
    }
}
