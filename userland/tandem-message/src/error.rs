//! Decoding and encoding errors.

use trace_elements::Register;

/// Why a record could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TandemErrorKind {
    /// An opcode byte the protocol does not define (0, 12-15, 18-255).
    UnknownOpcode { opcode: u8 },
    /// The stream ended inside the record's payload.
    Truncated {
        opcode: u8,
        /// Payload bytes the record needs (opcode excluded), as far as known.
        needed: u8,
        /// Payload bytes left in the stream.
        available: u8,
    },
    /// An additional-state identifier the protocol does not define.
    UnknownAdditionalState { identifier: u8 },
    /// A memory request operation field of 14 or 15.
    UnknownMemoryOperation { operation: u8 },
    /// A memory size field of 4 or more.
    UnknownAccessSize { size: u8 },
    /// A memory response result field of 2 or more.
    UnknownMemoryResult { result: u8 },
    /// A memory response that does not immediately follow a memory request.
    ResponseWithoutRequest,
    /// A full floating-point register record while the parameters have no FLEN.
    FloatRegisterWithoutFlen { register: Register },
}

/// A record that could not be decoded, at the byte offset of its opcode. The protocol has
/// no synchronisation point to resume from, so the decoder stops after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("at byte offset {offset:#x}: {}", describe(.kind))]
pub struct TandemError {
    /// Offset of the offending record's opcode byte.
    pub offset: u64,
    pub kind: TandemErrorKind,
}

fn describe(kind: &TandemErrorKind) -> String {
    match *kind {
        TandemErrorKind::UnknownOpcode { opcode } => format!("unknown opcode {opcode}"),
        TandemErrorKind::Truncated {
            opcode,
            needed,
            available,
        } => format!(
            "stream ends inside the payload of opcode {opcode}: {needed} bytes needed, {available} left"
        ),
        TandemErrorKind::UnknownAdditionalState { identifier } => {
            format!("unknown additional-state identifier {identifier:#04x}")
        }
        TandemErrorKind::UnknownMemoryOperation { operation } => {
            format!("unknown memory operation {operation}")
        }
        TandemErrorKind::UnknownAccessSize { size } => format!("unknown memory size field {size}"),
        TandemErrorKind::UnknownMemoryResult { result } => {
            format!("unknown memory result {result}")
        }
        TandemErrorKind::ResponseWithoutRequest => {
            "memory response not immediately after a memory request".to_owned()
        }
        TandemErrorKind::FloatRegisterWithoutFlen { register } => format!(
            "full register record for {register:?}, but the parameters have no floating point"
        ),
    }
}

/// A record that cannot be written with the encoder's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A value does not fit its field (XLEN, FLEN, MLEN or the access size).
    #[error("value {value:#x} does not fit the {bytes}-byte {field} field")]
    ValueTooWide {
        field: &'static str,
        value: u64,
        bytes: u8,
    },
    /// A floating-point register while the parameters have no FLEN.
    #[error("{register:?} cannot be written: the parameters have no floating point")]
    FloatRegisterWithoutFlen { register: Register },
    /// A 16-bit instruction whose raw value is wider than 16 bits or whose low two bits
    /// announce a longer encoding (the decoder would read it as 32 bits).
    #[error("{raw:#x} is not a 16-bit instruction encoding")]
    NotSixteenBitEncoding { raw: u32 },
    /// A memory request or response whose data presence does not match its operation.
    #[error("memory {record} data must be {}", if *expected_present { "present" } else { "absent" })]
    DataPresence {
        record: &'static str,
        expected_present: bool,
    },
    /// A memory response not immediately after a memory request.
    #[error("memory response not immediately after a memory request")]
    ResponseWithoutRequest,
}
