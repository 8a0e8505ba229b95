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
/// rvperf's trace block, implementation-defined (0xE00-0xFFF are the implementation's,
/// announced by [`implementation::HAS_WRAP_COUNT`]): how many times the write pointer
/// went from the buffer's end back to trRamStart since the sink left reset, modulo
/// 2^32, read-only. trRamWrap alone says only "at least once": with the count, software
/// reading a circular buffer knows how many laps it missed.
pub const WRAP_COUNT: usize = 0xe00;

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
    /// Implementation-defined (bits 31:24 are the implementation's): the sink has the
    /// [`WRAP_COUNT`](super::WRAP_COUNT) register.
    pub const HAS_WRAP_COUNT: Field = Field::bit(24);
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

/// How much a RAM sink has written into its circular buffer, counted from successive
/// readings of its write pointer (`trRamWP`, with `trRamWrap`): what the `rvtrace`
/// driver reports as `bytes_written` and `wraps`, and what a reader of the buffer needs
/// to find the bytes it has not read and to tell when it was overtaken.
///
/// A reading after which the pointer is lower than before is one wrap. The first
/// reading that shows `trRamWrap` with the pointer not lower is one whole lap (the
/// buffer filled exactly, or more). More laps between two readings cannot be seen in
/// the registers: an observer reads the pointer at least once per time the sink takes
/// to fill the buffer, or under-counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteProgress {
    start: u64,
    end: u64,
    last: u64,
    wrap_seen: bool,
    bytes_written: u64,
    wraps: u64,
}

/// A write pointer outside the buffer [`WriteProgress`] was made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointerOutsideBuffer {
    pub write_pointer: u64,
    pub start: u64,
    pub end: u64,
}

impl core::fmt::Display for PointerOutsideBuffer {
    fn fmt(&self, formatter: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            formatter,
            "write pointer {:#x} outside the buffer [{:#x}, {:#x})",
            self.write_pointer, self.start, self.end
        )
    }
}

/// Where the bytes a reader has not read are, as offsets from the buffer's start:
/// `first`, then `second` (empty unless the unread bytes go round the buffer's end).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unread {
    /// Bytes the sink overwrote before they were read (a gap in the trace).
    pub lost: u64,
    pub first: core::ops::Range<u64>,
    pub second: core::ops::Range<u64>,
}

impl Unread {
    /// Bytes to read.
    pub fn len(&self) -> u64 {
        (self.first.end - self.first.start) + (self.second.end - self.second.start)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl WriteProgress {
    /// The progress of a sink whose buffer is `[start, limit + 4)` (`trRamStart`,
    /// `trRamLimit`), its write pointer at `start`. `None` if the limit is below the
    /// start, either is not word-aligned, or the end overflows.
    pub const fn new(start: u64, limit: u64) -> Option<WriteProgress> {
        if start % ADDRESS_ALIGNMENT != 0 || limit % ADDRESS_ALIGNMENT != 0 || limit < start {
            return None;
        }
        let Some(end) = limit.checked_add(ADDRESS_ALIGNMENT) else {
            return None;
        };
        Some(WriteProgress {
            start,
            end,
            last: start,
            wrap_seen: false,
            bytes_written: 0,
            wraps: 0,
        })
    }

    /// The buffer's length in bytes.
    pub const fn buffer_bytes(&self) -> u64 {
        self.end - self.start
    }

    /// The buffer's first address.
    pub const fn start(&self) -> u64 {
        self.start
    }

    /// Bytes written since the start.
    pub const fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Times the pointer went back to the buffer's start.
    pub const fn wraps(&self) -> u64 {
        self.wraps
    }

    /// The write pointer of the last reading.
    pub const fn write_pointer(&self) -> u64 {
        self.last
    }

    /// Takes one reading of the pointer (`trRamWP` with its low bits cleared), of
    /// `trRamWrap` and, where the sink has one, of its [`WRAP_COUNT`] (read before and
    /// after the pointer with the same value, so the three agree); returns the bytes
    /// written since the previous reading. With the count, laps are counted exactly
    /// however rarely the pointer is read (up to 2^32 - 1 wraps between readings).
    pub fn observe_counted(
        &mut self,
        write_pointer: u64,
        wrap_count: u32,
    ) -> Result<u64, PointerOutsideBuffer> {
        if write_pointer < self.start || write_pointer >= self.end {
            return Err(PointerOutsideBuffer {
                write_pointer,
                start: self.start,
                end: self.end,
            });
        }
        let laps = u64::from(wrap_count.wrapping_sub(self.wraps as u32));
        let size = self.buffer_bytes();
        // From the last pointer to the buffer's end, whole laps, then from the start.
        let new = if laps == 0 {
            write_pointer.saturating_sub(self.last)
        } else {
            (self.end - self.last) + (laps - 1).saturating_mul(size) + (write_pointer - self.start)
        };
        self.wraps += laps;
        self.wrap_seen |= laps > 0;
        self.last = write_pointer;
        self.bytes_written = self.bytes_written.saturating_add(new);
        Ok(new)
    }

    /// Takes one reading of the pointer (`trRamWP` with its low bits cleared) and of
    /// `trRamWrap`; returns the bytes written since the previous reading.
    pub fn observe(&mut self, write_pointer: u64, wrap: bool) -> Result<u64, PointerOutsideBuffer> {
        if write_pointer < self.start || write_pointer >= self.end {
            return Err(PointerOutsideBuffer {
                write_pointer,
                start: self.start,
                end: self.end,
            });
        }
        let first_wrap_sign = wrap && !self.wrap_seen;
        self.wrap_seen |= wrap;
        let new = if write_pointer < self.last {
            self.wraps += 1;
            (self.end - self.last) + (write_pointer - self.start)
        } else if first_wrap_sign && self.wraps == 0 {
            // trRamWrap without the pointer going down: a whole lap since the last reading.
            self.wraps += 1;
            self.buffer_bytes() + (write_pointer - self.last)
        } else {
            write_pointer - self.last
        };
        self.last = write_pointer;
        self.bytes_written = self.bytes_written.saturating_add(new);
        Ok(new)
    }

    /// What a reader that has read the first `consumed` bytes of the trace has left to
    /// read, oldest first. When the sink overtook it, the bytes the sink overwrote are
    /// `lost` and the rest starts at the write pointer (the oldest byte in the buffer).
    pub fn unread(&self, consumed: u64) -> Unread {
        unread(
            self.buffer_bytes(),
            self.bytes_written,
            self.last - self.start,
            consumed,
        )
    }
}

/// [`WriteProgress::unread`] from the counts a driver reports: the buffer's length, the
/// bytes written since the start, and the write pointer as an offset in the buffer.
/// `buffer_bytes` must not be 0.
pub fn unread(buffer_bytes: u64, bytes_written: u64, write_offset: u64, consumed: u64) -> Unread {
    let size = buffer_bytes.max(1);
    let available = bytes_written.saturating_sub(consumed);
    let (lost, from, length) = if available > size {
        (available - size, write_offset.min(size - 1), size)
    } else {
        (0, consumed % size, available)
    };
    let first_length = length.min(size - from);
    Unread {
        lost,
        first: from..from + first_length,
        second: 0..length - first_length,
    }
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
    #[test]
    fn progress_counts_wraps_and_laps() {
        let mut progress = WriteProgress::new(0x3000, 0x3ffc).unwrap();
        assert_eq!(progress.buffer_bytes(), 0x1000);
        assert_eq!(progress.observe(0x3100, false), Ok(0x100));
        assert_eq!(progress.observe(0x3100, false), Ok(0));
        // Went round: from 0x3100 to the end, then 0x80 from the start.
        assert_eq!(progress.observe(0x3080, true), Ok(0xf00 + 0x80));
        assert_eq!((progress.wraps(), progress.bytes_written()), (1, 0x1080));
        // The wrap bit stays set; it alone says nothing more.
        assert_eq!(progress.observe(0x3090, true), Ok(0x10));
        assert_eq!(progress.wraps(), 1);
        assert!(progress.observe(0x4000, true).is_err());
        assert!(progress.observe(0x2ffc, true).is_err());
    }

    #[test]
    fn a_first_wrap_bit_without_the_pointer_going_down_is_a_lap() {
        let mut progress = WriteProgress::new(0x0, 0xfc).unwrap();
        assert_eq!(progress.observe(0x10, false), Ok(0x10));
        assert_eq!(progress.observe(0x20, true), Ok(0x100 + 0x10));
        assert_eq!(progress.wraps(), 1);
    }

    #[test]
    fn a_stop_on_wrap_sink_ends_with_the_buffer_full() {
        let mut progress = WriteProgress::new(0x3000, 0x3ffc).unwrap();
        assert_eq!(progress.observe(0x3ff0, false), Ok(0xff0));
        assert_eq!(progress.observe(0x3000, true), Ok(0x10));
        assert_eq!(progress.bytes_written(), 0x1000);
    }

    #[test]
    fn unread_bytes_go_round_the_end_and_a_slow_reader_loses_the_oldest() {
        let mut progress = WriteProgress::new(0x1000, 0x10fc).unwrap();
        progress.observe(0x10c0, false).unwrap();
        let unread = progress.unread(0x40);
        assert_eq!(
            (unread.lost, unread.first, unread.second),
            (0, 0x40..0xc0, 0..0)
        );
        progress.observe(0x1020, true).unwrap();
        // 0x120 written: 0xe0 unread from 0x40 round the end to 0x20.
        let unread = progress.unread(0x40);
        assert_eq!(
            (unread.lost, unread.first.clone(), unread.second.clone()),
            (0, 0x40..0x100, 0..0x20)
        );
        assert_eq!(unread.len(), 0xe0);
        // Nothing read: 0x20 bytes were overwritten; the rest starts at the pointer.
        let unread = progress.unread(0);
        assert_eq!(
            (unread.lost, unread.first, unread.second),
            (0x20, 0x20..0x100, 0..0x20)
        );
        assert!(progress.unread(0x120).is_empty());
    }

    #[test]
    fn progress_refuses_a_bad_buffer() {
        assert!(WriteProgress::new(0x1002, 0x2000).is_none());
        assert!(WriteProgress::new(0x2000, 0x1000).is_none());
        assert!(WriteProgress::new(0, u64::MAX - 3).is_none());
    }
    #[test]
    fn a_wrap_count_counts_every_lap_between_readings() {
        let mut progress = WriteProgress::new(0x1000, 0x10fc).unwrap();
        assert_eq!(progress.observe_counted(0x1040, 0), Ok(0x40));
        // Three laps unseen: to the end (0xc0), two whole buffers, then 0x20.
        assert_eq!(progress.observe_counted(0x1020, 3), Ok(0xc0 + 0x200 + 0x20));
        assert_eq!((progress.wraps(), progress.bytes_written()), (3, 0x320));
        assert_eq!(progress.observe_counted(0x1030, 3), Ok(0x10));
        // The count is modulo 2^32.
        let mut progress = WriteProgress::new(0, 0xfc).unwrap();
        progress.wraps = u64::from(u32::MAX);
        assert_eq!(progress.observe_counted(0x10, 0), Ok(0x100 + 0x10));
        assert!(progress.observe_counted(0x100, 0).is_err());
    }
}
