//! `read_ntrace_recording` over perf.data files written by perf-data's writer as
//! `rvperf trace record` writes them: the configuration, the pieces and gaps of the
//! trace (chunk offsets and `reference` lengths, idle padding dropped), the executable
//! mappings; and the errors, each naming its file offset.

use std::io::Cursor;

use perf_abi::ntrace::{feature, NtraceInfo, RVPERF_AUXTRACE_NTRACE};
use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::{Mmap2FileId, Mmap2Record, SampleId};
use perf_data::{AuxtraceChunk, EventDesc, Metadata, PerfDataReader, PerfDataWriter};
use perf_session::{read_ntrace_recording, JoinedGap, NtraceRecordingError, TracePiece};

fn info() -> NtraceInfo {
    NtraceInfo {
        mode: 6,
        features: feature::IMPLICIT_RETURN,
        privileges: 1,
        sync_max: None,
        src_bits: 0,
        return_stack_depth: 32,
        harts: 1,
        buffer_bytes: 4096,
        time: None,
        timestamp_prescale: 0,
        hart_cpus: Vec::new(),
    }
}

fn dummy_attr() -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: abi::PERF_COUNT_SW_DUMMY.into(),
        sample_type: u64::from(abi::PERF_SAMPLE_TID | abi::PERF_SAMPLE_TIME),
        ..Default::default()
    };
    attr.set_sample_id_all(1);
    attr.set_mmap2(1);
    attr
}

/// (offset, reference, data) chunks after an AUXTRACE_INFO of `words`.
fn recording(words: &[u64], chunks: &[(u64, u64, Vec<u8>)]) -> Vec<u8> {
    let mut writer = PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![EventDesc {
            attr: dummy_attr(),
            name: "dummy:u".into(),
            ids: vec![1],
        }],
    )
    .unwrap();
    for (filename, prot) in [("/bin/program", 5u32), ("/bin/data", 3)] {
        writer
            .write_mmap2(
                0,
                2,
                &Mmap2Record {
                    pid: 7,
                    tid: 7,
                    addr: 0x10000,
                    len: 0x1000,
                    pgoff: 0,
                    file_id: Mmap2FileId::BuildId(&[0xab; 20]),
                    prot,
                    flags: 2,
                    filename: filename.as_bytes(),
                    sample_id: SampleId {
                        pid: Some(7),
                        tid: Some(7),
                        time: Some(1),
                        ..SampleId::default()
                    },
                },
            )
            .unwrap();
    }
    writer
        .write_auxtrace_info(RVPERF_AUXTRACE_NTRACE, words)
        .unwrap();
    for (offset, reference, data) in chunks {
        writer
            .write_auxtrace(&AuxtraceChunk {
                offset: *offset,
                reference: *reference,
                idx: 0,
                tid: u32::MAX,
                cpu: u32::MAX,
                data,
            })
            .unwrap();
    }
    writer
        .finish(&Metadata::from_host("rvperf", vec![]))
        .unwrap()
        .into_inner()
}

#[test]
fn pieces_gaps_configuration_and_mappings_read_back() {
    let padded = |bytes: &[u8]| {
        let mut padded = bytes.to_vec();
        padded.resize(bytes.len().next_multiple_of(8), 0xff);
        padded
    };
    let bytes = recording(
        &info().to_words(),
        &[
            (0, 12, padded(&[1; 12])),
            (12, 4, padded(&[2; 4])),
            // 100 bytes lost, then a new piece.
            (116, 8, padded(&[3; 8])),
        ],
    );
    let reader = PerfDataReader::from_bytes(&bytes, "trace").unwrap();
    let recording = read_ntrace_recording(&reader).unwrap();
    assert_eq!(recording.info, info());
    let mut first = vec![1; 12];
    first.extend([2; 4]);
    assert_eq!(
        recording.pieces,
        [
            TracePiece {
                offset: 0,
                bytes: first
            },
            TracePiece {
                offset: 116,
                bytes: vec![3; 8]
            }
        ]
    );
    assert_eq!(recording.lost_bytes, 100);
    // Joined: the gap sits where the second piece begins.
    let (joined, gaps) = recording.joined_trace();
    assert_eq!(joined.len(), 24);
    assert_eq!(
        gaps,
        [JoinedGap {
            position: 16,
            lost: 100
        }]
    );
    // The executable mapping only, with its build id.
    assert_eq!(recording.mappings.len(), 1);
    assert_eq!(recording.mappings[0].filename, "/bin/program");
    assert_eq!(
        recording.mappings[0].build_id.as_deref(),
        Some(&[0xab; 20][..])
    );
}

#[test]
fn bad_recordings_are_refused_naming_the_offset() {
    let no_trace = recording(&[], &[]);
    let bytes = {
        // An N-Trace AUXTRACE_INFO without its words is refused.
        let reader = PerfDataReader::from_bytes(&no_trace, "none").unwrap();
        matches!(
            read_ntrace_recording(&reader),
            Err(NtraceRecordingError::Info { .. })
        )
    };
    assert!(bytes, "an empty info is refused");
    let mut words = info().to_words();
    words[1] = 4;
    let bad_mode = recording(&words, &[]);
    let reader = PerfDataReader::from_bytes(&bad_mode, "mode").unwrap();
    let error = read_ntrace_recording(&reader).unwrap_err();
    assert!(error.to_string().contains("word 1 (mode)"), "{error}");
    assert!(error.to_string().contains("file offset 0x"), "{error}");
    let long_reference = recording(&info().to_words(), &[(0, 9, vec![0; 8])]);
    let reader = PerfDataReader::from_bytes(&long_reference, "reference").unwrap();
    assert!(matches!(
        read_ntrace_recording(&reader),
        Err(NtraceRecordingError::Chunk {
            what: "more trace bytes than the chunk holds",
            ..
        })
    ));
    let overlap = recording(
        &info().to_words(),
        &[(0, 8, vec![0; 8]), (4, 8, vec![0; 8])],
    );
    let reader = PerfDataReader::from_bytes(&overlap, "overlap").unwrap();
    assert!(matches!(
        read_ntrace_recording(&reader),
        Err(NtraceRecordingError::Chunk {
            what: "chunk overlaps the one before",
            ..
        })
    ));
}
