//! PERF_RECORD_AUXTRACE in perf.data (trace data that follows its record, indexed by
//! HEADER_AUXTRACE) and pipe-mode streams: written, read back, and corrupted.

mod common;

use std::io::Cursor;
use std::sync::OnceLock;

use common::*;
use perf_data::*;
use proptest::prelude::*;

const TRACE_TYPE: u32 = 0x5256_4354;

/// A file with AUXTRACE_INFO, three chunks (one not a multiple of 8 bytes, one empty)
/// between ordinary records, and the chunks written.
fn auxtrace_file() -> (Vec<u8>, Vec<Vec<u8>>) {
    let chunks: Vec<Vec<u8>> = vec![
        (0..40u8).collect(),
        (0..13u8).map(|b| b ^ 0x5a).collect(),
        Vec::new(),
    ];
    let mut writer = PerfDataWriter::new(
        Cursor::new(Vec::new()),
        vec![EventDesc {
            attr: cpu_clock_attr(0, 0),
            name: "cpu-clock".into(),
            ids: vec![7],
        }],
    )
    .unwrap();
    writer.write_auxtrace_info(TRACE_TYPE, &[1, 2, 3]).unwrap();
    let mut offset = 0;
    for (i, data) in chunks.iter().enumerate() {
        writer
            .write_auxtrace(&AuxtraceChunk {
                offset,
                reference: i as u64,
                idx: i as u32,
                tid: PID,
                cpu: 1,
                data,
            })
            .unwrap();
        offset += data.len() as u64;
        writer.write_finished_round().unwrap();
    }
    let meta = Metadata::from_host("6.1.0", vec!["rvperf".into()]);
    (writer.finish(&meta).unwrap().into_inner(), chunks)
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

#[test]
fn auxtrace_chunks_read_back_with_their_fields_and_are_indexed() {
    let (bytes, chunks) = auxtrace_file();
    let reader = PerfDataReader::from_bytes(&bytes, "aux").unwrap();
    assert!(reader.info().features.contains(&HEADER_AUXTRACE));
    let mut seen = Vec::new();
    let mut info = None;
    let mut finished_rounds = 0;
    for record in reader.records() {
        let record = record.unwrap();
        match record.record_type {
            PERF_RECORD_AUXTRACE_INFO => info = Some(record.body.to_vec()),
            PERF_RECORD_AUXTRACE => seen.push((
                record.offset,
                record.body.to_vec(),
                record.aux_data.to_vec(),
            )),
            PERF_RECORD_FINISHED_ROUND => finished_rounds += 1,
            other => panic!("unexpected record type {other}"),
        }
    }
    // Records after each chunk are found: the walk stepped over the trace data.
    assert_eq!(finished_rounds, 3);
    let info = info.expect("AUXTRACE_INFO");
    assert_eq!(
        u32::from_le_bytes(info[0..4].try_into().unwrap()),
        TRACE_TYPE
    );
    assert_eq!(info[8..].len(), 24);
    assert_eq!(seen.len(), chunks.len());
    let mut expected_offset = 0;
    for (i, ((_, body, data), chunk)) in seen.iter().zip(&chunks).enumerate() {
        let padded = chunk.len().div_ceil(8) * 8;
        assert_eq!(u64_at(body, 0), padded as u64, "size of chunk {i}");
        assert_eq!(u64_at(body, 8), expected_offset, "offset of chunk {i}");
        assert_eq!(u64_at(body, 16), i as u64, "reference");
        assert_eq!(
            u32::from_le_bytes(body[24..28].try_into().unwrap()),
            i as u32
        );
        assert_eq!(&data[..chunk.len()], &chunk[..]);
        assert!(data[chunk.len()..].iter().all(|&b| b == 0), "zero padding");
        expected_offset += chunk.len() as u64;
    }
    // HEADER_AUXTRACE: count, then (file offset, size) of each AUXTRACE record.
    let features = reader.info().features.clone();
    let position = features.iter().position(|&f| f == HEADER_AUXTRACE).unwrap();
    let data_end = (u64_at(&bytes, 40) + u64_at(&bytes, 48)) as usize;
    let section = u64_at(&bytes, data_end + 16 * position) as usize;
    assert_eq!(u64_at(&bytes, section), chunks.len() as u64);
    for (i, (offset, _, data)) in seen.iter().enumerate() {
        assert_eq!(u64_at(&bytes, section + 8 + 16 * i), *offset);
        assert_eq!(
            u64_at(&bytes, section + 16 + 16 * i),
            48 + data.len() as u64
        );
    }
}

#[test]
fn auxtrace_data_past_the_end_is_an_error_at_its_record() {
    let (mut bytes, _) = auxtrace_file();
    let reader = PerfDataReader::from_bytes(&bytes, "aux").unwrap();
    let first = reader
        .records()
        .map(Result::unwrap)
        .find(|r| r.record_type == PERF_RECORD_AUXTRACE)
        .unwrap()
        .offset as usize;
    drop(reader);
    bytes[first + 8..first + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let reader = PerfDataReader::from_bytes(&bytes, "aux").unwrap();
    let error = reader.records().find_map(Result::err).expect("an error");
    let text = error.to_string();
    assert!(text.contains(&format!("offset {first:#x}")), "{text}");
    assert!(text.contains("AUXTRACE"), "{text}");
}

/// A pipe-mode stream recorded by Linux perf (`perf record -o -`).
fn pipe_stream() -> &'static Vec<u8> {
    static STREAM: OnceLock<Vec<u8>> = OnceLock::new();
    STREAM.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let prog = build_hot_program(dir.path());
        let output = std::process::Command::new(perf())
            .args([
                "record",
                "-q",
                "-e",
                "cpu-clock",
                "-F",
                "999",
                "-o",
                "-",
                "--",
            ])
            .arg(&prog.path)
            .arg("100")
            .output()
            .expect("perf record -o -");
        assert!(output.status.success(), "perf record -o - failed");
        output.stdout
    })
}

#[test]
fn pipe_stream_of_linux_perf_reads_like_its_file_mode() {
    let bytes = pipe_stream();
    assert_eq!(u64_at(bytes, 8), 16, "a pipe header");
    let reader = PerfDataReader::from_bytes(bytes, "pipe").unwrap();
    assert_eq!(reader.event_names(), vec!["cpu-clock".to_string()]);
    assert!(reader.info().os_release.is_some());
    assert!(reader
        .info()
        .cmdline
        .as_ref()
        .is_some_and(|c| c.iter().any(|a| a == "record")));
    let samples = reader
        .records()
        .map(Result::unwrap)
        .filter(|r| r.record_type == abi::PERF_RECORD_SAMPLE)
        .map(|r| reader.parse_sample(&r).unwrap())
        .filter(|s| s.ip.is_some() && s.tid.is_some())
        .count();
    assert!(samples > 5, "{samples} samples");
}

fn read_all(bytes: &[u8]) -> Result<usize, ReadError> {
    let reader = PerfDataReader::from_bytes(bytes, "mutated")?;
    let _ = reader.event_names();
    let mut n = 0;
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        if record.record_type == abi::PERF_RECORD_SAMPLE {
            let _ = reader.parse_sample(&record);
        }
        n += 1;
    }
    Ok(n)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Overwritten bytes anywhere in an AUXTRACE file or a pipe stream never panic the
    /// reader, and its errors name an offset.
    #[test]
    fn mutated_auxtrace_and_pipe_files_never_panic(
        pipe: bool,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate: bool,
    ) {
        let mut bytes = if pipe { pipe_stream().clone() } else { auxtrace_file().0 };
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Err(error) = read_all(&bytes) {
            prop_assert!(error.to_string().contains("offset"), "{}", error);
        }
    }
}

/// perf's directory format (`perf record --kcore`): the directory opens as its `data`
/// file; the kernel's code lies beside it in `kcore_dir`.
#[test]
fn a_perf_data_directory_is_read_through_its_data_file() {
    let (bytes, chunks) = auxtrace_file();
    let directory = tempfile::tempdir().unwrap();
    let recording = directory.path().join("perf.data");
    std::fs::create_dir_all(recording.join(DIRECTORY_KCORE)).unwrap();
    std::fs::write(recording.join(DIRECTORY_DATA), &bytes).unwrap();
    std::fs::write(
        recording.join(DIRECTORY_KCORE).join(DIRECTORY_KCORE_ELF),
        b"\x7fELF",
    )
    .unwrap();
    let reader = PerfDataReader::open(&recording).unwrap();
    let mut read = Vec::new();
    for record in reader.records() {
        let record = record.unwrap();
        if record.record_type == PERF_RECORD_AUXTRACE {
            read.push(record.aux_data[..chunks[read.len()].len()].to_vec());
        }
    }
    assert_eq!(read, chunks);
    // A directory without one is an error that names the file it looked for.
    let empty = directory.path().join("empty.data");
    std::fs::create_dir(&empty).unwrap();
    let error = PerfDataReader::open(&empty).unwrap_err().to_string();
    assert!(error.contains("empty.data/data"), "{error}");
}
