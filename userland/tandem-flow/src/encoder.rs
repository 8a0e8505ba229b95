//! A tandem trace from architectural state: what an emulator log reader (before and after
//! each instruction) needs to produce a trace.

use riscv_insn::{decode, AccessOperation, AmoOperation, DecodeOptions, RegisterOperand};
use tandem_message::{
    AccessSize, AdditionalState, EncodeError, InstructionBits, MemoryOperation, MemoryResult,
    Parameters, Record, RecordEncoder, Register, Xlen,
};

use crate::step::advance_pc;

/// Whether a class of state is traced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tracing {
    Traced,
    /// Absent from the trace (a partial trace, §3.2).
    Omitted,
}

/// How the pc after each instruction is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PcUpdates {
    /// `increment pc` where the instruction falls through, the pc value elsewhere.
    #[default]
    IncrementWhereSequential,
    /// Always the pc value (additional state 0x10).
    AlwaysValue,
}

/// What the encoder traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EncoderOptions {
    pub integer_registers: Tracing,
    pub float_registers: Tracing,
    pub csrs: Tracing,
    /// Effective address and store data additional state, memory requests and responses.
    pub memory: Tracing,
    pub pc_updates: PcUpdates,
}

impl Default for EncoderOptions {
    /// Everything traced, `increment pc` where possible.
    fn default() -> Self {
        EncoderOptions {
            integer_registers: Tracing::Traced,
            float_registers: Tracing::Traced,
            csrs: Tracing::Traced,
            memory: Tracing::Traced,
            pc_updates: PcUpdates::IncrementWhereSequential,
        }
    }
}

impl EncoderOptions {
    #[must_use]
    pub fn with_integer_registers(mut self, tracing: Tracing) -> Self {
        self.integer_registers = tracing;
        self
    }

    #[must_use]
    pub fn with_float_registers(mut self, tracing: Tracing) -> Self {
        self.float_registers = tracing;
        self
    }

    #[must_use]
    pub fn with_csrs(mut self, tracing: Tracing) -> Self {
        self.csrs = tracing;
        self
    }

    #[must_use]
    pub fn with_memory(mut self, tracing: Tracing) -> Self {
        self.memory = tracing;
        self
    }

    #[must_use]
    pub fn with_pc_updates(mut self, pc_updates: PcUpdates) -> Self {
        self.pc_updates = pc_updates;
        self
    }
}

/// A hart's architectural state at one point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchitecturalState {
    pub pc: u64,
    /// `x0`..`x31`; `x0` is never traced.
    pub integer: [u64; 32],
    /// `f0`..`f31`, when the hart has floating point.
    pub float: Option<[u64; 32]>,
    /// CSRs by address, those the caller knows.
    pub csrs: Vec<(u16, u64)>,
    /// 0 U, 1 S, 3 M.
    pub privilege: u8,
}

impl ArchitecturalState {
    /// The CSR's value, if known.
    #[must_use]
    pub fn csr(&self, address: u16) -> Option<u64> {
        self.csrs
            .iter()
            .find_map(|&(known, value)| (known == address).then_some(value))
    }

    /// The value of an instruction's register operand.
    #[must_use]
    pub fn operand(&self, operand: RegisterOperand) -> Option<u64> {
        match operand {
            RegisterOperand::Integer(index) => self.integer.get(usize::from(index)).copied(),
            RegisterOperand::Float(index) => self
                .float
                .as_ref()
                .and_then(|float| float.get(usize::from(index)).copied()),
        }
    }

    /// Registers whose values differ in `after` (`x0` never; CSRs `after` knows and `self`
    /// does not, or with another value; floating-point registers when both have them).
    #[must_use]
    pub fn changes_to(&self, after: &ArchitecturalState) -> Vec<(Register, u64)> {
        let mut writes = Vec::new();
        for (index, (&old, &new)) in self.integer.iter().zip(&after.integer).enumerate().skip(1) {
            if old != new {
                writes.push((Register::Integer(index as u8), new));
            }
        }
        if let (Some(old), Some(new)) = (&self.float, &after.float) {
            for (index, (&old, &new)) in old.iter().zip(new).enumerate() {
                if old != new {
                    writes.push((Register::Float(index as u8), new));
                }
            }
        }
        for &(address, value) in &after.csrs {
            if self.csr(address) != Some(value) {
                writes.push((Register::Csr(address), value));
            }
        }
        writes
    }
}

/// One memory access of a retired instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryRecord {
    pub operation: MemoryOperation,
    pub effective_address: u64,
    pub size: AccessSize,
    /// What a store, SC or AMO writes.
    pub store_data: Option<u64>,
    /// What a load, LR or AMO reads.
    pub load_data: Option<u64>,
    /// An SC's outcome.
    pub result: MemoryResult,
}

/// One retired instruction (or one that raised an exception: then `next_pc` is the
/// handler and `writes` holds the trap CSRs).
#[derive(Clone, Copy, Debug)]
pub struct Retirement<'w> {
    pub pc: u64,
    pub bits: InstructionBits,
    pub next_pc: u64,
    pub writes: &'w [(Register, u64)],
    pub memory: Option<MemoryRecord>,
    /// The new privilege mode, when it changed.
    pub privilege: Option<u8>,
}

/// An interrupt taken between two instructions.
#[derive(Clone, Copy, Debug)]
pub struct Interrupt<'w> {
    /// The handler.
    pub next_pc: u64,
    /// xepc, xcause, xstatus, xtval...
    pub writes: &'w [(Register, u64)],
    pub privilege: Option<u8>,
}

/// The memory operation a trace records for an instruction's access shape.
#[must_use]
pub fn memory_operation(operation: AccessOperation) -> MemoryOperation {
    match operation {
        AccessOperation::Load => MemoryOperation::Load,
        AccessOperation::Store => MemoryOperation::Store,
        AccessOperation::LoadReserved => MemoryOperation::LoadReserved,
        AccessOperation::StoreConditional => MemoryOperation::StoreConditional,
        AccessOperation::Amo(amo) => match amo {
            AmoOperation::Swap => MemoryOperation::AtomicSwap,
            AmoOperation::Add => MemoryOperation::AtomicAdd,
            AmoOperation::Xor => MemoryOperation::AtomicXor,
            AmoOperation::And => MemoryOperation::AtomicAnd,
            AmoOperation::Or => MemoryOperation::AtomicOr,
            AmoOperation::Min => MemoryOperation::AtomicMin,
            AmoOperation::Max => MemoryOperation::AtomicMax,
            AmoOperation::MinUnsigned => MemoryOperation::AtomicMinUnsigned,
            AmoOperation::MaxUnsigned => MemoryOperation::AtomicMaxUnsigned,
        },
    }
}

fn register_of(operand: RegisterOperand) -> Register {
    match operand {
        RegisterOperand::Integer(index) => Register::Integer(index),
        RegisterOperand::Float(index) => Register::Float(index),
    }
}

/// The low `size` bytes of `value`.
fn truncate(value: u64, size: AccessSize) -> u64 {
    match size {
        AccessSize::Bits64 => value,
        _ => value & ((1u64 << (u32::from(size.bytes()) * 8)) - 1),
    }
}

/// Builds a trace group by group; bytes accumulate until [`TandemEncoder::take_output`].
#[derive(Clone, Debug)]
pub struct TandemEncoder {
    parameters: Parameters,
    options: EncoderOptions,
    records: RecordEncoder,
    output: Vec<u8>,
}

impl TandemEncoder {
    #[must_use]
    pub fn new(parameters: Parameters, options: EncoderOptions) -> Self {
        TandemEncoder {
            parameters,
            options,
            records: RecordEncoder::new(parameters),
            output: Vec::new(),
        }
    }

    /// The bytes so far, leaving the encoder empty.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    fn traced(&self, register: Register) -> bool {
        let tracing = match register {
            Register::Integer(0) => return false,
            Register::Integer(_) => self.options.integer_registers,
            Register::Float(_) => self.options.float_registers,
            Register::Csr(_) | Register::Other(_) => self.options.csrs,
        };
        tracing == Tracing::Traced
    }

    /// Encodes a whole group, writing nothing when any record is refused.
    fn group(&mut self, records: &[Record]) -> Result<(), EncodeError> {
        let mut bytes = Vec::new();
        let mut encoder = self.records.clone();
        encoder.encode(&Record::BeginGroup, &mut bytes)?;
        encoder.encode_all(records, &mut bytes)?;
        encoder.encode(&Record::EndGroup, &mut bytes)?;
        self.records = encoder;
        self.output.extend_from_slice(&bytes);
        Ok(())
    }

    fn register_records(&self, writes: &[(Register, u64)], records: &mut Vec<Record>) {
        records.extend(
            writes
                .iter()
                .filter(|(register, _)| self.traced(*register))
                .map(|&(register, value)| Record::FullRegister { register, value }),
        );
    }

    /// A state-initialization group: the pc, every traced register and the privilege.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when a value does not fit the parameters.
    pub fn start(&mut self, state: &ArchitecturalState) -> Result<(), EncodeError> {
        let mut records = vec![
            Record::StateInitialization,
            Record::AdditionalState(AdditionalState::ProgramCounter(state.pc)),
        ];
        let mut writes: Vec<(Register, u64)> = (1..32u8)
            .map(|index| (Register::Integer(index), state.integer[usize::from(index)]))
            .collect();
        if let (Some(float), Some(_)) = (&state.float, self.parameters.flen.bytes()) {
            writes
                .extend((0..32u8).map(|index| (Register::Float(index), float[usize::from(index)])));
        }
        writes.extend(
            state
                .csrs
                .iter()
                .map(|&(address, value)| (Register::Csr(address), value)),
        );
        self.register_records(&writes, &mut records);
        records.push(Record::AdditionalState(AdditionalState::Privilege(
            state.privilege,
        )));
        self.group(&records)
    }

    /// One group for a retired instruction.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when a value does not fit the parameters or the instruction is not
    /// a valid encoding of its length; nothing is written then.
    pub fn retire(&mut self, retirement: &Retirement<'_>) -> Result<(), EncodeError> {
        let mut records = Vec::new();
        let fall_through = advance_pc(
            self.parameters,
            retirement.pc,
            retirement.bits.length.bytes(),
        );
        if self.options.pc_updates == PcUpdates::IncrementWhereSequential
            && retirement.next_pc == fall_through
        {
            records.push(Record::IncrementPc);
        } else {
            records.push(Record::AdditionalState(AdditionalState::ProgramCounter(
                retirement.next_pc,
            )));
        }
        records.push(Record::Instruction(retirement.bits));
        self.register_records(retirement.writes, &mut records);
        if let (Some(memory), Tracing::Traced) = (retirement.memory, self.options.memory) {
            records.push(Record::AdditionalState(AdditionalState::EffectiveAddress(
                memory.effective_address,
            )));
            if let Some(value) = memory.store_data {
                records.push(Record::AdditionalState(AdditionalState::StoreData {
                    size: memory.size,
                    value: truncate(value, memory.size),
                }));
            }
            let request_data = tandem_message::request_carries_data(memory.operation)
                .then(|| truncate(memory.store_data.unwrap_or(0), memory.size));
            records.push(Record::MemoryRequest {
                address: memory.effective_address,
                operation: memory.operation,
                size: memory.size,
                data: request_data,
            });
            let response_data = tandem_message::response_carries_data(memory.operation)
                .then(|| truncate(memory.load_data.unwrap_or(0), memory.size));
            records.push(Record::MemoryResponse {
                size: memory.size,
                result: memory.result,
                data: response_data,
            });
        }
        if let Some(mode) = retirement.privilege {
            records.push(Record::AdditionalState(AdditionalState::Privilege(mode)));
        }
        self.group(&records)
    }

    /// One group for an interrupt: the handler pc, the trap CSRs, the privilege.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when a value does not fit the parameters.
    pub fn interrupt(&mut self, interrupt: &Interrupt<'_>) -> Result<(), EncodeError> {
        let mut records = vec![Record::AdditionalState(AdditionalState::ProgramCounter(
            interrupt.next_pc,
        ))];
        self.register_records(interrupt.writes, &mut records);
        if let Some(mode) = interrupt.privilege {
            records.push(Record::AdditionalState(AdditionalState::Privilege(mode)));
        }
        self.group(&records)
    }

    /// Retires the instruction `bits` that took the hart from `before` to `after`: the
    /// changed registers plus the instruction's destination register (even when its value
    /// did not change), and its memory access from the encoding and the two states.
    ///
    /// # Errors
    ///
    /// As [`TandemEncoder::retire`].
    pub fn retire_states(
        &mut self,
        before: &ArchitecturalState,
        bits: InstructionBits,
        after: &ArchitecturalState,
    ) -> Result<(), EncodeError> {
        let mut writes = before.changes_to(after);
        let xlen = match self.parameters.xlen {
            Xlen::Bits32 => riscv_insn::Xlen::Rv32,
            Xlen::Bits64 => riscv_insn::Xlen::Rv64,
        };
        let instruction = decode(bits.raw, DecodeOptions::new(xlen)).ok();
        if let Some(destination) =
            instruction.and_then(|instruction| instruction.destination_register())
        {
            let register = register_of(destination);
            if let Some(value) = after.operand(destination) {
                if !writes.iter().any(|(written, _)| *written == register) {
                    writes.push((register, value));
                }
            }
        }
        let memory = instruction
            .and_then(|instruction| instruction.memory_access())
            .and_then(|shape| {
                let size = AccessSize::from_bytes(shape.size_bytes)?;
                let base = before.integer.get(usize::from(shape.base)).copied()?;
                let address = base.wrapping_add(i64::from(shape.offset) as u64);
                let effective_address = match self.parameters.xlen {
                    Xlen::Bits32 => address & 0xffff_ffff,
                    Xlen::Bits64 => address,
                };
                let store_data = shape
                    .data
                    .and_then(|data| before.operand(data))
                    .map(|value| truncate(value, size));
                let destination_after = shape
                    .destination
                    .and_then(|destination| after.operand(destination));
                let operation = memory_operation(shape.operation);
                let (load_data, result) = match shape.operation {
                    AccessOperation::StoreConditional => (
                        None,
                        // sc writes 0 to rd on success.
                        if destination_after.unwrap_or(0) == 0 {
                            MemoryResult::Success
                        } else {
                            MemoryResult::Failure
                        },
                    ),
                    _ => (
                        destination_after.map(|value| truncate(value, size)),
                        MemoryResult::Success,
                    ),
                };
                Some(MemoryRecord {
                    operation,
                    effective_address,
                    size,
                    store_data,
                    load_data,
                    result,
                })
            });
        let privilege = (before.privilege != after.privilege).then_some(after.privilege);
        self.retire(&Retirement {
            pc: before.pc,
            bits,
            next_pc: after.pc,
            writes: &writes,
            memory,
            privilege,
        })
    }
}
