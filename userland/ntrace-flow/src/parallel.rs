//! Parallel decode: the trace cut into chunks, each decoded on its own core, joined in
//! order into exactly the serial decoder's output.
//!
//! Each chunk's messages are first read (`seam::scan`, on any core; reading them again
//! in the decode costs less than keeping them: a message model is some 10 to 40 times
//! the trace bytes it came from). A chunk starts at its first
//! synchronisation message or, earlier, at its first *seam*: the message after one
//! whose walk ends at the address it gives (an indirect branch, a trap), where the
//! scans of the chunks before it, applied in order, give the U-ADDR reference address
//! and the time (see `seam`). So a trace with a single synchronisation message is cut
//! as finely as one with many.
//!
//! A chunk's decoder knows nothing else of the state before the chunk: the harts it
//! was not started for wait for their synchronisation, and the return-stack entries
//! pushed before are unknown (popping one is counted, never guessed; the hart then
//! drops its walk, keeps its message-level state and goes on at the next seam). It
//! records [`Snapshot`]s of its state at its start, after each synchronisation and
//! seam it resumed at, and every 4096 messages. The join, sequential and in
//! order, owns the one decoder with the true state (the truth): it decodes the start of
//! each chunk itself up to the first snapshot whose state the true state continues as
//! (the same addresses, counts, history, time; the speculative stack a top part of the
//! true one), takes the chunk's elements from there up to the snapshot before the first
//! error or unknown stack entry the chunk's decoder met, then takes over that snapshot's
//! state (the true stack entries put back below the chunk's) and goes on the same way.
//! In the common case (the chunk's start state exact, no pop below the chunk's own
//! stack entries) the join decodes nothing and copies the chunk's elements.
//!
//! Instruction ranges are never extended across a seam by the chunks; the join merges
//! consecutive ranges exactly as the serial decoder does (same hart, the first ending
//! without a control transfer at the second's start).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use code_image::CodeImage;
use trace_elements::{ElementKind, ElementSource, GapReason, RangeEnd, TraceElement};

use crate::block::{visit_range, Block, FileDecodeInfo, NO_BLOCK};
use crate::decoder::{ChunkEnd, SeamStart, Snapshot};
use crate::return_stack::ReturnStackModel;
use crate::seam::{self, ChunkScan, HartState};
use crate::walk::BlockWalk;
use crate::{BlockExecutions, DecoderOptions, FlowDecoder, FlowError, FlowStatistics};

/// Largest automatic chunk: a few MB of trace per chunk keeps the cost of each chunk's
/// cold block cache small, and the elements of a few chunks in flight fit in memory.
pub const DEFAULT_CHUNK_BYTES: usize = 2 << 20;

/// Largest automatic chunk when instruction ranges are reported.
const MAX_AUTOMATIC_CHUNK_BYTES_WITH_RANGES: usize = 256 << 10;

/// Smallest automatic chunk: below it the cold block cache and the join's share of
/// each chunk start to show.
const MIN_AUTOMATIC_CHUNK_BYTES: usize = 64 << 10;

/// How [`ParallelDecoder`] divides the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParallelOptions {
    /// Threads decoding chunks (at least 1).
    pub jobs: usize,
    /// Trace bytes per chunk; a chunk ends at the first synchronisation message after
    /// its share. 0 (the default) picks enough chunks to keep every thread busy until
    /// the end: a sixteenth of the trace per thread (the join starts once the first chunks
    /// are scanned and decoded), within 64 KiB..=2 MiB.
    pub chunk_bytes: usize,
}

impl Default for ParallelOptions {
    fn default() -> Self {
        Self {
            jobs: std::thread::available_parallelism().map_or(1, usize::from),
            chunk_bytes: 0,
        }
    }
}

impl ParallelOptions {
    pub fn with_jobs(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// 0 chooses automatically.
    pub fn with_chunk_bytes(mut self, bytes: usize) -> Self {
        self.chunk_bytes = bytes;
        self
    }

    /// The chunk size for a trace of `length` bytes.
    fn chunk_bytes_for(&self, length: usize) -> usize {
        match self.chunk_bytes {
            0 => (length / (self.jobs * 16)).clamp(MIN_AUTOMATIC_CHUNK_BYTES, DEFAULT_CHUNK_BYTES),
            bytes => bytes,
        }
    }
}

/// Why [`ParallelDecoder::run`] stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParallelError<E> {
    /// The consumer's callback failed.
    #[error(transparent)]
    Consumer(E),
    #[error("cannot start the decoding threads: {0}")]
    ThreadPool(String),
}

/// One output of [`ParallelDecoder::run`], in the serial decoder's order.
#[derive(Debug)]
pub enum Decoded<'x> {
    Element(DecodedElement<'x>),
    /// What `FlowDecoder::next_element` returns as an error (with
    /// [`crate::Recovery::ReturnError`]).
    Error(FlowError),
}

/// A trace element, with what is needed to list a range's instructions.
#[derive(Debug)]
pub struct DecodedElement<'x> {
    pub element: TraceElement,
    recovered_error: Option<&'x FlowError>,
    instructions: InstructionSource<'x>,
}

impl DecodedElement<'_> {
    /// With [`crate::Recovery::Resync`]: the error behind a `GapReason::DecodeError` gap.
    pub fn recovered_error(&self) -> Option<&FlowError> {
        self.recovered_error
    }

    /// Calls `visit` with the address of each of `instructions` instructions from `start`
    /// (an instruction range of this element). Returns false if `start` is not the
    /// start of a walked block.
    pub fn for_each_instruction(
        &self,
        start: u64,
        instructions: u32,
        visit: impl FnMut(u64),
    ) -> bool {
        self.instructions.visit(start, instructions, visit)
    }
}

/// Where the blocks of a range are found: the decoder that made it (its block first),
/// then the join's decoder, then every block the chunks decoded.
#[derive(Debug)]
struct InstructionSource<'x> {
    primary: Option<&'x BlockWalk<'x>>,
    block: u32,
    truth: &'x BlockWalk<'x>,
    known: &'x HashMap<u64, Block>,
}

impl InstructionSource<'_> {
    fn lookup(&self, address: u64) -> Option<&Block> {
        self.primary
            .and_then(|walk| walk.cache.cached(address))
            .or_else(|| self.truth.cache.cached(address))
            .or_else(|| self.known.get(&address))
    }

    fn visit(&self, start: u64, instructions: u32, visit: impl FnMut(u64)) -> bool {
        let hinted = self
            .primary
            .and_then(|walk| walk.cache.blocks.get(self.block as usize))
            .filter(|block| block.start == start);
        let Some(block) = hinted.or_else(|| self.lookup(start)) else {
            return false;
        };
        visit_range(
            block,
            start,
            instructions,
            |address| self.lookup(address),
            visit,
        )
    }
}

/// What a whole parallel decode found, as the serial decoder reports it at the end.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ParallelSummary {
    pub statistics: FlowStatistics,
    pub idle_bytes: u64,
    pub skipped_bytes: u64,
    /// Instructions executed per block (in no particular order).
    pub block_profile: Vec<BlockExecutions>,
    /// Messages the joining thread decoded itself, not taken from a chunk's decode: the
    /// serial part of the work.
    pub serial_messages: u64,
    /// Chunks the trace was cut into, and how many of them started at a seam (see
    /// `seam`) rather than a synchronisation message.
    pub chunks: u64,
    pub seam_starts: u64,
    /// Chunks whose decode stopped early, its walks lost again and again (returns from
    /// functions entered before it); after two in a row the rest is decoded serially.
    pub chunks_given_up: u64,
    /// Message walks replayed rather than walked, over every decoder of the run (see
    /// [`FlowDecoder::walks_replayed`]).
    pub walks_replayed: u64,
}

/// Decodes a trace on several threads; delivers exactly what [`FlowDecoder`] would.
#[derive(Debug)]
pub struct ParallelDecoder<'a> {
    trace: &'a [u8],
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    options: DecoderOptions,
    parallel: ParallelOptions,
    progress: Arc<AtomicU64>,
}

/// An item a chunk's decoder produced.
#[derive(Debug)]
enum ChunkItem {
    Element(TraceElement, u32),
    /// An error returned: a dependency, so never delivered from the chunk (the join
    /// decodes that part itself).
    Error,
}

/// One chunk decoded speculatively.
#[derive(Debug)]
struct ChunkOutput<'a> {
    index: usize,
    started_at_seam: bool,
    /// `None` when the chunk has no start of its own (no synchronisation message, no
    /// seam).
    decoded: Option<DecodedChunk<'a>>,
}

#[derive(Debug)]
struct DecodedChunk<'a> {
    decoder: FlowDecoder<'a>,
    items: Vec<ChunkItem>,
    /// The last one is the state at the chunk's end.
    snapshots: Vec<Snapshot>,
}

/// Which decoder made an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Truth,
    Chunk(usize),
}

/// An element held back because the next one may extend it.
#[derive(Debug)]
struct Pending {
    element: TraceElement,
    block: u32,
    source: Source,
}

impl<'a> ParallelDecoder<'a> {
    pub fn new(
        trace: &'a [u8],
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: DecoderOptions,
        parallel: ParallelOptions,
    ) -> Self {
        Self {
            trace,
            image,
            files,
            options,
            parallel: {
                let parallel = parallel.with_jobs(parallel.jobs);
                match options.return_stack_model {
                    ReturnStackModel::DropOldest => {
                        let bytes = parallel.chunk_bytes_for(trace.len()).max(1);
                        // A chunk's instruction ranges wait for the join (tens of bytes
                        // each, several per trace byte): smaller chunks bound that memory.
                        let bytes = if options.instruction_ranges && parallel.chunk_bytes == 0 {
                            bytes.min(MAX_AUTOMATIC_CHUNK_BYTES_WITH_RANGES)
                        } else {
                            bytes
                        };
                        parallel.with_chunk_bytes(bytes)
                    }
                    // The reference code's stack is more than its entries (where pushes
                    // and pops wrap): a chunk cannot be put on top of another's. One
                    // chunk: the serial decode.
                    _ => parallel.with_chunk_bytes(trace.len().max(1)),
                }
            },
            progress: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Decodes on other threads while `consume` pulls the elements in order on this
    /// one ([`PulledElements`] is an [`ElementSource`]), for consumers written against
    /// the serial decoder's pull interface. Instructions of a range cannot be listed
    /// this way (the blocks stay with the decoding threads): consumers that need them
    /// use [`Self::run`]. Returns what `consume` returned and, when the decode ran to
    /// its end, its summary (`None` when `consume` stopped pulling early).
    pub fn pull<R>(
        self,
        consume: impl FnOnce(&mut PulledElements) -> R,
    ) -> Result<(R, Option<ParallelSummary>), ParallelError<std::convert::Infallible>> {
        std::thread::scope(|scope| {
            let (sender, receiver) = mpsc::sync_channel::<Vec<Pulled>>(PULL_BATCHES_IN_FLIGHT);
            let decode = scope.spawn(move || {
                let mut batch = Vec::with_capacity(PULL_BATCH);
                let summary = self.run(|decoded| {
                    batch.push(match decoded {
                        Decoded::Element(decoded) => {
                            Pulled::Element(decoded.element, decoded.recovered_error().cloned())
                        }
                        Decoded::Error(error) => Pulled::Error(error),
                    });
                    if batch.len() == PULL_BATCH {
                        let full = std::mem::replace(&mut batch, Vec::with_capacity(PULL_BATCH));
                        // The consumer stopped pulling: stop decoding.
                        sender.send(full).map_err(|_| PullStopped)?;
                    }
                    Ok(())
                });
                if !batch.is_empty() {
                    let _ = sender.send(batch);
                }
                summary
            });
            let mut pulled = PulledElements {
                receiver,
                batch: Vec::new().into_iter(),
                recovered_error: None,
            };
            let result = consume(&mut pulled);
            // Dropping the receiver stops a decode the consumer left early.
            drop(pulled);
            let summary = match decode.join() {
                Ok(Ok(summary)) => Some(summary),
                Ok(Err(ParallelError::Consumer(PullStopped))) => None,
                Ok(Err(ParallelError::ThreadPool(error))) => {
                    return Err(ParallelError::ThreadPool(error))
                }
                Err(panic) => std::panic::resume_unwind(panic),
            };
            Ok((result, summary))
        })
    }

    /// Trace bytes joined so far (advisory, as [`FlowDecoder::progress`]).
    pub fn progress(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.progress)
    }

    /// Decodes the whole trace, calling `deliver` with each output in order, on the
    /// calling thread. At most about twice `jobs` chunks are in flight.
    pub fn run<E>(
        self,
        mut deliver: impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<ParallelSummary, ParallelError<E>> {
        let chunk_bytes = self.parallel.chunk_bytes;
        let chunks = self.trace.len().div_ceil(chunk_bytes).max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.parallel.jobs)
            .build()
            .map_err(|error| ParallelError::ThreadPool(error.to_string()))?;
        let window = self.parallel.jobs * 2;
        let mut join = Join::new(FlowDecoder::new(
            self.trace,
            self.image,
            self.files.clone(),
            self.options,
        ));
        let this = &self;
        let delivered = pool.in_place_scope(|scope| {
            let mut plan = Plan::new(chunks);
            let mut scans = VecDeque::new();
            let mut next_scan = 0;
            let mut receivers = VecDeque::new();
            let mut next = 0;
            // Chunks in a row whose decode gave up: the trace's returns leave functions
            // entered before each chunk too often (see `decoder::GIVE_UP_AFTER_LOSSES`).
            // After two, the rest is decoded serially, on a core not shared with
            // speculation that would be thrown away.
            let mut given_up = 0;
            for index in 0..chunks {
                while next < chunks && next < index + window && given_up < 2 {
                    // A chunk's end is where the next chunk with a start starts: plan
                    // up to a few chunks ahead (scans are cheap and small).
                    let horizon = (next + SCAN_AHEAD).min(chunks - 1);
                    while next_scan < chunks && next_scan <= horizon {
                        let (sender, receiver) = mpsc::sync_channel(1);
                        let chunk = next_scan;
                        scope.spawn(move |_| {
                            let _ = sender.send(this.scan_chunk(chunk));
                        });
                        scans.push_back(receiver);
                        next_scan += 1;
                    }
                    while plan.planned() <= horizon {
                        let Some(scan) =
                            scans.pop_front().and_then(|receiver| receiver.recv().ok())
                        else {
                            break;
                        };
                        plan.add(scan);
                    }
                    let (start, end) = plan.chunk(next, this.chunk_end(next));
                    let (sender, receiver) = mpsc::sync_channel(1);
                    let chunk = next;
                    scope.spawn(move |_| {
                        // The receiver is gone only when the join stopped early.
                        let _ = sender.send(this.decode_chunk(chunk, start, end));
                    });
                    receivers.push_back(receiver);
                    next += 1;
                }
                let Some(output) = receivers
                    .pop_front()
                    .and_then(|receiver| receiver.recv().ok())
                else {
                    break;
                };
                let gave_up = output
                    .decoded
                    .as_ref()
                    .is_some_and(|chunk| chunk.decoder.gave_up());
                given_up = if gave_up { given_up + 1 } else { 0 };
                join.chunks_given_up += u64::from(gave_up);
                join.walks_replayed += output
                    .decoded
                    .as_ref()
                    .map_or(0, |chunk| chunk.decoder.walks_replayed());
                join.chunk(output, &mut deliver)?;
                this.progress
                    .store(join.truth.next_offset(), Ordering::Relaxed);
            }
            join.finish(&mut deliver)
        });
        delivered.map_err(ParallelError::Consumer)
    }

    /// Where chunk `index`'s share of the trace ends (`u64::MAX` for the last).
    fn chunk_end(&self, index: usize) -> u64 {
        let chunk_bytes = self.parallel.chunk_bytes as u64;
        (index as u64 + 1)
            .checked_mul(chunk_bytes)
            .filter(|&end| end < self.trace.len() as u64)
            .unwrap_or(u64::MAX)
    }

    /// Reads the messages that start in chunk `index`'s share (see `seam::scan`).
    fn scan_chunk(&self, index: usize) -> ChunkScan {
        let begin = index as u64 * self.parallel.chunk_bytes as u64;
        seam::scan(
            self.trace,
            self.options.message,
            begin,
            self.chunk_end(index),
        )
    }

    /// Decodes chunk `index` speculatively from `start` to `end`.
    fn decode_chunk(
        &self,
        index: usize,
        start: Option<ChunkStart>,
        end: ChunkEnd,
    ) -> ChunkOutput<'a> {
        let Some(start) = start else {
            return ChunkOutput {
                index,
                started_at_seam: false,
                decoded: None,
            };
        };
        let mut decoder = FlowDecoder::speculative(
            self.trace,
            usize::try_from(start.offset).unwrap_or(usize::MAX),
            end,
            start.seam,
            self.image,
            self.files.clone(),
            self.options,
        );
        let mut items = Vec::new();
        loop {
            match decoder.next_element() {
                Ok(Some(element)) => items.push(ChunkItem::Element(element, decoder.last_block())),
                Ok(None) => break,
                Err(_) => items.push(ChunkItem::Error),
            }
        }
        let snapshots = decoder.finish_speculation();
        ChunkOutput {
            index,
            started_at_seam: start.seam.is_some(),
            decoded: Some(DecodedChunk {
                decoder,
                items,
                snapshots,
            }),
        }
    }
}

/// Elements per batch handed from the decode to a [`ParallelDecoder::pull`] consumer,
/// and batches in flight: enough to keep both sides busy, a bounded amount of memory.
const PULL_BATCH: usize = 4096;
const PULL_BATCHES_IN_FLIGHT: usize = 4;

/// The consumer of [`ParallelDecoder::pull`] stopped pulling.
#[derive(Debug)]
struct PullStopped;

/// One output of a parallel decode, as [`PulledElements`] hands it over.
#[derive(Debug)]
enum Pulled {
    /// An element, with the error behind it when it is a decode error's gap.
    Element(TraceElement, Option<FlowError>),
    Error(FlowError),
}

/// The elements of a [`ParallelDecoder::pull`], in the serial decoder's order.
#[derive(Debug)]
pub struct PulledElements {
    receiver: mpsc::Receiver<Vec<Pulled>>,
    batch: std::vec::IntoIter<Pulled>,
    recovered_error: Option<FlowError>,
}

impl PulledElements {
    /// With [`crate::Recovery::Resync`]: the error behind the `GapReason::DecodeError`
    /// gap returned last (as [`FlowDecoder::last_recovered_error`]).
    pub fn last_recovered_error(&self) -> Option<&FlowError> {
        self.recovered_error.as_ref()
    }
}

impl ElementSource for PulledElements {
    type Error = FlowError;

    fn gap_cause(&self) -> Option<&FlowError> {
        self.last_recovered_error()
    }

    #[inline]
    fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        let pulled = match self.batch.next() {
            Some(pulled) => pulled,
            None => match self.receiver.recv() {
                Ok(batch) => {
                    self.batch = batch.into_iter();
                    match self.batch.next() {
                        Some(pulled) => pulled,
                        None => return Ok(None),
                    }
                }
                // The decode ended (or failed: its summary says).
                Err(_) => return Ok(None),
            },
        };
        match pulled {
            Pulled::Element(element, error) => {
                if error.is_some() {
                    self.recovered_error = error;
                }
                Ok(Some(element))
            }
            Pulled::Error(error) => Err(error),
        }
    }
}

/// Chunks planned past the one whose decode is started, to find where it ends.
const SCAN_AHEAD: usize = 2;

/// Where a chunk's decoder starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ChunkStart {
    offset: u64,
    /// Set when it starts at a seam rather than at a synchronisation message (or the
    /// trace's start).
    seam: Option<SeamStart>,
}

/// The chunks' starts, found from their scans in order.
#[derive(Debug)]
struct Plan {
    starts: Vec<Option<ChunkStart>>,
    /// The message-level state before the next chunk to plan (`None`: unknowable).
    state: Option<HartState>,
    chunks: usize,
}

impl Plan {
    fn new(chunks: usize) -> Self {
        Self {
            starts: Vec::with_capacity(chunks),
            state: Some(HartState::START),
            chunks,
        }
    }

    /// Chunks planned so far.
    fn planned(&self) -> usize {
        self.starts.len()
    }

    /// Plans the next chunk from its scan.
    fn add(&mut self, scan: ChunkScan) {
        let index = self.starts.len();
        let at_seam = scan.seam.and_then(|seam| {
            let state = seam.before.apply(self.state)?;
            state.synced.then_some(ChunkStart {
                offset: seam.offset,
                seam: Some(SeamStart {
                    src: seam.src,
                    address: state.address,
                    time: state.time,
                }),
            })
        });
        let at_sync = scan
            .first_sync
            .map(|offset| ChunkStart { offset, seam: None });
        let start = if index == 0 {
            Some(ChunkStart {
                offset: 0,
                seam: None,
            })
        } else {
            match (at_seam, at_sync) {
                (Some(seam), Some(sync)) if sync.offset < seam.offset => Some(sync),
                (Some(seam), _) => Some(seam),
                (None, sync) => sync,
            }
        };
        self.starts.push(start);
        self.state = if scan.several_harts {
            None
        } else {
            scan.effect.apply(self.state)
        };
    }

    /// Chunk `index`'s start and end (`share_end`: where its share of the trace ends):
    /// it ends where the next chunk with a start starts, or, when none is planned yet,
    /// at the first synchronisation message from its share's end.
    fn chunk(&self, index: usize, share_end: u64) -> (Option<ChunkStart>, ChunkEnd) {
        let start = self.starts.get(index).copied().flatten();
        let next_start = self.starts.iter().skip(index + 1).find_map(|start| *start);
        let end = match next_start {
            Some(next) => ChunkEnd::Before(next.offset),
            None if self.starts.len() >= self.chunks => ChunkEnd::Before(u64::MAX),
            None => ChunkEnd::SyncAtOrAfter(share_end),
        };
        (start, end)
    }
}

/// The sequential, ordered join.
struct Join<'a> {
    truth: FlowDecoder<'a>,
    pending: Option<Pending>,
    /// Chunks whose elements may still be delivered (the pending element's).
    retained: VecDeque<ChunkOutput<'a>>,
    /// Every block the chunks decoded, for listing instructions of merged ranges.
    known: HashMap<u64, Block>,
    /// Instructions per block start executed in the parts taken from chunks.
    executed: HashMap<u64, BlockExecutions>,
    /// Block starts the parts taken from chunks looked up.
    looked_up: HashSet<u64>,
    chunks: u64,
    seam_starts: u64,
    chunks_given_up: u64,
    walks_replayed: u64,
}

impl<'a> Join<'a> {
    fn new(truth: FlowDecoder<'a>) -> Self {
        Self {
            truth,
            pending: None,
            retained: VecDeque::new(),
            known: HashMap::new(),
            executed: HashMap::new(),
            looked_up: HashSet::new(),
            chunks: 0,
            seam_starts: 0,
            chunks_given_up: 0,
            walks_replayed: 0,
        }
    }

    /// Joins the next chunk, delivering its part of the output.
    fn chunk<E>(
        &mut self,
        output: ChunkOutput<'a>,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let index = output.index;
        self.chunks += 1;
        self.seam_starts += u64::from(output.started_at_seam);
        match &output.decoded {
            Some(chunk) => {
                for block in &chunk.decoder.walk().cache.blocks {
                    self.known.entry(block.start).or_insert(*block);
                }
            }
            None => return Ok(()),
        }
        self.retained.push_back(output);
        let snapshots = self.chunk_snapshots(index).len();
        let mut candidate = 0;
        // The last snapshot is the chunk's end: nothing to take from there.
        while candidate + 1 < snapshots {
            let (offset, dependencies) = {
                let snapshot = &self.chunk_snapshots(index)[candidate];
                (snapshot.offset, snapshot.dependencies)
            };
            if offset < self.truth.next_offset() {
                candidate += 1;
                continue;
            }
            self.truth.run_to(offset);
            self.drain_truth(deliver)?;
            if !self
                .truth
                .continues_as(&self.chunk_snapshots(index)[candidate])
            {
                candidate += 1;
                continue;
            }
            // The chunk's decode is exact from here until the snapshot before its first
            // error or pop of an unknown stack entry.
            let mut last = candidate;
            while last + 1 < snapshots
                && self.chunk_snapshots(index)[last + 1].dependencies == dependencies
            {
                last += 1;
            }
            if last == candidate {
                candidate += 1;
                continue;
            }
            self.take_from_chunk(index, candidate, last, deliver)?;
            candidate = last;
        }
        self.release_chunks(index);
        Ok(())
    }

    fn chunk_snapshots(&self, index: usize) -> &[Snapshot] {
        self.retained
            .iter()
            .find(|output| output.index == index)
            .and_then(|output| output.decoded.as_ref())
            .map_or(&[], |chunk| &chunk.snapshots)
    }

    /// Delivers the chunk's items between snapshots `from` and `to` and takes over its
    /// state at `to`.
    fn take_from_chunk<E>(
        &mut self,
        index: usize,
        from: usize,
        to: usize,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let position = self
            .retained
            .iter()
            .position(|output| output.index == index)
            .unwrap_or_default();
        let Some(chunk) = self.retained[position].decoded.take() else {
            return Ok(());
        };
        let (first, last) = (&chunk.snapshots[from], &chunk.snapshots[to]);
        let mut result = Ok(());
        for item in &chunk.items[first.items..last.items] {
            // A snapshot's count of dependencies covers errors: none in between.
            if let ChunkItem::Element(element, block) = *item {
                result = self.push(
                    element,
                    block,
                    Source::Chunk(index),
                    None,
                    Some(&chunk),
                    deliver,
                );
                if result.is_err() {
                    break;
                }
            }
        }
        let blocks = &chunk.decoder.walk().cache.blocks;
        for (block_index, block) in blocks.iter().enumerate().take(last.executed.len()) {
            let before = first.executed.get(block_index).copied().unwrap_or(0);
            let gained = last.executed[block_index].saturating_sub(before);
            if gained > 0 || block_index >= first.executed.len() {
                self.looked_up.insert(block.start);
            }
            if gained > 0 {
                self.executed
                    .entry(block.start)
                    .or_insert(BlockExecutions {
                        start: block.start,
                        last: block.last,
                        instructions: 0,
                    })
                    .instructions += gained;
            }
        }
        self.truth.adopt(first, last);
        self.retained[position].decoded = Some(chunk);
        result
    }

    /// Delivers what the truth decodes up to its stop.
    fn drain_truth<E>(
        &mut self,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        loop {
            match self.truth.next_element() {
                Ok(Some(element)) => {
                    let block = self.truth.last_block();
                    let error = match element.kind {
                        ElementKind::Gap {
                            reason: GapReason::DecodeError { .. },
                        } => self.truth.last_recovered_error().cloned(),
                        _ => None,
                    };
                    self.push(element, block, Source::Truth, error, None, deliver)?;
                }
                Ok(None) => return Ok(()),
                Err(error) => {
                    self.flush(deliver)?;
                    deliver(Decoded::Error(error))?;
                }
            }
        }
    }

    /// Delivers `element` after the pending one, merging instruction ranges as the
    /// serial decoder's walk does.
    fn push<E>(
        &mut self,
        element: TraceElement,
        block: u32,
        source: Source,
        recovered_error: Option<FlowError>,
        chunk: Option<&DecodedChunk<'a>>,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(pending) = &mut self.pending {
            if extend(&mut pending.element, &element) {
                return Ok(());
            }
            self.flush_with(chunk, deliver)?;
        }
        if can_grow(&element) {
            self.pending = Some(Pending {
                element,
                block,
                source,
            });
            return Ok(());
        }
        let primary = match source {
            Source::Truth => Some(self.truth.walk()),
            Source::Chunk(_) => chunk.map(|chunk| chunk.decoder.walk()),
        };
        deliver(Decoded::Element(DecodedElement {
            element,
            recovered_error: recovered_error.as_ref(),
            instructions: InstructionSource {
                primary,
                block,
                truth: self.truth.walk(),
                known: &self.known,
            },
        }))
    }

    fn flush<E>(
        &mut self,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.flush_with(None, deliver)
    }

    /// Delivers the pending element; `chunk` is one taken out of `retained` for now.
    fn flush_with<E>(
        &mut self,
        chunk: Option<&DecodedChunk<'a>>,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let primary = match pending.source {
            Source::Truth => Some(self.truth.walk()),
            Source::Chunk(index) => self
                .retained
                .iter()
                .find(|output| output.index == index)
                .and_then(|output| output.decoded.as_ref())
                .or(chunk)
                .map(|chunk| chunk.decoder.walk()),
        };
        let block = if primary.is_some() {
            pending.block
        } else {
            NO_BLOCK
        };
        deliver(Decoded::Element(DecodedElement {
            element: pending.element,
            recovered_error: None,
            instructions: InstructionSource {
                primary,
                block,
                truth: self.truth.walk(),
                known: &self.known,
            },
        }))
    }

    /// Drops the chunks before `current` that the pending element does not come from.
    fn release_chunks(&mut self, current: usize) {
        let keep = match self.pending {
            Some(Pending {
                source: Source::Chunk(index),
                ..
            }) => index.min(current),
            _ => current,
        };
        self.retained.retain(|output| output.index >= keep);
    }

    /// Decodes what no chunk covered up to the end and delivers the rest.
    fn finish<E>(
        mut self,
        deliver: &mut impl FnMut(Decoded<'_>) -> Result<(), E>,
    ) -> Result<ParallelSummary, E> {
        self.truth.run_to(u64::MAX);
        self.drain_truth(deliver)?;
        self.flush(deliver)?;
        let mut profile: HashMap<u64, BlockExecutions> = self.executed;
        let mut looked_up = self.looked_up;
        for block in self.truth.walk().cache.blocks.iter() {
            looked_up.insert(block.start);
        }
        for block in self.truth.block_profile() {
            profile
                .entry(block.start)
                .or_insert(BlockExecutions {
                    instructions: 0,
                    ..block
                })
                .instructions += block.instructions;
        }
        let mut statistics = self.truth.statistics();
        statistics.blocks_decoded = looked_up.len() as u64;
        Ok(ParallelSummary {
            statistics,
            idle_bytes: self.truth.idle_bytes(),
            skipped_bytes: self.truth.skipped_bytes(),
            block_profile: profile.into_values().collect(),
            serial_messages: self.truth.applied_messages(),
            chunks: self.chunks,
            seam_starts: self.seam_starts,
            chunks_given_up: self.chunks_given_up,
            walks_replayed: self.walks_replayed + self.truth.walks_replayed(),
        })
    }
}

impl std::fmt::Debug for Join<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Join")
            .field("next_offset", &self.truth.next_offset())
            .field("retained", &self.retained.len())
            .finish()
    }
}

/// Whether the walk could still extend `element` (a range that ended without a control
/// transfer).
fn can_grow(element: &TraceElement) -> bool {
    matches!(
        element.kind,
        ElementKind::InstructionRange {
            end: RangeEnd::BranchNotTaken | RangeEnd::Sequential,
            ..
        }
    )
}

/// Extends `previous` by `next` when the serial walk would have made them one range
/// (see `walk::push_range`).
fn extend(previous: &mut TraceElement, next: &TraceElement) -> bool {
    if previous.hart != next.hart {
        return false;
    }
    let (
        ElementKind::InstructionRange {
            last,
            instructions,
            end: end @ (RangeEnd::BranchNotTaken | RangeEnd::Sequential),
            next: following,
            ..
        },
        ElementKind::InstructionRange {
            start: next_start,
            last: next_last,
            instructions: next_instructions,
            end: next_end,
            next: next_following,
        },
    ) = (&mut previous.kind, next.kind)
    else {
        return false;
    };
    let Some(total) = instructions.checked_add(next_instructions) else {
        return false;
    };
    if *following != Some(next_start) {
        return false;
    }
    *last = next_last;
    *instructions = total;
    *end = next_end;
    *following = next_following;
    true
}
