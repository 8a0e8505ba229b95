//! The RISC-V tandem-verification trace protocol (Bluespec, 2018-11-20 draft): opcode and
//! payload records; decode, encode and a one-line text dump.
//!
//! Every record is an opcode byte and a payload whose length the opcode (and the
//! additional-state identifier, the memory operation and size, the register class)
//! determines with the out-of-band [`Parameters`] (XLEN, FLEN, MLEN). Multi-byte fields
//! are little-endian, sub-byte fields packed from the least significant bit. Where the
//! draft contradicts itself, docs/tandem-protocol-choices.md says what this crate does.
//!
//! ```
//! use tandem_message::{Parameters, Record, RecordDecoder, Register};
//!
//! // Appendix C.1: add gp, t0, t1.
//! let bytes = [
//!     0x01, 0x03, 0x11, 0xb3, 0x81, 0x62, 0x00, 0x04, 0x03, 0x10, 0x34, 0x12, 0, 0, 0, 0,
//!     0, 0, 0x02,
//! ];
//! let mut decoder = RecordDecoder::new(&bytes, Parameters::default());
//! let mut records = Vec::new();
//! while let Some(located) = decoder.next_record().unwrap() {
//!     records.push(located.record);
//! }
//! assert_eq!(
//!     records[3],
//!     Record::FullRegister { register: Register::Integer(3), value: 0x1234 }
//! );
//! assert_eq!(records.len(), 5);
//! ```
//!
//! The decoder does no I/O, never panics and never allocates. After an error it returns
//! `Ok(None)`: the protocol has no synchronisation point to resume at.

#![forbid(unsafe_code)]

mod decode;
mod dump;
mod encode;
mod error;
mod types;

pub use decode::{detect, DecoderStatistics, RecordDecoder};
pub use dump::{csr_name, dump_record, RegisterName};
pub use encode::RecordEncoder;
pub use error::{EncodeError, TandemError, TandemErrorKind};
pub use types::{
    identifier, opcode, operation_code, operation_from_code, request_carries_data,
    response_carries_data, AccessSize, AdditionalState, AddressWidth, Flen, InstructionBits,
    InstructionLength, LocatedRecord, MemoryOperation, MemoryResult, Note, Parameters, Record,
    Register, Xlen,
};
