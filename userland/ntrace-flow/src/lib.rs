//! RISC-V N-Trace flow reconstruction.
//!
//! [`FlowDecoder`] turns an N-Trace byte stream plus the code that ran into
//! protocol-free [`trace_elements::TraceElement`]s; [`TraceEncoder`] is the opposite: a
//! model of a trace encoder that turns a retired-instruction stream into N-Trace bytes,
//! used by tests and for emulating hardware.
//!
//! Where the specification is ambiguous, both follow the choices recorded in
//! `docs/ntrace-errata.md`.

#![forbid(unsafe_code)]

mod block;
mod decoder;
mod encoder;
mod history;
mod return_stack;

pub use block::FileDecodeInfo;
pub use decoder::{FlowDecoder, FlowStatistics};
pub use encoder::{BranchMode, EncodeError, EncoderOptions, EncoderStatistics, TraceEncoder};

use ntrace_message::{MessageError, MessageOptions};

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
    /// Produce an element per instruction range. Without them the decoder still follows
    /// the flow, counts instructions (`FlowStatistics::instructions`) and keeps the block
    /// profile, and still reports every other element: the fast path for summaries.
    pub instruction_ranges: bool,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        Self {
            message: MessageOptions::default(),
            return_stack_depth: DEFAULT_RETURN_STACK_DEPTH,
            instruction_ranges: true,
        }
    }
}

impl DecoderOptions {
    pub fn with_message(mut self, message: MessageOptions) -> Self {
        self.message = message;
        self
    }

    pub fn with_return_stack_depth(mut self, depth: usize) -> Self {
        self.return_stack_depth = depth;
        self
    }

    pub fn with_instruction_ranges(mut self, ranges: bool) -> Self {
        self.instruction_ranges = ranges;
        self
    }
}

/// Why the flow could not be followed. Every variant names the byte offset of the
/// message being applied.
#[derive(Debug, thiserror::Error)]
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
            | FlowError::UnknownAddress { offset }
            | FlowError::AddressMismatch { offset, .. }
            | FlowError::HistoryLeft { offset, .. }
            | FlowError::MissingStopBit { offset }
            | FlowError::IcntOverflow { offset }
            | FlowError::RepeatWithoutBranch { offset } => offset,
        }
    }
}
