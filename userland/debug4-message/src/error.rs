use crate::types::{Half, Header};

/// Why bytes could not be decoded as sequences. Every variant says where: the byte
/// `offset` of the offending header and which `half` of the byte holds it. After an error
/// the decoder resumes at the next synchronisation point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Debug4Error {
    /// Header 13, reserved for future standards: the data is not ours or is corrupt.
    #[error("at byte offset {offset:#x} ({half:?} half): reserved header 13")]
    ReservedHeader { offset: u64, half: Half },
    /// The buffer (or the part of a wrapped buffer being read) ends inside the sequence.
    #[error("at byte offset {offset:#x} ({half:?} half): {header} sequence cut short by the end of the data")]
    Truncated {
        offset: u64,
        half: Half,
        header: Header,
    },
    /// Trace Enabled announces a data version other than 0, the only one defined.
    #[error(
        "at byte offset {offset:#x} ({half:?} half): Trace Enabled with unknown version {version}"
    )]
    BadVersion {
        offset: u64,
        half: Half,
        version: u8,
    },
    /// A PC value has bits beyond bit 63 of the address.
    #[error("at byte offset {offset:#x} ({half:?} half): {header} value {value:#x} is wider than the address space")]
    ValueTooWide {
        offset: u64,
        half: Half,
        header: Header,
        value: u64,
    },
}

impl Debug4Error {
    /// Byte offset of the offending sequence's header.
    #[must_use]
    pub fn offset(&self) -> u64 {
        match *self {
            Debug4Error::ReservedHeader { offset, .. }
            | Debug4Error::Truncated { offset, .. }
            | Debug4Error::BadVersion { offset, .. }
            | Debug4Error::ValueTooWide { offset, .. } => offset,
        }
    }

    /// Which half of the byte at [`Self::offset`] holds the header.
    #[must_use]
    pub fn half(&self) -> Half {
        match *self {
            Debug4Error::ReservedHeader { half, .. }
            | Debug4Error::Truncated { half, .. }
            | Debug4Error::BadVersion { half, .. }
            | Debug4Error::ValueTooWide { half, .. } => half,
        }
    }
}

/// Why the encoder refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A ring buffer must hold eight synchronisation points a whole number of words
    /// apart (a multiple of 32 bytes), each interval long enough for the longest unit.
    #[error("ring buffer of {bytes} bytes: must be a multiple of 32 bytes and at least {minimum}")]
    BadRingSize { bytes: u64, minimum: u64 },
    /// The ring buffer could not be allocated.
    #[error("cannot allocate a ring buffer of {bytes} bytes")]
    RingTooLarge { bytes: u64 },
    /// A PC with bits the granularity drops (odd, or not word-aligned without C).
    #[error("PC {address:#x} is not aligned to the PC granularity")]
    MisalignedPc { address: u64 },
    /// A privilege level beyond PRV\[1:0\].
    #[error("privilege level {level} does not fit 2 bits")]
    BadPrivilege { level: u8 },
    /// The sequences of one unit do not fit between two synchronisation points.
    #[error("a unit of {packets} packets does not fit between synchronisation points {spacing} packets apart")]
    UnitTooLong { packets: u64, spacing: u64 },
}
