//! The flow decoder: N-Trace messages in, protocol-free trace elements out.
//!
//! Layers, as libipt stacks its decoders: the message decoder (packets) is owned here;
//! each message goes to its hart's event layer (`event`), which turns it into an event
//! and arms a walk; the block walk (`walk`) then advances one cached block per call and
//! yields one instruction range per block. This module only routes: messages to harts,
//! events to elements, errors to the recovery policy. Nothing is buffered beyond one
//! batch of elements, so memory does not grow with the trace, and the caller pulls at
//! its own pace.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use code_image::CodeImage;
use ntrace_message::{Body, BranchType, Message, MessageDecoder, ShortMessage};
use trace_elements::{Context, ElementKind, GapReason, RangeEnd, TraceElement, TraceOnReason};

use crate::block::FileDecodeInfo;
use crate::event::{units_of, Event, NextWalk, Resume};
use crate::memo::{MessageKey, MessageMemo, WalkKey};
use crate::walk::{BlockRef, BlockWalk, Hart, RangeOutput, ReadyElement, Stepped};
use crate::{DecoderOptions, FlowError, Recovery, WalkReplay};

/// Counters for `summary` output and for reporting what was skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowStatistics {
    /// Instructions walked (retired instructions placed by the trace).
    pub instructions: u64,
    pub messages: u64,
    pub sync_messages: u64,
    /// Messages seen by a hart before its first synchronisation (or after a gap), which
    /// cannot be decoded and are skipped.
    pub messages_before_sync: u64,
    /// Error messages of the encoder (trace it lost), and restarts after a FIFO overrun
    /// (SYNC=7) without one.
    pub gaps: u64,
    /// Times a hart's trace stopped (ProgTraceCorrelation: trace disabled, debug mode,
    /// low power), each after the instructions its I-CNT and HIST placed.
    pub trace_stops: u64,
    /// Times decoding restarted after trace stopped, was lost or could not be followed
    /// (`TraceOn` elements with `TraceOnReason::Restart`).
    pub restarts: u64,
    /// Errors reported as gaps under [`Recovery::Resync`].
    pub recovered_errors: u64,
    pub vendor_or_reserved_messages: u64,
    /// I-CNT units still unresolved when the stream ended (trace cut after a ResourceFull).
    pub unresolved_units_at_end: u64,
    pub blocks_decoded: u64,
    /// I-CNT units (16-bit instruction units) the trace carried but the decoder could not
    /// place: those of messages skipped while a hart waited for synchronisation and of the
    /// synchronisation message it (re)started at, and those armed but not yet walked when
    /// an error or an Error message cost a hart its flow. What a profile lost.
    pub skipped_units: u64,
}

impl FlowStatistics {
    /// The counters of `self` plus those `later` gained since `earlier` (two statistics
    /// of one decoder), for joining the parts of a trace decoded separately.
    pub(crate) fn add_difference(&mut self, later: &FlowStatistics, earlier: &FlowStatistics) {
        let gained = |later: u64, earlier: u64| later.saturating_sub(earlier);
        self.instructions += gained(later.instructions, earlier.instructions);
        self.messages += gained(later.messages, earlier.messages);
        self.sync_messages += gained(later.sync_messages, earlier.sync_messages);
        self.messages_before_sync +=
            gained(later.messages_before_sync, earlier.messages_before_sync);
        self.gaps += gained(later.gaps, earlier.gaps);
        self.trace_stops += gained(later.trace_stops, earlier.trace_stops);
        self.restarts += gained(later.restarts, earlier.restarts);
        self.recovered_errors += gained(later.recovered_errors, earlier.recovered_errors);
        self.vendor_or_reserved_messages += gained(
            later.vendor_or_reserved_messages,
            earlier.vendor_or_reserved_messages,
        );
        self.skipped_units += gained(later.skipped_units, earlier.skipped_units);
    }
}

/// Where a decoder of part of the trace stops reading messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StopRule {
    /// Before the first message at or after the offset.
    AnyMessage,
    /// Before the first synchronisation message at or after the offset: the end of a
    /// chunk of a parallel decode.
    SyncMessage,
}

#[derive(Clone, Copy, Debug)]
struct Stop {
    offset: u64,
    rule: StopRule,
}

/// The state of a speculative decoder before one of its messages, for the join of a
/// parallel decode (see `parallel`) to compare with the true state there.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// Offset of the message about to be applied.
    pub(crate) offset: u64,
    /// Items (elements and returned errors) the decoder produced before it.
    pub(crate) items: usize,
    pub(crate) harts: Vec<Hart>,
    pub(crate) statistics: FlowStatistics,
    pub(crate) idle_bytes: u64,
    pub(crate) skipped_bytes: u64,
    /// Instructions executed per cached block so far, and how many blocks were cached.
    pub(crate) executed: Vec<u64>,
    /// Errors met and stack entries popped from before the decode started, so far:
    /// between two snapshots with the same count the decode needed nothing it guessed.
    pub(crate) dependencies: u64,
}

/// What a speculative decoder (one chunk of a parallel decode) records.
#[derive(Debug)]
struct Speculation {
    snapshots: Vec<Snapshot>,
    /// Items returned before the current batch.
    produced: usize,
}

/// A speculative decoder takes a snapshot at least this often (in messages), besides
/// after each synchronisation and each seam it resumes at: after a pop of a stack entry
/// from before the chunk, the join decodes from the snapshot before it, so the spacing
/// bounds that serial work, while each snapshot copies the block profile.
const SNAPSHOT_MESSAGES: u64 = 4096;

/// A speculative decoder whose walks keep getting lost (each return leaving a function
/// entered before its chunk pops an entry it cannot know, as in a recursive sort whose
/// comparisons are called through a pointer) stops after this many losses once they
/// are more than one in [`GIVE_UP_RATIO`] messages: the join decodes the rest of the
/// chunk serially anyway, and a decode that keeps losing only costs the other cores.
const GIVE_UP_AFTER_LOSSES: u64 = 16;
const GIVE_UP_RATIO: u64 = 64;

/// Where a chunk of a parallel decode ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkEnd {
    /// Before the first synchronisation message at or after the offset.
    SyncAtOrAfter(u64),
    /// Before the first message at or after the offset (where the next chunk starts).
    Before(u64),
}

/// How a chunk's hart starts at a seam (see `seam`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SeamStart {
    pub(crate) src: u16,
    /// The pc, which is also the U-ADDR reference address.
    pub(crate) address: u64,
    pub(crate) time: u64,
}

/// Which harts an error cost their flow.
#[derive(Clone, Copy, Debug)]
enum Lost {
    /// The hart whose message or walk failed.
    Hart(usize),
    /// An unreadable message may have belonged to any hart.
    EveryHart,
}

/// The code of one program: an image and its files' decoding options, by file index.
#[derive(Clone, Debug)]
pub struct ProgramCode<'a> {
    pub image: &'a CodeImage,
    pub files: Vec<FileDecodeInfo>,
}

/// The code of each context a trace reports, for [`FlowDecoder::with_contexts`].
#[derive(Clone, Debug)]
pub struct ContextCode<'a> {
    /// The code of contexts not in `contexts`, and of a hart before its first context.
    pub shared: ProgramCode<'a>,
    /// By `scontext` value. A context given twice has the code given last.
    pub contexts: Vec<(u64, ProgramCode<'a>)>,
}

/// Decodes an N-Trace byte stream against a code image.
#[derive(Debug)]
pub struct FlowDecoder<'a> {
    trace: &'a [u8],
    messages: MessageDecoder<'a>,
    /// Idle and skipped bytes counted by message decoders that `seek` replaced.
    idle_before: u64,
    skipped_before: u64,
    /// Where to stop reading (a part of the trace); offset `u64::MAX` never stops.
    stop: Stop,
    /// A message read but not applied: the one a stop stopped before.
    held: Option<Message>,
    /// Errors met (returned or recovered).
    errors: u64,
    /// Set for one chunk of a parallel decode.
    speculation: Option<Box<Speculation>>,
    /// A snapshot is to be taken before the next message.
    snapshot_due: bool,
    walk: BlockWalk<'a>,
    /// Messages replayed whole (see `memo`), when the trace allows it.
    message_memo: Option<MessageMemo>,
    /// The key of the message being applied, when it may be kept for replay.
    message_candidate: Option<MessageKey>,
    options: DecoderOptions,
    harts: Vec<Hart>,
    active: Option<usize>,
    /// Elements produced but not yet returned, with the block each range came from
    /// (`NO_BLOCK` otherwise). Producing a batch per refill keeps the walk in a tight loop.
    ready: Vec<ReadyElement>,
    ready_index: usize,
    /// Block of the element returned last, for `for_each_instruction`.
    last_block: BlockRef,
    /// The code of each context Ownership messages report (scontext -> code of the
    /// walk); empty when the decoder has one code.
    contexts: HashMap<u64, u32>,
    /// An error met while producing the current batch, returned after its elements.
    pending_error: Option<FlowError>,
    /// The error behind the latest gap of [`Recovery::Resync`].
    recovered_error: Option<FlowError>,
    statistics: FlowStatistics,
    /// Messages this decoder applied itself (not taken over from another's decode).
    applied_messages: u64,
    /// Walks a speculative decoder lost (see `Hart::lose_walk`).
    walks_lost: u64,
    finished: bool,
    /// Trace bytes consumed, published for other threads (progress display, releasing
    /// pages of a mapped trace) without borrowing the decoder.
    progress: Arc<AtomicU64>,
}

/// Elements produced per refill.
const BATCH: usize = 64;

impl<'a> FlowDecoder<'a> {
    /// `files` gives the decoding options of each file of `image`, by file index.
    pub fn new(
        trace: &'a [u8],
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: DecoderOptions,
    ) -> Self {
        let ranges = if options.instruction_ranges {
            RangeOutput::Report
        } else {
            RangeOutput::CountOnly
        };
        Self {
            trace,
            messages: MessageDecoder::new(trace, options.message),
            idle_before: 0,
            skipped_before: 0,
            stop: Stop {
                offset: u64::MAX,
                rule: StopRule::AnyMessage,
            },
            held: None,
            errors: 0,
            speculation: None,
            snapshot_due: false,
            walk: BlockWalk::new(image, files, ranges, options.walk_replay, options.all_jumps),
            // A message's bytes say all it does only with one hart (no SRC field: the
            // key has one hart's state) and without timestamps (a relative timestamp
            // adds to the time, which the key does not hold).
            message_memo: (options.walk_replay == WalkReplay::Replay
                && options.message.src_bits == 0
                && !options.message.timestamps)
                .then(MessageMemo::default),
            message_candidate: None,
            options,
            harts: Vec::new(),
            active: None,
            ready: Vec::with_capacity(BATCH),
            ready_index: 0,
            last_block: BlockRef::NONE,
            contexts: HashMap::new(),
            pending_error: None,
            recovered_error: None,
            statistics: FlowStatistics::default(),
            applied_messages: 0,
            walks_lost: 0,
            finished: false,
            progress: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A decoder of a trace whose Ownership messages report the context (`scontext`)
    /// each hart runs (trTeContext): from a hart's Ownership message on, its walk is in
    /// the code of that context, `code.shared` for a context with no code of its own and
    /// before the first. Each context's code must hold what every context runs (an
    /// operating system's kernel): the instructions a hart ran before an Ownership
    /// message, since the message before it, are walked in the new context's code.
    ///
    /// Kept walks and messages are by address, so of one code: they are off.
    pub fn with_contexts(trace: &'a [u8], code: ContextCode<'a>, options: DecoderOptions) -> Self {
        let options = options.with_walk_replay(WalkReplay::Off);
        let mut decoder = Self::new(trace, code.shared.image, code.shared.files, options);
        for (context, program) in code.contexts {
            let number = decoder.walk.add_code(program.image, program.files);
            decoder.contexts.insert(context, number);
        }
        decoder
    }

    /// Whether Ownership messages choose the code ([`Self::with_contexts`]).
    pub fn has_contexts(&self) -> bool {
        self.walk.has_codes()
    }

    /// A shared counter of the trace bytes consumed so far, updated every few thousand
    /// messages and at the end: another thread may read it while this one decodes (a
    /// summary decode can run through a whole trace within one call). It is advisory:
    /// relaxed stores, no ordering with anything else.
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.progress)
    }

    pub fn statistics(&self) -> FlowStatistics {
        let mut statistics = self.statistics;
        statistics.instructions = self.walk.instructions;
        statistics.blocks_decoded = self.walk.caches().map(|cache| cache.len() as u64).sum();
        statistics
    }

    /// Message walks replayed from an identical earlier one instead of walked
    /// ([`crate::WalkReplay`]): how the decode went, not what the trace holds.
    pub fn walks_replayed(&self) -> u64 {
        self.walk.walks_replayed
    }

    /// Of those, the walks of messages replayed whole (without being parsed).
    pub fn messages_replayed(&self) -> u64 {
        self.message_memo.as_ref().map_or(0, |memo| memo.replayed)
    }

    /// With [`Recovery::Resync`]: the error behind the latest `GapReason::DecodeError`
    /// element returned (until the next batch of elements is produced), for callers that
    /// report it in full.
    pub fn last_recovered_error(&self) -> Option<&FlowError> {
        self.recovered_error.as_ref()
    }

    /// Instructions executed per code block so far: (block start, address of the block's
    /// last instruction, instructions executed starting at that block start). A cheap
    /// instruction-count profile: it costs one add per block walked.
    /// With several codes ([`Self::with_contexts`]), the blocks of each code in turn.
    pub fn block_profile(&self) -> impl Iterator<Item = crate::BlockExecutions> + '_ {
        self.walk.caches().flat_map(|cache| cache.executed())
    }

    /// Approximate heap bytes the decoder holds: the block cache (bounded by the code
    /// image), queued history (bounded by the trace bytes carrying it) and buffers.
    pub fn memory_footprint(&self) -> usize {
        self.walk
            .caches()
            .map(|cache| cache.footprint())
            .sum::<usize>()
            + self.walk.memo.as_ref().map_or(0, |memo| memo.footprint())
            + self.message_memo.as_ref().map_or(0, MessageMemo::footprint)
            + self.ready.capacity() * std::mem::size_of::<ReadyElement>()
            + self
                .harts
                .iter()
                .map(|hart| hart.events.footprint())
                .sum::<usize>()
            + self.harts.capacity() * std::mem::size_of::<Hart>()
    }

    /// Trace bytes consumed so far.
    pub fn position(&self) -> u64 {
        self.messages.position()
    }

    pub fn idle_bytes(&self) -> u64 {
        self.idle_before + self.messages.idle_bytes()
    }

    /// Trace bytes thrown away: unreadable messages and the bytes up to the next message
    /// start after each of them (and what `sync_forward` skipped).
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_before + self.messages.skipped_bytes()
    }

    /// Skips to the first message boundary after the next end of message: for buffers
    /// that start in the middle of a message (a wrapped trace buffer).
    pub fn sync_forward(&mut self) -> Option<u64> {
        self.harts.iter_mut().for_each(Hart::unsync);
        self.active = None;
        self.messages.sync_forward()
    }

    /// Calls `visit` with the address of each of `instructions` instructions from `start`,
    /// which must be the start of an [`ElementKind::InstructionRange`] this decoder
    /// produced. Returns false if `start` is not such an address.
    #[inline]
    pub fn for_each_instruction(
        &self,
        start: u64,
        instructions: u32,
        visit: impl FnMut(u64),
    ) -> bool {
        self.walk
            .for_each_instruction(self.last_block, start, instructions, visit)
    }

    /// The next trace element; `Ok(None)` at the end of the trace. After an error the
    /// affected hart waits for its next synchronisation message, so calling again resumes
    /// (see [`Recovery`]).
    #[inline]
    pub fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        if let Some(&(element, block)) = self.ready.get(self.ready_index) {
            self.ready_index += 1;
            self.last_block = block;
            return Ok(Some(element));
        }
        self.refill()
    }

    /// Calls `visit` with every element to the end of the trace (and the error behind
    /// each decode-error gap), straight from the batches the decoder produces: what a
    /// loop over [`Self::next_element`] gives, without moving each element out.
    /// Returns the first error `next_element` would return (after the elements before
    /// it); calling again resumes as `next_element` would.
    pub fn for_each_element(
        &mut self,
        mut visit: impl FnMut(&TraceElement, Option<&FlowError>),
    ) -> Result<(), FlowError> {
        loop {
            for (element, block) in &self.ready[self.ready_index..] {
                // As `next_element` leaves it, for a later `for_each_instruction`.
                self.last_block = *block;
                visit(element, self.cause_of(element));
            }
            self.ready_index = self.ready.len();
            match self.refill()? {
                Some(element) => visit(&element, self.cause_of(&element)),
                None => return Ok(()),
            }
        }
    }

    /// The error behind `element` when it is a decode-error gap of the current batch.
    fn cause_of(&self, element: &TraceElement) -> Option<&FlowError> {
        match element.kind {
            ElementKind::Gap {
                reason: GapReason::DecodeError { .. },
            } => self.recovered_error.as_ref(),
            _ => None,
        }
    }

    /// Produces the next batch of elements and returns its first.
    fn refill(&mut self) -> Result<Option<TraceElement>, FlowError> {
        if let Some(speculation) = &mut self.speculation {
            speculation.produced += self.ready.len();
        }
        self.ready.clear();
        self.ready_index = 0;
        if let Some(error) = self.pending_error.take() {
            self.count_returned_error();
            return Err(error);
        }
        // A batch also waits for its last range to be complete, so that how far ranges
        // extend does not depend on where batches happen to end.
        while self.ready.len() < BATCH || self.last_range_may_grow() {
            if let Some(hart) = self.active {
                if let Err(error) = self.step(hart) {
                    self.recover(error, Lost::Hart(hart));
                    break;
                }
                continue;
            }
            if self.finished {
                break;
            }
            if self.held.is_none() && !self.snapshot_due && self.replay_message() {
                continue;
            }
            let next = match self.held.take() {
                Some(message) => Ok(Some(message)),
                None => self.messages.next_message(),
            };
            match next {
                Ok(Some(message)) => {
                    if message.offset >= self.stop.offset && self.stops_before(&message) {
                        self.held = Some(message);
                        // Not `finish`: the stream goes on, only this decoder stops.
                        self.finished = true;
                        break;
                    }
                    if self.snapshot_due {
                        self.snapshot_due = false;
                        self.snapshot(message.offset);
                        if !self.ready.is_empty() {
                            // Ranges never grow across a snapshot: the join merges them
                            // when it delivers them.
                            self.held = Some(message);
                            break;
                        }
                    }
                    if self.statistics.messages % 4096 == 0 {
                        self.progress.store(self.position(), Ordering::Relaxed);
                    }
                    let hart = self.hart_index(message.src);
                    self.message_candidate = self.message_key(hart, &message);
                    let applied = self.apply(hart, message);
                    self.message_candidate = None;
                    if let Err(error) = applied {
                        self.recover(error, Lost::Hart(hart));
                        break;
                    }
                }
                Ok(None) => self.finish(),
                Err(error) => {
                    self.recover(FlowError::Message(error), Lost::EveryHart);
                    break;
                }
            }
        }
        match self.ready.first() {
            Some(&(element, block)) => {
                self.ready_index = 1;
                self.last_block = block;
                Ok(Some(element))
            }
            None => match self.pending_error.take() {
                Some(error) => {
                    self.count_returned_error();
                    Err(error)
                }
                None => Ok(None),
            },
        }
    }

    fn count_returned_error(&mut self) {
        if let Some(speculation) = &mut self.speculation {
            speculation.produced += 1;
        }
    }

    #[cold]
    fn stops_before(&self, message: &Message) -> bool {
        match self.stop.rule {
            StopRule::AnyMessage => true,
            StopRule::SyncMessage => message.is_sync(),
        }
    }

    /// A decoder of the chunk of `trace` that starts at byte `start` (a message start)
    /// and ends before the first synchronisation message at or after `end`, starting
    /// with no knowledge of the state before it: every hart waits for its
    /// synchronisation, the stack entries pushed before are unknown. It records
    /// [`Snapshot`]s for the join to compare with the true state.
    /// With a `seam`, its hart starts there instead, as after a synchronisation message.
    pub(crate) fn speculative(
        trace: &'a [u8],
        start: usize,
        end: ChunkEnd,
        seam: Option<SeamStart>,
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: DecoderOptions,
    ) -> Self {
        let mut decoder = Self::new(trace, image, files, options);
        decoder.seek(start as u64);
        decoder.stop = match end {
            ChunkEnd::SyncAtOrAfter(offset) => Stop {
                offset,
                rule: StopRule::SyncMessage,
            },
            ChunkEnd::Before(offset) => Stop {
                offset,
                rule: StopRule::AnyMessage,
            },
        };
        if let Some(seam) = seam {
            decoder.harts.push(Hart::at_seam(
                seam,
                options.return_stack_depth,
                options.return_stack_model,
            ));
        }
        decoder.speculation = Some(Box::new(Speculation {
            snapshots: Vec::new(),
            produced: 0,
        }));
        decoder.snapshot_due = true;
        decoder
    }

    /// Continues reading at byte `offset` (a message start), with the harts as they are.
    pub(crate) fn seek(&mut self, offset: u64) {
        self.idle_before += self.messages.idle_bytes();
        self.skipped_before += self.messages.skipped_bytes();
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.trace.len());
        self.messages = MessageDecoder::new(&self.trace[start..], self.options.message)
            .with_base_offset(start as u64);
        self.held = None;
        self.active = None;
        self.finished = false;
    }

    /// Decodes up to (not including) the first message at or after `offset`: the
    /// elements come from `next_element` until it gives `Ok(None)`.
    pub(crate) fn run_to(&mut self, offset: u64) {
        self.stop = Stop {
            offset,
            rule: StopRule::AnyMessage,
        };
        self.finished = false;
    }

    /// Offset of the next message to apply (the end of the trace after the last).
    pub(crate) fn next_offset(&self) -> u64 {
        self.held
            .map_or_else(|| self.position(), |message| message.offset)
    }

    /// Whether a speculative decoder stopped because its walks kept getting lost.
    pub(crate) fn gave_up(&self) -> bool {
        self.walks_lost > GIVE_UP_AFTER_LOSSES
            && self.walks_lost * GIVE_UP_RATIO > self.applied_messages
    }

    /// Messages this decoder applied itself (without those [`Self::adopt`] took over).
    pub(crate) fn applied_messages(&self) -> u64 {
        self.applied_messages
    }

    /// Block of the element returned last (`NO_BLOCK` for other elements).
    pub(crate) fn last_block(&self) -> u32 {
        self.last_block.block
    }

    pub(crate) fn walk(&self) -> &BlockWalk<'a> {
        &self.walk
    }

    /// Errors met and stack entries popped from before a speculative decode started.
    fn dependencies(&self) -> u64 {
        self.harts.iter().fold(self.errors, |total, hart| {
            total + hart.events.stack().base_pops
        })
    }

    /// The snapshots of a speculative decoder, and its state at the end as one more.
    pub(crate) fn finish_speculation(&mut self) -> Vec<Snapshot> {
        let offset = self.next_offset();
        let produced = self
            .speculation
            .as_ref()
            .map_or(0, |speculation| speculation.produced + self.ready.len());
        let mut end = self.capture(offset, produced);
        end.statistics.unresolved_units_at_end = 0;
        let mut snapshots = self
            .speculation
            .take()
            .map(|speculation| speculation.snapshots)
            .unwrap_or_default();
        snapshots.push(end);
        snapshots
    }

    fn capture(&self, offset: u64, items: usize) -> Snapshot {
        Snapshot {
            offset,
            items,
            harts: self.harts.clone(),
            statistics: self.statistics(),
            idle_bytes: self.idle_bytes(),
            skipped_bytes: self.skipped_bytes(),
            executed: self.walk.cache.executed.clone(),
            dependencies: self.dependencies(),
        }
    }

    #[cold]
    fn snapshot(&mut self, offset: u64) {
        let Some(speculation) = &self.speculation else {
            return;
        };
        if speculation
            .snapshots
            .last()
            .is_some_and(|last| last.offset == offset)
        {
            return;
        }
        let items = speculation.produced + self.ready.len();
        let snapshot = self.capture(offset, items);
        if let Some(speculation) = &mut self.speculation {
            speculation.snapshots.push(snapshot);
        }
    }

    /// Takes over the harts of a speculative decode from where its true state was
    /// established (`matched`, compared with this decoder's harts) to `end`, and the
    /// statistics it gained in between; decoding goes on at `end.offset`. The stack
    /// entries below those the speculative decode knew come from this decoder's.
    pub(crate) fn adopt(&mut self, matched: &Snapshot, end: &Snapshot) {
        for hart in &end.harts {
            let src = hart.events.src;
            let mine = self.harts.iter().position(|own| own.events.src == src);
            let at_match = matched
                .harts
                .iter()
                .find(|other| other.events.src == src)
                .map(|other| other.events.stack());
            let known_at_match = at_match.map_or(0, |stack| stack.entries().len());
            // Entries from before the match the chunk dropped (explicit returns).
            let discarded = hart
                .events
                .stack()
                .base_discards
                .saturating_sub(at_match.map_or(0, |stack| stack.base_discards));
            let below: Vec<u64> = mine.map_or_else(Vec::new, |index| {
                let stack = self.harts[index].events.stack();
                let keep = stack
                    .entries()
                    .len()
                    .saturating_sub(known_at_match)
                    .saturating_sub(usize::try_from(discarded).unwrap_or(usize::MAX));
                stack.entries().take(keep).collect()
            });
            let mut adopted = hart.clone();
            adopted.events.stack_mut().rebase(below.into_iter());
            adopted.position.jump_to(hart.position.pc());
            match mine {
                Some(index) => self.harts[index] = adopted,
                None => self.harts.push(adopted),
            }
        }
        self.statistics
            .add_difference(&end.statistics, &matched.statistics);
        self.walk.instructions += end
            .statistics
            .instructions
            .saturating_sub(matched.statistics.instructions);
        self.idle_before += end.idle_bytes.saturating_sub(matched.idle_bytes);
        self.skipped_before += end.skipped_bytes.saturating_sub(matched.skipped_bytes);
        self.seek(end.offset);
    }

    /// Whether a speculative decode in the state of `snapshot` goes on exactly as this
    /// decoder, which holds the true state at the same message, would.
    pub(crate) fn continues_as(&self, snapshot: &Snapshot) -> bool {
        if self.next_offset() != snapshot.offset || self.active.is_some() {
            return false;
        }
        let mine_match = self.harts.iter().all(|hart| {
            match snapshot
                .harts
                .iter()
                .find(|other| other.events.src == hart.events.src)
            {
                Some(other) => {
                    hart.position.pc() == other.position.pc()
                        && hart.events.continues_as(&other.events)
                }
                None => hart.events.is_untouched(),
            }
        });
        mine_match
            && snapshot.harts.iter().all(|other| {
                other.events.is_untouched()
                    || self
                        .harts
                        .iter()
                        .any(|hart| hart.events.src == other.events.src)
            })
    }

    fn finish(&mut self) {
        self.finished = true;
        self.held = None;
        self.progress.store(self.position(), Ordering::Relaxed);
        self.statistics.unresolved_units_at_end = self.harts.iter().fold(0u64, |total, hart| {
            total.saturating_add(hart.events.pending_units())
        });
    }

    /// Applies the recovery policy to an error; the batch ends after it, so that
    /// `last_recovered_error` still names the gaps' error when they are returned.
    fn recover(&mut self, error: FlowError, lost: Lost) {
        self.active = None;
        self.errors += 1;
        let harts = match lost {
            Lost::Hart(hart) => hart..hart + 1,
            Lost::EveryHart => 0..self.harts.len(),
        };
        // The units armed but not walked are lost with the flow.
        self.statistics.skipped_units = self.harts[harts.clone()]
            .iter()
            .fold(self.statistics.skipped_units, |total, hart| {
                total.saturating_add(hart.events.pending_units())
            });
        // A speculative decode keeps a hart's message-level state after an error of its
        // own walk, to resume at the next address a message gives.
        let keeps_messages = self.speculation.is_some() && matches!(lost, Lost::Hart(_));
        if keeps_messages {
            self.walks_lost += 1;
            if self.gave_up() {
                self.finished = true;
            }
        }
        let lose = |hart: &mut Hart| {
            if keeps_messages && hart.events.is_synced() {
                hart.lose_walk();
            } else {
                hart.unsync();
            }
        };
        match self.options.recovery {
            Recovery::ReturnError => {
                self.harts[harts].iter_mut().for_each(lose);
                self.pending_error = Some(error);
            }
            Recovery::Resync => {
                self.statistics.recovered_errors += 1;
                let gap = ElementKind::Gap {
                    reason: GapReason::DecodeError {
                        cause: error.failure(),
                    },
                };
                let offset = error.offset();
                let before = self.ready.len();
                for hart in &mut self.harts[harts] {
                    // A hart already waiting for synchronisation loses nothing more.
                    if let (Lost::EveryHart, false) = (lost, hart.events.is_synced()) {
                        continue;
                    }
                    lose(hart);
                    let element = TraceElement {
                        hart: hart.events.src,
                        offset,
                        kind: gap,
                    };
                    self.ready.push((element, BlockRef::NONE));
                }
                if self.ready.len() == before {
                    // Unreadable bytes before any hart synchronised (a wrapped buffer's
                    // start): still reported, under the first hart number.
                    let element = TraceElement {
                        hart: 0,
                        offset,
                        kind: gap,
                    };
                    self.ready.push((element, BlockRef::NONE));
                }
                self.recovered_error = Some(error);
            }
        }
    }

    /// Whether the newest range could still be extended by the walk (it ended without a
    /// control transfer) before the stream ends.
    fn last_range_may_grow(&self) -> bool {
        !self.finished
            && self.ready.last().is_some_and(|(element, _)| {
                matches!(
                    element.kind,
                    ElementKind::InstructionRange {
                        end: RangeEnd::BranchNotTaken | RangeEnd::Sequential,
                        ..
                    }
                )
            })
    }

    fn hart_index(&mut self, src: u16) -> usize {
        if let Some(index) = self.harts.iter().position(|hart| hart.events.src == src) {
            return index;
        }
        self.harts.push(Hart::new(
            src,
            self.options.return_stack_depth,
            self.options.return_stack_model,
        ));
        self.harts.len() - 1
    }

    fn queue(&mut self, hart: usize, offset: u64, kind: ElementKind) {
        let hart = self.harts[hart].events.src;
        self.ready
            .push((TraceElement { hart, offset, kind }, BlockRef::NONE));
    }

    /// Hands a message to its hart's event layer and reports the event.
    #[inline(always)]
    fn apply(&mut self, hart: usize, message: Message) -> Result<(), FlowError> {
        self.statistics.messages += 1;
        self.applied_messages += 1;
        if message.is_sync() {
            self.statistics.sync_messages += 1;
            // A parallel decode's join can compare states once the sync is applied.
            self.snapshot_due = self.speculation.is_some();
        } else if self.statistics.messages % SNAPSHOT_MESSAGES == 0 {
            self.snapshot_due = self.speculation.is_some();
        }
        let offset = message.offset;
        let kind = match self.harts[hart].events.apply(message)? {
            Event::BeforeSync => {
                self.statistics.messages_before_sync += 1;
                self.statistics.skipped_units = self
                    .statistics
                    .skipped_units
                    .saturating_add(units_of(&message.body));
                return Ok(());
            }
            Event::Walk => {
                if self.harts[hart].position.pc().is_none() && self.speculation.is_some() {
                    self.resume_lost_walk(hart, offset);
                    return Ok(());
                }
                self.active = Some(hart);
                // A hart's code changes only between its walks (at an Ownership
                // message): the walk it starts is all in the code it runs now.
                self.walk.select(self.harts[hart].code);
                if let Some(key) = self.walk.replay_key(&self.harts[hart]) {
                    if self
                        .walk
                        .replay(&mut self.harts[hart], key, &mut self.ready)
                    {
                        if let Some(message) = self.message_candidate.take() {
                            self.keep_message(hart, message, key);
                        }
                        return self.end_walk(hart);
                    }
                }
                return Ok(());
            }
            Event::Nothing => None,
            Event::TraceOn { address, reason } => {
                if reason == TraceOnReason::Restart {
                    self.statistics.restarts += 1;
                }
                // The message's I-CNT covers instructions before its address, which
                // cannot be placed (a restart after an overrun, a wrapped buffer).
                self.statistics.skipped_units = self
                    .statistics
                    .skipped_units
                    .saturating_add(units_of(&message.body));
                self.harts[hart].position.jump_to(Some(address));
                if self.speculation.is_some() && reason == TraceOnReason::Start {
                    // The true decoder may have been synchronised here, with entries
                    // on its stack that this speculative one cannot know.
                    self.harts[hart].events.stack_mut().forget_base();
                }
                Some(ElementKind::TraceOn { address, reason })
            }
            Event::Lost {
                error_type,
                error_code,
                lost_units,
            } => {
                self.statistics.gaps += 1;
                self.statistics.skipped_units =
                    self.statistics.skipped_units.saturating_add(lost_units);
                self.harts[hart].position.jump_to(None);
                Some(ElementKind::Gap {
                    reason: GapReason::EncoderOverflow {
                        error_type,
                        error_code,
                    },
                })
            }
            Event::RestartAfterLoss {
                address,
                lost_units,
            } => {
                self.statistics.gaps += 1;
                self.statistics.restarts += 1;
                self.statistics.skipped_units =
                    self.statistics.skipped_units.saturating_add(lost_units);
                // ETYPE 0 (FIFO overrun), ECODE 0 (reason not given): what SYNC=7 says.
                let gap = ElementKind::Gap {
                    reason: GapReason::EncoderOverflow {
                        error_type: 0,
                        error_code: 0,
                    },
                };
                self.queue(hart, offset, gap);
                self.harts[hart].position.jump_to(Some(address));
                Some(ElementKind::TraceOn {
                    address,
                    reason: TraceOnReason::Restart,
                })
            }
            Event::Unhandled { code } => {
                self.statistics.vendor_or_reserved_messages += 1;
                Some(ElementKind::Unhandled { code })
            }
            Event::ContextChange {
                privilege,
                virtualized,
                context,
            } => {
                if let (Some(Context::Process(process)), false) =
                    (context, self.contexts.is_empty())
                {
                    // A context with no code of its own runs the code every context
                    // shares (the kernel's).
                    let code = self.contexts.get(&process).copied().unwrap_or(0);
                    self.harts[hart].switch_code(code);
                }
                Some(ElementKind::ContextChange {
                    privilege,
                    virtualized,
                    context,
                })
            }
        };
        if let Some(kind) = kind {
            self.queue(hart, offset, kind);
        }
        // Nothing to walk: the message's timestamp applies now.
        self.flush_time(hart, offset);
        Ok(())
    }

    /// Replays the next message whole when it is short and was kept in the hart's
    /// present state (see `memo`): the same elements, counts and state as parsing,
    /// applying and walking it. False, with nothing changed, otherwise.
    #[inline]
    fn replay_message(&mut self) -> bool {
        let Some(memo) = &mut self.message_memo else {
            return false;
        };
        let [hart] = self.harts.as_mut_slice() else {
            return false;
        };
        if !hart.events.between_messages() {
            return false;
        }
        let Some(pc) = hart.position.pc() else {
            return false;
        };
        let Some(short) = self.messages.peek_short() else {
            return false;
        };
        let offset = self.messages.position();
        if offset >= self.stop.offset {
            return false;
        }
        let key = MessageKey {
            bytes: short.bytes(),
            pc,
            last_address: hart.events.last_address(),
        };
        let Some(&message) = memo.get(key) else {
            return false;
        };
        let target = match message.resume {
            Resume::At(target) => Some(target),
            Resume::WhereTheWalkStopped | Resume::Nowhere => None,
        };
        if !self.walk.replay_kept(
            hart,
            message.walk,
            message.walk_slot,
            offset,
            target,
            &mut self.ready,
        ) {
            return false;
        }
        memo.replayed += 1;
        hart.events
            .message_replayed(offset, message.last_address, message.armed);
        if let Some(target) = target {
            hart.position.jump_to(Some(target));
        }
        // What reading and applying the message counts.
        self.messages.skip_short(short);
        if self.statistics.messages % 4096 == 0 {
            self.progress.store(self.position(), Ordering::Relaxed);
        }
        self.statistics.messages += 1;
        self.applied_messages += 1;
        if self.statistics.messages % SNAPSHOT_MESSAGES == 0 {
            self.snapshot_due = self.speculation.is_some();
        }
        true
    }

    /// The key under which `message`, about to be applied to `hart`, may be kept for
    /// replay: a short DirectBranch or IndirectBranch(Hist) message of an indirect jump,
    /// without a timestamp, applied between messages.
    fn message_key(&self, hart: usize, message: &Message) -> Option<MessageKey> {
        self.message_memo.as_ref()?;
        if self.harts.len() != 1 || message.timestamp.is_some() {
            return None;
        }
        match message.body {
            Body::DirectBranch { .. }
            | Body::IndirectBranch {
                btype: BranchType::Indirect,
                ..
            }
            | Body::IndirectBranchHist {
                btype: BranchType::Indirect,
                ..
            } => {}
            _ => return None,
        }
        let hart = &self.harts[hart];
        if !hart.events.between_messages() {
            return None;
        }
        let pc = hart.position.pc()?;
        let short = ShortMessage::of(message, self.trace)?;
        Some(MessageKey {
            bytes: short.bytes(),
            pc,
            last_address: hart.events.last_address(),
        })
    }

    /// Keeps what the message of `key` did: its walk (`walk`, just replayed) ends
    /// plainly, so the rest is the state its event layer is left in.
    fn keep_message(&mut self, hart: usize, key: MessageKey, walk: WalkKey) {
        let events = &self.harts[hart].events;
        if let (Some(memo), Some(resume), Some(armed)) = (
            &mut self.message_memo,
            events.plain_end(),
            events.armed_branch(),
        ) {
            memo.keep(key, walk, events.last_address(), armed, resume);
        }
    }

    /// A speculative decode's hart that lost its walk ([`Hart::lose_walk`]) skips the
    /// walk of each message until one gives the address it ends at, and goes on from
    /// there: a seam, where the join can compare states again.
    #[cold]
    fn resume_lost_walk(&mut self, hart: usize, offset: u64) {
        if let Some(address) = self.harts[hart].events.skip_walk() {
            self.harts[hart].position.jump_to(Some(address));
            self.snapshot_due = true;
        }
        self.flush_time(hart, offset);
    }

    fn flush_time(&mut self, hart: usize, offset: u64) {
        if let Some(time) = self.harts[hart].events.take_time() {
            self.queue(hart, offset, ElementKind::Timestamp { time });
        }
    }

    /// Ends the walk (complete or paused waiting for history or an address).
    fn stop_walk(&mut self, hart: usize) {
        self.active = None;
        let offset = self.harts[hart].events.walk_offset();
        self.flush_time(hart, offset);
    }

    /// Advances the active walk by one block.
    #[inline]
    fn step(&mut self, hart: usize) -> Result<(), FlowError> {
        match self.walk.step(&mut self.harts[hart], &mut self.ready) {
            Ok(Stepped::Element) => {}
            Ok(Stepped::Pause) => {
                self.walk.walk_abandoned(&mut self.harts[hart]);
                self.stop_walk(hart);
            }
            Ok(Stepped::Done) => {
                self.walk.walk_done(&mut self.harts[hart]);
                self.end_walk(hart)?;
            }
            Err(error) => {
                self.walk.walk_abandoned(&mut self.harts[hart]);
                return Err(error);
            }
        }
        Ok(())
    }

    /// The armed I-CNT is used up: the event layer checks the walk against the message
    /// that armed it and says where execution resumes. Once per message: out of line.
    #[inline]
    fn end_walk(&mut self, index: usize) -> Result<(), FlowError> {
        let hart = &mut self.harts[index];
        let src = hart.events.src;
        let offset = hart.events.walk_offset();
        let ready = &mut self.ready;
        let statistics = &mut self.statistics;
        let ended = hart.events.end_walk(hart.position.pc(), |kind| {
            match kind {
                ElementKind::TraceOff { .. } => statistics.trace_stops += 1,
                ElementKind::TraceOn {
                    reason: TraceOnReason::Restart,
                    ..
                } => statistics.restarts += 1,
                _ => {}
            }
            ready.push((
                TraceElement {
                    hart: src,
                    offset,
                    kind,
                },
                BlockRef::NONE,
            ));
        })?;
        match ended.resume {
            Resume::WhereTheWalkStopped => {}
            Resume::At(address) => hart.position.jump_to(Some(address)),
            Resume::Nowhere => hart.position.jump_to(None),
        }
        match ended.next {
            NextWalk::Repeat => {}
            NextWalk::Idle => self.stop_walk(index),
        }
        Ok(())
    }
}
