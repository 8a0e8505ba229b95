//! Truncated and corrupted perf.data never panics the reader; errors carry an offset.

mod common;

use std::sync::OnceLock;

use common::*;
use perf_data::*;
use proptest::prelude::*;

/// One real recording by Linux perf and one file from our writer (with branch stacks).
fn inputs() -> &'static (Vec<u8>, Vec<u8>) {
    static INPUTS: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let prog = build_hot_program(dir.path());
        let recorded = std::fs::read(perf_record(dir.path(), &prog)).unwrap();
        let (lo, _) = prog.hot;
        let entry = perf_abi::BranchEntry {
            from: lo,
            to: lo + 8,
            flags: perf_abi::BranchFlags::default(),
        };
        let branches = Branches::new(Some(3), &[entry; 3]);
        let samples: Vec<_> = (0..20).map(|i| (lo + i, Some(branches.clone()))).collect();
        let attr = cpu_clock_attr(
            (abi::PERF_SAMPLE_BRANCH_STACK | abi::PERF_SAMPLE_CALLCHAIN).into(),
            (abi::PERF_SAMPLE_BRANCH_ANY | abi::PERF_SAMPLE_BRANCH_HW_INDEX).into(),
        );
        let written = write_file(&prog, attr, &samples);
        (recorded, written)
    })
}

/// Reads everything the API offers; returns the error, if any.
fn read_all(bytes: &[u8]) -> Result<usize, ReadError> {
    let r = PerfDataReader::from_bytes(bytes, "mutated")?;
    let _ = r.info();
    let _ = r.event_names();
    let mut n = 0;
    let mut recs = r.records();
    while let Some(rec) = recs.next_record()? {
        if rec.record_type == abi::PERF_RECORD_SAMPLE {
            r.parse_sample(&rec)?;
        }
        n += 1;
    }
    Ok(n)
}

fn check_error(e: &ReadError, len: usize) {
    match e {
        ReadError::Malformed { offset, .. } | ReadError::Record { offset, .. } => {
            assert!(
                *offset <= len as u64,
                "offset {offset} beyond file of {len}: {e}"
            )
        }
        ReadError::Io { .. } => panic!("no I/O for in-memory input: {e}"),
    }
    assert!(e.to_string().contains("offset 0x"), "{e}");
}

#[test]
fn unmodified_inputs_read_cleanly() {
    let (a, b) = inputs();
    assert!(read_all(a).unwrap() > 10);
    assert!(read_all(b).unwrap() > 20);
}

#[test]
fn every_truncation_errors_with_offset() {
    for bytes in [&inputs().0, &inputs().1] {
        // Cutting inside the file leaves the header's sections pointing past the end.
        for cut in (0..bytes.len()).step_by(7) {
            let e = read_all(&bytes[..cut]).expect_err("truncated file accepted");
            check_error(&e, cut);
        }
    }
}

#[test]
fn corrupt_record_size_reports_its_offset() {
    let bytes = inputs().1.clone();
    let r = PerfDataReader::from_bytes(&bytes, "x").unwrap();
    let first = r.records().next().unwrap().unwrap().offset as usize;
    let mut bad = bytes.clone();
    bad[first + 6..first + 8].copy_from_slice(&4u16.to_le_bytes());
    match read_all(&bad) {
        Err(ReadError::Malformed { offset, .. }) => assert_eq!(offset, first as u64),
        other => panic!("expected a malformed-record error, got {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn flipped_bytes_never_panic(
        which in 0..2usize,
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 1..8),
        cut in any::<prop::sample::Index>(),
        do_cut in any::<bool>(),
    ) {
        let src = if which == 0 { &inputs().0 } else { &inputs().1 };
        let mut bytes = src.clone();
        for (i, x) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= x;
        }
        if do_cut {
            bytes.truncate(cut.index(bytes.len()));
        }
        if let Err(e) = read_all(&bytes) {
            check_error(&e, bytes.len());
        }
    }

    #[test]
    fn header_fields_fuzzed_never_panic(
        which in 0..2usize,
        field in 0..13usize,
        value in any::<u64>(),
    ) {
        // Aim at the header's offsets and sizes, which random flips rarely hit hard.
        let src = if which == 0 { &inputs().0 } else { &inputs().1 };
        let mut bytes = src.clone();
        bytes[8 + field * 8..16 + field * 8].copy_from_slice(&value.to_le_bytes());
        if let Err(e) = read_all(&bytes) {
            check_error(&e, bytes.len());
        }
    }
}
