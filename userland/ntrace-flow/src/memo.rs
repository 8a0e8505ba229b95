//! Replayed walks and messages: what a message did, kept and played again when the same
//! message comes back in the same state.
//!
//! What a branch message's walk does depends only on where it starts, the message's
//! I-CNT, its HIST bits and how it ends, given that no history bits are left from an
//! earlier message, and on the return-stack entries its implicit returns pop. The code
//! does not change. Loops, interpreters and hot call paths send the same message from
//! the same address again and again, so the walk's effects are kept under that key:
//! each block's instruction range, the return addresses it pushed, dropped or popped,
//! the last instruction it placed and where it stopped. The next time, one lookup and a
//! check that the stack holds what the walk popped replace a walk of several blocks,
//! each with its branch and history bookkeeping ([`WalkMemo`]).
//!
//! With one hart and no timestamps, a whole short message that comes when its hart is
//! between messages does all it does by its bytes, the pc and the U-ADDR reference
//! address: it is then replayed without being parsed or applied ([`MessageMemo`]).
//!
//! Replaying gives exactly the elements, counts and state walking would: every decode
//! goes through it (it is on by default), so every decoder test checks it, and
//! `tests/parallel.rs` compares every decode of its corpus with walks replayed, walked
//! (`WalkReplay::Off`) and in parallel.

use crate::event::{LastInstruction, RepeatableWalk, Resume};
use crate::return_stack::StackOp;
use crate::walk::{merged, Position, Range};

/// How a replayable walk ends (the other ends, synchronisation messages among them,
/// are walked every time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplayableEnd {
    /// DirectBranch: a taken conditional branch.
    TakenBranch,
    /// IndirectBranch(Hist) with B-TYPE 0: an indirect jump (its target is the
    /// message's and not part of the walk).
    IndirectJump,
}

/// What a walk depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WalkKey {
    pub(crate) pc: u64,
    /// The message's I-CNT, all of the walk's units.
    pub(crate) units: u64,
    /// The message's HIST field with its stop bit (1: no branch bits).
    pub(crate) hist: u64,
    pub(crate) end: ReplayableEnd,
}

impl WalkKey {
    /// Its slot in the table of kept walks.
    pub(crate) fn slot(&self) -> usize {
        let end = match self.end {
            ReplayableEnd::TakenBranch => 0,
            ReplayableEnd::IndirectJump => 1,
        };
        let mixed = (self.pc ^ self.units.rotate_left(20) ^ self.hist.rotate_left(40) ^ end)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> (64 - TABLE_BITS)) as usize
    }
}

/// One block of a kept walk: the range it added, from block `block`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalkStep {
    pub(crate) block: u32,
    pub(crate) range: Range,
}

/// A kept walk: what replaying it does.
#[derive(Clone, Debug)]
pub(crate) struct KeptWalk {
    key: WalkKey,
    pub(crate) steps: Vec<WalkStep>,
    /// The steps' ranges merged as the decoder merges consecutive ranges (each with its
    /// first block): what a replay reports.
    pub(crate) ranges: Vec<WalkStep>,
    pub(crate) stack_ops: Vec<StackOp>,
    pub(crate) instructions: u64,
    pub(crate) last: LastInstruction,
    /// Where the walk stopped.
    pub(crate) position: Position,
}

/// Slots of the direct-mapped table: a newer walk replaces an older one in its slot.
const TABLE_BITS: u32 = 9;
/// Longer walks are walked every time: they are rare (a walk's length is bounded by its
/// message's HIST bits and I-CNT), and keeping them would cost memory for little.
const MAX_STEPS: usize = 32;
/// Lookups per window of the hit-rate check.
const WINDOW: u32 = 1 << 14;
/// A window with fewer hits than 1 in this many stops recording for the next window:
/// a trace whose walks do not repeat pays for a lookup only, not for recording.
const MIN_HIT_RATE: u32 = 8;

/// The kept walks of one decoder and the walk being recorded.
#[derive(Debug, Default)]
pub(crate) struct WalkMemo {
    table: Vec<Option<KeptWalk>>,
    /// The key of the walk being recorded, if any.
    recording: Option<WalkKey>,
    steps: Vec<WalkStep>,
    lookups: u32,
    hits: u32,
    /// Recording is paused for this window (too few hits in the last one).
    paused: bool,
}

impl WalkMemo {
    /// Whether a walk of `key` is kept; counts the lookup for the hit rate.
    #[inline]
    pub(crate) fn find(&mut self, key: WalkKey) -> bool {
        self.lookups += 1;
        if self.lookups == WINDOW {
            self.paused = self.hits < WINDOW / MIN_HIT_RATE;
            self.lookups = 0;
            self.hits = 0;
        }
        let found = self.get(key).is_some();
        self.hits += u32::from(found);
        found
    }

    /// The kept walk of `key`, if any.
    #[inline]
    pub(crate) fn get(&self, key: WalkKey) -> Option<&KeptWalk> {
        self.get_at(key.slot(), key)
    }

    /// The kept walk of `key` when it is in `slot` (`key`'s, computed before).
    #[inline]
    pub(crate) fn get_at(&self, slot: usize, key: WalkKey) -> Option<&KeptWalk> {
        match self.table.get(slot) {
            Some(Some(kept)) if kept.key == key => Some(kept),
            _ => None,
        }
    }

    /// Starts recording the walk of `key` (unless recording is paused); returns whether
    /// it does.
    pub(crate) fn start(&mut self, key: WalkKey) -> bool {
        if self.paused {
            return false;
        }
        self.recording = Some(key);
        self.steps.clear();
        true
    }

    #[inline(always)]
    pub(crate) fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Adds a step to the walk being recorded.
    #[inline]
    pub(crate) fn record(&mut self, block: u32, range: Range) {
        if self.steps.len() < MAX_STEPS {
            self.steps.push(WalkStep { block, range });
        } else {
            self.recording = None;
        }
    }

    /// Drops the walk being recorded (it paused, failed, or read the trace state).
    pub(crate) fn abandon(&mut self) {
        self.recording = None;
    }

    /// Keeps the walk recorded, which ended with these effects.
    pub(crate) fn keep(
        &mut self,
        stack_ops: &[StackOp],
        last: LastInstruction,
        position: Position,
    ) {
        let Some(key) = self.recording.take() else {
            return;
        };
        if self.table.is_empty() {
            self.table.resize_with(1 << TABLE_BITS, || None);
        }
        let instructions = self
            .steps
            .iter()
            .map(|step| u64::from(step.range.instructions))
            .sum();
        let slot = &mut self.table[key.slot()];
        let kept = slot.get_or_insert_with(|| KeptWalk {
            key,
            steps: Vec::new(),
            ranges: Vec::new(),
            stack_ops: Vec::new(),
            instructions,
            last,
            position,
        });
        // The slot's vectors are reused: no allocation once the table is warm.
        kept.key = key;
        kept.steps.clone_from(&self.steps);
        kept.ranges.clear();
        for &step in &self.steps {
            match kept.ranges.last_mut() {
                Some(previous) => match merged(previous.range, step.range) {
                    Some(range) => previous.range = range,
                    None => kept.ranges.push(step),
                },
                None => kept.ranges.push(step),
            }
        }
        kept.stack_ops.clear();
        kept.stack_ops.extend_from_slice(stack_ops);
        kept.instructions = instructions;
        kept.last = last;
        kept.position = position;
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        let kept: usize = self
            .table
            .iter()
            .flatten()
            .map(|kept| {
                (kept.steps.capacity() + kept.ranges.capacity()) * std::mem::size_of::<WalkStep>()
                    + kept.stack_ops.capacity() * std::mem::size_of::<StackOp>()
            })
            .sum();
        self.table.capacity() * std::mem::size_of::<Option<KeptWalk>>()
            + self.steps.capacity() * std::mem::size_of::<WalkStep>()
            + kept
    }
}

/// What a whole message does depends on its bytes, where the hart is and the U-ADDR
/// reference address, when the hart is between messages (no walk or bits pending) and
/// the message is a plain branch message whose walk can be replayed: so a message that
/// comes again in the same state is replayed whole, without parsing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MessageKey {
    /// The message's bytes ([`ntrace_message::ShortMessage::bytes`]).
    pub(crate) bytes: u64,
    pub(crate) pc: u64,
    pub(crate) last_address: u64,
}

impl MessageKey {
    fn slot(&self) -> usize {
        let mixed = (self.bytes ^ self.pc.rotate_left(24) ^ self.last_address.rotate_left(44))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (mixed >> (64 - MESSAGE_TABLE_BITS)) as usize
    }
}

/// What replaying a message does besides its walk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayedMessage {
    key: MessageKey,
    /// The walk it arms, and that walk's slot in the table of kept walks.
    pub(crate) walk: WalkKey,
    pub(crate) walk_slot: usize,
    /// The U-ADDR reference address after it.
    pub(crate) last_address: u64,
    /// The branch message RepeatBranch would repeat after it.
    pub(crate) armed: RepeatableWalk,
    /// Where execution resumes after its walk.
    pub(crate) resume: Resume,
}

const MESSAGE_TABLE_BITS: u32 = 10;

/// Replayable messages of one decoder (single-hart traces without timestamps: with
/// either, a message's bytes say less than all it does).
#[derive(Debug, Default)]
pub(crate) struct MessageMemo {
    table: Vec<Option<ReplayedMessage>>,
    /// Messages replayed so far.
    pub(crate) replayed: u64,
}

impl MessageMemo {
    #[inline]
    pub(crate) fn get(&self, key: MessageKey) -> Option<&ReplayedMessage> {
        match self.table.get(key.slot()) {
            Some(Some(message)) if message.key == key => Some(message),
            _ => None,
        }
    }

    /// Keeps what the message of `key` does.
    pub(crate) fn keep(
        &mut self,
        key: MessageKey,
        walk: WalkKey,
        last_address: u64,
        armed: RepeatableWalk,
        resume: Resume,
    ) {
        if self.table.is_empty() {
            self.table.resize(1 << MESSAGE_TABLE_BITS, None);
        }
        self.table[key.slot()] = Some(ReplayedMessage {
            key,
            walk,
            walk_slot: walk.slot(),
            last_address,
            armed,
            resume,
        });
    }

    /// Approximate heap bytes held.
    pub(crate) fn footprint(&self) -> usize {
        self.table.capacity() * std::mem::size_of::<Option<ReplayedMessage>>()
    }
}
