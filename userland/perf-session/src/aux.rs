//! AUX data kept in a file as PERF_RECORD_AUXTRACE, decoded into the records it holds:
//! rvperf_ctr's (`rvperf record --keep-aux`), each the branch-stack sample
//! `perf_data::ctr` converts it to. The one decoder of the session and of
//! [`inject`](crate::inject).

use perf_abi::ctr::{CtrRecord, CtrRecordError, CtrRecords, RVPERF_AUXTRACE_CTR};
use perf_data::{RawRecord, AUXTRACE_RECORD_SIZE};

/// How one AUXTRACE type's data becomes samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuxDecoder {
    /// rvperf_ctr records: one sample each, no options.
    Ctr,
}

/// AUX data that does not decode.
#[derive(Debug, thiserror::Error)]
#[error("corrupt AUXTRACE data at offset {offset:#x}")]
pub struct CorruptAux {
    /// The file offset of the bad record.
    pub offset: u64,
    #[source]
    pub source: CtrRecordError,
}

/// The AUXTRACE type a PERF_RECORD_AUXTRACE_INFO names (0 in a record too short to
/// name one, a type no tool uses).
pub fn auxtrace_type(info: &RawRecord<'_>) -> u32 {
    info.body.get(..4).map_or(0, |word| {
        u32::from_le_bytes([word[0], word[1], word[2], word[3]])
    })
}

impl AuxDecoder {
    /// The decoder for an AUXTRACE type, if rvperf has one.
    pub fn for_type(auxtrace_type: u32) -> Option<Self> {
        (auxtrace_type == RVPERF_AUXTRACE_CTR).then_some(Self::Ctr)
    }

    /// The records of one PERF_RECORD_AUXTRACE chunk, each a sample
    /// ([`perf_data::ctr::ctr_sample`]).
    pub fn records<'a>(self, record: &RawRecord<'a>) -> Result<Vec<CtrRecord<'a>>, CorruptAux> {
        match self {
            Self::Ctr => {
                let data_at = record.offset.saturating_add(AUXTRACE_RECORD_SIZE);
                let mut records = CtrRecords::new(record.aux_data);
                let mut decoded = Vec::new();
                loop {
                    let at = records.offset();
                    match records.next_record() {
                        Ok(Some(ctr)) => decoded.push(ctr),
                        Ok(None) => return Ok(decoded),
                        Err(source) => {
                            return Err(CorruptAux {
                                offset: data_at.saturating_add(at as u64),
                                source,
                            })
                        }
                    }
                }
            }
        }
    }
}

/// AUXTRACE chunks of a type rvperf does not decode, counted (a session reads the
/// rest of the file and says what it left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UndecodedAux {
    /// The AUXTRACE_INFO type, `None` for chunks without an AUXTRACE_INFO before them.
    pub auxtrace_type: Option<u32>,
    pub chunks: u64,
    pub bytes: u64,
}
