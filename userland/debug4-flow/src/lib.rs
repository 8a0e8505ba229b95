//! Program flow from the RISC-V debug specification's trace module over a code image.
//!
//! [`Debug4Decoder`] turns the sequences of `debug4-message` into protocol-free
//! [`trace_elements`]: instruction ranges walked through the code, traps, privilege
//! changes, timestamps, memory accesses. [`Debug4Encoder`] is the trace source model: it
//! takes retired instructions (the instruction at each PC is read from the same image to
//! classify it) and writes the packets a trace module would.
//!
//! Two reporting modes ([`BranchReporting`], the specification's `emitbranch` and
//! `emitpc`): branch outcomes with the destinations of uninferable transfers, or a pair of
//! PCs (from, to) for every taken transfer. What rvperf chose where the draft is silent is
//! in `docs/debug-trace-module-choices.md`.

#![forbid(unsafe_code)]

mod code;
mod decoder;
mod encoder;

pub use debug4_message::{BufferMode, EncodedTrace, StreamOptions};
pub use decoder::{Debug4Decoder, DecoderOptions, FlowError};
pub use encoder::{
    AccessKind, DataAccess, DataEmission, Debug4Encoder, Emission, EncodeError, EncoderOptions,
    Retirement,
};

/// How control transfers are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BranchReporting {
    /// `emitbranch`: Branch Taken / Branch Not Taken for conditional branches, nothing for
    /// direct jumps, the destination PC of every uninferable transfer (indirect jumps,
    /// traps, trap returns).
    #[default]
    TakenNotTaken,
    /// `emitpc` alone: two PCs, the transferring instruction's address and the
    /// destination, for every taken transfer; nothing for branches not taken.
    PcPairs,
}
