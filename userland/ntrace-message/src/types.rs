use crate::tcode;

/// Width of the hart's addresses (XLEN), which decides how far the address MSB extension
/// of spec 8.2 replicates the top bit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressWidth {
    /// RV32: extension replicates up to address bit 31.
    Bits32,
    /// RV64: extension replicates up to address bit 63.
    Bits64,
}

impl AddressWidth {
    /// Highest bit of an F-ADDR/U-ADDR field (the field carries address bits [XLEN-1:1]).
    #[inline]
    pub(crate) fn top_field_bit(self) -> u32 {
        match self {
            AddressWidth::Bits32 => 30,
            AddressWidth::Bits64 => 62,
        }
    }
}

/// Trace encoder configuration that changes the message layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageOptions {
    /// Width of the SRC field (trTeSrcBits); 0 means no SRC field. The spec allows 0..=12;
    /// the decoder accepts up to 16 (wider values are treated as 16), the encoder refuses
    /// more than 12.
    pub src_bits: u8,
    /// Whether the encoder was configured to emit TSTAMP (trTsEnable). Informational: the
    /// decoder accepts an optional trailing TSTAMP on every message regardless, because
    /// encoders may omit it on non-synchronisation messages (spec 8.7).
    pub timestamps: bool,
    /// Address MSB extension (trTeInstExtendAddrMSB, spec 8.2).
    pub address_msb_extension: bool,
    /// Address width of the traced hart.
    pub address_width: AddressWidth,
}

impl Default for MessageOptions {
    fn default() -> Self {
        MessageOptions {
            src_bits: 0,
            timestamps: false,
            address_msb_extension: false,
            address_width: AddressWidth::Bits64,
        }
    }
}

impl MessageOptions {
    /// These options with the SRC width set to `src_bits`.
    pub fn with_src_bits(mut self, src_bits: u8) -> Self {
        self.src_bits = src_bits;
        self
    }

    /// These options with timestamps marked as enabled or not.
    pub fn with_timestamps(mut self, timestamps: bool) -> Self {
        self.timestamps = timestamps;
        self
    }

    /// These options with the address MSB extension switched on or off.
    pub fn with_address_msb_extension(mut self, extension: bool) -> Self {
        self.address_msb_extension = extension;
        self
    }

    /// These options with the given address width.
    pub fn with_address_width(mut self, width: AddressWidth) -> Self {
        self.address_width = width;
        self
    }
}

/// B-TYPE: reason for an indirect flow change (spec Table 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchType {
    /// 0: indirect jump, call or return.
    Indirect,
    /// 1: exception or interrupt, from encoders that cannot tell them apart.
    ExceptionOrInterrupt,
    /// 2: exception.
    Exception,
    /// 3: interrupt.
    Interrupt,
}

impl BranchType {
    /// Interprets the two low bits of `bits`; higher bits are ignored because the field is
    /// two bits wide on the wire.
    #[inline]
    pub fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => BranchType::Indirect,
            1 => BranchType::ExceptionOrInterrupt,
            2 => BranchType::Exception,
            _ => BranchType::Interrupt,
        }
    }

    /// The two-bit wire value.
    #[inline]
    pub fn bits(self) -> u8 {
        match self {
            BranchType::Indirect => 0,
            BranchType::ExceptionOrInterrupt => 1,
            BranchType::Exception => 2,
            BranchType::Interrupt => 3,
        }
    }

    /// Name used in dumps.
    pub fn name(self) -> &'static str {
        match self {
            BranchType::Indirect => "Indirect",
            BranchType::ExceptionOrInterrupt => "ExceptionOrInterrupt",
            BranchType::Exception => "Exception",
            BranchType::Interrupt => "Interrupt",
        }
    }
}

/// SYNC field: reason for a synchronisation message (spec Table 25). Kept as the raw value
/// because reserved and vendor codes must be reported, not rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncReason(pub u8);

impl SyncReason {
    /// External trace trigger (marker, encoder not reset).
    pub const EXTERNAL_TRIGGER: SyncReason = SyncReason(0);
    /// Exit from reset.
    pub const EXIT_FROM_RESET: SyncReason = SyncReason(1);
    /// Periodic synchronisation.
    pub const PERIODIC: SyncReason = SyncReason(2);
    /// Exit from debug mode.
    pub const EXIT_FROM_DEBUG: SyncReason = SyncReason(3);
    /// I-CNT overflow (marker, encoder not reset).
    pub const SEQUENTIAL_INSTRUCTION_COUNTER: SyncReason = SyncReason(4);
    /// Trace re-enabled after a gap.
    pub const TRACE_ENABLE: SyncReason = SyncReason(5);
    /// Debug watchpoint with action 4 (marker, encoder not reset).
    pub const TRACE_EVENT: SyncReason = SyncReason(6);
    /// First synchronisation after lost trace.
    pub const RESTART_FROM_FIFO_OVERRUN: SyncReason = SyncReason(7);
    /// Exit from power-down.
    pub const EXIT_FROM_POWER_DOWN: SyncReason = SyncReason(9);

    /// Name used in dumps: `"Reserved"` for 8 and 10..=13, `"VendorDefined"` for 14 and 15,
    /// `"Invalid"` for values that do not fit the 4-bit field.
    pub fn name(self) -> &'static str {
        match self.0 {
            0 => "ExternalTrigger",
            1 => "ExitFromReset",
            2 => "Periodic",
            3 => "ExitFromDebug",
            4 => "SequentialInstructionCounter",
            5 => "TraceEnable",
            6 => "TraceEvent",
            7 => "RestartFromFifoOverrun",
            9 => "ExitFromPowerDown",
            8 | 10..=13 => "Reserved",
            14 | 15 => "VendorDefined",
            _ => "Invalid",
        }
    }

    /// Whether the encoder state (I-CNT, HIST, reference address, timestamp base) is reset,
    /// per the "Encoder Reset" column of Table 25. Reserved values reset (the table says so).
    pub fn resets_encoder(self) -> bool {
        !matches!(
            self,
            SyncReason::EXTERNAL_TRIGGER
                | SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER
                | SyncReason::TRACE_EVENT
        )
    }
}

/// FORMAT\[1:0\] of the PROCESS field (spec 7.1): what the Ownership message reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProcessFormat {
    /// A V and/or PRV change; CONTEXT is absent.
    PrivilegeChange,
    /// Reserved by the spec.
    Reserved,
    /// A synchronisation or an scontext change: CONTEXT holds scontext.
    Scontext,
    /// A synchronisation or an hcontext change: CONTEXT holds hcontext.
    Hcontext,
}

impl ProcessFormat {
    /// The format of the two bits FORMAT\[1:0\] (higher bits are ignored).
    #[inline]
    pub fn from_bits(bits: u8) -> Self {
        match bits & 3 {
            0 => ProcessFormat::PrivilegeChange,
            1 => ProcessFormat::Reserved,
            2 => ProcessFormat::Scontext,
            _ => ProcessFormat::Hcontext,
        }
    }

    /// The field's two bits.
    #[inline]
    pub fn bits(self) -> u8 {
        match self {
            ProcessFormat::PrivilegeChange => 0,
            ProcessFormat::Reserved => 1,
            ProcessFormat::Scontext => 2,
            ProcessFormat::Hcontext => 3,
        }
    }
}

/// EVCODE of ProgTraceCorrelation (spec field EVCODE, 4 bits): why the message was sent.
/// Values without a name are reserved (2, 3: data trace; 5-7) or vendor specific (8-15)
/// and are kept as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CorrelationEvent(pub u8);

impl CorrelationEvent {
    /// Entry into debug mode (also a hart halted with trace disabled).
    pub const ENTRY_INTO_DEBUG: CorrelationEvent = CorrelationEvent(0);
    /// Entry into a low-power mode.
    pub const ENTRY_INTO_LOW_POWER: CorrelationEvent = CorrelationEvent(1);
    /// Program trace disabled (the hart may still run).
    pub const TRACE_DISABLED: CorrelationEvent = CorrelationEvent(4);
}

/// PROCESS field of the Ownership message: `{CONTEXT, V, PRV[1:0], FORMAT[1:0]}` (spec 7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process {
    pub format: ProcessFormat,
    /// PRV\[1:0\] privilege level (0 = U, 1 = S, 3 = M).
    pub privilege: u8,
    /// V bit (virtualisation mode).
    pub virtualized: bool,
    /// scontext or hcontext value (meaningless for [`ProcessFormat::PrivilegeChange`]).
    pub context: u64,
}

impl Process {
    /// Number of bits below CONTEXT in the PROCESS field.
    pub const CONTEXT_SHIFT: u32 = 5;

    /// Splits a PROCESS field value into its sub-fields.
    #[inline]
    pub fn from_field(field: u64) -> Self {
        Process {
            format: ProcessFormat::from_bits((field & 3) as u8),
            privilege: ((field >> 2) & 3) as u8,
            virtualized: (field >> 4) & 1 == 1,
            context: field >> Self::CONTEXT_SHIFT,
        }
    }

    /// Packs the sub-fields into a PROCESS field value. Bits that do not fit their sub-field
    /// are dropped; the encoder rejects such values before calling this.
    #[inline]
    pub fn to_field(self) -> u64 {
        u64::from(self.format.bits())
            | u64::from(self.privilege & 3) << 2
            | u64::from(self.virtualized) << 4
            | self.context.wrapping_shl(Self::CONTEXT_SHIFT)
    }
}

/// ResourceFull payload, interpreted according to RCODE (spec 7.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceFull {
    /// RCODE 0: RDATA\[0\] is the overflowed I-CNT.
    IcntOverflow {
        /// I-CNT value.
        icnt: u64,
    },
    /// RCODE 1: RDATA\[0\] is a full HIST (MSB stop bit included).
    HistOverflow {
        /// HIST value.
        hist: u64,
    },
    /// RCODE 2: RDATA\[0\] is HIST and RDATA\[1\] is HREPEAT (repeated history, spec 9.3).
    RepeatedHist {
        /// HIST value.
        hist: u64,
        /// HREPEAT count.
        repeat: u64,
    },
    /// Reserved (3..=7) or vendor-specific (8..=15) RCODE: the RDATA fields as found.
    Other {
        /// RCODE value.
        rcode: u8,
        /// RDATA fields; entries at index `count` and above are zero.
        rdata: [u64; 2],
        /// Number of RDATA fields present (1 or 2 when decoded).
        count: u8,
    },
}

impl ResourceFull {
    /// The RCODE wire value.
    pub fn rcode(&self) -> u8 {
        match self {
            ResourceFull::IcntOverflow { .. } => 0,
            ResourceFull::HistOverflow { .. } => 1,
            ResourceFull::RepeatedHist { .. } => 2,
            ResourceFull::Other { rcode, .. } => *rcode,
        }
    }
}

/// Message-specific fields (spec chapter 7). Address fields are full addresses: the wire
/// field (address bits \[63:1\]) shifted left by one, after MSB extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Body {
    /// TCODE 2.
    Ownership {
        /// PROCESS field.
        process: Process,
    },
    /// TCODE 3.
    DirectBranch {
        /// I-CNT field.
        icnt: u64,
    },
    /// TCODE 4.
    IndirectBranch {
        /// B-TYPE field.
        btype: BranchType,
        /// I-CNT field.
        icnt: u64,
        /// U-ADDR field shifted left by one: XOR with the reference address gives the target.
        uaddr: u64,
    },
    /// TCODE 8.
    Error {
        /// ETYPE field (4 bits).
        etype: u8,
        /// ECODE field.
        ecode: u64,
    },
    /// TCODE 9.
    ProgTraceSync {
        /// SYNC field.
        sync: SyncReason,
        /// I-CNT field.
        icnt: u64,
        /// F-ADDR field shifted left by one.
        faddr: u64,
    },
    /// TCODE 11.
    DirectBranchSync {
        /// SYNC field.
        sync: SyncReason,
        /// I-CNT field.
        icnt: u64,
        /// F-ADDR field shifted left by one.
        faddr: u64,
    },
    /// TCODE 12.
    IndirectBranchSync {
        /// SYNC field.
        sync: SyncReason,
        /// B-TYPE field.
        btype: BranchType,
        /// I-CNT field.
        icnt: u64,
        /// F-ADDR field shifted left by one.
        faddr: u64,
    },
    /// TCODE 27.
    ResourceFull(ResourceFull),
    /// TCODE 28.
    IndirectBranchHist {
        /// B-TYPE field.
        btype: BranchType,
        /// I-CNT field.
        icnt: u64,
        /// U-ADDR field shifted left by one.
        uaddr: u64,
        /// HIST field.
        hist: u64,
    },
    /// TCODE 29.
    IndirectBranchHistSync {
        /// SYNC field.
        sync: SyncReason,
        /// B-TYPE field.
        btype: BranchType,
        /// I-CNT field.
        icnt: u64,
        /// F-ADDR field shifted left by one.
        faddr: u64,
        /// HIST field.
        hist: u64,
    },
    /// TCODE 30.
    RepeatBranch {
        /// B-CNT field.
        bcnt: u64,
    },
    /// TCODE 33.
    ProgTraceCorrelation {
        /// EVCODE field (4 bits).
        evcode: CorrelationEvent,
        /// CDF field (2 bits).
        cdf: u8,
        /// I-CNT field.
        icnt: u64,
        /// HIST field, present when CDF is 1 (and, if found, for reserved CDF 2 and 3).
        hist: Option<u64>,
    },
    /// Vendor-defined (56..=62) or reserved TCODE; the content is in [`Message::bytes`].
    Other {
        /// TCODE value.
        tcode: u8,
    },
}

impl Body {
    /// The TCODE of this message.
    pub fn tcode(&self) -> u8 {
        match self {
            Body::Ownership { .. } => tcode::OWNERSHIP,
            Body::DirectBranch { .. } => tcode::DIRECT_BRANCH,
            Body::IndirectBranch { .. } => tcode::INDIRECT_BRANCH,
            Body::Error { .. } => tcode::ERROR,
            Body::ProgTraceSync { .. } => tcode::PROG_TRACE_SYNC,
            Body::DirectBranchSync { .. } => tcode::DIRECT_BRANCH_SYNC,
            Body::IndirectBranchSync { .. } => tcode::INDIRECT_BRANCH_SYNC,
            Body::ResourceFull(_) => tcode::RESOURCE_FULL,
            Body::IndirectBranchHist { .. } => tcode::INDIRECT_BRANCH_HIST,
            Body::IndirectBranchHistSync { .. } => tcode::INDIRECT_BRANCH_HIST_SYNC,
            Body::RepeatBranch { .. } => tcode::REPEAT_BRANCH,
            Body::ProgTraceCorrelation { .. } => tcode::PROG_TRACE_CORRELATION,
            Body::Other { tcode } => *tcode,
        }
    }

    /// The SYNC field, for the four synchronisation messages.
    pub fn sync_reason(&self) -> Option<SyncReason> {
        match self {
            Body::ProgTraceSync { sync, .. }
            | Body::DirectBranchSync { sync, .. }
            | Body::IndirectBranchSync { sync, .. }
            | Body::IndirectBranchHistSync { sync, .. } => Some(*sync),
            _ => None,
        }
    }
}

/// One decoded message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Offset of the TCODE byte (decoder base offset plus position in its buffer).
    pub offset: u64,
    /// Bytes from the TCODE byte to the byte with MSEO=11, both included (idle excluded).
    /// Saturates at `u32::MAX` for absurdly long corrupt messages.
    pub length: u32,
    /// SRC field, 0 when the SRC field is not configured.
    pub src: u16,
    /// TSTAMP field, when the message carried one. Absolute on synchronisation messages,
    /// relative otherwise (spec 8.7); never set for [`Body::Other`].
    pub timestamp: Option<u64>,
    /// Message-specific fields.
    pub body: Body,
}

impl Message {
    /// The TCODE of this message.
    #[inline]
    pub fn tcode(&self) -> u8 {
        self.body.tcode()
    }

    /// Whether this is a synchronisation message (one carrying a SYNC field and F-ADDR).
    #[inline]
    pub fn is_sync(&self) -> bool {
        self.body.sync_reason().is_some()
    }

    /// The SYNC field, for synchronisation messages.
    #[inline]
    pub fn sync_reason(&self) -> Option<SyncReason> {
        self.body.sync_reason()
    }

    /// Raw bytes of this message within `stream`, the buffer whose first byte is at offset 0
    /// (a decoder created without a base offset). Empty when `stream` does not hold them.
    pub fn bytes<'a>(&self, stream: &'a [u8]) -> &'a [u8] {
        self.bytes_at(stream, 0)
    }

    /// Raw bytes of this message within `chunk`, a buffer whose first byte is at offset
    /// `base` (as given to [`crate::MessageDecoder::with_base_offset`]). Empty when the
    /// chunk does not hold the whole message.
    pub fn bytes_at<'a>(&self, chunk: &'a [u8], base: u64) -> &'a [u8] {
        let Some(start) = self.offset.checked_sub(base) else {
            return &[];
        };
        let Ok(start) = usize::try_from(start) else {
            return &[];
        };
        let Ok(length) = usize::try_from(self.length) else {
            return &[];
        };
        start
            .checked_add(length)
            .and_then(|end| chunk.get(start..end))
            .unwrap_or(&[])
    }
}
