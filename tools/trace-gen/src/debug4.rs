//! A debug-trace-module trace (the debug specification's trace appendix,
//! [`debug4_flow`]) of a program QEMU runs, fed to [`Debug4Encoder`] from either of
//! QEMU's logs:
//!
//! - [`Debug4FromQemu::push_pc`]: the exec log's retired PCs, enough for control flow;
//! - [`Debug4FromQemu::push_state`]: the register log ([`crate::cpu_log`]), which also
//!   gives each load's and store's data access. QEMU logs the registers *before* each
//!   instruction, so the value a load wrote is only known from the next state: the
//!   driver keeps one instruction pending per hart (as [`crate::tandem`] does).
//!
//! Each access is computed from the instruction's encoding
//! ([`riscv_insn::Instruction::memory_access`]): the address is the base register
//! before plus the offset; store data is the data register before, load data the
//! destination register after, both truncated to the access size (the bytes that
//! crossed the bus, what a trace module sees). An atomic memory operation is reported
//! as a load (its old value) when the options send load sequences and it has a
//! destination, else as a store (the value of `rs2`).
//!
//! CSR accesses are not reported: user-mode QEMU logs no CSR but `fcsr`, so the value
//! of most CSR reads and writes is unknown. The decoder places data sequences that come
//! without an address on the next instruction that can make them, CSR instructions
//! included, so options that send load (or store) data without the address are
//! refused ([`Debug4FromQemuError::DataWithoutAddress`]) rather than traced wrongly.
//! Privilege is not reported either: a user-mode run never leaves user mode.

use std::collections::BTreeMap;

use code_image::CodeImage;
use debug4_flow::{
    AccessKind, DataAccess, DataEmission, Debug4Encoder, Emission, EncodeError, EncodedTrace,
    EncoderOptions, Retirement,
};
use riscv_insn::{AccessOperation, MemoryAccessShape, RegisterOperand};

use crate::cpu_log::CpuState;

/// Which side's sequences a refused option concerns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSide {
    Load,
    Store,
}

/// Why QEMU's log could not be encoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Debug4FromQemuError {
    /// The encoder refused its options (a ring size that is not a multiple of 32 bytes).
    #[error("debug trace module encoder options: {source}")]
    Options {
        #[source]
        source: EncodeError,
    },
    /// The options send data values without addresses: the decoder would place them on
    /// CSR instructions, whose accesses this driver cannot report.
    #[error(
        "the options send {side:?} data without its address, which needs CSR accesses QEMU's user-mode log does not show"
    )]
    DataWithoutAddress { side: DataSide },
    /// Data sequences need register states: the exec log has only PCs.
    #[error("instruction #{index} at {pc:#x}: the options send data sequences, which need register states (push_state), not PCs")]
    DataNeedsRegisters { pc: u64, index: u64 },
    /// The program's code has no instruction at a retired PC.
    #[error("instruction #{index}: no instruction at {pc:#x} in the program's code")]
    NoCode { pc: u64, index: u64 },
    #[error("instruction #{index} at {pc:#x}: {source}")]
    Encode {
        pc: u64,
        index: u64,
        #[source]
        source: EncodeError,
    },
}

/// One instruction handed to the encoder, with the data access computed for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retired {
    pub hart: u16,
    pub pc: u64,
    pub data: Option<DataAccess>,
}

/// Feeds a [`Debug4Encoder`] with QEMU's PCs or register states.
#[derive(Debug)]
pub struct Debug4FromQemu<'a> {
    code: &'a CodeImage,
    encoder: Debug4Encoder<'a>,
    data: DataEmission,
    /// Per hart, the state before its instruction not yet encoded.
    pending: BTreeMap<u16, CpuState>,
    instructions: u64,
}

impl<'a> Debug4FromQemu<'a> {
    /// An encoder of `code`'s execution with `options`.
    ///
    /// # Errors
    ///
    /// When the encoder refuses the options, or they send data without addresses.
    pub fn new(code: &'a CodeImage, options: EncoderOptions) -> Result<Self, Debug4FromQemuError> {
        let data = options.data;
        if data.load_data == Emission::On && data.load_address == Emission::Off {
            return Err(Debug4FromQemuError::DataWithoutAddress {
                side: DataSide::Load,
            });
        }
        if data.store_data == Emission::On && data.store_address == Emission::Off {
            return Err(Debug4FromQemuError::DataWithoutAddress {
                side: DataSide::Store,
            });
        }
        let encoder = Debug4Encoder::new(code, options)
            .map_err(|source| Debug4FromQemuError::Options { source })?;
        Ok(Self {
            code,
            encoder,
            data,
            pending: BTreeMap::new(),
            instructions: 0,
        })
    }

    /// Instructions encoded so far (pending ones not counted).
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// The next retired PC of `hart`, from the exec log.
    ///
    /// # Errors
    ///
    /// When the options send data sequences, or the encoder refuses the instruction.
    pub fn push_pc(&mut self, hart: u16, pc: u64) -> Result<(), Debug4FromQemuError> {
        if self.data != DataEmission::default() {
            return Err(Debug4FromQemuError::DataNeedsRegisters {
                pc,
                index: self.instructions,
            });
        }
        // A hart fed states before: its last one has no state after it.
        if let Some(before) = self.pending.remove(&hart) {
            self.retire_state(hart, &before, None)?;
        }
        self.retire(Retirement::at(hart, pc))
    }

    /// The registers of `hart` before its next instruction: they complete the hart's
    /// pending instruction (its successor, the value it loaded), which is encoded now;
    /// returned with the access computed for it.
    ///
    /// # Errors
    ///
    /// When the pending instruction has no code, or the encoder refuses it.
    pub fn push_state(
        &mut self,
        hart: u16,
        state: &CpuState,
    ) -> Result<Option<Retired>, Debug4FromQemuError> {
        let retired = match self.pending.get(&hart) {
            Some(before) => {
                let before = before.clone();
                Some(self.retire_state(hart, &before, Some(state))?)
            }
            None => None,
        };
        match self.pending.get_mut(&hart) {
            Some(slot) => slot.clone_from(state),
            None => {
                self.pending.insert(hart, state.clone());
            }
        }
        Ok(retired)
    }

    /// Encodes each hart's pending instruction (no state after it: a load there would
    /// lack its value, which the encoder refuses when the options send it), ends the
    /// trace and returns it with the count of instructions encoded.
    ///
    /// # Errors
    ///
    /// As [`Debug4FromQemu::push_state`], and when the encoder cannot end the trace.
    pub fn finish(mut self) -> Result<(EncodedTrace, u64), Debug4FromQemuError> {
        let pending = std::mem::take(&mut self.pending);
        for (hart, before) in pending {
            self.retire_state(hart, &before, None)?;
        }
        let instructions = self.instructions;
        let trace = self
            .encoder
            .finish()
            .map_err(|source| Debug4FromQemuError::Encode {
                pc: 0,
                index: instructions,
                source,
            })?;
        Ok((trace, instructions))
    }

    fn retire(&mut self, retirement: Retirement) -> Result<(), Debug4FromQemuError> {
        let index = self.instructions;
        self.encoder
            .retire(&retirement)
            .map_err(|source| match source {
                EncodeError::NoCode { pc } => Debug4FromQemuError::NoCode { pc, index },
                source => Debug4FromQemuError::Encode {
                    pc: retirement.pc,
                    index,
                    source,
                },
            })?;
        self.instructions = self.instructions.saturating_add(1);
        Ok(())
    }

    fn retire_state(
        &mut self,
        hart: u16,
        before: &CpuState,
        after: Option<&CpuState>,
    ) -> Result<Retired, Debug4FromQemuError> {
        let pc = before.pc;
        let data = if self.data == DataEmission::default() {
            None
        } else {
            let shape = self.memory_access(pc)?;
            shape.map(|shape| access(shape, self.data, before, after))
        };
        self.retire(Retirement {
            hart,
            pc,
            privilege: None,
            data,
            time: None,
        })?;
        Ok(Retired { hart, pc, data })
    }

    /// The memory access of the instruction at `pc`, `None` when it makes none.
    fn memory_access(&self, pc: u64) -> Result<Option<MemoryAccessShape>, Debug4FromQemuError> {
        let no_code = Debug4FromQemuError::NoCode {
            pc,
            index: self.instructions,
        };
        let mut bytes = [0u8; 4];
        let read = self.code.read(pc, &mut bytes);
        if read < 2 {
            return Err(no_code);
        }
        let options = self
            .code
            .machine_at(pc)
            .and_then(|machine| machine.riscv())
            .map(|info| info.options)
            .unwrap_or_default();
        let instruction = riscv_insn::decode(u32::from_le_bytes(bytes), options).map_err(|_| {
            Debug4FromQemuError::NoCode {
                pc,
                index: self.instructions,
            }
        })?;
        if usize::from(instruction.length) > read {
            return Err(no_code);
        }
        Ok(instruction.memory_access())
    }
}

/// The access `shape` made, from the registers before and (for loaded values) after.
fn access(
    shape: MemoryAccessShape,
    data: DataEmission,
    before: &CpuState,
    after: Option<&CpuState>,
) -> DataAccess {
    let base = before
        .integer
        .get(usize::from(shape.base))
        .copied()
        .unwrap_or(0);
    // Address arithmetic wraps in the hart itself: the effective address is the
    // register sum modulo 2^64, whatever the log's values.
    let address = base.wrapping_add(i64::from(shape.offset) as u64);
    let sends_loads = data.load_address == Emission::On || data.load_data == Emission::On;
    let sends_stores = data.store_address == Emission::On || data.store_data == Emission::On;
    let kind = match shape.operation {
        AccessOperation::Load | AccessOperation::LoadReserved => AccessKind::Load,
        AccessOperation::Store | AccessOperation::StoreConditional => AccessKind::Store,
        // One access per retirement, of a side whose sequences are sent: the decoder
        // places sequences of either side on an AMO, so it must carry one. The old
        // value is lost when rd is x0 (`amoswap.w zero, zero, (a5)` unlocks): then the
        // store side, whose value is always known, when it is sent.
        AccessOperation::Amo(_) => match (sends_loads, shape.destination, sends_stores) {
            (true, Some(_), _) | (true, None, false) => AccessKind::Load,
            _ => AccessKind::Store,
        },
    };
    let value = match kind {
        AccessKind::Load => shape
            .destination
            .and_then(|destination| after.and_then(|after| operand(after, destination))),
        _ => shape.data.and_then(|source| operand(before, source)),
    }
    .map(|value| truncate(value, shape.size_bytes));
    DataAccess {
        kind,
        address: Some(address),
        value,
    }
}

fn operand(state: &CpuState, register: RegisterOperand) -> Option<u64> {
    match register {
        RegisterOperand::Integer(index) => state.integer.get(usize::from(index)).copied(),
        RegisterOperand::Float(index) => state
            .float
            .as_ref()
            .and_then(|float| float.get(usize::from(index)).copied()),
    }
}

/// The low `size_bytes` bytes of `value` (all of it from 8 bytes up).
fn truncate(value: u64, size_bytes: u8) -> u64 {
    match 1u64.checked_shl(u32::from(size_bytes).saturating_mul(8)) {
        Some(limit) => value & limit.wrapping_sub(1),
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncation_keeps_the_accessed_bytes() {
        assert_eq!(truncate(0x1122_3344_5566_7788, 1), 0x88);
        assert_eq!(truncate(0x1122_3344_5566_7788, 2), 0x7788);
        assert_eq!(truncate(0x1122_3344_5566_7788, 4), 0x5566_7788);
        assert_eq!(truncate(0x1122_3344_5566_7788, 8), 0x1122_3344_5566_7788);
    }
}
