//! The timestamp unit (`trTs*`) of a trace encoder or funnel, at the same offsets in both
//! (specification, "Timestamp Unit").

/// `trTsControl`.
pub const CONTROL: usize = 0x040;
/// `trTsCounterLow`: bits 31:0 of the timestamp counter.
pub const COUNTER_LOW: usize = 0x048;
/// `trTsCounterHigh`: the counter's upper bits.
pub const COUNTER_HIGH: usize = 0x04c;

/// `trTsControl` fields.
pub mod control {
    use crate::Field;

    /// `trTsActive`: 0 holds the timestamp unit in reset.
    pub const ACTIVE: Field = Field::bit(0);
    /// `trTsCount`: the counter runs (internal timestamps only).
    pub const COUNT: Field = Field::bit(1);
    /// `trTsReset` (write 1): the counter restarts from 0.
    pub const RESET: Field = Field::bit(2);
    /// `trTsRunInDebug`: the counter runs while the hart is halted (internal core only).
    pub const RUN_IN_DEBUG: Field = Field::bit(3);
    /// `trTsMode`: a [`mode`](super::mode) value.
    pub const MODE: Field = Field::new(4, 3);
    /// `trTsPrescale`: the input clock is divided by 4^value.
    pub const PRESCALE: Field = Field::new(8, 2);
    /// `trTsEnable`: messages carry a timestamp field (encoders only).
    pub const ENABLE: Field = Field::bit(15);
    /// Bits 23:16, vendor-specific: which messages carry timestamps.
    pub const VENDOR: Field = Field::new(16, 8);
    /// `trTsWidth` (read-only): width of the counter in bits, 0..=63.
    pub const WIDTH: Field = Field::new(24, 6);
}

/// `trTsMode` values.
pub mod mode {
    /// No timestamps.
    pub const NONE: u32 = 0;
    /// A binary timestamp from outside (for example CoreSight).
    pub const EXTERNAL: u32 = 1;
    /// A fixed system clock increments the counter.
    pub const INTERNAL_SYSTEM: u32 = 2;
    /// The hart's clock increments the counter (encoders only).
    pub const INTERNAL_CORE: u32 = 3;
    /// The timestamp of another encoder or funnel.
    pub const SHARED: u32 = 4;
}

/// log2 of the division `trTsPrescale` = 1 stands for: the input clock is divided by
/// 2^(2 × prescale).
pub const PRESCALE_SHIFT_PER_STEP: u32 = 2;
