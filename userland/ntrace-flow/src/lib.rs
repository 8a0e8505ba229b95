//! RISC-V N-Trace flow reconstruction.
//!
//! [`FlowDecoder`] turns an N-Trace byte stream plus the code that ran into
//! protocol-free [`trace_elements::TraceElement`]s. Its layers follow libipt's: the
//! message decoder (`ntrace-message`, libipt's packets); the event layer (`event`,
//! libipt's query layer: per-hart address reconstruction, HIST, I-CNT, timestamps and
//! the implicit-return stack, with no knowledge of the code); the block walk (`walk`
//! over `block`'s cached basic blocks, libipt's block decoder), which asks the event layer
//! what the code cannot say; [`InstructionDecoder`] gives the ranges instruction by
//! instruction, as libipt's instruction flow decoder. What to do after an error is an
//! option ([`Recovery`]): return it, or report a gap and resynchronise.
//! [`ParallelDecoder`] gives the same output from chunks of the trace cut at
//! synchronisation messages, or at seams the messages alone locate (`seam`), and
//! decoded on all cores (`parallel` says how the chunks are joined exactly). [`TraceEncoder`] is the opposite: a
//! model of a trace encoder that turns a retired-instruction stream into N-Trace bytes,
//! used by tests and for emulating hardware.
//!
//! Where the specification is ambiguous, both follow the choices recorded in
//! `docs/ntrace-errata.md`.

#![forbid(unsafe_code)]

mod block;
mod decoder;
mod encoder;
mod event;
mod history;
mod instructions;
mod memo;
mod parallel;
mod return_stack;
mod seam;
mod walk;

pub use block::{BlockExecutions, FileDecodeInfo};
pub use decoder::{ContextCode, FlowDecoder, FlowStatistics, ProgramCode};
pub use encoder::{
    BranchMode, Context, EncodeError, EncoderOptions, EncoderStatistics, InstructionRun,
    TraceEncoder, Trap,
};
pub use instructions::{InstructionDecoder, InstructionError, InstructionStep, TracedInstruction};
pub use parallel::{
    Decoded, DecodedElement, ParallelDecoder, ParallelError, ParallelOptions, ParallelSummary,
    PulledElements, DEFAULT_CHUNK_BYTES,
};
pub use return_stack::ReturnStackModel;
pub use walk::WalkReplay;

use ntrace_message::{MessageError, MessageOptions};
use trace_elements::{DecodeFailure, TraceElement};

/// Return-stack depth the decoder assumes by default: the spec's maximum (9.2).
pub const DEFAULT_RETURN_STACK_DEPTH: usize = 32;

/// Options of [`FlowDecoder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecoderOptions {
    /// Wire options: SRC width, timestamps, MSB address extension.
    pub message: MessageOptions,
    /// Depth of the implicit-return stack; at least the encoder's (0 disables it).
    pub return_stack_depth: usize,
    /// How the encoder's return stack behaves when full (with `return_stack_depth` its
    /// depth, exactly, when it is not [`ReturnStackModel::DropOldest`]).
    pub return_stack_model: ReturnStackModel,
    /// Produce an element per instruction range. Without them the decoder still follows
    /// the flow, counts instructions (`FlowStatistics::instructions`) and keeps the block
    /// profile, and still reports every other element: the fast path for summaries.
    pub instruction_ranges: bool,
    /// What the decoder does after an error.
    pub recovery: Recovery,
    /// Whether a walk that comes again is replayed from the first (the default: the
    /// same output, faster on code that loops) or walked each time.
    pub walk_replay: WalkReplay,
    /// The encoder reports every direct jump and call (`jal`, `c.j`, `c.jal`) as a taken
    /// branch (trTeInstEnAllJumps): a HIST bit (HTM) or a DirectBranch message (BTM)
    /// each. Must match the encoder: a trace of one decoded with the other setting
    /// fails with decode errors.
    pub all_jumps: bool,
}

/// What [`FlowDecoder`] does when a message is corrupt or the trace disagrees with the
/// code. Either way the harts affected (every hart for an unreadable message, since its
/// SRC is unknown) forget their flow and wait for their next synchronisation message,
/// so decoding can go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// `next_element` returns the error (after the elements before it); calling it again
    /// resumes at the next synchronisation message. The caller decides.
    #[default]
    ReturnError,
    /// The error becomes an [`trace_elements::ElementKind::Gap`] element at its byte
    /// offset (`GapReason::DecodeError`, for each hart that lost its flow) and decoding
    /// resumes at the next synchronisation message; [`FlowDecoder::last_recovered_error`]
    /// gives the error itself.
    Resync,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        Self {
            message: MessageOptions::default(),
            return_stack_depth: DEFAULT_RETURN_STACK_DEPTH,
            return_stack_model: ReturnStackModel::DropOldest,
            instruction_ranges: true,
            recovery: Recovery::ReturnError,
            walk_replay: WalkReplay::Replay,
            all_jumps: false,
        }
    }
}

impl DecoderOptions {
    pub fn with_walk_replay(mut self, walk_replay: WalkReplay) -> Self {
        self.walk_replay = walk_replay;
        self
    }

    pub fn with_message(mut self, message: MessageOptions) -> Self {
        self.message = message;
        self
    }

    pub fn with_return_stack_depth(mut self, depth: usize) -> Self {
        self.return_stack_depth = depth;
        self
    }

    pub fn with_return_stack_model(mut self, model: ReturnStackModel) -> Self {
        self.return_stack_model = model;
        self
    }

    pub fn with_instruction_ranges(mut self, ranges: bool) -> Self {
        self.instruction_ranges = ranges;
        self
    }

    pub fn with_recovery(mut self, recovery: Recovery) -> Self {
        self.recovery = recovery;
        self
    }

    pub fn with_all_jumps(mut self, all_jumps: bool) -> Self {
        self.all_jumps = all_jumps;
        self
    }
}

/// Why the flow could not be followed. Every variant names the byte offset of the
/// message being applied.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    #[error(transparent)]
    Message(#[from] MessageError),
    #[error("at byte offset {offset:#x}: no code at address {address:#x} (outside every ELF)")]
    Unmapped { offset: u64, address: u64 },
    #[error("at byte offset {offset:#x}: cannot decode the instruction at {address:#x}")]
    Undecodable { offset: u64, address: u64 },
    #[error("at byte offset {offset:#x}: odd instruction address {address:#x}")]
    Misaligned { offset: u64, address: u64 },
    #[error("at byte offset {offset:#x}: I-CNT ends inside an instruction of the block at {block_start:#x}")]
    IcntInsideInstruction { offset: u64, block_start: u64 },
    #[error(
        "at byte offset {offset:#x}: the I-CNT runs past the indirect jump at {address:#x}, whose target neither the return stack nor the code gives"
    )]
    UnknownTarget { offset: u64, address: u64 },
    #[error("at byte offset {offset:#x}: a branch message's I-CNT ends at {address:#x}, which is not a taken conditional branch")]
    NotABranch { offset: u64, address: u64 },
    /// A branch message ends at a direct jump or call: the encoder reports them as taken
    /// branches (trTeInstEnAllJumps), which the decoder was not told
    /// ([`DecoderOptions::all_jumps`]).
    #[error("at byte offset {offset:#x}: a branch message's I-CNT ends at the direct jump at {address:#x}: the encoder reports direct jumps as taken branches (trTeInstEnAllJumps), decode with all-jumps")]
    JumpReported { offset: u64, address: u64 },
    /// With [`DecoderOptions::all_jumps`]: the trace does not report a direct jump or call
    /// as a taken branch (no DirectBranch message ends at it, or its HIST bit is 0).
    #[error("at byte offset {offset:#x}: the direct jump at {address:#x} is not reported as a taken branch, as trTeInstEnAllJumps reports every one (was the trace encoded without it?)")]
    JumpNotReported { offset: u64, address: u64 },
    #[error("at byte offset {offset:#x}: the trace continues from an unknown address")]
    UnknownAddress { offset: u64 },
    #[error("at byte offset {offset:#x}: computed address {computed:#x} disagrees with reported F-ADDR {reported:#x}")]
    AddressMismatch {
        offset: u64,
        computed: u64,
        reported: u64,
    },
    #[error("at byte offset {offset:#x}: {bits} HIST bits left over after the I-CNT was used up")]
    HistoryLeft { offset: u64, bits: u64 },
    #[error("at byte offset {offset:#x}: HIST field without its stop bit (zero)")]
    MissingStopBit { offset: u64 },
    #[error("at byte offset {offset:#x}: accumulated I-CNT overflows 64 bits")]
    IcntOverflow { offset: u64 },
    #[error("at byte offset {offset:#x}: RepeatBranch without a preceding branch message")]
    RepeatWithoutBranch { offset: u64 },
    #[error("at byte offset {offset:#x}: the relative timestamp takes the time past 64 bits")]
    TimestampOverflow { offset: u64 },
}

impl FlowError {
    /// Byte offset in the trace of the message the error is about.
    pub fn offset(&self) -> u64 {
        match *self {
            FlowError::Message(ref error) => error.offset(),
            FlowError::Unmapped { offset, .. }
            | FlowError::Undecodable { offset, .. }
            | FlowError::Misaligned { offset, .. }
            | FlowError::IcntInsideInstruction { offset, .. }
            | FlowError::UnknownTarget { offset, .. }
            | FlowError::NotABranch { offset, .. }
            | FlowError::JumpReported { offset, .. }
            | FlowError::JumpNotReported { offset, .. }
            | FlowError::UnknownAddress { offset }
            | FlowError::AddressMismatch { offset, .. }
            | FlowError::HistoryLeft { offset, .. }
            | FlowError::MissingStopBit { offset }
            | FlowError::IcntOverflow { offset }
            | FlowError::RepeatWithoutBranch { offset }
            | FlowError::TimestampOverflow { offset } => offset,
        }
    }

    /// The protocol-free reason reported in a gap element.
    pub fn failure(&self) -> DecodeFailure {
        match *self {
            // A HIST field without its stop bit is a malformed field, not a disagreement.
            FlowError::Message(_) | FlowError::MissingStopBit { .. } => DecodeFailure::CorruptData,
            FlowError::Unmapped { address, .. }
            | FlowError::Undecodable { address, .. }
            | FlowError::Misaligned { address, .. } => DecodeFailure::NoCode { address },
            FlowError::IcntInsideInstruction { .. }
            | FlowError::UnknownTarget { .. }
            | FlowError::NotABranch { .. }
            | FlowError::JumpReported { .. }
            | FlowError::JumpNotReported { .. }
            | FlowError::UnknownAddress { .. }
            | FlowError::AddressMismatch { .. }
            | FlowError::HistoryLeft { .. }
            | FlowError::IcntOverflow { .. }
            | FlowError::RepeatWithoutBranch { .. }
            | FlowError::TimestampOverflow { .. } => DecodeFailure::Inconsistent,
        }
    }
}

impl trace_elements::ElementSource for FlowDecoder<'_> {
    type Error = FlowError;

    #[inline]
    fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        FlowDecoder::next_element(self)
    }

    fn gap_cause(&self) -> Option<&FlowError> {
        self.last_recovered_error()
    }

    fn for_each_element<F>(&mut self, visit: F) -> Result<(), FlowError>
    where
        F: FnMut(&TraceElement, Option<&FlowError>),
    {
        FlowDecoder::for_each_element(self, visit)
    }
}
