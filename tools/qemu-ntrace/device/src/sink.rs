//! RAM sink registers and the sink itself: SMEM mode only, addresses are the block's
//! offsets (`docs/trace-device.md`, "Addresses of the RAM sink"), trace is written in
//! 32-bit trace words at trRamWP.

use trace_control::component::implementation_value;
use trace_control::ram_sink::{
    self as registers, control, join_address, mode, split_address, write_pointer_low,
    ADDRESS_ALIGNMENT,
};
use trace_control::{ComponentType, Version};

use crate::memory::SharedMemory;

/// `trRamImpl`: version 1.0, type RAM sink, SMEM only, with the wrap count.
pub(crate) const IMPLEMENTATION: u32 = registers::implementation::HAS_WRAP_COUNT.with(
    registers::implementation::HAS_SMEM.with(
        implementation_value(ComponentType::RamSink, Version::V1_0),
        true,
    ),
    true,
);

/// N-Trace idle byte (MSEO = 11 where a message would start, 0xFF as
/// `ntrace_message::MessageEncoder::encode_idle` writes it): pads the last trace word.
pub(crate) const IDLE: u8 = 0xff;

/// Bytes per trace word.
const WORD: usize = ADDRESS_ALIGNMENT as usize;

/// The registers the poll watches, in the order of [`Registers`]. RP is watched though
/// not implemented: software probes it (writes the limit, reads back) to choose between
/// `trRamData` and memory reads, so it must read 0 at once.
pub(crate) const WATCHED: [usize; 11] = [
    registers::CONTROL,
    registers::IMPLEMENTATION,
    registers::START_LOW,
    registers::START_HIGH,
    registers::LIMIT_LOW,
    registers::LIMIT_HIGH,
    registers::WRITE_POINTER_LOW,
    registers::WRITE_POINTER_HIGH,
    registers::READ_POINTER_LOW,
    registers::READ_POINTER_HIGH,
    registers::WRAP_COUNT,
];

/// Indices in [`Registers`].
pub(crate) const CONTROL: usize = 0;
pub(crate) const IMPLEMENTATION_INDEX: usize = 1;
pub(crate) const START: usize = 2;
pub(crate) const LIMIT: usize = 4;
pub(crate) const WRITE_POINTER: usize = 6;
pub(crate) const WRAP_COUNT: usize = 10;

/// Values of the [`WATCHED`] registers.
pub(crate) type Registers = [u32; WATCHED.len()];

/// The sink memory as addresses: `start..end`, both word-aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SinkMemory {
    pub start: u64,
    pub end: u64,
}

impl SinkMemory {
    /// The word-aligned address in the sink memory nearest to `address`.
    fn clamp(&self, address: u64) -> u64 {
        (address & !(ADDRESS_ALIGNMENT - 1)).clamp(self.start, self.end - ADDRESS_ALIGNMENT)
    }
}

fn address(registers: &Registers, low: usize) -> u64 {
    join_address(registers[low], registers[low + 1])
}

fn set_address(registers: &mut Registers, low: usize, address: u64) {
    (registers[low], registers[low + 1]) = split_address(address);
}

/// trRamStart.
pub(crate) fn start(registers: &Registers) -> u64 {
    address(registers, START)
}

/// trRamLimit: the address of the buffer's last word.
pub(crate) fn limit(registers: &Registers) -> u64 {
    address(registers, LIMIT)
}

/// trRamWP without the wrap bit.
pub(crate) fn write_pointer(registers: &Registers) -> u64 {
    address(registers, WRITE_POINTER) & !(ADDRESS_ALIGNMENT - 1)
}

/// trRamWrap.
pub(crate) fn wrapped(registers: &Registers) -> bool {
    write_pointer_low::WRAP.is_set(registers[WRITE_POINTER])
}

fn set_write_pointer(registers: &mut Registers, address: u64, wrap: bool) {
    set_address(registers, WRITE_POINTER, address);
    registers[WRITE_POINTER] = write_pointer_low::WRAP.with(registers[WRITE_POINTER], wrap);
}

/// trRamActive.
pub(crate) fn is_active(registers: &Registers) -> bool {
    control::ACTIVE.is_set(registers[CONTROL])
}

/// Whether the sink stores trace: active and enabled.
pub(crate) fn enabled(registers: &Registers) -> bool {
    control::ACTIVE.is_set(registers[CONTROL]) && control::ENABLE.is_set(registers[CONTROL])
}

/// Every register of a sink in reset (`active` false) or just released from it: the
/// buffer is the whole sink memory, the write pointer at its start.
pub(crate) fn reset(memory: &SinkMemory, active: bool) -> Registers {
    let control_value = control::ACTIVE.with(0, active);
    let control_value = control::EMPTY.with(control_value, true);
    let control_value = control::MODE.insert(control_value, mode::SMEM);
    let mut registers = [0; WATCHED.len()];
    registers[CONTROL] = control_value;
    registers[IMPLEMENTATION_INDEX] = IMPLEMENTATION;
    set_address(&mut registers, START, memory.start);
    set_address(&mut registers, LIMIT, memory.end - ADDRESS_ALIGNMENT);
    set_address(&mut registers, WRITE_POINTER, memory.start);
    registers
}

/// The registers after the guest stored `written` over `old` (see
/// [`encoder::apply`](crate::encoder::apply)). Effects on the sink's state (flush, reset)
/// are the caller's, from the old and new values.
pub(crate) fn apply(old: &Registers, written: &Registers, memory: &SinkMemory) -> Registers {
    let active = control::ACTIVE.is_set(written[CONTROL]);
    if !active || !control::ACTIVE.is_set(old[CONTROL]) {
        return reset(memory, active);
    }
    let mut new = *old;
    if written[CONTROL] != old[CONTROL] {
        let copied = control::ENABLE.mask() | control::STOP_ON_WRAP.mask();
        let control_value =
            (reset(memory, true)[CONTROL] & !control::EMPTY.mask()) | (written[CONTROL] & copied);
        new[CONTROL] = control::EMPTY.with(control_value, control::EMPTY.is_set(old[CONTROL]));
    }
    // An address is its Low and High registers together: either written, the pair is
    // legalised as one value (so trRamStartHigh = 0xffffffff reads back the top of the
    // sink memory's High, 0 for a block below 4 GiB, and moves Low to the top too).
    let written_pair = |low: usize| {
        let value = |index: usize| {
            if written[index] != old[index] {
                written[index]
            } else {
                old[index]
            }
        };
        (written[low] != old[low] || written[low + 1] != old[low + 1])
            .then(|| join_address(value(low), value(low + 1)))
    };
    for low in [START, LIMIT] {
        if let Some(address) = written_pair(low) {
            set_address(&mut new, low, memory.clamp(address));
        }
    }
    if let Some(address) = written_pair(WRITE_POINTER) {
        // trRamWrap is WARL: a store of trRamWPLow sets it to bit 0 of the value stored,
        // so a store that leaves the register as it was (unseen) changes nothing either.
        let wrap = if written[WRITE_POINTER] != old[WRITE_POINTER] {
            write_pointer_low::WRAP.is_set(written[WRITE_POINTER])
        } else {
            wrapped(old)
        };
        set_write_pointer(&mut new, memory.clamp(address), wrap);
    }
    // RP is not implemented: 0. The wrap count is read-only: `new` keeps the old one.
    new
}

/// Trace bytes received but not yet written: the sink writes whole trace words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PartialWord {
    bytes: [u8; WORD],
    length: usize,
}

impl PartialWord {
    pub(crate) fn is_empty(&self) -> bool {
        self.length == 0
    }

    pub(crate) fn clear(&mut self) {
        self.length = 0;
    }
}

/// What storing trace did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The write pointer went past trRamLimit back to trRamStart.
    pub wrapped: bool,
    /// trRamStopOnWrap stopped the sink; only `bytes` bytes were taken.
    pub stopped: bool,
    /// Bytes taken (stored or buffered).
    pub bytes: usize,
}

/// Writes a trace word at trRamWP and advances it: after the word at trRamLimit (or the
/// sink memory's last word) it goes back to trRamStart and sets trRamWrap. Returns
/// whether it wrapped.
fn store_word(
    shared: &SharedMemory,
    registers: &mut Registers,
    memory: &SinkMemory,
    word: [u8; WORD],
) -> bool {
    let at = write_pointer(registers);
    // The write pointer is kept inside the sink memory, which is inside the block.
    shared.store(at as usize, u32::from_le_bytes(word));
    let next = at + ADDRESS_ALIGNMENT;
    let wraps = at == limit(registers) || next >= memory.end;
    let next = if wraps { start(registers) } else { next };
    set_write_pointer(registers, next, wrapped(registers) || wraps);
    if wraps {
        registers[WRAP_COUNT] = registers[WRAP_COUNT].wrapping_add(1);
    }
    wraps
}

/// Stores `bytes` through the partial word (an enabled sink). With trRamStopOnWrap, the
/// word that fills the buffer is the last: the sink disables itself and the rest of
/// `bytes` is dropped.
pub(crate) fn store(
    shared: &SharedMemory,
    registers: &mut Registers,
    memory: &SinkMemory,
    partial: &mut PartialWord,
    bytes: &[u8],
) -> Stored {
    let stop_on_wrap = control::STOP_ON_WRAP.is_set(registers[CONTROL]);
    let mut result = Stored::default();
    for &byte in bytes {
        partial.bytes[partial.length] = byte;
        partial.length += 1;
        result.bytes += 1;
        if partial.length < WORD {
            continue;
        }
        partial.length = 0;
        if store_word(shared, registers, memory, partial.bytes) {
            result.wrapped = true;
            if stop_on_wrap {
                registers[CONTROL] = control::ENABLE.with(registers[CONTROL], false);
                result.stopped = true;
                break;
            }
        }
    }
    registers[CONTROL] = control::EMPTY.with(registers[CONTROL], partial.is_empty());
    result
}

/// Writes a partial word padded with idle bytes (trRamEnable 1 → 0 flushes).
pub(crate) fn flush(
    shared: &SharedMemory,
    registers: &mut Registers,
    memory: &SinkMemory,
    partial: &mut PartialWord,
) {
    if !partial.is_empty() {
        partial.bytes[partial.length..].fill(IDLE);
        partial.clear();
        store_word(shared, registers, memory, partial.bytes);
    }
    registers[CONTROL] = control::EMPTY.with(registers[CONTROL], true);
}
