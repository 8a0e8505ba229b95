//! Groups of records as steps, applied to a shadow state.

use std::collections::BTreeMap;

use tandem_message::{
    AccessSize, AdditionalState, InstructionBits, LocatedRecord, MemoryOperation, MemoryResult,
    Parameters, Record, RecordDecoder, Register, TandemError, Xlen,
};

/// Why a group of records cannot be applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum StepErrorKind {
    /// An instruction before any pc was known (docs/tandem-protocol-choices.md, choice 3).
    #[error("instruction at unknown pc")]
    InstructionAtUnknownPc,
    /// An incremental update of a register the trace never gave a value.
    #[error("incremental update of {register:?}, which has no value yet")]
    IncrementalWithoutValue { register: Register },
    /// Two instruction records in one group.
    #[error("two instructions in one group")]
    MultipleInstructions,
    /// `increment pc` in a group without an instruction (chapter 3 forbids it).
    #[error("increment pc in a group without an instruction")]
    IncrementPcWithoutInstruction,
    /// Both `increment pc` and a pc value, or two different pc values, in one group.
    #[error("conflicting pc updates in one group")]
    ConflictingPcUpdates,
    /// An instruction in a group with state initialization or hart reset (chapter 3).
    #[error("instruction combined with state initialization or hart reset")]
    InstructionWithInitialization,
    /// The trace ends inside the group begun at the offset: it was cut short, and the
    /// group's state changes may be incomplete (an end group may only be left out
    /// before a begin group).
    #[error("the trace ends inside this group: cut short")]
    UnterminatedGroup,
}

/// A trace that cannot be followed: a record that does not decode, or a group that cannot
/// be applied. Either way the decoder stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    #[error(transparent)]
    Record(#[from] TandemError),
    #[error("at byte offset {offset:#x}: {kind}")]
    Step {
        /// Offset of the record that could not be applied.
        offset: u64,
        kind: StepErrorKind,
    },
}

impl FlowError {
    /// Byte offset of the offending record.
    #[must_use]
    pub fn offset(&self) -> u64 {
        match *self {
            FlowError::Record(error) => error.offset,
            FlowError::Step { offset, .. } => offset,
        }
    }
}

/// A memory request and, when traced, its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryAccess {
    pub address: u64,
    pub operation: MemoryOperation,
    pub size: AccessSize,
    /// The data a store, SC or AMO writes.
    pub request_data: Option<u64>,
    pub response: Option<MemoryResponse>,
}

/// A memory response as the trace gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemoryResponse {
    pub size: AccessSize,
    pub result: MemoryResult,
    /// The data a load, LR, AMO or fetch reads.
    pub data: Option<u64>,
}

/// One state change of a step, in trace order; a register written twice in one group
/// appears once, with its final value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateChange {
    /// The register's value after the group (incremental updates already applied).
    Register {
        register: Register,
        value: u64,
    },
    Privilege(u8),
    Memory(MemoryAccess),
    EffectiveAddress(u64),
    PhysicalAddress(u64),
    StoreData {
        size: AccessSize,
        value: u64,
    },
    Mtime(u64),
    PcPhysical(u64),
}

/// What a step did to the pc and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StepKind {
    /// An instruction at `pc` retired (or raised an exception) and the hart continues at
    /// `next_pc`.
    Instruction {
        pc: u64,
        bits: InstructionBits,
        next_pc: u64,
    },
    /// No instruction, but the pc moved from a known value along with trap CSR writes
    /// (xepc and xcause): an interrupt.
    Interrupt { pc_before: u64, next_pc: u64 },
    /// The pc was set without an instruction or trap (the first pc, a debugger).
    PcSet { next_pc: u64 },
    /// A state initialization group, which may also set the pc.
    StateInitialization { next_pc: Option<u64> },
    /// A hart reset; the pc is unknown after it unless the group sets it.
    HartReset { next_pc: Option<u64> },
    /// Anything else: state changes that belong to no instruction.
    Other,
}

/// One group (or one record outside any group).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// 0-based position among the trace's steps.
    pub index: u64,
    /// Offset of the step's first record.
    pub offset: u64,
    /// Offset just past its last record.
    pub end_offset: u64,
    pub kind: StepKind,
    pub changes: Vec<StateChange>,
}

impl Step {
    /// A step with nothing in it, to decode into ([`StepDecoder::next_step_into`]).
    pub(crate) const fn empty() -> Step {
        Step {
            index: 0,
            offset: 0,
            end_offset: 0,
            kind: StepKind::Other,
            changes: Vec::new(),
        }
    }

    /// The pc the step happened at: the instruction's, or the pc an interrupt left.
    #[must_use]
    pub fn pc(&self) -> Option<u64> {
        match self.kind {
            StepKind::Instruction { pc, .. } => Some(pc),
            StepKind::Interrupt { pc_before, .. } => Some(pc_before),
            _ => None,
        }
    }

    /// The cause register value when the step wrote both an xepc and the matching xcause
    /// (machine, supervisor or virtual supervisor): what a trap does and a single CSR
    /// instruction cannot (docs/tandem-protocol-choices.md).
    #[must_use]
    pub fn trap_cause(&self) -> Option<u64> {
        trap_cause_in(&self.changes)
    }
}

/// The state the trace has set so far: the shadow state of the spec's §3.1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shadow {
    pc: Option<u64>,
    registers: RegisterFile,
    privilege: Option<u8>,
}

/// Register values by register: `x0`..`x31` and `f0`..`f31` in arrays (every step writes
/// some), the rest (CSRs, other numbers) in a map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct RegisterFile {
    integer: [Option<u64>; 32],
    float: [Option<u64>; 32],
    others: BTreeMap<Register, u64>,
}

impl RegisterFile {
    fn slot(&mut self, register: Register) -> Option<&mut Option<u64>> {
        match register {
            Register::Integer(index) => self.integer.get_mut(usize::from(index)),
            Register::Float(index) => self.float.get_mut(usize::from(index)),
            Register::Csr(_) | Register::Other(_) => None,
        }
    }

    fn get(&self, register: Register) -> Option<u64> {
        match register {
            Register::Integer(index) if usize::from(index) < self.integer.len() => {
                self.integer[usize::from(index)]
            }
            Register::Float(index) if usize::from(index) < self.float.len() => {
                self.float[usize::from(index)]
            }
            _ => self.others.get(&register).copied(),
        }
    }

    fn insert(&mut self, register: Register, value: u64) {
        match self.slot(register) {
            Some(slot) => *slot = Some(value),
            None => {
                self.others.insert(register, value);
            }
        }
    }

    /// Every register with a value, in [`Register`] order: CSRs, integer, float, other.
    fn iter(&self) -> impl Iterator<Item = (Register, u64)> + '_ {
        let others = |range: core::ops::Range<Register>| {
            self.others
                .range(range)
                .map(|(&register, &value)| (register, value))
        };
        let first_integer = Register::Integer(0);
        let first_float = Register::Float(0);
        let first_other = Register::Other(0);
        // Numbers past the arrays (never decoded, but constructible) sit in the map
        // between the arrays' registers.
        others(Register::Csr(0)..first_integer)
            .chain(known(&self.integer, Register::Integer))
            .chain(others(Register::Integer(32)..first_float))
            .chain(known(&self.float, Register::Float))
            .chain(others(Register::Float(32)..first_other))
            .chain(self.others.range(first_other..).map(|(&r, &v)| (r, v)))
    }
}

/// The registers of `values` (by index) that have one.
fn known(
    values: &[Option<u64>; 32],
    make: fn(u8) -> Register,
) -> impl Iterator<Item = (Register, u64)> + '_ {
    (0u8..32)
        .zip(values.iter())
        .filter_map(move |(index, value)| value.map(|value| (make(index), value)))
}

impl Shadow {
    /// The pc of the next instruction, once known.
    #[must_use]
    pub fn pc(&self) -> Option<u64> {
        self.pc
    }

    /// The register's value, if the trace ever gave one.
    #[must_use]
    pub fn register(&self, register: Register) -> Option<u64> {
        self.registers.get(register)
    }

    /// Every register with a value, in register order.
    pub fn registers(&self) -> impl Iterator<Item = (Register, u64)> + '_ {
        self.registers.iter()
    }

    /// The privilege mode, once known.
    #[must_use]
    pub fn privilege(&self) -> Option<u8> {
        self.privilege
    }
}

/// Whether the decoder can go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    Running,
    /// An error was returned; the trace has no point to resume at.
    Stopped,
}

/// How a group changes the pc, gathered while its records are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PcUpdate {
    None,
    Increment,
    Value(u64),
}

/// A group being gathered.
struct Pending {
    offset: u64,
    end_offset: u64,
    instruction: Option<InstructionBits>,
    pc_update: PcUpdate,
    initialization: bool,
    reset: bool,
    changes: Vec<StateChange>,
}

/// Bits of a register value the parameters keep.
fn width_mask(parameters: Parameters, register: Register) -> u64 {
    match parameters.register_bytes(register) {
        Some(4) => 0xffff_ffff,
        _ => u64::MAX,
    }
}

/// The pc after `pc` plus `bytes`, in XLEN arithmetic (the pc wraps like any address).
pub(crate) fn advance_pc(parameters: Parameters, pc: u64, bytes: u8) -> u64 {
    let next = pc.wrapping_add(u64::from(bytes));
    match parameters.xlen {
        Xlen::Bits32 => next & 0xffff_ffff,
        Xlen::Bits64 => next,
    }
}

/// Pulls steps out of a record stream, keeping the shadow state.
#[derive(Clone, Debug)]
pub struct StepDecoder<'a> {
    records: RecordDecoder<'a>,
    /// A begin group that ended the previous group by implication.
    lookahead: Option<LocatedRecord>,
    shadow: Shadow,
    next_index: u64,
    condition: Condition,
}

impl<'a> StepDecoder<'a> {
    #[must_use]
    pub fn new(bytes: &'a [u8], parameters: Parameters) -> Self {
        StepDecoder::from_records(RecordDecoder::new(bytes, parameters))
    }

    #[must_use]
    pub fn from_records(records: RecordDecoder<'a>) -> Self {
        StepDecoder {
            records,
            lookahead: None,
            shadow: Shadow::default(),
            next_index: 0,
            condition: Condition::Running,
        }
    }

    /// The state after the last step returned.
    #[must_use]
    pub fn shadow(&self) -> &Shadow {
        &self.shadow
    }

    #[must_use]
    pub fn parameters(&self) -> Parameters {
        self.records.parameters()
    }

    /// The record decoder underneath, for its statistics.
    #[must_use]
    pub fn records(&self) -> &RecordDecoder<'a> {
        &self.records
    }

    fn next_record(&mut self) -> Result<Option<LocatedRecord>, FlowError> {
        if let Some(record) = self.lookahead.take() {
            return Ok(Some(record));
        }
        Ok(self.records.next_record()?)
    }

    /// The next step; `Ok(None)` at the end of the trace and after an error.
    ///
    /// # Errors
    ///
    /// [`FlowError`] for a record that does not decode or a group that cannot be applied.
    pub fn next_step(&mut self) -> Result<Option<Step>, FlowError> {
        self.step_with(Vec::new())
    }

    /// As [`StepDecoder::next_step`], into `step`, reusing its allocation: `Ok(false)` at
    /// the end of the trace and after an error, `step` then unspecified.
    ///
    /// # Errors
    ///
    /// As [`StepDecoder::next_step`].
    pub fn next_step_into(&mut self, step: &mut Step) -> Result<bool, FlowError> {
        let mut changes = core::mem::take(&mut step.changes);
        changes.clear();
        match self.step_with(changes)? {
            Some(next) => {
                *step = next;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The next step, its changes gathered into `changes` (empty).
    fn step_with(&mut self, changes: Vec<StateChange>) -> Result<Option<Step>, FlowError> {
        if self.condition == Condition::Stopped {
            return Ok(None);
        }
        let result = self.gather(changes);
        if result.is_err() {
            self.condition = Condition::Stopped;
        }
        result
    }

    fn gather(&mut self, changes: Vec<StateChange>) -> Result<Option<Step>, FlowError> {
        let Some(first) = self.next_record()? else {
            return Ok(None);
        };
        let mut pending = Pending {
            offset: first.offset,
            end_offset: first.end_offset(),
            instruction: None,
            pc_update: PcUpdate::None,
            initialization: false,
            reset: false,
            changes,
        };
        match first.record {
            // Inside a group there is no lookahead: read the records directly (the hot
            // loop, without rewrapping each record's result).
            Record::BeginGroup => loop {
                let record = match self.records.next_record() {
                    Ok(Some(record)) => record,
                    // A trace cut inside a group: what the group held is not known.
                    Ok(None) => {
                        return Err(FlowError::Step {
                            offset: first.offset,
                            kind: StepErrorKind::UnterminatedGroup,
                        })
                    }
                    Err(error) => return Err(error.into()),
                };
                match record.record {
                    Record::EndGroup => {
                        pending.end_offset = record.end_offset();
                        break;
                    }
                    // Chapter 3: a begin group implies the end of the previous group.
                    Record::BeginGroup => {
                        self.lookahead = Some(record);
                        break;
                    }
                    _ => {
                        pending.end_offset = record.end_offset();
                        self.apply(&mut pending, &record)?;
                    }
                }
            },
            // An end group with no group open ends nothing: an empty step.
            Record::EndGroup => {}
            // A record outside any group is a step of its own.
            _ => self.apply(&mut pending, &first)?,
        }
        let kind = self.finish(&pending)?;
        let index = self.next_index;
        self.next_index = self.next_index.saturating_add(1);
        Ok(Some(Step {
            index,
            offset: pending.offset,
            end_offset: pending.end_offset,
            kind,
            changes: pending.changes,
        }))
    }

    fn apply(&mut self, pending: &mut Pending, located: &LocatedRecord) -> Result<(), FlowError> {
        let error = |kind| FlowError::Step {
            offset: located.offset,
            kind,
        };
        let parameters = self.parameters();
        match located.record {
            Record::BeginGroup | Record::EndGroup => {}
            Record::IncrementPc => {
                pending.pc_update = match pending.pc_update {
                    PcUpdate::None | PcUpdate::Increment => PcUpdate::Increment,
                    PcUpdate::Value(_) => return Err(error(StepErrorKind::ConflictingPcUpdates)),
                };
            }
            Record::FullRegister { register, value } => {
                self.write_register(pending, register, value);
            }
            Record::IncrementalAdd { register, offset } => {
                let Some(old) = self.shadow.register(register) else {
                    return Err(error(StepErrorKind::IncrementalWithoutValue { register }));
                };
                // Register arithmetic wraps at the register's width, as the hart's does.
                let value =
                    old.wrapping_add(i64::from(offset) as u64) & width_mask(parameters, register);
                self.write_register(pending, register, value);
            }
            Record::IncrementalOr { register, mask } => {
                let Some(old) = self.shadow.register(register) else {
                    return Err(error(StepErrorKind::IncrementalWithoutValue { register }));
                };
                self.write_register(pending, register, old | u64::from(mask));
            }
            Record::AdditionalState(state) => match state {
                AdditionalState::Privilege(mode) => {
                    self.shadow.privilege = Some(mode);
                    replace_or_push(
                        &mut pending.changes,
                        |change| matches!(change, StateChange::Privilege(_)),
                        StateChange::Privilege(mode),
                    );
                }
                AdditionalState::ProgramCounter(pc) => {
                    pending.pc_update = match pending.pc_update {
                        PcUpdate::None => PcUpdate::Value(pc),
                        PcUpdate::Value(previous) if previous == pc => PcUpdate::Value(pc),
                        _ => return Err(error(StepErrorKind::ConflictingPcUpdates)),
                    };
                }
                AdditionalState::PhysicalAddress(address) => {
                    pending.changes.push(StateChange::PhysicalAddress(address));
                }
                AdditionalState::EffectiveAddress(address) => {
                    pending.changes.push(StateChange::EffectiveAddress(address));
                }
                AdditionalState::StoreData { size, value } => {
                    pending.changes.push(StateChange::StoreData { size, value });
                }
                AdditionalState::Mtime(time) => pending.changes.push(StateChange::Mtime(time)),
                AdditionalState::PcPhysicalAddress(address) => {
                    pending.changes.push(StateChange::PcPhysical(address));
                }
            },
            Record::MemoryRequest {
                address,
                operation,
                size,
                data,
            } => pending.changes.push(StateChange::Memory(MemoryAccess {
                address,
                operation,
                size,
                request_data: data,
                response: None,
            })),
            Record::MemoryResponse { size, result, data } => {
                // The record decoder only lets a response through right after a request,
                // which is then the last change.
                if let Some(StateChange::Memory(access)) = pending.changes.last_mut() {
                    access.response = Some(MemoryResponse { size, result, data });
                }
            }
            Record::HartReset => pending.reset = true,
            Record::StateInitialization => pending.initialization = true,
            Record::Instruction(bits) => {
                if pending.instruction.is_some() {
                    return Err(error(StepErrorKind::MultipleInstructions));
                }
                pending.instruction = Some(bits);
            }
        }
        if pending.instruction.is_some() && (pending.reset || pending.initialization) {
            return Err(error(StepErrorKind::InstructionWithInitialization));
        }
        Ok(())
    }

    fn write_register(&mut self, pending: &mut Pending, register: Register, value: u64) {
        self.shadow.registers.insert(register, value);
        replace_or_push(
            &mut pending.changes,
            |change| matches!(change, StateChange::Register { register: written, .. } if *written == register),
            StateChange::Register { register, value },
        );
    }

    fn finish(&mut self, pending: &Pending) -> Result<StepKind, FlowError> {
        let error = |kind| FlowError::Step {
            offset: pending.offset,
            kind,
        };
        let explicit = match pending.pc_update {
            PcUpdate::Value(pc) => Some(pc),
            _ => None,
        };
        let kind = if pending.reset {
            // The ISA resets into machine mode; the pc is what the group says, or unknown.
            if !pending
                .changes
                .iter()
                .any(|change| matches!(change, StateChange::Privilege(_)))
            {
                self.shadow.privilege = Some(3);
            }
            self.shadow.pc = explicit;
            StepKind::HartReset { next_pc: explicit }
        } else if pending.initialization {
            if explicit.is_some() {
                self.shadow.pc = explicit;
            }
            StepKind::StateInitialization { next_pc: explicit }
        } else if let Some(bits) = pending.instruction {
            let Some(pc) = self.shadow.pc else {
                return Err(error(StepErrorKind::InstructionAtUnknownPc));
            };
            // Without any pc update the instruction is taken to fall through
            // (docs/tandem-protocol-choices.md).
            let next_pc =
                explicit.unwrap_or_else(|| advance_pc(self.parameters(), pc, bits.length.bytes()));
            self.shadow.pc = Some(next_pc);
            StepKind::Instruction { pc, bits, next_pc }
        } else if pending.pc_update == PcUpdate::Increment {
            return Err(error(StepErrorKind::IncrementPcWithoutInstruction));
        } else if let Some(next_pc) = explicit {
            let before = self.shadow.pc;
            self.shadow.pc = Some(next_pc);
            match before {
                Some(pc_before) if trap_cause_in(&pending.changes).is_some() => {
                    StepKind::Interrupt { pc_before, next_pc }
                }
                _ => StepKind::PcSet { next_pc },
            }
        } else {
            StepKind::Other
        };
        Ok(kind)
    }
}

/// The xcause value when `changes` write both an xepc and the matching xcause.
pub(crate) fn trap_cause_in(changes: &[StateChange]) -> Option<u64> {
    const LEVELS: [(u16, u16); 3] = [(0x341, 0x342), (0x141, 0x142), (0x241, 0x242)];
    let written = |csr: u16| {
        changes.iter().find_map(|change| match *change {
            StateChange::Register {
                register: Register::Csr(address),
                value,
            } if address == csr => Some(value),
            _ => None,
        })
    };
    LEVELS
        .iter()
        .find_map(|&(epc, cause)| written(epc).and(written(cause)))
}

fn replace_or_push(
    changes: &mut Vec<StateChange>,
    same: impl Fn(&StateChange) -> bool,
    change: StateChange,
) {
    match changes.iter_mut().find(|existing| same(existing)) {
        Some(existing) => *existing = change,
        None => changes.push(change),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_registers_come_in_register_order() {
        let mut file = RegisterFile::default();
        let written = [
            Register::Other(0x2000),
            Register::Float(31),
            Register::Integer(40),
            Register::Integer(3),
            Register::Csr(0x300),
            Register::Float(2),
            Register::Integer(1),
            Register::Csr(0x001),
            Register::Float(32),
        ];
        for (value, &register) in written.iter().enumerate() {
            file.insert(register, value as u64);
        }
        file.insert(Register::Integer(3), 100);
        let mut expected: Vec<(Register, u64)> = written
            .iter()
            .enumerate()
            .map(|(value, &register)| (register, value as u64))
            .collect();
        expected[3].1 = 100;
        expected.sort();
        assert_eq!(file.iter().collect::<Vec<_>>(), expected);
        for &(register, value) in &expected {
            assert_eq!(file.get(register), Some(value));
        }
        assert_eq!(file.get(Register::Integer(4)), None);
        assert_eq!(file.get(Register::Csr(0x341)), None);
    }
}
