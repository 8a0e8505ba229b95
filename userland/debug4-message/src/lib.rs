//! The RISC-V debug specification's trace module (its appendix draft): a stream of 4-bit
//! packets stored in 32-bit little-endian words, the first packet in bits 3:0. Each
//! sequence starts with a header packet; PC, Change Hart, load/store address and data,
//! Timestamp and (rvperf's reading) the custom headers are followed by a value sequence:
//! a size packet N, then N+1 packets, low bits first. Missing high bits are filled from
//! the last value of the kind (PC, addresses, timestamps: per hart), by sign extension
//! (data) or with zeros (hart). Eight synchronisation points per buffer, evenly spaced,
//! are packet positions where a sequence header is guaranteed.
//!
//! ```
//! use debug4_message::{
//!     OutgoingSequence, Sequence, SequenceDecoder, SequenceEncoder, SequenceEncoderOptions,
//!     StreamOptions, Value,
//! };
//!
//! let mut encoder = SequenceEncoder::new(SequenceEncoderOptions::default()).unwrap();
//! encoder
//!     .write_unit(0, &[OutgoingSequence::TraceEnabled, OutgoingSequence::Pc { address: 0x8000_0000 }])
//!     .unwrap();
//! encoder.write_unit(0, &[OutgoingSequence::Pc { address: 0x8000_0010 }]).unwrap();
//! let trace = encoder.finish();
//! let mut decoder = SequenceDecoder::new(&trace.bytes, StreamOptions::default());
//! let mut sequences = Vec::new();
//! while let Some(located) = decoder.next_sequence().unwrap() {
//!     sequences.push(located.sequence);
//! }
//! assert_eq!(sequences[0], Sequence::TraceEnabled { version: 0 });
//! assert_eq!(sequences[1], Sequence::Pc(Value::Known(0x8000_0000)));
//! // The second PC only sends the packets that differ from the first.
//! assert_eq!(sequences[2], Sequence::Pc(Value::Known(0x8000_0010)));
//! assert_eq!(sequences[3], Sequence::Nops { count: 1 });
//! ```
//!
//! The library does no I/O and never panics on any input. `docs/debug-trace-module-choices.md`
//! says what rvperf chose where the draft is silent.

#![forbid(unsafe_code)]

mod decode;
mod dump;
mod encode;
mod error;
mod fill;
mod types;

pub use decode::{detect, SequenceDecoder};
pub use dump::dump_sequence;
pub use encode::{
    BufferMode, EncodedTrace, SequenceEncoder, SequenceEncoderOptions, MINIMUM_RING_BYTES,
};
pub use error::{Debug4Error, EncodeError};
pub use types::{
    CustomHeader, Half, Header, InterruptEnable, LocatedSequence, OutgoingSequence, PcGranularity,
    Privilege, PrivilegeCause, Sequence, StreamOptions, Value,
};
