//! RAM sink registers (`trRam*`, specification "Trace RAM Sink"). Addresses are split in
//! `Low` and `High` registers; [`join_address`] and [`split_address`] convert.

/// `trRamControl`.
pub const CONTROL: usize = 0x000;
/// `trRamImpl`.
pub const IMPLEMENTATION: usize = 0x004;
/// `trRamStartLow`: start of the circular buffer, bits 31:0.
pub const START_LOW: usize = 0x010;
/// `trRamStartHigh`: bits 63:32.
pub const START_HIGH: usize = 0x014;
/// `trRamLimitLow`: address of the buffer's last trace word, bits 31:0.
pub const LIMIT_LOW: usize = 0x018;
/// `trRamLimitHigh`.
pub const LIMIT_HIGH: usize = 0x01c;
/// `trRamWPLow`: where the next trace word goes, bits 31:0, and `trRamWrap` in bit 0.
pub const WRITE_POINTER_LOW: usize = 0x020;
/// `trRamWPHigh`.
pub const WRITE_POINTER_HIGH: usize = 0x024;
/// `trRamRPLow`: the read pointer of `trRamData` (SRAM mode).
pub const READ_POINTER_LOW: usize = 0x028;
/// `trRamRPHigh`.
pub const READ_POINTER_HIGH: usize = 0x02c;
/// `trRamData`: trace memory read through the sink (SRAM mode).
pub const DATA: usize = 0x040;

/// Start, limit, write and read pointers are aligned to a trace word of this many bytes.
pub const ADDRESS_ALIGNMENT: u64 = 4;

/// `trRamControl` fields.
pub mod control {
    use crate::Field;

    /// `trRamActive`: 0 holds the sink in reset.
    pub const ACTIVE: Field = crate::component::control::ACTIVE;
    /// `trRamEnable`: the sink stores trace; 1 → 0 flushes it to memory.
    pub const ENABLE: Field = crate::component::control::ENABLE;
    /// `trRamEmpty` (read-only): all trace has been written to memory.
    pub const EMPTY: Field = crate::component::control::EMPTY;
    /// `trRamMode`: a [`mode`](super::mode) value.
    pub const MODE: Field = Field::bit(4);
    /// `trRamStopOnWrap`: stop storing (`trRamEnable` → 0) when the buffer is full.
    pub const STOP_ON_WRAP: Field = Field::bit(8);
    /// `trRamMemFormat`: 0, plain bytes.
    pub const MEMORY_FORMAT: Field = Field::new(9, 2);
    /// `trRamAsyncFreq`: 0, no alignment synchronisation.
    pub const ASYNC_FREQUENCY: Field = Field::new(12, 3);
}

/// `trRamMode` values.
pub mod mode {
    /// Dedicated memory read through `trRamData`.
    pub const SRAM: u32 = 0;
    /// System memory, read as any other memory.
    pub const SMEM: u32 = 1;
}

/// `trRamImpl` fields besides the common ones of
/// [`component::implementation`](crate::component::implementation).
pub mod implementation {
    use crate::Field;

    /// `trRamHasSRAM`.
    pub const HAS_SRAM: Field = Field::bit(12);
    /// `trRamHasSMEM`.
    pub const HAS_SMEM: Field = Field::bit(13);
}

/// `trRamWPLow` fields.
pub mod write_pointer_low {
    use crate::Field;

    /// `trRamWrap`: set when the write pointer wrapped from the limit to the start.
    pub const WRAP: Field = Field::bit(0);
    /// `trRamWPLow`: the address bits (1:0 are the wrap bit and 0).
    pub const ADDRESS: Field = Field::new(2, 30);
}

/// The 64-bit address in a `Low`/`High` register pair.
pub const fn join_address(low: u32, high: u32) -> u64 {
    ((high as u64) << 32) | low as u64
}

/// The `(Low, High)` register values of a 64-bit address.
pub const fn split_address(address: u64) -> (u32, u32) {
    (address as u32, (address >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_and_join() {
        let address = 0x1234_5678_9abc_def0;
        let (low, high) = split_address(address);
        assert_eq!((low, high), (0x9abc_def0, 0x1234_5678));
        assert_eq!(join_address(low, high), address);
    }

    #[test]
    fn write_pointer_fields_cover_the_low_register() {
        // Bit 1 is the only bit of trRamWPLow that is neither address nor wrap.
        assert_eq!(
            !(write_pointer_low::WRAP.mask() | write_pointer_low::ADDRESS.mask()),
            0b10
        );
    }
}
