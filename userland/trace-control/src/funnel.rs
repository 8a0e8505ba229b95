//! Trace funnel registers (`trFunnel*`, specification "Trace Funnel"). A funnel's
//! optional timestamp unit has the encoder's offsets, [`crate::timestamp`].

/// `trFunnelControl`: fields as in [`component::control`](crate::component::control).
pub const CONTROL: usize = 0x000;
/// `trFunnelImpl`.
pub const IMPLEMENTATION: usize = 0x004;
/// `trFunnelDisInput`.
pub const DISABLE_INPUT: usize = 0x008;

/// `trFunnelDisInput` fields.
pub mod disable_input {
    use crate::Field;

    /// Bit *n* set: messages of input *n* are read and discarded.
    pub const INPUTS: Field = Field::new(0, 16);
}

/// The most inputs a funnel has (`trFunnelDisInput` has 16 bits).
pub const MAX_INPUTS: usize = 16;
