//! Golden dumps: every `tests/data/*.bin` is dumped with `dump_stream` and compared with the
//! `.dump` file beside it. Options come from the file name (see tests/data/README.md).
//! `RVPERF_BLESS=1` rewrites the expected files (and regenerates the generated inputs);
//! missing expected files are written and reported.

use std::fs;
use std::path::{Path, PathBuf};

use ntrace_message::{
    dump_stream, AddressWidth, Body, BranchType, CorrelationEvent, MessageEncoder, MessageOptions,
    Process, ResourceFull, SyncReason,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn blessing() -> bool {
    std::env::var_os("RVPERF_BLESS").is_some_and(|v| v == "1")
}

/// Options encoded in a file stem: `srcN`, `ts`, `ext`, `rv32` tokens separated by `_`.
fn options_from_stem(stem: &str) -> MessageOptions {
    let mut options = MessageOptions::default();
    for token in stem.split('_') {
        match token {
            "ts" => options.timestamps = true,
            "ext" => options.address_msb_extension = true,
            "rv32" => options.address_width = AddressWidth::Bits32,
            _ => {
                if let Some(bits) = token.strip_prefix("src").and_then(|n| n.parse().ok()) {
                    options.src_bits = bits;
                }
            }
        }
    }
    options
}

/// One message of every Table 8 TCODE, with fields chosen to exercise the dump format.
fn every_message(width: AddressWidth) -> Vec<Body> {
    let high = match width {
        AddressWidth::Bits32 => 0xFFFF_F1F4,
        AddressWidth::Bits64 => 0xFFFF_FFFF_8000_31F4,
    };
    vec![
        Body::ProgTraceSync {
            sync: SyncReason::EXIT_FROM_DEBUG,
            icnt: 0,
            faddr: 0x8000_0000,
        },
        Body::Ownership {
            process: Process::from_field(0x3B2),
        },
        Body::Ownership {
            process: Process::from_field(0xC),
        },
        Body::DirectBranch { icnt: 3 },
        Body::IndirectBranch {
            btype: BranchType::Indirect,
            icnt: 7,
            uaddr: 0x3FC04 ^ 0x3F368,
        },
        Body::Error {
            etype: 0,
            ecode: 0b100,
        },
        Body::DirectBranchSync {
            sync: SyncReason::PERIODIC,
            icnt: 12,
            faddr: 0x8000_0104,
        },
        Body::IndirectBranchSync {
            sync: SyncReason::TRACE_ENABLE,
            btype: BranchType::Exception,
            icnt: 5,
            faddr: high,
        },
        Body::ResourceFull(ResourceFull::IcntOverflow { icnt: 1 << 21 }),
        Body::ResourceFull(ResourceFull::HistOverflow { hist: 0x8000_0001 }),
        Body::ResourceFull(ResourceFull::RepeatedHist {
            hist: 0x5,
            repeat: 150,
        }),
        Body::ResourceFull(ResourceFull::Other {
            rcode: 9,
            rdata: [0x12, 0x34],
            count: 2,
        }),
        Body::IndirectBranchHist {
            btype: BranchType::Indirect,
            icnt: 0x7D,
            uaddr: 0xE,
            hist: 0xFFE,
        },
        Body::IndirectBranchHistSync {
            sync: SyncReason::SEQUENTIAL_INSTRUCTION_COUNTER,
            btype: BranchType::Interrupt,
            icnt: 8,
            faddr: 0x110,
            hist: 0x2,
        },
        Body::IndirectBranchHistSync {
            sync: SyncReason(14),
            btype: BranchType::ExceptionOrInterrupt,
            icnt: 0,
            faddr: high,
            hist: 1,
        },
        Body::RepeatBranch { bcnt: 42 },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(0),
            cdf: 1,
            icnt: 6,
            hist: Some(1),
        },
        Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(4),
            cdf: 0,
            icnt: 10,
            hist: None,
        },
    ]
}

fn encode_all(stem: &str, timestamps: bool) -> Vec<u8> {
    let options = options_from_stem(stem);
    let encoder = MessageEncoder::new(options);
    let mut out = Vec::new();
    let src_max = (1u16 << options.src_bits) - 1;
    for (k, body) in every_message(options.address_width).iter().enumerate() {
        let src = (k as u16 * 3) & src_max;
        let timestamp = (timestamps && k % 3 != 2).then_some(k as u64 * 1000 + 7);
        encoder
            .encode(src, body, timestamp, &mut out)
            .expect("encodable");
        encoder.encode_idle(k % 3, &mut out);
    }
    out
}

/// The generated inputs, by file name.
fn generated_inputs() -> Vec<(&'static str, Vec<u8>)> {
    let mut vendor_garbage = Vec::new();
    let encoder = MessageEncoder::new(MessageOptions::default());
    let table6 = vec![0xFF, 0x70, 0xD0, 0x1D, 0x1D, 0xF8, 0xFF, 0xFF];
    vendor_garbage.extend_from_slice(&table6);
    // Vendor-defined and reserved TCODEs.
    vendor_garbage.extend_from_slice(&[56 << 2, 0x01 << 2, 0x2A << 2 | 1, 0x03 << 2 | 3]);
    vendor_garbage.extend_from_slice(&[62 << 2, 0x3F << 2 | 3]);
    vendor_garbage.extend_from_slice(&[13 << 2, 0x00, 0x07]);
    // Garbage: MSEO=01 at a message start, reserved MSEO, too-wide field, extra fields.
    vendor_garbage.extend_from_slice(&[0x01, 0x22, 0x03]);
    encoder
        .encode(
            0,
            &Body::DirectBranch { icnt: 5 },
            None,
            &mut vendor_garbage,
        )
        .unwrap();
    vendor_garbage.extend_from_slice(&[0x24, 0x06, 0x00, 0x03]);
    vendor_garbage.extend_from_slice(&[0x0C]);
    vendor_garbage.extend_from_slice(&[0xFC; 11]);
    vendor_garbage.push(0x07);
    vendor_garbage.extend_from_slice(&[0x0C, 0x05, 0x05, 0x07]);
    encoder
        .encode(
            0,
            &Body::RepeatBranch { bcnt: 2 },
            None,
            &mut vendor_garbage,
        )
        .unwrap();
    // Truncated final message.
    vendor_garbage.extend_from_slice(&table6[1..4]);

    vec![
        ("table6.bin", table6),
        ("every_message.bin", encode_all("every_message", false)),
        (
            "every_message_src4_ts_ext.bin",
            encode_all("every_message_src4_ts_ext", true),
        ),
        (
            "every_message_src12_rv32_ext.bin",
            encode_all("every_message_src12_rv32_ext", false),
        ),
        ("vendor_reserved_garbage.bin", vendor_garbage),
    ]
}

#[test]
fn generated_inputs_are_current() {
    let mut stale = Vec::new();
    for (name, bytes) in generated_inputs() {
        let path = data_dir().join(name);
        match fs::read(&path) {
            Ok(existing) if existing == bytes => {}
            _ if blessing() => fs::write(&path, &bytes).expect("write generated input"),
            // A missing input is stale too: only RVPERF_BLESS=1 writes files.
            _ => stale.push(name),
        }
    }
    assert!(
        stale.is_empty(),
        "generated inputs missing or different from the encoder (rerun with \
         RVPERF_BLESS=1): {stale:?}"
    );
}

#[test]
fn golden_dumps() {
    let mut inputs: Vec<PathBuf> = fs::read_dir(data_dir())
        .expect("tests/data exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "bin"))
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no golden inputs found");
    let mut failures = Vec::new();
    for input in inputs {
        let stem = input
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 file name");
        let bytes = fs::read(&input).expect("readable input");
        let mut dump = String::new();
        dump_stream(&bytes, options_from_stem(stem), &mut dump).expect("fmt to String");
        let expected_path = input.with_extension("dump");
        match fs::read_to_string(&expected_path) {
            Ok(expected) if expected == dump => {}
            _ if blessing() => fs::write(&expected_path, &dump).expect("write expected dump"),
            Ok(expected) => {
                let first = expected.lines().zip(dump.lines()).position(|(a, b)| a != b);
                failures.push(format!(
                    "{}: first differing line {first:?}\n--- got ---\n{dump}",
                    expected_path.display()
                ));
            }
            // Only RVPERF_BLESS=1 writes files: a missing golden is a failure.
            Err(_) => failures.push(format!("{} is missing", expected_path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "golden dump mismatch (rerun with RVPERF_BLESS=1 if intended):\n{}",
        failures.join("\n")
    );
}
