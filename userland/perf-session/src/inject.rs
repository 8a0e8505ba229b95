//! A perf.data rewritten with its kept AUX data decoded: every PERF_RECORD_AUXTRACE
//! chunk becomes the SAMPLE records its trace holds, written in time order among the
//! other records, which are copied; AUXTRACE_INFO and HEADER_AUXTRACE are dropped and
//! every other header feature is copied. No messages and no I/O but the reader and
//! writer given: errors say what went wrong and at which file offset.
//!
//! Decoded today: rvperf_ctr's records (`rvperf record --keep-aux`), each the SAMPLE
//! with PERF_SAMPLE_BRANCH_STACK the default recording writes for it
//! ([`ctr_sample`]), and after a record at which perf throttled the trigger, the
//! PERF_RECORD_THROTTLE the default recording writes too ([`ctr_throttle`]), under the
//! same attr: `rvperf record` gives the triggering event the same attr whether it
//! keeps the AUX data or not.

use std::io::{Seek, Write};

use perf_abi::ctr::{CtrRecord, CtrRecordError};
use perf_abi::sys::bindings as abi;
use perf_abi::{attr_from_bytes, AttrBytesError, ThrottleRecord, RECORD_HEADER_SIZE};
use perf_data::{
    EventDesc, FeatureSection, PerfDataReader, PerfDataWriter, RawRecord, ReadError, WriteError,
    HEADER_AUXTRACE, PERF_RECORD_AUXTRACE, PERF_RECORD_AUXTRACE_INFO, PERF_RECORD_EVENT_UPDATE,
    PERF_RECORD_FINISHED_ROUND, PERF_RECORD_HEADER_ATTR, PERF_RECORD_HEADER_EVENT_TYPE,
    PERF_RECORD_HEADER_FEATURE,
};

use perf_data::ctr::{ctr_sample, ctr_throttle, write_ctr_throttle};

use crate::aux::{auxtrace_type, AuxDecoder, CorruptAux};
use crate::ordered::OrderedEvents;

/// Why a file could not be injected.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    /// AUX data of a type rvperf does not decode (Intel PT, CoreSight, ...).
    #[error(
        "no decoder for AUXTRACE type {auxtrace_type} at offset {offset:#x} \
         (rvperf decodes rvperf_ctr's only)"
    )]
    NoDecoder { auxtrace_type: u32, offset: u64 },
    /// A PERF_RECORD_AUXTRACE with no AUXTRACE_INFO before it to say what it holds.
    #[error(
        "AUXTRACE data at offset {offset:#x} without a PERF_RECORD_AUXTRACE_INFO \
         before it: its type is unknown"
    )]
    NoAuxtraceInfo { offset: u64 },
    /// AUX data that does not decode; `offset` is the file offset of the bad record.
    #[error("corrupt AUXTRACE data at offset {offset:#x}")]
    CorruptAux {
        offset: u64,
        #[source]
        source: CtrRecordError,
    },
    /// An AUXTRACE chunk from an AUX area (`idx`) the event has no sample id for.
    #[error(
        "AUXTRACE chunk at offset {offset:#x} is from AUX area {idx}, for which \
         the event has no sample id"
    )]
    NoEventForAuxArea { idx: u32, offset: u64 },
    /// The attr the decoded samples belong to cannot hold them.
    #[error("event {index}: {why}")]
    Attr { index: usize, why: &'static str },
    /// An attr that cannot be read, so cannot be copied.
    #[error("event {index}: its perf_event_attr cannot be copied")]
    AttrBytes {
        index: usize,
        #[source]
        source: AttrBytesError,
    },
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl From<CorruptAux> for InjectError {
    fn from(error: CorruptAux) -> Self {
        Self::CorruptAux {
            offset: error.offset,
            source: error.source,
        }
    }
}

/// What [`inject`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    /// PERF_RECORD_AUXTRACE chunks decoded.
    pub chunks: u64,
    /// SAMPLE records written for them.
    pub samples: u64,
    /// PERF_RECORD_THROTTLE records written after samples at which the trigger was
    /// throttled.
    pub throttles: u64,
}

/// Whether the file keeps AUX data (AUXTRACE_INFO, AUXTRACE records or the
/// HEADER_AUXTRACE index): without it, there is nothing to inject.
pub fn has_aux_data(reader: &PerfDataReader<'_>) -> Result<bool, ReadError> {
    if reader.info().features.contains(&HEADER_AUXTRACE) {
        return Ok(true);
    }
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        if matches!(
            record.record_type,
            PERF_RECORD_AUXTRACE_INFO | PERF_RECORD_AUXTRACE
        ) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes `reader`'s file to `out` (file mode) with its AUX data decoded into samples;
/// returns `out`, positioned at the end, and what was injected. A pipe-mode input's
/// attrs, features and event names go into the header.
pub fn inject<W: Write + Seek>(
    reader: &PerfDataReader<'_>,
    out: W,
) -> Result<(W, Injected), InjectError> {
    let events = events(reader)?;
    // The sample id of each AUX area's event: perf numbers the areas (one per CPU
    // event) in the order rvperf record lists the events' ids.
    let ids = events[0].ids.clone();
    let mut writer = PerfDataWriter::new(out, events)?;
    let mut queue = OrderedEvents::default();
    let mut decoder = None;
    let mut injected = Injected::default();
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        match record.record_type {
            PERF_RECORD_AUXTRACE_INFO => {
                let auxtrace_type = auxtrace_type(&record);
                decoder = Some(AuxDecoder::for_type(auxtrace_type).ok_or(
                    InjectError::NoDecoder {
                        auxtrace_type,
                        offset: record.offset,
                    },
                )?);
            }
            PERF_RECORD_AUXTRACE => {
                let decoder = decoder.as_ref().ok_or(InjectError::NoAuxtraceInfo {
                    offset: record.offset,
                })?;
                injected.chunks = injected.chunks.saturating_add(1);
                let id = sample_id(&record, &ids)?;
                for ctr in decoder.records(&record)? {
                    injected.samples = injected.samples.saturating_add(1);
                    let time = Some(ctr.header.time);
                    let throttle = ctr_throttle(&ctr, id);
                    if let Some(now) = queue.queue(time, Pending::Ctr { record: ctr, id }) {
                        write(&mut writer, now)?;
                    }
                    // At the sample's time, queued after it: written right after it.
                    if let Some(throttle) = throttle {
                        injected.throttles = injected.throttles.saturating_add(1);
                        if let Some(now) = queue.queue(time, Pending::Throttle(throttle)) {
                            write(&mut writer, now)?;
                        }
                    }
                }
            }
            PERF_RECORD_FINISHED_ROUND => {
                for pending in queue.finish_round() {
                    write(&mut writer, pending)?;
                }
                writer.write_finished_round()?;
            }
            // The header of the file written holds them.
            PERF_RECORD_HEADER_ATTR
            | PERF_RECORD_HEADER_EVENT_TYPE
            | PERF_RECORD_EVENT_UPDATE
            | PERF_RECORD_HEADER_FEATURE => {}
            _ => {
                let time = reader.record_time(&record);
                if let Some(now) = queue.queue(time, Pending::Record(record)) {
                    write(&mut writer, now)?;
                }
            }
        }
    }
    for pending in queue.finish() {
        write(&mut writer, pending)?;
    }
    // The writer makes EVENT_DESC, BRANCH_STACK and (with no AUXTRACE written, none)
    // HEADER_AUXTRACE itself from what it wrote; the rest is copied as it was.
    let features = reader
        .info()
        .features
        .iter()
        .filter_map(|&feature| {
            Some(FeatureSection {
                feature,
                bytes: reader.feature_section(feature)?.to_vec(),
            })
        })
        .collect();
    let out = writer.finish_with_sections(features)?;
    Ok((out, injected))
}

/// The file's events with the attrs as it holds them, every field kept (a field the
/// writer cannot write is refused by it). The decoded samples belong to the first
/// (rvperf_ctr records one event), which must record branch stacks.
fn events(reader: &PerfDataReader<'_>) -> Result<Vec<EventDesc>, InjectError> {
    let mut events = Vec::new();
    for (index, info) in reader.attrs().iter().enumerate() {
        let attr = attr_from_bytes(&info.bytes)
            .map_err(|source| InjectError::AttrBytes { index, source })?;
        events.push(EventDesc {
            attr,
            name: info.name.clone().unwrap_or_default(),
            ids: info.ids.clone(),
        });
    }
    match events.first() {
        None => Err(InjectError::Attr {
            index: 0,
            why: "the file has no event",
        }),
        Some(first) if first.attr.sample_type & u64::from(abi::PERF_SAMPLE_BRANCH_STACK) == 0 => {
            Err(InjectError::Attr {
                index: 0,
                why: "no PERF_SAMPLE_BRANCH_STACK for the branch stacks of the AUX data \
                      (rvperf record --keep-aux sets it)",
            })
        }
        Some(_) => Ok(events),
    }
}

/// The sample id of the event whose AUX area a chunk came from (its `idx`); 0 for an
/// event that lists no ids (a single event needs none).
fn sample_id(record: &RawRecord<'_>, ids: &[u64]) -> Result<u64, InjectError> {
    // struct perf_record_auxtrace after its header: size, offset, reference, idx, ...
    let idx = record
        .body
        .get(24..28)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if ids.is_empty() {
        return Ok(0);
    }
    ids.get(idx as usize)
        .copied()
        .ok_or(InjectError::NoEventForAuxArea {
            idx,
            offset: record.offset,
        })
}

/// A record waiting for its time to be written.
enum Pending<'a> {
    /// Copied as it was.
    Record(RawRecord<'a>),
    /// An rvperf_ctr record of AUX data, written as its sample for the event `id`.
    Ctr { record: CtrRecord<'a>, id: u64 },
    /// The PERF_RECORD_THROTTLE after a decoded sample.
    Throttle(ThrottleRecord),
}

fn write<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    pending: Pending<'_>,
) -> Result<(), WriteError> {
    match pending {
        Pending::Ctr { record, id } => writer.write_sample(0, &ctr_sample(&record, id)),
        Pending::Throttle(throttle) => write_ctr_throttle(writer, &throttle),
        Pending::Record(record) => {
            let size = RECORD_HEADER_SIZE + record.body.len();
            let mut bytes = Vec::with_capacity(size);
            bytes.extend_from_slice(&record.record_type.to_le_bytes());
            bytes.extend_from_slice(&record.misc.to_le_bytes());
            bytes.extend_from_slice(&u16::try_from(size).unwrap_or(0).to_le_bytes());
            bytes.extend_from_slice(record.body);
            writer.write_record(&bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use perf_abi::ctr::{
        encode_ctr_record, CtrBranch, CtrRecordHeader, CTR_RECORD_THROTTLED, RVPERF_AUXTRACE_CTR,
    };
    use perf_abi::sys::bindings::perf_event_attr;
    use perf_data::{AuxtraceChunk, Metadata};

    use super::*;

    /// A cycles attr with `sample_type`, branch stacks of any branch and sample_id_all.
    fn attr(sample_type: u64) -> perf_event_attr {
        let mut attr = perf_event_attr {
            size: std::mem::size_of::<perf_event_attr>() as u32,
            sample_type,
            branch_sample_type: u64::from(abi::PERF_SAMPLE_BRANCH_ANY),
            ..Default::default()
        };
        attr.set_sample_id_all(1);
        attr
    }

    /// A kept file of one event with `ids` and one chunk of one record from AUX area
    /// `idx`, with or without AUXTRACE_INFO before it.
    fn kept(sample_type: u64, ids: Vec<u64>, idx: u32, info: bool) -> Vec<u8> {
        kept_records(sample_type, ids, idx, info, &[0])
    }

    /// [`kept`] with one record per entry of `flags`, each with those record flags, at
    /// times 1000, 2000, ...
    fn kept_records(
        sample_type: u64,
        ids: Vec<u64>,
        idx: u32,
        info: bool,
        flags: &[u8],
    ) -> Vec<u8> {
        let mut attr = attr(sample_type);
        attr.sample_period = 20_000;
        let events = vec![EventDesc {
            attr,
            name: "cycles".to_owned(),
            ids,
        }];
        let mut writer = PerfDataWriter::new(Cursor::new(Vec::new()), events).unwrap();
        if info {
            writer
                .write_auxtrace_info(RVPERF_AUXTRACE_CTR, &[42, 0, 0])
                .unwrap();
        }
        let branch = CtrBranch {
            from: 0x1010,
            to: 0x1000,
            flags_word: 0,
        };
        let mut data = Vec::new();
        for (index, &flags) in flags.iter().enumerate() {
            let header = CtrRecordHeader {
                flags,
                pid: 7,
                tid: 7,
                time: 1000 * (index as u64 + 1),
                ip: 0x1000,
                period: 20_000,
                ..CtrRecordHeader::default()
            };
            data.extend(encode_ctr_record(&header, &[branch]));
        }
        writer
            .write_auxtrace(&AuxtraceChunk {
                offset: 0,
                reference: 0,
                idx,
                tid: 7,
                cpu: 0,
                data: &data,
            })
            .unwrap();
        writer
            .finish(&Metadata::from_host("test", Vec::new()))
            .unwrap()
            .into_inner()
    }

    const BRANCHES: u64 = (abi::PERF_SAMPLE_IP
        | abi::PERF_SAMPLE_TID
        | abi::PERF_SAMPLE_TIME
        | abi::PERF_SAMPLE_ID
        | abi::PERF_SAMPLE_BRANCH_STACK) as u64;

    /// Injects the kept file `bytes`, which must give `expected`; the injected file.
    fn inject_expecting(bytes: &[u8], expected: Injected) -> Vec<u8> {
        let reader = PerfDataReader::from_bytes(bytes, "kept").unwrap();
        let (out, injected) = inject(&reader, Cursor::new(Vec::new())).unwrap();
        assert_eq!(injected, expected);
        out.into_inner()
    }

    fn inject_bytes(bytes: &[u8]) -> Result<Injected, InjectError> {
        let reader = PerfDataReader::from_bytes(bytes, "kept").unwrap();
        inject(&reader, Cursor::new(Vec::new())).map(|(_, injected)| injected)
    }

    #[test]
    fn a_chunk_becomes_a_sample_under_its_area_s_event() {
        let bytes = kept(BRANCHES, vec![5, 6], 1, true);
        let out = inject_expecting(
            &bytes,
            Injected {
                chunks: 1,
                samples: 1,
                throttles: 0,
            },
        );
        let reader = PerfDataReader::from_bytes(&out, "injected").unwrap();
        let samples: Vec<_> = reader
            .records()
            .map(Result::unwrap)
            .filter(|record| record.record_type == abi::PERF_RECORD_SAMPLE)
            .map(|record| reader.parse_sample(&record).unwrap())
            .collect();
        assert_eq!(samples.len(), 1);
        assert_eq!(samples[0].id, Some(6));
        assert_eq!(samples[0].ip, Some(0x1000));
        assert_eq!(samples[0].branch_stack.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn a_throttled_record_is_followed_by_a_throttle_record() {
        let flags = [0, CTR_RECORD_THROTTLED, 0];
        let bytes = kept_records(BRANCHES, vec![5], 0, true, &flags);
        let out = inject_expecting(
            &bytes,
            Injected {
                chunks: 1,
                samples: 3,
                throttles: 1,
            },
        );
        let reader = PerfDataReader::from_bytes(&out, "injected").unwrap();
        let format = perf_abi::SampleFormat {
            sample_type: BRANCHES,
            sample_id_all: true,
            ..perf_abi::SampleFormat::default()
        };
        let mut order = Vec::new();
        for record in reader.records() {
            let record = record.unwrap();
            match record.record_type {
                abi::PERF_RECORD_SAMPLE => {
                    let sample = reader.parse_sample(&record).unwrap();
                    order.push(("sample", sample.time.unwrap()));
                }
                abi::PERF_RECORD_THROTTLE => {
                    let parsed = perf_abi::parse_record(
                        record.record_type,
                        record.misc,
                        record.body,
                        &format,
                    )
                    .unwrap();
                    let perf_abi::Record::Throttle(throttle) = parsed else {
                        panic!("not a throttle record: {parsed:?}");
                    };
                    assert_eq!((throttle.id, throttle.stream_id), (5, 5));
                    assert_eq!(throttle.sample_id.tid, Some(7));
                    order.push(("throttle", throttle.time));
                }
                _ => {}
            }
        }
        assert_eq!(
            order,
            [
                ("sample", 1000),
                ("sample", 2000),
                ("throttle", 2000),
                ("sample", 3000)
            ]
        );
    }

    #[test]
    fn aux_data_without_auxtrace_info_is_refused() {
        let bytes = kept(BRANCHES, vec![5], 0, false);
        let error = inject_bytes(&bytes).unwrap_err();
        assert!(
            matches!(error, InjectError::NoAuxtraceInfo { offset } if offset > 0),
            "{error}"
        );
    }

    #[test]
    fn a_chunk_of_an_area_without_an_event_is_refused() {
        let bytes = kept(BRANCHES, vec![5], 3, true);
        let error = inject_bytes(&bytes).unwrap_err();
        assert!(
            matches!(error, InjectError::NoEventForAuxArea { idx: 3, .. }),
            "{error}"
        );
    }

    #[test]
    fn an_attr_without_branch_stacks_is_refused() {
        let bytes = kept(
            BRANCHES & !u64::from(abi::PERF_SAMPLE_BRANCH_STACK),
            vec![5],
            0,
            true,
        );
        let error = inject_bytes(&bytes).unwrap_err();
        assert!(
            matches!(error, InjectError::Attr { index: 0, .. }),
            "{error}"
        );
    }

    /// The fields a hand-built attr used to drop (and inject then refused to copy)
    /// reach the injected file.
    #[test]
    fn every_field_of_the_attr_is_copied() {
        let mut attr = attr(BRANCHES);
        attr.config1 = 0x11;
        attr.config2 = 0x22;
        attr.set_precise_ip(3);
        attr.set_exclude_hv(1);
        attr.aux_watermark = 4096;
        let events = vec![EventDesc {
            attr,
            name: "cycles".to_owned(),
            ids: vec![5],
        }];
        let mut writer = PerfDataWriter::new(Cursor::new(Vec::new()), events).unwrap();
        writer.write_finished_round().unwrap();
        let unusual = writer
            .finish(&Metadata::from_host("test", Vec::new()))
            .unwrap()
            .into_inner();
        let reader = PerfDataReader::from_bytes(&unusual, "kept").unwrap();
        let (out, _) = inject(&reader, Cursor::new(Vec::new())).unwrap();
        let out = out.into_inner();
        let injected = PerfDataReader::from_bytes(&out, "injected").unwrap();
        assert_eq!(injected.attrs()[0].bytes, reader.attrs()[0].bytes);
        let copied = attr_from_bytes(&injected.attrs()[0].bytes).unwrap();
        assert_eq!((copied.config1, copied.config2), (0x11, 0x22));
        assert_eq!((copied.precise_ip(), copied.exclude_hv()), (3, 1));
    }
}
