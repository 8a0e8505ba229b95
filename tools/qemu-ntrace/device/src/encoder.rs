//! Encoder registers (`docs/trace-device.md`, "Implemented fields"): their reset values,
//! how a guest store is legalised, and the effective configuration they describe.

use ntrace_flow::{BranchMode, EncoderOptions};
use ntrace_message::MessageOptions;
use trace_control::component::implementation_value;
use trace_control::encoder::{
    self as registers, control, filter_control, filter_match_instruction, format,
    implicit_return_mode, instruction_features as features, instruction_filters, instruction_mode,
    privilege, sync_mode, SYNC_MAX_BIAS,
};
use trace_control::timestamp::{self, control as timestamp_control};
use trace_control::{ComponentType, Version};

/// Filters implemented: 0 and 1, each matching privilege levels.
pub(crate) const FILTERS: usize = 2;

/// The registers the poll watches, in the order of [`Registers`].
pub(crate) const WATCHED: [usize; 9] = [
    registers::CONTROL,
    registers::IMPLEMENTATION,
    registers::INSTRUCTION_FEATURES,
    registers::INSTRUCTION_FILTERS,
    timestamp::CONTROL,
    registers::filter_control(0),
    registers::filter_match_instruction(0),
    registers::filter_control(1),
    registers::filter_match_instruction(1),
];

/// Indices in [`Registers`].
pub(crate) const CONTROL: usize = 0;
pub(crate) const IMPLEMENTATION: usize = 1;
pub(crate) const INSTRUCTION_FEATURES: usize = 2;
pub(crate) const INSTRUCTION_FILTERS: usize = 3;
pub(crate) const TIMESTAMP_CONTROL: usize = 4;
/// Filter `i`'s control is at `FILTER_CONTROL + 2 i`, its MatchInst right after.
pub(crate) const FILTER_CONTROL: usize = 5;

/// Values of the [`WATCHED`] registers.
pub(crate) type Registers = [u32; WATCHED.len()];

/// The N-Trace version the encoder speaks (`trTeProtocolMajor`/`Minor`).
const PROTOCOL: Version = Version::V1_0;

/// `trTsWidth`: the counter is the 64-bit `time` CSR, but the field holds at most 63.
pub(crate) const TIMESTAMP_WIDTH: u32 = 63;

/// Privilege levels a filter can match (`trTeFilterMatchChoicePrivilege` bits 0, 1, 3).
const PRIVILEGE_CHOICES: u32 =
    1 << privilege::USER | 1 << privilege::SUPERVISOR | 1 << privilege::MACHINE;

/// What the encoder registers depend on besides the guest's stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EncoderParameters {
    pub return_stack_depth: u8,
}

/// `trTeImpl`: version 1.0, type encoder, protocol N-Trace 1.0, and in the vendor bits
/// the implicit-return stack depth and the stand-in context register.
pub(crate) const fn implementation(return_stack_depth: u8) -> u32 {
    let value = implementation_value(ComponentType::Encoder, Version::V1_0);
    let value = registers::implementation::PROTOCOL_MAJOR.insert(value, PROTOCOL.major as u32);
    let value = registers::implementation::PROTOCOL_MINOR.insert(value, PROTOCOL.minor as u32);
    let value =
        registers::implementation::RETURN_STACK_DEPTH.insert(value, return_stack_depth as u32);
    registers::implementation::HAS_CONTEXT.with(value, true)
}

/// `trTsControl` of a timestamp unit in reset, or just released from it.
pub(crate) const fn timestamp_reset(active: bool) -> u32 {
    let value = timestamp_control::MODE.value(timestamp::mode::INTERNAL_SYSTEM);
    let value = timestamp_control::WIDTH.insert(value, TIMESTAMP_WIDTH);
    timestamp_control::ACTIVE.with(value, active)
}

/// Every register of an encoder in reset (`active` false) or just released from it.
pub(crate) fn reset(parameters: &EncoderParameters, active: bool) -> Registers {
    let control = control::ACTIVE.with(0, active);
    let control = control::EMPTY.with(control, true);
    let control = control::INSTRUCTION_MODE.insert(control, instruction_mode::OPTIMIZED);
    let control = control::FORMAT.insert(control, format::N_TRACE);
    let mut registers = [0; WATCHED.len()];
    registers[CONTROL] = control;
    registers[IMPLEMENTATION] = implementation(parameters.return_stack_depth);
    registers[INSTRUCTION_FEATURES] =
        features::IMPLICIT_RETURN_MODE.value(implicit_return_mode(parameters));
    registers[TIMESTAMP_CONTROL] = timestamp_reset(false);
    registers
}

fn implicit_return_mode(parameters: &EncoderParameters) -> u32 {
    if parameters.return_stack_depth == 0 {
        implicit_return_mode::UNKNOWN
    } else {
        implicit_return_mode::FULL_ADDRESS
    }
}

/// The registers after the guest stored `written` over `old` (the legal values of the
/// last poll). Only registers whose word changed count as written: a store of the value a
/// register holds cannot be seen.
pub(crate) fn apply(
    old: &Registers,
    written: &Registers,
    parameters: &EncoderParameters,
) -> Registers {
    let was_active = control::ACTIVE.is_set(old[CONTROL]);
    let active = control::ACTIVE.is_set(written[CONTROL]);
    if !active {
        // In reset: every register holds its reset value and ignores stores.
        return reset(parameters, false);
    }
    if !was_active {
        // Released from reset: every field at its default, including those of the store
        // that set trTeActive (the specification's sequence writes 0x1, then configures).
        return reset(parameters, true);
    }
    let mut new = *old;
    for (index, (&old_value, &value)) in old.iter().zip(written).enumerate() {
        if value == old_value {
            continue;
        }
        new[index] = match index {
            CONTROL => write_control(old_value, value),
            IMPLEMENTATION => old_value,
            INSTRUCTION_FEATURES => write_features(value, parameters),
            INSTRUCTION_FILTERS => {
                value & instruction_filters::FILTERS.mask() & ((1 << FILTERS) - 1)
            }
            TIMESTAMP_CONTROL => write_timestamp_control(old_value, value),
            _ if (index - FILTER_CONTROL) % 2 == 0 => {
                value & (filter_control::ENABLE.mask() | filter_control::MATCH_PRIVILEGE.mask())
            }
            _ => {
                value
                    & filter_match_instruction::MATCH_CHOICE_PRIVILEGE.insert(0, PRIVILEGE_CHOICES)
            }
        };
    }
    new
}

/// `trTeControl` of an active encoder after a store of `written`.
fn write_control(old: u32, written: u32) -> u32 {
    let enabling = !control::ENABLE.is_set(old) && control::ENABLE.is_set(written);
    // RW1C, and cleared when trace is enabled.
    let overflow = control::INSTRUCTION_STALL_OR_OVERFLOW.is_set(old)
        && !control::INSTRUCTION_STALL_OR_OVERFLOW.is_set(written)
        && !enabling;
    let mode = match control::INSTRUCTION_MODE.extract(written) {
        instruction_mode::OFF => instruction_mode::OFF,
        instruction_mode::BASELINE => instruction_mode::BASELINE,
        // 6, and every other non-zero mode: "it cannot revert to 0".
        _ => instruction_mode::OPTIMIZED,
    };
    let sync = match control::INSTRUCTION_SYNC_MODE.extract(written) {
        sync_mode::OFF => sync_mode::OFF,
        sync_mode::MESSAGES => sync_mode::MESSAGES,
        // Cycles: under -icount a cycle is an instruction, so half-words stand in.
        _ => sync_mode::HALFWORDS,
    };
    let copied = [
        control::ACTIVE,
        control::ENABLE,
        control::INSTRUCTION_TRACING,
        control::CONTEXT,
        control::INHIBIT_SOURCE,
        control::INSTRUCTION_SYNC_MAX,
    ];
    let value = copied
        .iter()
        .fold(0, |value, field| value | (written & field.mask()));
    let value = control::EMPTY.with(value, control::EMPTY.is_set(old));
    let value = control::INSTRUCTION_STALL_OR_OVERFLOW.with(value, overflow);
    let value = control::INSTRUCTION_MODE.insert(value, mode);
    let value = control::INSTRUCTION_SYNC_MODE.insert(value, sync);
    control::FORMAT.insert(value, format::N_TRACE)
}

/// `trTeInstFeatures` after a store of `written`.
fn write_features(written: u32, parameters: &EncoderParameters) -> u32 {
    let implemented = features::ENABLE_SEQUENTIAL_JUMP.mask()
        | features::ENABLE_REPEATED_HISTORY.mask()
        | features::ENABLE_ALL_JUMPS.mask()
        | features::EXTEND_ADDRESS_MSB.mask();
    let implemented =
        features::ENABLE_IMPLICIT_RETURN.with(implemented, parameters.return_stack_depth > 0);
    let value = features::IMPLICIT_RETURN_MODE
        .insert(written & implemented, implicit_return_mode(parameters));
    let source_bits = features::SOURCE_BITS
        .extract(written)
        .min(features::MAX_SOURCE_BITS);
    let source_id = features::SOURCE_ID.extract(written) & ((1 << source_bits) - 1);
    let value = features::SOURCE_BITS.insert(value, source_bits);
    features::SOURCE_ID.insert(value, source_id)
}

/// `trTsControl` of an active encoder after a store of `written`. trTsReset reads 0.
fn write_timestamp_control(old: u32, written: u32) -> u32 {
    if !timestamp_control::ACTIVE.is_set(written) {
        return timestamp_reset(false);
    }
    if !timestamp_control::ACTIVE.is_set(old) {
        return timestamp_reset(true);
    }
    let copied = [
        timestamp_control::COUNT,
        timestamp_control::PRESCALE,
        timestamp_control::ENABLE,
    ];
    copied.iter().fold(timestamp_reset(true), |value, field| {
        value | (written & field.mask())
    })
}

/// Whether a store to `trTsControl` asked for a counter reset (trTsReset, write 1) of a
/// unit that stays active.
pub(crate) fn timestamp_reset_requested(
    old: &Registers,
    written: &Registers,
    new: &Registers,
) -> bool {
    written[TIMESTAMP_CONTROL] != old[TIMESTAMP_CONTROL]
        && timestamp_control::RESET.is_set(written[TIMESTAMP_CONTROL])
        && timestamp_control::ACTIVE.is_set(old[TIMESTAMP_CONTROL])
        && timestamp_control::ACTIVE.is_set(new[TIMESTAMP_CONTROL])
}

/// How often the encoder sends a synchronisation message of its own accord.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyncPeriod {
    Off,
    /// Every this many messages (2^(trTeInstSyncMax + 4)).
    Messages(u32),
    /// Every this many instruction half-words (2^(trTeInstSyncMax + 4)).
    Halfwords(u32),
}

/// Privilege levels (E-Trace *priv* values, [`trace_control::encoder::privilege`]) as a
/// bit set: bit *n* is level *n*.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrivilegeSet(u8);

impl PrivilegeSet {
    /// The set with the levels of the bits of `bits`.
    pub const fn from_bits(bits: u8) -> PrivilegeSet {
        PrivilegeSet(bits)
    }

    /// Bit *n* set: level *n* is in the set.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Whether privilege level `level` is in the set.
    pub const fn contains(self, level: u8) -> bool {
        level < 8 && self.0 & (1 << level) != 0
    }
}

/// Which privilege levels the filters let be traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrivilegeFilter {
    /// No enabled filter is selected in trTeInstFilters (or one matches every level).
    Everything,
    /// The union of the selected, enabled filters' trTeFilterMatchChoicePrivilege.
    Only(PrivilegeSet),
}

impl PrivilegeFilter {
    /// Whether an instruction at privilege level `level` (0 U, 1 S, 3 M) is traced.
    pub const fn qualifies(self, level: u8) -> bool {
        match self {
            PrivilegeFilter::Everything => true,
            PrivilegeFilter::Only(levels) => levels.contains(level),
        }
    }
}

/// The encoder's timestamp unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimestampConfig {
    /// trTsActive (and trTeActive).
    pub active: bool,
    /// trTsCount: the counter runs.
    pub counting: bool,
    /// trTsEnable: messages carry the timestamp.
    pub enabled: bool,
    /// trTsPrescale: the counter counts `time` / 4^prescale.
    pub prescale: u8,
}

impl TimestampConfig {
    /// Whether messages carry a timestamp field.
    pub const fn in_messages(&self) -> bool {
        self.active && self.enabled
    }
}

/// An encoder's effective configuration: what its legal register values ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EncoderConfig {
    /// trTeActive.
    pub active: bool,
    /// trTeEnable.
    pub enabled: bool,
    /// trTeInstTracing.
    pub instruction_tracing: bool,
    /// trTeInstMode: branch (3, BTM) or history (6, HTM) messaging; `None` for 0.
    pub mode: Option<BranchMode>,
    /// trTeContext: Ownership messages after synchronisation and privilege changes.
    pub context: bool,
    /// trTeInstSyncMode and trTeInstSyncMax.
    pub sync: SyncPeriod,
    /// trTeInhibitSrc.
    pub inhibit_source: bool,
    /// trTeSrcID (fits in `source_bits` bits).
    pub source_id: u16,
    /// trTeSrcBits, 0..=12.
    pub source_bits: u8,
    /// trTeInstEnImplicitReturn.
    pub implicit_return: bool,
    /// The implicit-return stack depth in use: the block's, or 0 with implicit returns
    /// off.
    pub return_stack_depth: u8,
    /// trTeInstEnRepeatedHistory.
    pub repeated_history: bool,
    /// trTeInstEnSequentialJump.
    pub sequential_jumps: bool,
    /// trTeInstEnAllJumps.
    pub all_jumps: bool,
    /// trTeInstExtendAddrMSB.
    pub extend_address_msb: bool,
    /// trTeInstFilters with the filters' privilege matches.
    pub privileges: PrivilegeFilter,
    /// The timestamp unit.
    pub timestamps: TimestampConfig,
}

impl EncoderConfig {
    /// The configuration legal register values describe.
    pub(crate) fn from_registers(
        registers: &Registers,
        parameters: &EncoderParameters,
    ) -> EncoderConfig {
        let control_value = registers[CONTROL];
        let features_value = registers[INSTRUCTION_FEATURES];
        let timestamp_value = registers[TIMESTAMP_CONTROL];
        let sync_period =
            1u32 << (control::INSTRUCTION_SYNC_MAX.extract(control_value) + SYNC_MAX_BIAS);
        let implicit_return = features::ENABLE_IMPLICIT_RETURN.is_set(features_value);
        EncoderConfig {
            active: control::ACTIVE.is_set(control_value),
            enabled: control::ENABLE.is_set(control_value),
            instruction_tracing: control::INSTRUCTION_TRACING.is_set(control_value),
            mode: match control::INSTRUCTION_MODE.extract(control_value) {
                instruction_mode::BASELINE => Some(BranchMode::Btm),
                instruction_mode::OPTIMIZED => Some(BranchMode::Htm),
                _ => None,
            },
            context: control::CONTEXT.is_set(control_value),
            sync: match control::INSTRUCTION_SYNC_MODE.extract(control_value) {
                sync_mode::MESSAGES => SyncPeriod::Messages(sync_period),
                sync_mode::HALFWORDS => SyncPeriod::Halfwords(sync_period),
                _ => SyncPeriod::Off,
            },
            inhibit_source: control::INHIBIT_SOURCE.is_set(control_value),
            source_id: features::SOURCE_ID.extract(features_value) as u16,
            source_bits: features::SOURCE_BITS.extract(features_value) as u8,
            implicit_return,
            return_stack_depth: if implicit_return {
                parameters.return_stack_depth
            } else {
                0
            },
            repeated_history: features::ENABLE_REPEATED_HISTORY.is_set(features_value),
            sequential_jumps: features::ENABLE_SEQUENTIAL_JUMP.is_set(features_value),
            all_jumps: features::ENABLE_ALL_JUMPS.is_set(features_value),
            extend_address_msb: features::EXTEND_ADDRESS_MSB.is_set(features_value),
            privileges: privilege_filter(registers),
            timestamps: TimestampConfig {
                active: timestamp_control::ACTIVE.is_set(timestamp_value),
                counting: timestamp_control::COUNT.is_set(timestamp_value),
                enabled: timestamp_control::ENABLE.is_set(timestamp_value),
                prescale: timestamp_control::PRESCALE.extract(timestamp_value) as u8,
            },
        }
    }

    /// Whether the encoder traces instructions: active, enabled, tracing, with a mode.
    pub const fn traces_instructions(&self) -> bool {
        self.active && self.enabled && self.instruction_tracing && self.mode.is_some()
    }

    /// Options of an [`ntrace_flow::TraceEncoder`] producing what this configuration asks
    /// for. What they cannot say is left to the caller: `context` is `Some(0)` when
    /// Ownership messages are on (the caller knows the hart's `scontext`).
    pub fn encoder_options(&self) -> EncoderOptions {
        let source_bits = if self.inhibit_source {
            0
        } else {
            self.source_bits
        };
        let mut options = EncoderOptions::default();
        options.mode = self.mode.unwrap_or(BranchMode::Htm);
        options.message = MessageOptions::default()
            .with_src_bits(source_bits)
            .with_timestamps(self.timestamps.in_messages())
            .with_address_msb_extension(self.extend_address_msb);
        options.src = if source_bits == 0 { 0 } else { self.source_id };
        options.return_stack_depth = usize::from(self.return_stack_depth);
        options.repeated_history = self.repeated_history;
        options.sequential_jumps = self.sequential_jumps;
        options.all_jumps = self.all_jumps;
        match self.sync {
            SyncPeriod::Messages(messages) => options.periodic_sync = messages,
            SyncPeriod::Halfwords(units) => options.periodic_sync_units = u64::from(units),
            SyncPeriod::Off => {}
        }
        options.context = self.context.then_some(0);
        options
    }
}

/// The union of the privilege levels of the filters trTeInstFilters selects and
/// trTeFilterEnable enables; a selected filter that does not match privileges matches
/// everything, so it lets everything be traced.
fn privilege_filter(registers: &Registers) -> PrivilegeFilter {
    let selected = registers[INSTRUCTION_FILTERS];
    let mut levels = 0u32;
    let mut any = false;
    for filter in 0..FILTERS {
        let filter_control_value = registers[FILTER_CONTROL + 2 * filter];
        if selected & (1 << filter) == 0 || !filter_control::ENABLE.is_set(filter_control_value) {
            continue;
        }
        if !filter_control::MATCH_PRIVILEGE.is_set(filter_control_value) {
            return PrivilegeFilter::Everything;
        }
        any = true;
        levels |= filter_match_instruction::MATCH_CHOICE_PRIVILEGE
            .extract(registers[FILTER_CONTROL + 2 * filter + 1]);
    }
    if any {
        PrivilegeFilter::Only(PrivilegeSet::from_bits(levels as u8))
    } else {
        PrivilegeFilter::Everything
    }
}
