//! A translation block as the ingress port needs it: its instructions decoded once, when
//! QEMU translates it, and where control may go after its last one.

use ntrace_flow::InstructionRun;
use qemu_plugin::TranslationBlock;
use riscv_insn::{ControlFlow, DecodeOptions, Instruction};

/// A translated block. Its instructions are kept by offset: QEMU shares a block between
/// every virtual address its physical page is mapped at, so the address it was
/// translated at is not where it runs (the executed `pc` is read on every execution).
#[derive(Debug)]
pub struct TranslatedBlock {
    pub run: InstructionRun,
    /// The address QEMU translated it at (where it runs unless its page is mapped at
    /// several addresses).
    pub translated_at: u64,
    /// Its last instruction's place and flow, kept beside the run: every execution asks
    /// for its successors, and this spares a walk to the run's heap storage.
    last: Option<LastInstruction>,
}

/// The last instruction of a block: where it is and where it goes.
#[derive(Clone, Copy, Debug)]
struct LastInstruction {
    offset: u32,
    length: u8,
    flow: ControlFlow,
}

/// Where execution goes after a block's last instruction, as far as the code says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Successor {
    /// Only these addresses (a conditional branch has two).
    Known { first: u64, second: u64 },
    /// Anywhere: an indirect jump or a return.
    Indirect,
    /// A trap return (`sret`, `mret`): the privilege level changes.
    TrapReturn,
    /// `ecall`/`ebreak`: a trap, always.
    Trap,
}

impl TranslatedBlock {
    /// Decodes the block's instructions. One that does not decode ends the run: it cannot
    /// retire (it raises an illegal-instruction exception).
    pub fn new(block: &TranslationBlock<'_>) -> Self {
        let start = block.vaddr();
        let mut instructions = Vec::with_capacity(block.size());
        for instruction in block.instructions() {
            let mut bytes = [0u8; 4];
            let read = instruction.read_data(&mut bytes);
            let Some(decoded) = decode(&bytes[..read.min(4)]) else {
                break;
            };
            let Ok(offset) = u32::try_from(instruction.vaddr().wrapping_sub(start)) else {
                break;
            };
            instructions.push((offset, decoded));
        }
        let last = instructions
            .last()
            .map(|&(offset, instruction)| LastInstruction {
                offset,
                length: instruction.length,
                flow: instruction.control_flow,
            });
        Self {
            run: InstructionRun::new(instructions),
            translated_at: start,
            last,
        }
    }

    /// Where execution goes after the last instruction when the block ran at `start`;
    /// `None` for a block without instructions.
    #[inline]
    pub fn successor(&self, start: u64) -> Option<Successor> {
        let last = self.last?;
        let address = start.wrapping_add(u64::from(last.offset));
        let fallthrough = address.wrapping_add(u64::from(last.length));
        let target = |offset: i32| address.wrapping_add(offset as i64 as u64);
        Some(match last.flow {
            ControlFlow::Sequential => Successor::Known {
                first: fallthrough,
                second: fallthrough,
            },
            ControlFlow::Branch { offset } => Successor::Known {
                first: target(offset),
                second: fallthrough,
            },
            ControlFlow::Jump { offset, .. } => Successor::Known {
                first: target(offset),
                second: target(offset),
            },
            ControlFlow::JumpRegister { .. }
            | ControlFlow::TableJump { .. }
            | ControlFlow::PopReturn => Successor::Indirect,
            ControlFlow::TrapReturn => Successor::TrapReturn,
            ControlFlow::EnvironmentTrap => Successor::Trap,
        })
    }

    /// The index of the instruction at `address` when the block ran at `start`.
    pub fn index_of(&self, start: u64, address: u64) -> Option<usize> {
        let offset = u32::try_from(address.wrapping_sub(start)).ok()?;
        self.run
            .instructions()
            .iter()
            .position(|&(own, _)| own == offset)
    }
}

/// One instruction from the bytes QEMU translated (RV64GC; the guest's CPU has no Zcmp
/// or Zcmt).
fn decode(bytes: &[u8]) -> Option<Instruction> {
    if bytes.len() < 2 {
        return None;
    }
    let mut word = [0u8; 4];
    word[..bytes.len()].copy_from_slice(bytes);
    riscv_insn::decode(u32::from_le_bytes(word), DecodeOptions::default()).ok()
}
