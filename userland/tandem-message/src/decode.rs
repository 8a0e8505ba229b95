//! The record decoder: opcode byte, then a payload whose length the opcode (and for
//! additional state the identifier, for memory records the operation and size) gives.

use trace_elements::{MemoryOperation, Register};

use crate::error::{TandemError, TandemErrorKind};
use crate::types::{
    identifier, opcode, operation_from_code, request_carries_data, response_carries_data,
    AccessSize, AdditionalState, InstructionBits, InstructionLength, LocatedRecord, MemoryResult,
    Note, Parameters, Record,
};

/// How often the decoder applied each tolerance of docs/tandem-protocol-choices.md.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DecoderStatistics {
    /// Records decoded.
    pub records: u64,
    /// Opcode-16 records read as 32-bit instructions (appendix C.5's erratum).
    pub thirty_two_bit_under_opcode_16: u64,
    /// Additional-state identifier 0x0a read as the pc.
    pub decimal_pc_identifiers: u64,
}

/// Whether the decoder can go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Condition {
    Running,
    /// An error was returned: there is no point to resynchronise at, so the stream ends.
    Stopped,
}

/// Pulls records out of a byte slice, one per [`RecordDecoder::next_record`] call.
#[derive(Clone, Debug)]
pub struct RecordDecoder<'a> {
    bytes: &'a [u8],
    position: usize,
    parameters: Parameters,
    /// Operation of the memory request just decoded, which a response must follow
    /// immediately; cleared by any other record.
    pending_request: Option<MemoryOperation>,
    statistics: DecoderStatistics,
    condition: Condition,
}

/// Reads `count` (at most 8) little-endian bytes at `position`.
fn read_le(bytes: &[u8], position: usize, count: u8) -> Option<u64> {
    let end = position.checked_add(usize::from(count))?;
    let field = bytes.get(position..end)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0u64, |value, &byte| (value << 8) | u64::from(byte)),
    )
}

/// What a record still needs once the opcode byte is read.
struct Cursor<'b> {
    bytes: &'b [u8],
    /// Just past the opcode.
    start: usize,
    /// Payload bytes consumed so far.
    used: u8,
    opcode: u8,
}

impl Cursor<'_> {
    fn available(&self) -> u8 {
        let left = self.bytes.len().saturating_sub(self.start);
        u8::try_from(left).unwrap_or(u8::MAX)
    }

    /// Reads the next `count` payload bytes; `needed` is the payload length known so far,
    /// for the error.
    fn take(&mut self, count: u8, needed: u8) -> Result<u64, TandemErrorKind> {
        let position = self.start + usize::from(self.used);
        match read_le(self.bytes, position, count) {
            Some(value) => {
                self.used = self.used.saturating_add(count);
                Ok(value)
            }
            None => Err(TandemErrorKind::Truncated {
                opcode: self.opcode,
                needed,
                available: self.available(),
            }),
        }
    }

    /// Reads one byte as the first `count`-byte field of a payload of `needed` bytes.
    fn byte(&mut self, needed: u8) -> Result<u8, TandemErrorKind> {
        // A one-byte read always fits a u8.
        self.take(1, needed).map(|value| value as u8)
    }
}

impl<'a> RecordDecoder<'a> {
    /// A decoder over `bytes`, which hold records from the first byte on.
    #[must_use]
    pub fn new(bytes: &'a [u8], parameters: Parameters) -> Self {
        RecordDecoder {
            bytes,
            position: 0,
            parameters,
            pending_request: None,
            statistics: DecoderStatistics::default(),
            condition: Condition::Running,
        }
    }

    /// The parameters the decoder sizes fields with.
    #[must_use]
    pub fn parameters(&self) -> Parameters {
        self.parameters
    }

    /// Offset of the next record.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.position as u64
    }

    /// Counts of records and tolerances so far.
    #[must_use]
    pub fn statistics(&self) -> DecoderStatistics {
        self.statistics
    }

    /// The next record; `Ok(None)` at the end of the stream and after an error (the
    /// protocol has no point to resynchronise at).
    ///
    /// # Errors
    ///
    /// [`TandemError`] at the offending record's opcode offset.
    pub fn next_record(&mut self) -> Result<Option<LocatedRecord>, TandemError> {
        if self.condition == Condition::Stopped {
            return Ok(None);
        }
        let Some(&opcode_byte) = self.bytes.get(self.position) else {
            return Ok(None);
        };
        let offset = self.position as u64;
        let mut cursor = Cursor {
            bytes: self.bytes,
            start: self.position + 1,
            used: 0,
            opcode: opcode_byte,
        };
        match self.parse(&mut cursor) {
            Ok((record, note)) => {
                self.pending_request = match record {
                    Record::MemoryRequest { operation, .. } => Some(operation),
                    _ => None,
                };
                self.position = cursor.start + usize::from(cursor.used);
                self.statistics.records = self.statistics.records.saturating_add(1);
                match note {
                    Some(Note::ThirtyTwoBitInstructionUnderOpcode16) => {
                        self.statistics.thirty_two_bit_under_opcode_16 = self
                            .statistics
                            .thirty_two_bit_under_opcode_16
                            .saturating_add(1);
                    }
                    Some(Note::DecimalProgramCounterIdentifier) => {
                        self.statistics.decimal_pc_identifiers =
                            self.statistics.decimal_pc_identifiers.saturating_add(1);
                    }
                    None => {}
                }
                Ok(Some(LocatedRecord {
                    offset,
                    // At most 1 + 8 + 1 + 8 bytes.
                    length: cursor.used.saturating_add(1),
                    record,
                    note,
                }))
            }
            Err(kind) => {
                self.condition = Condition::Stopped;
                Err(TandemError { offset, kind })
            }
        }
    }

    fn parse(&self, cursor: &mut Cursor<'_>) -> Result<(Record, Option<Note>), TandemErrorKind> {
        let parameters = self.parameters;
        let record = match cursor.opcode {
            opcode::BEGIN_GROUP => Record::BeginGroup,
            opcode::END_GROUP => Record::EndGroup,
            opcode::INCREMENT_PC => Record::IncrementPc,
            opcode::HART_RESET => Record::HartReset,
            opcode::STATE_INITIALIZATION => Record::StateInitialization,
            opcode::FULL_REGISTER => {
                // The register number decides the value's width, so the payload length is
                // only known once it is read: report the minimum until then.
                let number = cursor.take(2, 2)?;
                let register = Register::from_debug_number(number as u16);
                let Some(width) = parameters.register_bytes(register) else {
                    return Err(TandemErrorKind::FloatRegisterWithoutFlen { register });
                };
                let value = cursor.take(width, width.saturating_add(2))?;
                Record::FullRegister { register, value }
            }
            opcode::INCREMENTAL_ADD => {
                let number = cursor.take(2, 3)?;
                let offset = cursor.byte(3)? as i8;
                Record::IncrementalAdd {
                    register: Register::from_debug_number(number as u16),
                    offset,
                }
            }
            opcode::INCREMENTAL_OR => {
                let number = cursor.take(2, 3)?;
                let mask = cursor.byte(3)?;
                Record::IncrementalOr {
                    register: Register::from_debug_number(number as u16),
                    mask,
                }
            }
            opcode::ADDITIONAL_STATE => return self.parse_additional_state(cursor),
            opcode::MEMORY_REQUEST => {
                let address_bytes = parameters.address_width.bytes();
                let minimum = address_bytes.saturating_add(1);
                let address = cursor.take(address_bytes, minimum)?;
                let fields = cursor.byte(minimum)?;
                let operation = operation_from_code(fields & 0x0f).ok_or(
                    TandemErrorKind::UnknownMemoryOperation {
                        operation: fields & 0x0f,
                    },
                )?;
                let size = access_size(fields >> 4)?;
                let data = if request_carries_data(operation) {
                    Some(cursor.take(size.bytes(), minimum.saturating_add(size.bytes()))?)
                } else {
                    None
                };
                Record::MemoryRequest {
                    address,
                    operation,
                    size,
                    data,
                }
            }
            opcode::MEMORY_RESPONSE => {
                let Some(request) = self.pending_request else {
                    return Err(TandemErrorKind::ResponseWithoutRequest);
                };
                let fields = cursor.byte(1)?;
                let size = access_size(fields & 0x0f)?;
                let result = match fields >> 4 {
                    0 => MemoryResult::Success,
                    1 => MemoryResult::Failure,
                    result => return Err(TandemErrorKind::UnknownMemoryResult { result }),
                };
                let data = if response_carries_data(request) {
                    Some(cursor.take(size.bytes(), 1 + size.bytes())?)
                } else {
                    None
                };
                Record::MemoryResponse { size, result, data }
            }
            opcode::INSTRUCTION_16 => {
                let halfword = cursor.take(2, 2)?;
                if halfword & 0b11 == 0b11 {
                    // Appendix C.5 writes opcode 16 before a 32-bit encoding; the halfword's
                    // length bits say a 32-bit instruction starts here, so read the rest.
                    let upper = cursor.take(2, 4)?;
                    let raw = (upper << 16 | halfword) as u32;
                    return Ok((
                        Record::Instruction(InstructionBits::bits32(raw)),
                        Some(Note::ThirtyTwoBitInstructionUnderOpcode16),
                    ));
                }
                Record::Instruction(InstructionBits {
                    raw: halfword as u32,
                    length: InstructionLength::Bits16,
                })
            }
            opcode::INSTRUCTION_32 => {
                let raw = cursor.take(4, 4)?;
                Record::Instruction(InstructionBits::bits32(raw as u32))
            }
            opcode => return Err(TandemErrorKind::UnknownOpcode { opcode }),
        };
        Ok((record, None))
    }

    fn parse_additional_state(
        &self,
        cursor: &mut Cursor<'_>,
    ) -> Result<(Record, Option<Note>), TandemErrorKind> {
        let parameters = self.parameters;
        let id = cursor.byte(1)?;
        let address_bytes = parameters.address_width.bytes();
        let xlen_bytes = parameters.xlen.bytes();
        let mut note = None;
        let state = match id {
            identifier::PRIVILEGE => AdditionalState::Privilege(cursor.byte(2)?),
            identifier::PHYSICAL_ADDRESS => {
                AdditionalState::PhysicalAddress(cursor.take(address_bytes, 1 + address_bytes)?)
            }
            identifier::EFFECTIVE_ADDRESS => {
                AdditionalState::EffectiveAddress(cursor.take(address_bytes, 1 + address_bytes)?)
            }
            identifier::STORE_DATA_8
            | identifier::STORE_DATA_16
            | identifier::STORE_DATA_32
            | identifier::STORE_DATA_64 => {
                let size = access_size(id - identifier::STORE_DATA_8)?;
                let value = cursor.take(size.bytes(), 1 + size.bytes())?;
                AdditionalState::StoreData { size, value }
            }
            identifier::MTIME => AdditionalState::Mtime(cursor.take(8, 9)?),
            identifier::PC_PHYSICAL_ADDRESS => {
                AdditionalState::PcPhysicalAddress(cursor.take(address_bytes, 1 + address_bytes)?)
            }
            identifier::PROGRAM_COUNTER => {
                AdditionalState::ProgramCounter(cursor.take(xlen_bytes, 1 + xlen_bytes)?)
            }
            identifier::PROGRAM_COUNTER_DECIMAL => {
                note = Some(Note::DecimalProgramCounterIdentifier);
                AdditionalState::ProgramCounter(cursor.take(xlen_bytes, 1 + xlen_bytes)?)
            }
            identifier => return Err(TandemErrorKind::UnknownAdditionalState { identifier }),
        };
        Ok((Record::AdditionalState(state), note))
    }
}

fn access_size(code: u8) -> Result<AccessSize, TandemErrorKind> {
    AccessSize::from_code(code).ok_or(TandemErrorKind::UnknownAccessSize { size: code })
}

/// Whether `bytes` look like a tandem trace: a begin group followed by records that decode
/// with the default parameters (up to eight are checked; a record cut by the end of
/// `bytes` is fine, since callers may pass only a prefix of the trace).
#[must_use]
pub fn detect(bytes: &[u8]) -> bool {
    let mut decoder = RecordDecoder::new(bytes, Parameters::default());
    match decoder.next_record() {
        Ok(Some(LocatedRecord {
            record: Record::BeginGroup,
            ..
        })) => {}
        _ => return false,
    }
    let mut following = 0;
    while following < 8 {
        match decoder.next_record() {
            Ok(Some(_)) => following += 1,
            Ok(None) => break,
            Err(TandemError {
                kind: TandemErrorKind::Truncated { .. },
                ..
            }) => break,
            Err(_) => return false,
        }
    }
    following > 0
}
