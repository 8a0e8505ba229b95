//! `read_ntrace_recording` over perf.data files written by perf-data's writer as
//! `rvperf trace record` writes them: the configuration, the pieces and gaps of the
//! trace (chunk offsets and `reference` lengths, idle padding dropped), the executable
//! mappings; and the errors, each naming its file offset.

use std::io::Cursor;

use perf_abi::ntrace::{feature, NtraceInfo, RVPERF_AUXTRACE_NTRACE};
use perf_abi::sys::bindings::{self as abi, perf_event_attr};
use perf_abi::{Mmap2FileId, Mmap2Record, SampleId};
use perf_data::{AuxtraceChunk, EventDesc, Metadata, PerfDataReader, PerfDataWriter};
use perf_session::{
    place_vmlinux, read_ntrace_recording, JoinedGap, KernelMapping, NtraceRecordingError,
    PlacedElf, TracePiece, VmlinuxProblem,
};

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

/// A perf.data writer in memory with the recorder's one dummy event.
fn dummy_writer() -> PerfDataWriter<Cursor<Vec<u8>>> {
    PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![EventDesc {
            attr: dummy_attr(),
            name: "dummy:u".into(),
            ids: vec![1],
        }],
    )
    .unwrap()
}

/// (offset, reference, data) chunks after an AUXTRACE_INFO of `words`.
fn recording(words: &[u64], chunks: &[(u64, u64, Vec<u8>)]) -> Vec<u8> {
    let mut writer = dummy_writer();
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

/// The kernel's mapping as `rvperf trace record` writes it (perf's
/// `[kernel.kallsyms]_text`, pgoff `_text`'s run-time address) is read back, and a
/// vmlinux is found by its build id and moved to where the kernel ran.
#[test]
fn the_kernels_mapping_places_its_vmlinux() {
    let kernel_id = [0x4b; 20];
    let moved_by = 0x20_0000u64;
    let link = 0xffff_ffff_8000_0000u64;
    let mut writer = dummy_writer();
    writer
        .write_mmap2(
            0,
            abi::PERF_RECORD_MISC_KERNEL as u16,
            &Mmap2Record {
                pid: u32::MAX,
                tid: 0,
                addr: link + moved_by,
                len: 0x10_0000,
                pgoff: link + moved_by,
                file_id: Mmap2FileId::BuildId(&kernel_id),
                prot: 5,
                flags: 0,
                filename: format!("{}{}", symbolize::KERNEL_DSO, symbolize::KERNEL_TEXT_SYMBOL)
                    .as_bytes(),
                sample_id: SampleId {
                    pid: Some(u32::MAX),
                    tid: Some(0),
                    time: Some(0),
                    ..SampleId::default()
                },
            },
        )
        .unwrap();
    writer
        .write_auxtrace_info(RVPERF_AUXTRACE_NTRACE, &info().to_words())
        .unwrap();
    let bytes = writer
        .finish(&Metadata::from_host("rvperf", vec![]))
        .unwrap()
        .into_inner();
    let reader = PerfDataReader::from_bytes(&bytes, "trace").unwrap();
    let recording = read_ntrace_recording(&reader).unwrap();
    let kernel = recording.kernel.clone().expect("the kernel's mapping");
    assert_eq!(
        kernel,
        KernelMapping {
            symbol: "_text".to_owned(),
            address: link + moved_by,
            build_id: Some(kernel_id.to_vec()),
        }
    );
    assert!(
        recording.mappings.is_empty(),
        "the kernel is no file mapping"
    );

    // Two vmlinux files at the link address, one of another kernel: the one with the
    // recorded build id is placed, moved by the difference of the `_text`s.
    let vmlinux = |id: &[u8]| {
        let mut notes = Vec::new();
        notes.extend_from_slice(&4u32.to_le_bytes());
        notes.extend_from_slice(&(id.len() as u32).to_le_bytes());
        notes.extend_from_slice(&3u32.to_le_bytes());
        notes.extend_from_slice(b"GNU\0");
        notes.extend_from_slice(id);
        perf_record::KernelCode {
            ranges: vec![perf_record::CodeRange {
                owner: "[kernel]".to_owned(),
                address: link,
                bytes: vec![0x01; 0x3000],
            }],
            symbols: vec![perf_record::KernelSymbol {
                address: link + 0x1000,
                name: "_text".to_owned(),
                global: true,
            }],
            notes,
        }
        .to_elf()
        .unwrap()
    };
    let files = [
        (
            std::path::PathBuf::from("/other/vmlinux"),
            vmlinux(&[0x11; 20]),
        ),
        (
            std::path::PathBuf::from("/right/vmlinux"),
            vmlinux(&kernel_id),
        ),
    ];
    let candidates: Vec<std::path::PathBuf> = files.iter().map(|(path, _)| path.clone()).collect();
    let read = |path: &std::path::Path| {
        files
            .iter()
            .find(|(candidate, _)| candidate == path)
            .map(|(_, bytes)| bytes.clone())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    };
    // `_text` is 0x1000 into the file's code: the kernel ran `moved_by` above it.
    let recorded = KernelMapping {
        address: link + 0x1000 + moved_by,
        ..kernel.clone()
    };
    assert_eq!(
        place_vmlinux(Some(&recorded), &candidates, read).unwrap(),
        PlacedElf {
            path: "/right/vmlinux".into(),
            load_address: Some(link + moved_by),
        }
    );
    // Not moved: at its link addresses.
    let unmoved = KernelMapping {
        address: link + 0x1000,
        ..kernel.clone()
    };
    assert_eq!(
        place_vmlinux(Some(&unmoved), &candidates, read)
            .unwrap()
            .load_address,
        None
    );
    // Decoded there, its functions are named where they ran: the symbolizer is told
    // how far the kernel moved.
    let directory = std::env::temp_dir().join(format!("rvperf-vmlinux-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let path = directory.join("vmlinux");
    std::fs::write(&path, &files[1].1).unwrap();
    let code = perf_session::TraceCode::load(&[PlacedElf {
        path: path.clone(),
        load_address: Some(link + moved_by),
    }])
    .unwrap();
    let mut processes = code.processes(perf_session::SymbolOptions::default());
    let symbolized = processes
        .symbolizer()
        .symbolize(perf_session::TRACE_PID, link + 0x1000 + moved_by + 8);
    let _ = std::fs::remove_dir_all(&directory);
    assert_eq!(
        symbolized
            .frames
            .first()
            .and_then(|frame| frame.function.as_deref()),
        Some("_text"),
        "{symbolized:?}"
    );
    // Only the other kernel's: not found, and what was looked at is said.
    let error = place_vmlinux(Some(&recorded), &candidates[..1], read).unwrap_err();
    assert!(
        matches!(&error, VmlinuxProblem::NotFound { build_id, .. } if build_id == &"4b".repeat(20)),
        "{error}"
    );
    assert!(error.to_string().contains("/other/vmlinux"), "{error}");
    assert_eq!(
        place_vmlinux(None, &candidates, read).unwrap_err(),
        VmlinuxProblem::NotPlaced
    );
}
