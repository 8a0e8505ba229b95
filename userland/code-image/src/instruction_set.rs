//! What a profile needs of one instruction: its length (to walk a fall-through range)
//! and its control-flow class (a call's return lands after it), for each machine.
//!
//! The trace decoders use `riscv-insn` directly on their hot path, with the options
//! the image keeps per file ([`crate::FileDecodeInfo`]); this is the slower,
//! machine-independent view the AutoFDO profile builder walks binaries with.

use std::ops::Range;

use riscv_insn::{instruction_length, ControlFlow, Itype};

use crate::{CodeImage, Compressed, FileDecodeInfo, Machine};

/// The control-flow class of an instruction, common to every machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FlowKind {
    Sequential,
    ConditionalBranch,
    /// A direct jump without a link (and a RISC-V Zcmt `cm.jt`).
    Jump,
    IndirectJump,
    /// A direct call (and a RISC-V Zcmt `cm.jalt`).
    Call,
    /// An indirect call; on RISC-V also a coroutine swap, which links too.
    IndirectCall,
    Return,
    /// `ecall`, `ebreak`, `int`, `syscall`, `ud2`...
    Trap,
    /// `mret`, `sret`...
    TrapReturn,
}

impl FlowKind {
    /// Whether the instruction links: its return address is the next instruction.
    pub fn is_call(self) -> bool {
        matches!(self, FlowKind::Call | FlowKind::IndirectCall)
    }
}

/// One decoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// In bytes.
    pub length: u8,
    pub flow: FlowKind,
}

/// An instruction set: how long the instruction at an address is and how it changes
/// the flow. The provided methods read the bytes from a [`CodeImage`].
pub trait InstructionSet {
    /// How messages name these instructions (`RISC-V`, `x86_64`).
    fn name(&self) -> &'static str;

    /// The length of the shortest instruction in bytes: where to look for the next one
    /// after bytes that decode to none.
    fn min_instruction_length(&self) -> u8;

    /// The length of the longest instruction in bytes: how many [`decode`](Self::decode)
    /// wants to see.
    fn max_instruction_length(&self) -> u8;

    /// The instruction whose encoding starts `bytes` (at most
    /// [`max_instruction_length`](Self::max_instruction_length) of them, fewer where
    /// the mapping ends) at `address`; `None` when they are no instruction of this set.
    fn decode(&self, address: u64, bytes: &[u8]) -> Option<Instruction>;

    /// The instruction at `address` of `image`, `None` where no executable segment
    /// holds one.
    fn instruction_at(&self, image: &CodeImage, address: u64) -> Option<Instruction> {
        let segment = image.segment(image.segment_index(address)?)?;
        if !segment.executable {
            return None;
        }
        let mut bytes = [0u8; MAX_INSTRUCTION_BYTES];
        let wanted = usize::from(self.max_instruction_length()).min(MAX_INSTRUCTION_BYTES);
        let read = image.read(address, &mut bytes[..wanted]);
        self.decode(address, &bytes[..read])
    }

    /// Where the instruction after the one at `address` starts: past its length, or
    /// past the shortest instruction where the bytes decode to none. `None` at the top
    /// of the address space.
    fn next_instruction(&self, image: &CodeImage, address: u64) -> Option<u64> {
        let length = self
            .instruction_at(image, address)
            .map_or(self.min_instruction_length(), |instruction| {
                instruction.length
            });
        address.checked_add(u64::from(length.max(1)))
    }

    /// The addresses of the instructions in `range`, walking from its start with
    /// [`next_instruction`](Self::next_instruction): bytes that decode to no
    /// instruction (data in the text, an unknown extension) are stepped over by the
    /// smallest instruction.
    fn instruction_addresses<'a>(
        &'a self,
        image: &'a CodeImage,
        range: Range<u64>,
    ) -> InstructionAddresses<'a, Self>
    where
        Self: Sized,
    {
        InstructionAddresses {
            instruction_set: self,
            image,
            next: Some(range.start),
            end: range.end,
        }
    }
}

/// The longest instruction of any supported machine (x86's 15 bytes).
const MAX_INSTRUCTION_BYTES: usize = 16;

/// Iterator of [`InstructionSet::instruction_addresses`].
#[derive(Debug)]
pub struct InstructionAddresses<'a, S> {
    instruction_set: &'a S,
    image: &'a CodeImage,
    next: Option<u64>,
    end: u64,
}

impl<S: InstructionSet> Iterator for InstructionAddresses<'_, S> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let address = self.next.filter(|&address| address < self.end)?;
        self.next = self.instruction_set.next_instruction(self.image, address);
        Some(address)
    }
}

/// RISC-V code of one file, decoded by `riscv-insn` with the file's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RiscvCode {
    pub decode: FileDecodeInfo,
    pub compressed: Compressed,
}

impl Default for RiscvCode {
    /// RV64 with the C extension and no Zcmp/Zcmt (`rv64gc`).
    fn default() -> Self {
        RiscvCode {
            decode: FileDecodeInfo::default(),
            compressed: Compressed::Allowed,
        }
    }
}

impl InstructionSet for RiscvCode {
    fn name(&self) -> &'static str {
        "RISC-V"
    }

    fn min_instruction_length(&self) -> u8 {
        match self.compressed {
            Compressed::Allowed => 2,
            Compressed::Absent => 4,
        }
    }

    fn max_instruction_length(&self) -> u8 {
        // riscv-insn decodes 16- and 32-bit encodings; a longer one starts with the
        // same 32 bits and is refused from them.
        4
    }

    fn decode(&self, _address: u64, bytes: &[u8]) -> Option<Instruction> {
        let halfword = u16::from_le_bytes([*bytes.first()?, *bytes.get(1)?]);
        let length = instruction_length(halfword).bytes()?;
        let raw = if length == 2 {
            u32::from(halfword)
        } else {
            u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?)
        };
        let instruction = riscv_insn::decode(raw, self.decode.options).ok()?;
        Some(Instruction {
            length: instruction.length,
            flow: riscv_flow(&instruction),
        })
    }
}

fn riscv_flow(instruction: &riscv_insn::Instruction) -> FlowKind {
    let links = instruction.links();
    match instruction.control_flow {
        ControlFlow::Sequential => FlowKind::Sequential,
        ControlFlow::Branch { .. } => FlowKind::ConditionalBranch,
        ControlFlow::Jump { .. } | ControlFlow::TableJump { .. } if links => FlowKind::Call,
        ControlFlow::Jump { .. } | ControlFlow::TableJump { .. } => FlowKind::Jump,
        ControlFlow::JumpRegister { .. } if links => FlowKind::IndirectCall,
        ControlFlow::JumpRegister { .. } => match instruction.itype(false) {
            Itype::Return => FlowKind::Return,
            _ => FlowKind::IndirectJump,
        },
        ControlFlow::PopReturn => FlowKind::Return,
        ControlFlow::EnvironmentTrap => FlowKind::Trap,
        ControlFlow::TrapReturn => FlowKind::TrapReturn,
    }
}

/// x86_64 code, decoded by `iced-x86` in 64-bit mode.
#[cfg(feature = "x86")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct X86_64Code;

/// x86 instructions are at most 15 bytes long.
#[cfg(feature = "x86")]
const X86_MAX_INSTRUCTION_BYTES: u8 = 15;

#[cfg(feature = "x86")]
impl InstructionSet for X86_64Code {
    fn name(&self) -> &'static str {
        "x86_64"
    }

    fn min_instruction_length(&self) -> u8 {
        1
    }

    fn max_instruction_length(&self) -> u8 {
        X86_MAX_INSTRUCTION_BYTES
    }

    fn decode(&self, address: u64, bytes: &[u8]) -> Option<Instruction> {
        use iced_x86::FlowControl;
        let bytes = &bytes[..bytes.len().min(usize::from(X86_MAX_INSTRUCTION_BYTES))];
        let mut decoder =
            iced_x86::Decoder::with_ip(64, bytes, address, iced_x86::DecoderOptions::NONE);
        let instruction = decoder.decode();
        if instruction.is_invalid() {
            return None;
        }
        let flow = match instruction.flow_control() {
            FlowControl::Next | FlowControl::XbeginXabortXend => FlowKind::Sequential,
            FlowControl::UnconditionalBranch => FlowKind::Jump,
            FlowControl::IndirectBranch => FlowKind::IndirectJump,
            FlowControl::ConditionalBranch => FlowKind::ConditionalBranch,
            FlowControl::Return => FlowKind::Return,
            FlowControl::Call => FlowKind::Call,
            FlowControl::IndirectCall => FlowKind::IndirectCall,
            FlowControl::Interrupt | FlowControl::Exception => FlowKind::Trap,
        };
        Some(Instruction {
            // At most 15: `bytes` was cut there.
            length: u8::try_from(instruction.len()).ok()?,
            flow,
        })
    }
}

impl InstructionSet for Machine {
    fn name(&self) -> &'static str {
        match self {
            Machine::Riscv(code) => code.name(),
            Machine::X86_64 => "x86_64",
        }
    }

    fn min_instruction_length(&self) -> u8 {
        match self {
            Machine::Riscv(code) => code.min_instruction_length(),
            Machine::X86_64 => 1,
        }
    }

    fn max_instruction_length(&self) -> u8 {
        match self {
            Machine::Riscv(code) => code.max_instruction_length(),
            Machine::X86_64 => 15,
        }
    }

    fn decode(&self, address: u64, bytes: &[u8]) -> Option<Instruction> {
        match self {
            Machine::Riscv(code) => code.decode(address, bytes),
            #[cfg(feature = "x86")]
            Machine::X86_64 => X86_64Code.decode(address, bytes),
            // Never loaded without the feature (the loader refuses the file).
            #[cfg(not(feature = "x86"))]
            Machine::X86_64 => {
                let _ = (address, bytes);
                None
            }
        }
    }
}

impl CodeImage {
    /// The instruction at `address`, decoded as the file mapping it says; `None` where
    /// no executable segment holds one.
    pub fn instruction_at(&self, address: u64) -> Option<Instruction> {
        self.machine_at(address)?.instruction_at(self, address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(code: &[u8], machine: Machine) -> CodeImage {
        let mut image = CodeImage::new();
        let file = image.add_file_of_machine("code", machine);
        image
            .add_segment(0x1000, code.to_vec(), true, file)
            .unwrap();
        image
    }

    #[test]
    fn riscv_lengths_and_classes() {
        // jal ra,.+8; c.nop; ret; (junk halfword with 32-bit length bits, cut off)
        let code = [
            0xef, 0x00, 0x80, 0x00, // jal ra, 8
            0x01, 0x00, // c.nop
            0x82, 0x80, // c.jr ra (ret)
            0x67, 0x80, 0x00, 0x00, // jalr zero, 0(ra) (ret)
            0xff, 0xff,
        ];
        let machine = Machine::default();
        let image = image(&code, machine);
        let flows: Vec<_> = machine
            .instruction_addresses(&image, 0x1000..0x1000 + code.len() as u64)
            .map(|address| (address, image.instruction_at(address)))
            .collect();
        let instruction = |length, flow| Some(Instruction { length, flow });
        assert_eq!(
            flows,
            [
                (0x1000, instruction(4, FlowKind::Call)),
                (0x1004, instruction(2, FlowKind::Sequential)),
                (0x1006, instruction(2, FlowKind::Return)),
                (0x1008, instruction(4, FlowKind::Return)),
                (0x100c, None),
            ]
        );
        assert_eq!(image.instruction_at(0x0ffe), None);
    }

    #[test]
    fn riscv_without_compressed_instructions_steps_by_four() {
        let machine = Machine::Riscv(RiscvCode {
            compressed: Compressed::Absent,
            ..RiscvCode::default()
        });
        let image = image(&[0xff; 8], machine);
        let addresses: Vec<_> = machine
            .instruction_addresses(&image, 0x1000..0x1008)
            .collect();
        assert_eq!(addresses, [0x1000, 0x1004]);
    }

    #[test]
    fn non_executable_bytes_hold_no_instructions() {
        let mut image = CodeImage::new();
        let file = image.add_file("data");
        image
            .add_segment(0x1000, vec![0x01, 0x00], false, file)
            .unwrap();
        assert_eq!(image.instruction_at(0x1000), None);
    }

    #[test]
    fn the_walk_stops_at_the_top_of_the_address_space() {
        let machine = Machine::default();
        let image = image(&[], machine);
        let addresses: Vec<_> = machine
            .instruction_addresses(&image, u64::MAX - 1..u64::MAX)
            .collect();
        assert_eq!(addresses, [u64::MAX - 1]);
    }

    #[cfg(feature = "x86")]
    #[test]
    fn x86_64_lengths_and_classes() {
        // call rel32; nop; ret; jmp rax
        let code = [0xe8, 0, 0, 0, 0, 0x90, 0xc3, 0xff, 0xe0];
        let machine = Machine::X86_64;
        let image = image(&code, machine);
        let flows: Vec<_> = machine
            .instruction_addresses(&image, 0x1000..0x1000 + code.len() as u64)
            .map(|address| image.instruction_at(address).map(|i| (i.length, i.flow)))
            .collect();
        assert_eq!(
            flows,
            [
                Some((5, FlowKind::Call)),
                Some((1, FlowKind::Sequential)),
                Some((1, FlowKind::Return)),
                Some((2, FlowKind::IndirectJump)),
            ]
        );
    }
}
