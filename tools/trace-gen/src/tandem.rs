//! A tandem-verification trace of a program QEMU runs: the registers QEMU logs before
//! each instruction ([`crate::cpu_log`]) are the state after the one before, so each
//! instruction's group is read off two consecutive states
//! ([`tandem_flow::TandemEncoder::retire_states`]: the registers that changed, the
//! instruction's destination even when its value did not, and its memory access from
//! the encoding and the registers before it).
//!
//! User-mode QEMU logs no CSR but `fcsr` and never leaves user mode, so the trace holds
//! the integer and floating-point registers, `fcsr`, the pc and memory accesses, and its
//! privilege is always U. The program's last instruction (the `exit` system call's
//! `ecall`) has no state after it: its group has the instruction and the fall-through
//! pc, and no writes.

use code_image::CodeImage;
use tandem_flow::{ArchitecturalState, EncoderOptions, Retirement, TandemEncoder};
use tandem_message::{EncodeError, InstructionBits, Parameters};

use crate::cpu_log::CpuState;

/// `fcsr`'s CSR address.
const FLOAT_CONTROL_AND_STATUS: u16 = 0x003;

/// Why a state could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum TandemFromQemuError {
    #[error("no instruction at {pc:#x} in the program's code (instruction #{index})")]
    NoCode { pc: u64, index: u64 },
    #[error("instruction #{index} at {pc:#x}: {source}")]
    Encode {
        pc: u64,
        index: u64,
        #[source]
        source: EncodeError,
    },
}

/// Feeds a [`TandemEncoder`] with QEMU's states, one instruction behind.
#[derive(Debug)]
pub struct TandemFromQemu<'a> {
    code: &'a CodeImage,
    encoder: TandemEncoder,
    /// The state before the instruction not yet encoded.
    pending: Option<ArchitecturalState>,
    instructions: u64,
}

/// The architectural state of a QEMU register dump, in user mode.
#[must_use]
pub fn architectural_state(state: &CpuState) -> ArchitecturalState {
    ArchitecturalState {
        pc: state.pc,
        integer: state.integer,
        float: state.float,
        csrs: state
            .fcsr
            .map(|value| vec![(FLOAT_CONTROL_AND_STATUS, value)])
            .unwrap_or_default(),
        privilege: 0,
    }
}

impl<'a> TandemFromQemu<'a> {
    #[must_use]
    pub fn new(code: &'a CodeImage, parameters: Parameters, options: EncoderOptions) -> Self {
        TandemFromQemu {
            code,
            encoder: TandemEncoder::new(parameters, options),
            pending: None,
            instructions: 0,
        }
    }

    /// The instruction at `pc`, as the trace carries it.
    fn bits_at(&self, pc: u64) -> Result<InstructionBits, TandemFromQemuError> {
        let mut bytes = [0u8; 4];
        let read = self.code.read(pc, &mut bytes);
        let no_code = TandemFromQemuError::NoCode {
            pc,
            index: self.instructions,
        };
        if read < 2 {
            return Err(no_code);
        }
        let raw = u32::from_le_bytes(bytes);
        if raw & 0b11 != 0b11 {
            return Ok(InstructionBits::bits16(raw as u16));
        }
        if read < 4 {
            return Err(no_code);
        }
        Ok(InstructionBits::bits32(raw))
    }

    fn encode_error(&self, pc: u64) -> impl FnOnce(EncodeError) -> TandemFromQemuError {
        let index = self.instructions;
        move |source| TandemFromQemuError::Encode { pc, index, source }
    }

    /// The state before the next instruction: the first starts the trace (a
    /// state-initialization group), every later one completes the instruction before.
    ///
    /// # Errors
    ///
    /// When the previous instruction's pc has no code, or the encoder refuses a value.
    pub fn push(&mut self, state: &CpuState) -> Result<(), TandemFromQemuError> {
        let after = architectural_state(state);
        match self.pending.take() {
            None => self
                .encoder
                .start(&after)
                .map_err(self.encode_error(after.pc))?,
            Some(before) => {
                let bits = self.bits_at(before.pc)?;
                self.encoder
                    .retire_states(&before, bits, &after)
                    .map_err(self.encode_error(before.pc))?;
                self.instructions += 1;
            }
        }
        self.pending = Some(after);
        Ok(())
    }

    /// Instructions encoded so far.
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// The bytes so far.
    pub fn take_output(&mut self) -> Vec<u8> {
        self.encoder.take_output()
    }

    /// Encodes the last instruction (no state after it: its fall-through pc, no writes)
    /// and returns the rest of the bytes.
    ///
    /// # Errors
    ///
    /// As [`TandemFromQemu::push`].
    pub fn finish(mut self) -> Result<(Vec<u8>, u64), TandemFromQemuError> {
        if let Some(before) = self.pending.take() {
            let bits = self.bits_at(before.pc)?;
            let next_pc = before.pc.wrapping_add(u64::from(bits.length.bytes()));
            self.encoder
                .retire(&Retirement {
                    pc: before.pc,
                    bits,
                    next_pc,
                    writes: &[],
                    memory: None,
                    privilege: None,
                })
                .map_err(self.encode_error(before.pc))?;
            self.instructions += 1;
        }
        let instructions = self.instructions;
        Ok((self.encoder.take_output(), instructions))
    }
}
