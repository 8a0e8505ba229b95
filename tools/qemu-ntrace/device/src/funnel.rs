//! Funnel registers: Control (Active, Enable, Empty always 1: messages pass through
//! whole), Impl, DisInput (a bit per encoder input).

use trace_control::component::{control, implementation_value};
use trace_control::funnel as registers;
use trace_control::{ComponentType, Version};

/// `trFunnelImpl`: version 1.0, type funnel.
pub(crate) const IMPLEMENTATION: u32 = implementation_value(ComponentType::Funnel, Version::V1_0);

/// The registers the poll watches, in the order of [`Registers`].
pub(crate) const WATCHED: [usize; 3] = [
    registers::CONTROL,
    registers::IMPLEMENTATION,
    registers::DISABLE_INPUT,
];

/// Indices in [`Registers`].
pub(crate) const CONTROL: usize = 0;
pub(crate) const IMPLEMENTATION_INDEX: usize = 1;
pub(crate) const DISABLE_INPUT: usize = 2;

/// Values of the [`WATCHED`] registers.
pub(crate) type Registers = [u32; WATCHED.len()];

/// Every register of a funnel in reset (`active` false) or just
/// released from it.
pub(crate) fn reset(active: bool) -> Registers {
    let control_value = control::EMPTY.with(control::ACTIVE.with(0, active), true);
    let mut registers = [0; WATCHED.len()];
    registers[CONTROL] = control_value;
    registers[IMPLEMENTATION_INDEX] = IMPLEMENTATION;
    registers
}

/// The registers after the guest stored `written` over `old` (see
/// [`encoder::apply`](crate::encoder::apply)).
pub(crate) fn apply(old: &Registers, written: &Registers, inputs: usize) -> Registers {
    let active = control::ACTIVE.is_set(written[CONTROL]);
    if !active || !control::ACTIVE.is_set(old[CONTROL]) {
        return reset(active);
    }
    let mut new = *old;
    if written[CONTROL] != old[CONTROL] {
        new[CONTROL] = control::ENABLE.with(
            reset(true)[CONTROL],
            control::ENABLE.is_set(written[CONTROL]),
        );
    }
    if written[DISABLE_INPUT] != old[DISABLE_INPUT] {
        new[DISABLE_INPUT] = written[DISABLE_INPUT] & ((1 << inputs) - 1);
    }
    new
}

/// Whether the funnel passes messages of `input`.
pub(crate) fn passes(registers: &Registers, input: usize) -> Result<(), crate::DropReason> {
    let control_value = registers[CONTROL];
    if !control::ACTIVE.is_set(control_value) || !control::ENABLE.is_set(control_value) {
        return Err(crate::DropReason::FunnelDisabled);
    }
    if registers[DISABLE_INPUT] & (1 << input) != 0 {
        return Err(crate::DropReason::FunnelInputDisabled);
    }
    Ok(())
}
