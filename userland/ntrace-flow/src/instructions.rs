//! Instruction by instruction, as libipt's instruction flow decoder gives a trace: for
//! consumers that want every instruction (a simulator's replay, a coverage tool, an
//! instruction-level annotation) rather than [`FlowDecoder`]'s ranges. Each step is one
//! executed instruction, decoded, or one of the trace's other elements (a trap, a
//! context change, a timestamp, a gap) at its place in the flow.
//!
//! It costs a decode per instruction; profiles take the ranges instead.

use code_image::{CodeImage, FileDecodeInfo};
use riscv_insn::Instruction;
use trace_elements::{ElementKind, TraceElement};

use crate::{DecoderOptions, FlowDecoder, FlowError};

/// One executed instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracedInstruction {
    /// The hart (N-Trace SRC) that executed it.
    pub hart: u16,
    pub address: u64,
    /// The instruction (its bytes, length, control flow, mnemonic).
    pub instruction: Instruction,
    /// Byte offset in the trace of the message that placed it.
    pub offset: u64,
}

/// What [`InstructionDecoder::next_step`] gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstructionStep {
    Instruction(TracedInstruction),
    /// Any element other than an instruction range, where it happened in the flow.
    Event(TraceElement),
}

/// Why an instruction the trace placed cannot be given.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InstructionError {
    #[error(transparent)]
    Flow(#[from] FlowError),
    /// The flow decoder walked it, so it decoded then: the image cannot have changed.
    #[error("at byte offset {offset:#x}: the instruction at {address:#x} cannot be read back from the code image")]
    Unreadable { offset: u64, address: u64 },
}

/// The instructions (and other elements) of a trace, one at a time, in order.
#[derive(Debug)]
pub struct InstructionDecoder<'a> {
    flow: FlowDecoder<'a>,
    image: &'a CodeImage,
    files: Vec<FileDecodeInfo>,
    /// The addresses of the range being given, and how many were given.
    range: Vec<u64>,
    given: usize,
    /// Hart and offset of that range.
    hart: u16,
    offset: u64,
}

impl<'a> InstructionDecoder<'a> {
    /// As [`FlowDecoder::new`]; ranges are always produced (they are the instructions).
    pub fn new(
        trace: &'a [u8],
        image: &'a CodeImage,
        files: Vec<FileDecodeInfo>,
        options: DecoderOptions,
    ) -> Self {
        let flow = FlowDecoder::new(
            trace,
            image,
            files.clone(),
            options.with_instruction_ranges(true),
        );
        Self {
            flow,
            image,
            files,
            range: Vec::new(),
            given: 0,
            hart: 0,
            offset: 0,
        }
    }

    /// The flow decoder underneath (statistics, position, the recovered error).
    pub fn flow(&self) -> &FlowDecoder<'a> {
        &self.flow
    }

    /// The next instruction or element; `Ok(None)` at the end of the trace. Errors are
    /// the flow decoder's, under its [`crate::Recovery`] policy.
    pub fn next_step(&mut self) -> Result<Option<InstructionStep>, InstructionError> {
        loop {
            if let Some(&address) = self.range.get(self.given) {
                self.given += 1;
                return self.instruction_at(address).map(Some);
            }
            let Some(element) = self.flow.next_element()? else {
                return Ok(None);
            };
            let ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } = element.kind
            else {
                return Ok(Some(InstructionStep::Event(element)));
            };
            self.range.clear();
            self.given = 0;
            self.hart = element.hart;
            self.offset = element.offset;
            let range = &mut self.range;
            if !self
                .flow
                .for_each_instruction(start, instructions, |address| range.push(address))
            {
                return Err(InstructionError::Unreadable {
                    offset: element.offset,
                    address: start,
                });
            }
        }
    }

    fn instruction_at(&self, address: u64) -> Result<InstructionStep, InstructionError> {
        let unreadable = || InstructionError::Unreadable {
            offset: self.offset,
            address,
        };
        let file = self
            .image
            .segment_index(address)
            .and_then(|index| self.image.segment(index))
            .map(|segment| segment.file)
            .ok_or_else(unreadable)?;
        let options = self.files.get(file).ok_or_else(unreadable)?.options;
        // The last instruction of a segment may be a 2-byte one with nothing after it.
        let raw = match self.image.read_le::<4>(address) {
            Some(bytes) => u32::from_le_bytes(bytes),
            None => u32::from(u16::from_le_bytes(
                self.image.read_le::<2>(address).ok_or_else(unreadable)?,
            )),
        };
        let instruction = riscv_insn::decode(raw, options).map_err(|_| unreadable())?;
        Ok(InstructionStep::Instruction(TracedInstruction {
            hart: self.hart,
            address,
            instruction,
            offset: self.offset,
        }))
    }
}
