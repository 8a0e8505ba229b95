//! Trace encoder registers (`trTe*`, specification "Trace Encoder Control Interface" and
//! "Trace Encoder Filter Registers"). The encoder's timestamp unit is in
//! [`crate::timestamp`].

/// `trTeControl`.
pub const CONTROL: usize = 0x000;
/// `trTeImpl`.
pub const IMPLEMENTATION: usize = 0x004;
/// `trTeInstFeatures`: instruction trace options and the trace source ID.
pub const INSTRUCTION_FEATURES: usize = 0x008;
/// `trTeInstFilters`: which filters qualify instruction trace.
pub const INSTRUCTION_FILTERS: usize = 0x00c;
/// `trTeDataControl`.
pub const DATA_CONTROL: usize = 0x010;
/// `trTeDataFilters`.
pub const DATA_FILTERS: usize = 0x01c;
/// `trTeTrigDbgControl`.
pub const TRIGGER_DEBUG_CONTROL: usize = 0x050;
/// `trTeTrigExtInControl`.
pub const TRIGGER_EXTERNAL_INPUT_CONTROL: usize = 0x054;
/// `trTeTrigExtOutControl`.
pub const TRIGGER_EXTERNAL_OUTPUT_CONTROL: usize = 0x058;
/// rvperf's trace block, implementation-defined (0xE00-0xFFF are the implementation's,
/// announced by [`implementation::HAS_CONTEXT`]): a stand-in for the traced hart's
/// `scontext`, 32 bits, read-write while the encoder is active, 0 in reset. QEMU's harts
/// have no `scontext` (Sdtrig's context CSRs are not emulated): software that would write
/// `scontext` at a context switch writes this instead, and the encoder reports it in
/// Ownership messages as it would report `scontext`.
pub const CONTEXT: usize = 0xe00;

/// Offset of filter 0's registers; filter *i*'s are [`FILTER_STRIDE`] × *i* further.
pub const FILTERS: usize = 0x400;
/// Distance between consecutive filters' registers.
pub const FILTER_STRIDE: usize = 0x20;
/// The most filters the register map has room for (`trTeInstFilters` has 16 bits).
pub const MAX_FILTERS: usize = 16;
/// Offset of comparator 0's registers; comparator *j*'s are [`COMPARATOR_STRIDE`] × *j*
/// further.
pub const COMPARATORS: usize = 0x600;
/// Distance between consecutive comparators' registers.
pub const COMPARATOR_STRIDE: usize = 0x20;

/// `trTeFilter<filter>Control`.
pub const fn filter_control(filter: usize) -> usize {
    FILTERS + FILTER_STRIDE * filter
}

/// `trTeFilter<filter>MatchInst`.
pub const fn filter_match_instruction(filter: usize) -> usize {
    filter_control(filter) + 0x04
}

/// `trTeFilter<filter>MatchEcauseLow`.
pub const fn filter_match_exception_cause_low(filter: usize) -> usize {
    filter_control(filter) + 0x08
}

/// `trTeFilter<filter>MatchEcauseHigh`.
pub const fn filter_match_exception_cause_high(filter: usize) -> usize {
    filter_control(filter) + 0x0c
}

/// `trTeFilter<filter>MatchValueImpdef`.
pub const fn filter_match_value_implementation_defined(filter: usize) -> usize {
    filter_control(filter) + 0x10
}

/// `trTeFilter<filter>MatchMaskImpdef`.
pub const fn filter_match_mask_implementation_defined(filter: usize) -> usize {
    filter_control(filter) + 0x14
}

/// `trTeFilter<filter>MatchData`.
pub const fn filter_match_data(filter: usize) -> usize {
    filter_control(filter) + 0x18
}

/// `trTeComp<comparator>Control`.
pub const fn comparator_control(comparator: usize) -> usize {
    COMPARATORS + COMPARATOR_STRIDE * comparator
}

/// `trTeControl` fields.
pub mod control {
    use crate::Field;

    /// `trTeActive`: 0 holds the encoder in reset.
    pub const ACTIVE: Field = crate::component::control::ACTIVE;
    /// `trTeEnable`: 1 → 0 flushes the encoder; 0 → 1 clears
    /// [`INSTRUCTION_STALL_OR_OVERFLOW`].
    pub const ENABLE: Field = crate::component::control::ENABLE;
    /// `trTeInstTracing`: instruction trace is being generated.
    pub const INSTRUCTION_TRACING: Field = Field::bit(2);
    /// `trTeEmpty` (read-only): all generated trace has been emitted.
    pub const EMPTY: Field = crate::component::control::EMPTY;
    /// `trTeInstMode`: an [`instruction_mode`](super::instruction_mode) value.
    pub const INSTRUCTION_MODE: Field = Field::new(4, 3);
    /// `trTeContext`: messages with privilege and `scontext`/`mcontext`.
    pub const CONTEXT: Field = Field::bit(9);
    /// `trTeInstTrigEnable`: triggers may start and stop instruction tracing.
    pub const INSTRUCTION_TRIGGER_ENABLE: Field = Field::bit(11);
    /// `trTeInstStallOrOverflow` (write 1 to clear): trace was lost or the hart stalled.
    pub const INSTRUCTION_STALL_OR_OVERFLOW: Field = Field::bit(12);
    /// `trTeInstStallEna`: stall the hart instead of dropping messages.
    pub const INSTRUCTION_STALL_ENABLE: Field = Field::bit(13);
    /// `trTeInhibitSrc`: no source field in messages.
    pub const INHIBIT_SOURCE: Field = Field::bit(15);
    /// `trTeInstSyncMode`: a [`sync_mode`](super::sync_mode) value.
    pub const INSTRUCTION_SYNC_MODE: Field = Field::new(16, 2);
    /// `trTeInstSyncMax`: synchronise every 2^(value + 4) units of the sync mode.
    pub const INSTRUCTION_SYNC_MAX: Field = Field::new(20, 4);
    /// `trTeFormat`: a [`format`](super::format) value.
    pub const FORMAT: Field = Field::new(24, 3);
}

/// `trTeInstMode` values.
pub mod instruction_mode {
    /// No instruction trace (other trace may still be emitted).
    pub const OFF: u32 = 0;
    /// Baseline instruction trace (N-Trace: branch trace messaging, BTM).
    pub const BASELINE: u32 = 3;
    /// Optimised instruction trace (N-Trace: branch history messaging, HTM).
    pub const OPTIMIZED: u32 = 6;
    /// Vendor-defined.
    pub const VENDOR: u32 = 7;
}

/// `trTeInstSyncMode` values.
pub mod sync_mode {
    /// No periodic synchronisation.
    pub const OFF: u32 = 0;
    /// Count trace messages.
    pub const MESSAGES: u32 = 1;
    /// Count hart clock cycles.
    pub const CYCLES: u32 = 2;
    /// Count instruction 16-bit half-words.
    pub const HALFWORDS: u32 = 3;
}

/// `trTeInstSyncMax` + 4 is the log2 of the synchronisation period.
pub const SYNC_MAX_BIAS: u32 = 4;

/// `trTeFormat` values.
pub mod format {
    /// Efficient Trace for RISC-V.
    pub const E_TRACE: u32 = 0;
    /// RISC-V N-Trace.
    pub const N_TRACE: u32 = 1;
    /// Vendor-specific.
    pub const VENDOR: u32 = 7;
}

/// `trTeImpl` fields besides the common ones of
/// [`component::implementation`](crate::component::implementation).
pub mod implementation {
    use crate::Field;

    /// `trTeProtocolMajor`: major version of the protocol `trTeFormat` names.
    pub const PROTOCOL_MAJOR: Field = Field::new(16, 4);
    /// `trTeProtocolMinor`.
    pub const PROTOCOL_MINOR: Field = Field::new(20, 4);
    /// rvperf's trace block (in the vendor bits 31:24): the depth of the encoder's
    /// implicit-return stack.
    pub const RETURN_STACK_DEPTH: Field = Field::new(24, 7);
    /// rvperf's trace block (vendor bit 31): the encoder has the stand-in context
    /// register [`CONTEXT`](super::CONTEXT).
    pub const HAS_CONTEXT: Field = Field::bit(31);
    /// The deepest return stack [`RETURN_STACK_DEPTH`] holds.
    pub const MAX_RETURN_STACK_DEPTH: u32 = 127;
}

/// `trTeInstFeatures` fields.
pub mod instruction_features {
    use crate::Field;

    /// `trTeInstNoAddrDiff`: always full addresses.
    pub const NO_ADDRESS_DIFFERENCE: Field = Field::bit(0);
    /// `trTeInstNoTrapAddr`: no trap handler address in trap messages.
    pub const NO_TRAP_ADDRESS: Field = Field::bit(1);
    /// `trTeInstEnSequentialJump`: sequentially inferable jumps are not reported.
    pub const ENABLE_SEQUENTIAL_JUMP: Field = Field::bit(2);
    /// `trTeInstEnImplicitReturn`: returns to a recent call are not reported.
    pub const ENABLE_IMPLICIT_RETURN: Field = Field::bit(3);
    /// `trTeInstEnBranchPrediction`.
    pub const ENABLE_BRANCH_PREDICTION: Field = Field::bit(4);
    /// `trTeInstEnJumpTargetCache`.
    pub const ENABLE_JUMP_TARGET_CACHE: Field = Field::bit(5);
    /// `trTeInstImplicitReturnMode`: an [`implicit_return_mode`](super::implicit_return_mode)
    /// value.
    pub const IMPLICIT_RETURN_MODE: Field = Field::new(6, 2);
    /// `trTeInstEnRepeatedHistory`.
    pub const ENABLE_REPEATED_HISTORY: Field = Field::bit(8);
    /// `trTeInstEnAllJumps`: direct jumps and calls reported as taken branches.
    pub const ENABLE_ALL_JUMPS: Field = Field::bit(9);
    /// `trTeInstExtendAddrMSB`.
    pub const EXTEND_ADDRESS_MSB: Field = Field::bit(10);
    /// `trTeSrcID`: the source field value of this encoder's messages.
    pub const SOURCE_ID: Field = Field::new(16, 12);
    /// `trTeSrcBits`: width of the source field, 0..=[`MAX_SOURCE_BITS`].
    pub const SOURCE_BITS: Field = Field::new(28, 4);
    /// The widest source field the specification allows.
    pub const MAX_SOURCE_BITS: u32 = 12;
}

/// `trTeInstImplicitReturnMode` values.
pub mod implicit_return_mode {
    /// Not supported, or not reported.
    pub const UNKNOWN: u32 = 0;
    /// Level counting without comparing return addresses.
    pub const COUNTING: u32 = 1;
    /// Compares the low bits of return addresses.
    pub const PARTIAL_ADDRESS: u32 = 2;
    /// Compares whole return addresses.
    pub const FULL_ADDRESS: u32 = 3;
}

/// `trTeInstFilters` fields.
pub mod instruction_filters {
    use crate::Field;

    /// Bit *n*: filter *n* qualifies instruction trace; none set: everything is traced.
    pub const FILTERS: Field = Field::new(0, 16);
}

/// `trTeFilter<i>Control` fields.
pub mod filter_control {
    use crate::Field;

    /// `trTeFilterEnable`.
    pub const ENABLE: Field = Field::bit(0);
    /// `trTeFilterMatchPrivilege`: match the privileges of `trTeFilterMatchChoicePrivilege`.
    pub const MATCH_PRIVILEGE: Field = Field::bit(1);
    /// `trTeFilterMatchEcause`.
    pub const MATCH_EXCEPTION_CAUSE: Field = Field::bit(2);
    /// `trTeFilterMatchInterrupt`.
    pub const MATCH_INTERRUPT: Field = Field::bit(3);
    /// `trTeFilterMatchComp1`.
    pub const MATCH_COMPARATOR_1: Field = Field::bit(4);
    /// `trTeFilterComp1`.
    pub const COMPARATOR_1: Field = Field::new(5, 3);
    /// `trTeFilterMatchComp2`.
    pub const MATCH_COMPARATOR_2: Field = Field::bit(8);
    /// `trTeFilterComp2`.
    pub const COMPARATOR_2: Field = Field::new(9, 3);
    /// `trTeFilterMatchComp3`.
    pub const MATCH_COMPARATOR_3: Field = Field::bit(12);
    /// `trTeFilterComp3`.
    pub const COMPARATOR_3: Field = Field::new(13, 3);
    /// `trTeFilterMatchImpdef`.
    pub const MATCH_IMPLEMENTATION_DEFINED: Field = Field::bit(16);
    /// `trTeFilterMatchDtype`.
    pub const MATCH_DATA_TYPE: Field = Field::bit(24);
    /// `trTeFilterMatchDsize`.
    pub const MATCH_DATA_SIZE: Field = Field::bit(25);
}

/// `trTeFilter<i>MatchInst` fields.
pub mod filter_match_instruction {
    use crate::Field;

    /// `trTeFilterMatchChoicePrivilege`: bit *n* matches privilege level *n* (the
    /// [`privilege`](super::privilege) values).
    pub const MATCH_CHOICE_PRIVILEGE: Field = Field::new(0, 8);
    /// `trTeFilterMatchValueInterrupt`.
    pub const MATCH_VALUE_INTERRUPT: Field = Field::bit(8);
}

/// Privilege levels as the ingress port's *priv* reports them (E-Trace encoding), the bit
/// numbers of `trTeFilterMatchChoicePrivilege`.
pub mod privilege {
    /// U-mode.
    pub const USER: u32 = 0;
    /// S-mode (HS-mode with the hypervisor extension).
    pub const SUPERVISOR: u32 = 1;
    /// M-mode.
    pub const MACHINE: u32 = 3;
    /// Debug mode.
    pub const DEBUG: u32 = 4;
    /// VU-mode.
    pub const VIRTUAL_USER: u32 = 5;
    /// VS-mode.
    pub const VIRTUAL_SUPERVISOR: u32 = 6;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_the_specification() {
        assert_eq!(filter_control(0), 0x400);
        assert_eq!(filter_match_instruction(1), 0x424);
        assert_eq!(filter_match_data(2), 0x458);
        assert_eq!(filter_match_exception_cause_high(0), 0x40c);
        assert_eq!(comparator_control(1), 0x620);
        // The last filter's registers end where the comparators begin.
        assert_eq!(filter_match_data(MAX_FILTERS - 1) + 8, COMPARATORS);
    }

    #[test]
    fn control_fields_do_not_overlap() {
        let fields = [
            control::ACTIVE,
            control::ENABLE,
            control::INSTRUCTION_TRACING,
            control::EMPTY,
            control::INSTRUCTION_MODE,
            control::CONTEXT,
            control::INSTRUCTION_TRIGGER_ENABLE,
            control::INSTRUCTION_STALL_OR_OVERFLOW,
            control::INSTRUCTION_STALL_ENABLE,
            control::INHIBIT_SOURCE,
            control::INSTRUCTION_SYNC_MODE,
            control::INSTRUCTION_SYNC_MAX,
            control::FORMAT,
        ];
        let mut seen = 0u32;
        for field in fields {
            assert_eq!(seen & field.mask(), 0, "{field:?} overlaps");
            seen |= field.mask();
        }
        // Reserved bits of the specification: 8:7, 10, 14, 19:18, 31:27.
        assert_eq!(!seen, 0xf80c_4580);
    }

    #[test]
    fn feature_fields_do_not_overlap() {
        use instruction_features::*;
        let fields = [
            NO_ADDRESS_DIFFERENCE,
            NO_TRAP_ADDRESS,
            ENABLE_SEQUENTIAL_JUMP,
            ENABLE_IMPLICIT_RETURN,
            ENABLE_BRANCH_PREDICTION,
            ENABLE_JUMP_TARGET_CACHE,
            IMPLICIT_RETURN_MODE,
            ENABLE_REPEATED_HISTORY,
            ENABLE_ALL_JUMPS,
            EXTEND_ADDRESS_MSB,
            SOURCE_ID,
            SOURCE_BITS,
        ];
        let mut seen = 0u32;
        for field in fields {
            assert_eq!(seen & field.mask(), 0, "{field:?} overlaps");
            seen |= field.mask();
        }
        // Reserved: 15:11.
        assert_eq!(!seen, 0x0000_f800);
    }
}
