/// A message that could not be decoded. `offset` is always the offset of the first byte of
/// the offending message (base offset included); `byte_offset`, where present, is the
/// offending byte itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The stream ended before the byte with MSEO=11 that ends the message.
    #[error("at byte offset {offset:#x}: stream ended inside a message")]
    Truncated {
        /// Message start.
        offset: u64,
    },
    /// A byte has the reserved MSEO value 0b10.
    #[error(
        "at byte offset {offset:#x}: reserved MSEO value 0b10 in byte at offset {byte_offset:#x}"
    )]
    ReservedMseo {
        /// Message start.
        offset: u64,
        /// The byte with MSEO=0b10.
        byte_offset: u64,
    },
    /// The message ended (MSEO=11) before one of its mandatory fields.
    #[error("at byte offset {offset:#x}: {} message (TCODE {tcode}) ended before its {field} field", crate::tcode::name(*tcode))]
    MissingField {
        /// Message start.
        offset: u64,
        /// TCODE of the message.
        tcode: u8,
        /// Spec name of the first missing field.
        field: &'static str,
    },
    /// A variable-length field has a set bit beyond bit 63, or an address field has bit 63
    /// set (which would be address bit 64). Zero bits beyond are fine.
    #[error("at byte offset {offset:#x}: {field} field value does not fit in 64 bits")]
    FieldTooWide {
        /// Message start.
        offset: u64,
        /// Spec name of the field.
        field: &'static str,
    },
    /// More than one variable-length field follows the fields the message defines (only one
    /// trailing TSTAMP is allowed).
    #[error("at byte offset {offset:#x}: {} message (TCODE {tcode}) has more fields than its layout plus TSTAMP", crate::tcode::name(*tcode))]
    ExtraFields {
        /// Message start.
        offset: u64,
        /// TCODE of the message.
        tcode: u8,
    },
    /// The first byte of a message has MSEO=01 (end of a variable-length field), which
    /// cannot happen because TCODE fills the whole first byte.
    #[error("at byte offset {offset:#x}: message starts with an end-of-field byte (MSEO=01)")]
    InvalidMessageStart {
        /// Message start.
        offset: u64,
    },
    /// A byte holding only fixed-length fields (TCODE, SRC, SYNC, B-TYPE, ...) has MSEO=01,
    /// which would end a variable-length field that has not started.
    #[error("at byte offset {offset:#x}: end-of-field byte (MSEO=01) at offset {byte_offset:#x} inside the fixed-length fields")]
    UnexpectedFieldEnd {
        /// Message start.
        offset: u64,
        /// The byte with MSEO=01.
        byte_offset: u64,
    },
}

impl MessageError {
    /// Offset of the first byte of the offending message.
    pub fn offset(&self) -> u64 {
        match *self {
            MessageError::Truncated { offset }
            | MessageError::ReservedMseo { offset, .. }
            | MessageError::MissingField { offset, .. }
            | MessageError::FieldTooWide { offset, .. }
            | MessageError::ExtraFields { offset, .. }
            | MessageError::InvalidMessageStart { offset }
            | MessageError::UnexpectedFieldEnd { offset, .. } => offset,
        }
    }
}

/// A message that cannot be represented on the wire with the encoder's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// `src_bits` in the options exceeds the spec maximum of 12 (Table 10).
    #[error("SRC width of {src_bits} bits exceeds the maximum of 12")]
    InvalidSrcBits {
        /// Configured width.
        src_bits: u8,
    },
    /// The SRC value does not fit `src_bits`.
    #[error("SRC value {src} does not fit in {src_bits} bits")]
    SrcOutOfRange {
        /// SRC value.
        src: u16,
        /// Configured width.
        src_bits: u8,
    },
    /// A field value does not fit its field.
    #[error("value {value:#x} does not fit the {field} field")]
    FieldOutOfRange {
        /// Spec name of the field.
        field: &'static str,
        /// Rejected value.
        value: u64,
    },
    /// An address has bit 0 set, which F-ADDR/U-ADDR cannot carry.
    #[error("{field} address {address:#x} is odd; address fields carry bits [63:1] only")]
    OddAddress {
        /// Spec name of the field.
        field: &'static str,
        /// Rejected address.
        address: u64,
    },
    /// `Body::Other` has no known layout.
    #[error("cannot encode {} TCODE {tcode}: layout unknown", crate::tcode::name(*tcode))]
    UnknownLayout {
        /// TCODE of the message.
        tcode: u8,
    },
    /// The combination of fields would decode differently (for example an optional field
    /// followed by a TSTAMP that the decoder would take for that field).
    #[error("{} message (TCODE {tcode}) would not decode back: {reason}", crate::tcode::name(*tcode))]
    Ambiguous {
        /// TCODE of the message.
        tcode: u8,
        /// What is ambiguous.
        reason: &'static str,
    },
}
