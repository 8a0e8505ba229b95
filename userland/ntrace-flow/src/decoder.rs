//! The flow decoder: N-Trace messages in, protocol-free trace elements out.
//!
//! Layers, as libipt stacks its decoders: the message decoder (packets) is owned here;
//! each message goes to its hart's event layer (`event`), which turns it into an event
//! and arms a walk; the block walk (`walk`) then advances one cached block per call and
//! yields one instruction range per block. This module only routes: messages to harts,
//! events to elements, errors to the recovery policy. Nothing is buffered beyond one
//! batch of elements, so memory does not grow with the trace, and the caller pulls at
//! its own pace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use code_image::CodeImage;
use ntrace_message::{Message, MessageDecoder};
use trace_elements::{ElementKind, GapReason, RangeEnd, TraceElement};

use crate::block::{FileDecodeInfo, NO_BLOCK};
use crate::event::{Event, NextWalk, Resume};
use crate::walk::{BlockWalk, Hart, RangeOutput, ReadyElement, Stepped};
use crate::{DecoderOptions, FlowError, Recovery};

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
    /// Error messages of the encoder (trace it lost).
    pub gaps: u64,
    /// Errors reported as gaps under [`Recovery::Resync`].
    pub recovered_errors: u64,
    pub vendor_or_reserved_messages: u64,
    /// I-CNT units still unresolved when the stream ended (trace cut after a ResourceFull).
    pub unresolved_units_at_end: u64,
    pub blocks_decoded: u64,
}

/// Which harts an error cost their flow.
#[derive(Clone, Copy, Debug)]
enum Lost {
    /// The hart whose message or walk failed.
    Hart(usize),
    /// An unreadable message may have belonged to any hart.
    EveryHart,
}

/// Decodes an N-Trace byte stream against a code image.
#[derive(Debug)]
pub struct FlowDecoder<'a> {
    messages: MessageDecoder<'a>,
    walk: BlockWalk<'a>,
    options: DecoderOptions,
    harts: Vec<Hart>,
    active: Option<usize>,
    /// Elements produced but not yet returned, with the block each range came from
    /// (`NO_BLOCK` otherwise). Producing a batch per refill keeps the walk in a tight loop.
    ready: Vec<ReadyElement>,
    ready_index: usize,
    /// Block of the element returned last, for `for_each_instruction`.
    last_block: u32,
    /// An error met while producing the current batch, returned after its elements.
    pending_error: Option<FlowError>,
    /// The error behind the latest gap of [`Recovery::Resync`].
    recovered_error: Option<FlowError>,
    statistics: FlowStatistics,
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
            messages: MessageDecoder::new(trace, options.message),
            walk: BlockWalk::new(image, files, ranges),
            options,
            harts: Vec::new(),
            active: None,
            ready: Vec::with_capacity(BATCH),
            ready_index: 0,
            last_block: NO_BLOCK,
            pending_error: None,
            recovered_error: None,
            statistics: FlowStatistics::default(),
            finished: false,
            progress: Arc::new(AtomicU64::new(0)),
        }
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
        statistics.blocks_decoded = self.walk.cache.len() as u64;
        statistics
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
    pub fn block_profile(&self) -> impl Iterator<Item = crate::BlockExecutions> + '_ {
        self.walk.cache.executed()
    }

    /// Approximate heap bytes the decoder holds: the block cache (bounded by the code
    /// image), queued history (bounded by the trace bytes carrying it) and buffers.
    pub fn memory_footprint(&self) -> usize {
        self.walk.cache.footprint()
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
        self.messages.idle_bytes()
    }

    pub fn skipped_bytes(&self) -> u64 {
        self.messages.skipped_bytes()
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

    /// Produces the next batch of elements and returns its first.
    fn refill(&mut self) -> Result<Option<TraceElement>, FlowError> {
        self.ready.clear();
        self.ready_index = 0;
        if let Some(error) = self.pending_error.take() {
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
            match self.messages.next_message() {
                Ok(Some(message)) => {
                    if self.statistics.messages % 4096 == 0 {
                        self.progress
                            .store(self.messages.position(), Ordering::Relaxed);
                    }
                    let hart = self.hart_index(message.src);
                    if let Err(error) = self.apply(hart, message) {
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
            None => self.pending_error.take().map_or(Ok(None), Err),
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.progress
            .store(self.messages.position(), Ordering::Relaxed);
        self.statistics.unresolved_units_at_end = self.harts.iter().fold(0u64, |total, hart| {
            total.saturating_add(hart.events.pending_units())
        });
    }

    /// Applies the recovery policy to an error; the batch ends after it, so that
    /// `last_recovered_error` still names the gaps' error when they are returned.
    fn recover(&mut self, error: FlowError, lost: Lost) {
        self.active = None;
        let harts = match lost {
            Lost::Hart(hart) => hart..hart + 1,
            Lost::EveryHart => 0..self.harts.len(),
        };
        match self.options.recovery {
            Recovery::ReturnError => {
                self.harts[harts].iter_mut().for_each(Hart::unsync);
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
                    hart.unsync();
                    let element = TraceElement {
                        hart: hart.events.src,
                        offset,
                        kind: gap,
                    };
                    self.ready.push((element, NO_BLOCK));
                }
                if self.ready.len() == before {
                    // Unreadable bytes before any hart synchronised (a wrapped buffer's
                    // start): still reported, under the first hart number.
                    let element = TraceElement {
                        hart: 0,
                        offset,
                        kind: gap,
                    };
                    self.ready.push((element, NO_BLOCK));
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
            .push((TraceElement { hart, offset, kind }, NO_BLOCK));
    }

    /// Hands a message to its hart's event layer and reports the event.
    #[inline(always)]
    fn apply(&mut self, hart: usize, message: Message) -> Result<(), FlowError> {
        self.statistics.messages += 1;
        if message.is_sync() {
            self.statistics.sync_messages += 1;
        }
        let offset = message.offset;
        let kind = match self.harts[hart].events.apply(message)? {
            Event::BeforeSync => {
                self.statistics.messages_before_sync += 1;
                return Ok(());
            }
            Event::Walk => {
                self.active = Some(hart);
                return Ok(());
            }
            Event::Nothing => None,
            Event::TraceOn { address, reason } => {
                self.harts[hart].position.jump_to(Some(address));
                Some(ElementKind::TraceOn { address, reason })
            }
            Event::Lost {
                error_type,
                error_code,
            } => {
                self.statistics.gaps += 1;
                self.harts[hart].position.jump_to(None);
                Some(ElementKind::Gap {
                    reason: GapReason::EncoderOverflow {
                        error_type,
                        error_code,
                    },
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
            } => Some(ElementKind::ContextChange {
                privilege,
                virtualized,
                context,
            }),
        };
        if let Some(kind) = kind {
            self.queue(hart, offset, kind);
        }
        // Nothing to walk: the message's timestamp applies now.
        self.flush_time(hart, offset);
        Ok(())
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
        match self.walk.step(&mut self.harts[hart], &mut self.ready)? {
            Stepped::Element => {}
            Stepped::Pause => self.stop_walk(hart),
            Stepped::Done => self.end_walk(hart)?,
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
        let ended = hart.events.end_walk(hart.position.pc(), |kind| {
            ready.push((
                TraceElement {
                    hart: src,
                    offset,
                    kind,
                },
                NO_BLOCK,
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
