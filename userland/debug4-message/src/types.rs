//! What the wire carries: headers, value sequences as the decoder fills them in, and the
//! sequences an encoder is asked to send.

use core::fmt;

/// The 16 header packets of the trace module's Table "Trace Sequence Header Packets".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Header {
    Nop,
    Pc,
    BranchTaken,
    BranchNotTaken,
    TraceEnabled,
    TraceDisabled,
    PrivilegeLevel,
    ChangeHart,
    LoadAddress,
    StoreAddress,
    LoadData,
    StoreData,
    Timestamp,
    Reserved,
    Custom14,
    Custom15,
}

impl Header {
    /// The header a 4-bit packet names (only the low four bits of `packet` are looked at).
    #[must_use]
    pub const fn from_packet(packet: u8) -> Header {
        match packet & 0xf {
            0 => Header::Nop,
            1 => Header::Pc,
            2 => Header::BranchTaken,
            3 => Header::BranchNotTaken,
            4 => Header::TraceEnabled,
            5 => Header::TraceDisabled,
            6 => Header::PrivilegeLevel,
            7 => Header::ChangeHart,
            8 => Header::LoadAddress,
            9 => Header::StoreAddress,
            10 => Header::LoadData,
            11 => Header::StoreData,
            12 => Header::Timestamp,
            13 => Header::Reserved,
            14 => Header::Custom14,
            _ => Header::Custom15,
        }
    }

    /// The 4-bit packet value of the header.
    #[must_use]
    pub const fn packet(self) -> u8 {
        self as u8
    }

    /// The specification's name of the header.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Header::Nop => "Nop",
            Header::Pc => "PC",
            Header::BranchTaken => "Branch Taken",
            Header::BranchNotTaken => "Branch Not Taken",
            Header::TraceEnabled => "Trace Enabled",
            Header::TraceDisabled => "Trace Disabled",
            Header::PrivilegeLevel => "Privilege Level",
            Header::ChangeHart => "Change Hart",
            Header::LoadAddress => "Load Address",
            Header::StoreAddress => "Store Address",
            Header::LoadData => "Load Data",
            Header::StoreData => "Store Data",
            Header::Timestamp => "Timestamp",
            Header::Reserved => "Reserved",
            Header::Custom14 => "Custom 14",
            Header::Custom15 => "Custom 15",
        }
    }
}

impl fmt::Display for Header {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// Which of the two custom headers a custom sequence used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CustomHeader {
    Custom14,
    Custom15,
}

impl CustomHeader {
    /// The header's packet value (14 or 15), the code a flow decoder reports it with.
    #[must_use]
    pub const fn packet(self) -> u8 {
        match self {
            CustomHeader::Custom14 => 14,
            CustomHeader::Custom15 => 15,
        }
    }
}

/// Which bits of the PC a PC sequence carries: bits XLEN-1:1 when the hart implements the
/// compressed ISA, XLEN-1:2 when it does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PcGranularity {
    /// Bits XLEN-1:1 (C extension present): what every rvperf target has.
    #[default]
    Halfword,
    /// Bits XLEN-1:2 (no C extension).
    Word,
}

impl PcGranularity {
    /// How far the sequence's value is shifted right of the address.
    #[must_use]
    pub const fn shift(self) -> u32 {
        match self {
            PcGranularity::Halfword => 1,
            PcGranularity::Word => 2,
        }
    }
}

/// Which half of a byte a packet sits in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Half {
    /// Bits 3:0: the earlier packet of the byte.
    Low,
    /// Bits 7:4.
    High,
}

impl Half {
    pub(crate) const fn of_nibble(nibble: u64) -> Half {
        if nibble % 2 == 0 {
            Half::Low
        } else {
            Half::High
        }
    }
}

/// A value whose missing high bits are filled from the last value of its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// The whole value: sent in full, or filled from a last value the decoder knew.
    Known(u64),
    /// Only the low `known_bits` bits are known: the sequence was compressed and the
    /// decoder has seen no value of the kind since it (re)synchronised.
    Partial { low_bits: u64, known_bits: u8 },
}

impl Value {
    /// The value, when known whole.
    #[must_use]
    pub const fn known(self) -> Option<u64> {
        match self {
            Value::Known(value) => Some(value),
            Value::Partial { .. } => None,
        }
    }
}

/// What caused a privilege change (bit 3 of the Privilege Level packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrivilegeCause {
    Interrupt,
    /// A trap, a trap return or anything else that is not an interrupt.
    Other,
}

/// The IE bit of the Privilege Level packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InterruptEnable {
    Disabled,
    Enabled,
}

/// The packet after a Privilege Level header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Privilege {
    pub cause: PrivilegeCause,
    /// PRV\[1:0\]: 0 U, 1 S, 3 M.
    pub level: u8,
    pub interrupts: InterruptEnable,
}

impl Privilege {
    /// The privilege the 4-bit `packet` describes.
    #[must_use]
    pub const fn from_packet(packet: u8) -> Privilege {
        Privilege {
            cause: if packet & 0b1000 != 0 {
                PrivilegeCause::Interrupt
            } else {
                PrivilegeCause::Other
            },
            level: (packet >> 1) & 0b11,
            interrupts: if packet & 1 != 0 {
                InterruptEnable::Enabled
            } else {
                InterruptEnable::Disabled
            },
        }
    }

    /// The 4-bit packet, `None` when `level` does not fit PRV\[1:0\].
    #[must_use]
    pub const fn packet(self) -> Option<u8> {
        if self.level > 3 {
            return None;
        }
        let cause = match self.cause {
            PrivilegeCause::Interrupt => 0b1000,
            PrivilegeCause::Other => 0,
        };
        let enable = match self.interrupts {
            InterruptEnable::Enabled => 1,
            InterruptEnable::Disabled => 0,
        };
        Some(cause | (self.level << 1) | enable)
    }
}

/// One decoded sequence, values filled in as the fill rules say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Sequence {
    /// A run of Nop packets (padding before a synchronisation point, or the zeros of a
    /// RAM buffer not yet written), collapsed into one item.
    Nops {
        count: u64,
    },
    /// Bytes of a wrapped buffer before its first synchronisation point at or after the
    /// oldest data, which cannot be parsed: the write pointer cut a sequence there.
    Skipped {
        bytes: u64,
    },
    /// A PC, as an address (the sequence's value shifted left by the PC granularity).
    Pc(Value),
    BranchTaken,
    BranchNotTaken,
    /// Trace Enabled with its version packet (only version 0 is decoded; others are
    /// errors).
    TraceEnabled {
        version: u8,
    },
    TraceDisabled,
    Privilege(Privilege),
    /// The hart the following sequences belong to.
    ChangeHart {
        hart: u64,
    },
    LoadAddress(Value),
    StoreAddress(Value),
    /// Load data, sign-extended to 64 bits.
    LoadData {
        value: u64,
    },
    /// Store data, sign-extended to 64 bits.
    StoreData {
        value: u64,
    },
    Timestamp(Value),
    /// A custom header with its value sequence (rvperf's reading: the specification does
    /// not say what follows a custom header).
    Custom {
        header: CustomHeader,
        value: u64,
    },
}

impl Sequence {
    /// What to hand the encoder to send this sequence again, for sequences an encoder
    /// sends on request (not Nops, skips or Change Hart, which it inserts itself) whose
    /// value is known.
    #[must_use]
    pub fn to_outgoing(&self) -> Option<OutgoingSequence> {
        Some(match *self {
            Sequence::Nops { .. } | Sequence::Skipped { .. } | Sequence::ChangeHart { .. } => {
                return None
            }
            Sequence::Pc(value) => OutgoingSequence::Pc {
                address: value.known()?,
            },
            Sequence::BranchTaken => OutgoingSequence::BranchTaken,
            Sequence::BranchNotTaken => OutgoingSequence::BranchNotTaken,
            Sequence::TraceEnabled { .. } => OutgoingSequence::TraceEnabled,
            Sequence::TraceDisabled => OutgoingSequence::TraceDisabled,
            Sequence::Privilege(privilege) => OutgoingSequence::Privilege(privilege),
            Sequence::LoadAddress(value) => OutgoingSequence::LoadAddress {
                address: value.known()?,
            },
            Sequence::StoreAddress(value) => OutgoingSequence::StoreAddress {
                address: value.known()?,
            },
            Sequence::LoadData { value } => OutgoingSequence::LoadData { value },
            Sequence::StoreData { value } => OutgoingSequence::StoreData { value },
            Sequence::Timestamp(value) => OutgoingSequence::Timestamp {
                time: value.known()?,
            },
            Sequence::Custom { header, value } => OutgoingSequence::Custom { header, value },
        })
    }
}

/// A decoded sequence with where it was and which hart it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocatedSequence {
    /// Byte offset in the buffer of the header packet.
    pub offset: u64,
    /// Which half of that byte holds the header.
    pub half: Half,
    /// Packets the sequence takes, header included.
    pub packets: u64,
    /// The hart the sequence belongs to (for Change Hart, the hart it selects).
    pub hart: u64,
    pub sequence: Sequence,
}

/// A sequence the encoder is asked to send; it inserts Nops and Change Hart itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutgoingSequence {
    Pc {
        address: u64,
    },
    BranchTaken,
    BranchNotTaken,
    /// Trace Enabled with version 0.
    TraceEnabled,
    TraceDisabled,
    Privilege(Privilege),
    LoadAddress {
        address: u64,
    },
    StoreAddress {
        address: u64,
    },
    LoadData {
        value: u64,
    },
    StoreData {
        value: u64,
    },
    Timestamp {
        time: u64,
    },
    Custom {
        header: CustomHeader,
        value: u64,
    },
}

/// How the decoder finds synchronisation points and where the oldest data is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StreamOptions {
    /// Size of the trace buffer the data was written to. Its eight synchronisation points
    /// are `buffer_bytes / 8` bytes apart (the size should be a multiple of 32 bytes).
    /// `None`: the whole input is one buffer and only its start is known to be a
    /// synchronisation point.
    pub buffer_bytes: Option<u64>,
    pub pc_granularity: PcGranularity,
    /// The buffer wrapped: the byte offset of its oldest data (the write pointer).
    /// Decoding starts at the first synchronisation point at or after it, runs to the
    /// end and continues from the start up to this offset.
    pub wrap_offset: Option<u64>,
}

impl StreamOptions {
    #[must_use]
    pub fn with_buffer_bytes(mut self, buffer_bytes: Option<u64>) -> Self {
        self.buffer_bytes = buffer_bytes;
        self
    }

    #[must_use]
    pub fn with_pc_granularity(mut self, pc_granularity: PcGranularity) -> Self {
        self.pc_granularity = pc_granularity;
        self
    }

    #[must_use]
    pub fn with_wrap_offset(mut self, wrap_offset: Option<u64>) -> Self {
        self.wrap_offset = wrap_offset;
        self
    }

    /// Packets between synchronisation points, `None` when only the start is one.
    pub(crate) fn sync_spacing_packets(&self) -> Option<u64> {
        // A buffer smaller than 8 bytes has no room for eight points: only its start.
        let spacing = self.buffer_bytes? / 8;
        (spacing != 0).then(|| spacing.saturating_mul(2))
    }
}
