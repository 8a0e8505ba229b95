//! The record encoder: the inverse of the decoder for every record it accepts.

use crate::error::EncodeError;
use crate::types::{
    identifier, operation_code, request_carries_data, response_carries_data, AdditionalState,
    InstructionLength, MemoryOperation, Parameters, Record,
};

/// Writes records as bytes. It remembers whether the last record was a memory request, so
/// that a response's data is written exactly when the decoder will read it.
#[derive(Clone, Debug)]
pub struct RecordEncoder {
    parameters: Parameters,
    pending_request: Option<MemoryOperation>,
}

/// Appends the low `bytes` bytes of `value`, little-endian, after checking it fits.
fn put(out: &mut Vec<u8>, field: &'static str, value: u64, bytes: u8) -> Result<(), EncodeError> {
    if bytes < 8 && value >> (u32::from(bytes) * 8) != 0 {
        return Err(EncodeError::ValueTooWide {
            field,
            value,
            bytes,
        });
    }
    out.extend_from_slice(&value.to_le_bytes()[..usize::from(bytes.min(8))]);
    Ok(())
}

impl RecordEncoder {
    #[must_use]
    pub fn new(parameters: Parameters) -> Self {
        RecordEncoder {
            parameters,
            pending_request: None,
        }
    }

    #[must_use]
    pub fn parameters(&self) -> Parameters {
        self.parameters
    }

    /// Appends `record` to `out`. On error nothing is appended and the encoder's state is
    /// unchanged.
    ///
    /// # Errors
    ///
    /// [`EncodeError`] when a value does not fit its field with the encoder's parameters,
    /// a 16-bit instruction is not a 16-bit encoding, memory data presence does not match
    /// the operation, or a response does not follow a request.
    pub fn encode(&mut self, record: &Record, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut bytes = Vec::with_capacity(18);
        self.encode_into(record, &mut bytes)?;
        out.extend_from_slice(&bytes);
        self.pending_request = match *record {
            Record::MemoryRequest { operation, .. } => Some(operation),
            _ => None,
        };
        Ok(())
    }

    /// Encodes a whole sequence, stopping at the first record that cannot be encoded.
    ///
    /// # Errors
    ///
    /// The first [`EncodeError`], with the records before it already appended.
    pub fn encode_all<'r>(
        &mut self,
        records: impl IntoIterator<Item = &'r Record>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        for record in records {
            self.encode(record, out)?;
        }
        Ok(())
    }

    fn encode_into(&self, record: &Record, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let parameters = self.parameters;
        out.push(record.opcode());
        match *record {
            Record::BeginGroup
            | Record::EndGroup
            | Record::IncrementPc
            | Record::HartReset
            | Record::StateInitialization => {}
            Record::FullRegister { register, value } => {
                let Some(width) = parameters.register_bytes(register) else {
                    return Err(EncodeError::FloatRegisterWithoutFlen { register });
                };
                put(
                    out,
                    "register number",
                    u64::from(register.debug_number()),
                    2,
                )?;
                put(out, "register value", value, width)?;
            }
            Record::IncrementalAdd { register, offset } => {
                put(
                    out,
                    "register number",
                    u64::from(register.debug_number()),
                    2,
                )?;
                out.push(offset as u8);
            }
            Record::IncrementalOr { register, mask } => {
                put(
                    out,
                    "register number",
                    u64::from(register.debug_number()),
                    2,
                )?;
                out.push(mask);
            }
            Record::AdditionalState(state) => {
                let address_bytes = parameters.address_width.bytes();
                match state {
                    AdditionalState::Privilege(mode) => {
                        out.extend_from_slice(&[identifier::PRIVILEGE, mode]);
                    }
                    AdditionalState::PhysicalAddress(address) => {
                        out.push(identifier::PHYSICAL_ADDRESS);
                        put(out, "physical address", address, address_bytes)?;
                    }
                    AdditionalState::EffectiveAddress(address) => {
                        out.push(identifier::EFFECTIVE_ADDRESS);
                        put(out, "effective address", address, address_bytes)?;
                    }
                    AdditionalState::StoreData { size, value } => {
                        out.push(identifier::STORE_DATA_8 + size.code());
                        put(out, "store data", value, size.bytes())?;
                    }
                    AdditionalState::Mtime(time) => {
                        out.push(identifier::MTIME);
                        put(out, "mtime", time, 8)?;
                    }
                    AdditionalState::PcPhysicalAddress(address) => {
                        out.push(identifier::PC_PHYSICAL_ADDRESS);
                        put(out, "pc physical address", address, address_bytes)?;
                    }
                    AdditionalState::ProgramCounter(pc) => {
                        out.push(identifier::PROGRAM_COUNTER);
                        put(out, "pc", pc, parameters.xlen.bytes())?;
                    }
                }
            }
            Record::MemoryRequest {
                address,
                operation,
                size,
                data,
            } => {
                put(
                    out,
                    "memory address",
                    address,
                    parameters.address_width.bytes(),
                )?;
                out.push(operation_code(operation) | size.code() << 4);
                match (request_carries_data(operation), data) {
                    (true, Some(value)) => put(out, "memory request data", value, size.bytes())?,
                    (false, None) => {}
                    (expected_present, _) => {
                        return Err(EncodeError::DataPresence {
                            record: "request",
                            expected_present,
                        })
                    }
                }
            }
            Record::MemoryResponse { size, result, data } => {
                let Some(request) = self.pending_request else {
                    return Err(EncodeError::ResponseWithoutRequest);
                };
                let result_code = match result {
                    crate::types::MemoryResult::Success => 0,
                    crate::types::MemoryResult::Failure => 1,
                };
                out.push(size.code() | result_code << 4);
                match (response_carries_data(request), data) {
                    (true, Some(value)) => put(out, "memory response data", value, size.bytes())?,
                    (false, None) => {}
                    (expected_present, _) => {
                        return Err(EncodeError::DataPresence {
                            record: "response",
                            expected_present,
                        })
                    }
                }
            }
            Record::Instruction(bits) => match bits.length {
                InstructionLength::Bits16 => {
                    // A halfword with low bits 0b11 would be read back as the erratum's
                    // 32-bit instruction.
                    if bits.raw > 0xffff || bits.raw & 0b11 == 0b11 {
                        return Err(EncodeError::NotSixteenBitEncoding { raw: bits.raw });
                    }
                    put(out, "instruction", u64::from(bits.raw), 2)?;
                }
                InstructionLength::Bits32 => put(out, "instruction", u64::from(bits.raw), 4)?,
            },
        }
        Ok(())
    }
}
