//! RISC-V N-Trace 1.0 message layer: MSEO/MDO framing, decoding and encoding of every
//! message of the spec's Table 8, and a one-line-per-message text dump.
//!
//! Each byte carries MDO\[5:0\] in bits 7..2 and MSEO\[1:0\] in bits 1..0. MSEO 00 is message
//! data, 01 ends a variable-length field, 11 ends the message (and its last field), 10 is
//! reserved. Fields are packed LSB-first into the MDO bit stream: TCODE (6 bits), SRC
//! (`src_bits`), the fixed-length fields, then the variable-length fields, each running to
//! the end of the byte whose MSEO is 01 or 11, and finally an optional TSTAMP.
//!
//! ```
//! use ntrace_message::{Body, BranchType, MessageDecoder, MessageOptions};
//!
//! // Spec Table 6: idle, IndirectBranchHist, idle.
//! let bytes = [0xFF, 0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFF, 0xFF];
//! let mut decoder = MessageDecoder::new(&bytes, MessageOptions::default());
//! let message = decoder.next_message().unwrap().unwrap();
//! assert_eq!(message.offset, 1);
//! assert_eq!(
//!     message.body,
//!     Body::IndirectBranchHist { btype: BranchType::Indirect, icnt: 0x7D, uaddr: 0x7 << 1, hist: 0xFFE }
//! );
//! assert_eq!(decoder.next_message(), Ok(None));
//! assert_eq!(decoder.idle_bytes(), 2);
//! ```
//!
//! The library does no I/O, never panics on any input and never allocates while decoding.

mod decode;
mod dump;
mod encode;
mod error;
mod layout;
pub mod tcode;
mod types;

pub use decode::{MessageDecoder, ShortMessage};
pub use dump::{dump_message, dump_stream};
pub use encode::MessageEncoder;
pub use error::{EncodeError, MessageError};
pub use types::{
    AddressWidth, Body, BranchType, CorrelationEvent, Message, MessageOptions, Process,
    ProcessFormat, ResourceFull, SyncReason,
};
