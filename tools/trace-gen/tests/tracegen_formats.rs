//! `rvperf-tracegen --format debug4|tandem`, the binary: QEMU runs a test program, and
//! the trace written decodes (with the libraries) to exactly the pcs the tool wrote
//! beside it (`--pcs-output`, QEMU's retired pcs). A partial tandem trace has no
//! floating-point register; a debug trace module ring wraps and says its write
//! pointer; loads and stores from QEMU's register log come out as memory accesses; a
//! bad log is a one-line error and leaves no output file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use code_image::{load_elf, CodeImage};
use debug4_flow::{BranchReporting, Debug4Decoder, DecoderOptions, StreamOptions};
use tandem_flow::{StepDecoder, StepKind};
use tandem_message::{Parameters, Register};
use trace_elements::{ElementKind, ElementSource};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `recursion`, built once by tools/testprogs/build.sh (up to date: not rebuilt).
fn program() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testprogs");
    let status = Command::new("bash")
        .arg(repo_root().join("tools/testprogs/build.sh"))
        .arg(&out)
        .arg("recursion")
        .stdin(Stdio::null())
        .status()
        .expect("run tools/testprogs/build.sh");
    assert!(
        status.success(),
        "build.sh failed: run tools/install-deps.sh"
    );
    out.join("recursion")
}

fn work(name: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tracegen-formats");
    std::fs::create_dir_all(&directory).unwrap();
    directory.join(format!("{name}.{}", std::process::id()))
}

/// Runs the tool; its stderr.
fn tracegen(arguments: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-tracegen"))
        .args(arguments)
        .output()
        .expect("run rvperf-tracegen");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "rvperf-tracegen {arguments:?}: {stderr}"
    );
    stderr
}

fn pcs_file(path: &Path) -> Vec<u64> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| u64::from_str_radix(line.trim_start_matches("0x"), 16).unwrap())
        .collect()
}

fn image(program: &Path) -> CodeImage {
    let mut image = CodeImage::new();
    let bytes = std::fs::read(program).unwrap();
    load_elf(&mut image, &program.display().to_string(), &bytes, None).unwrap();
    image
}

/// The pcs of a debug trace module trace's ranges, and how many memory accesses it has.
fn debug4_pcs(trace: &[u8], image: &CodeImage, options: DecoderOptions) -> (Vec<u64>, u64) {
    let mut decoder = Debug4Decoder::new(trace, image, options);
    let mut pcs = Vec::new();
    let mut accesses = 0;
    while let Some(element) = decoder.next_element().unwrap() {
        match element.kind {
            ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } => {
                let mut address = start;
                for _ in 0..instructions {
                    pcs.push(address);
                    let mut halfword = [0u8; 2];
                    image.read(address, &mut halfword);
                    let length = riscv_insn::instruction_length(u16::from_le_bytes(halfword))
                        .bytes()
                        .unwrap();
                    address += u64::from(length);
                }
            }
            ElementKind::MemoryAccess { .. } => accesses += 1,
            ElementKind::Gap { reason } => panic!("gap {reason:?}"),
            _ => {}
        }
    }
    (pcs, accesses)
}

#[test]
fn a_partial_tandem_trace_decodes_to_the_pcs_written_beside_it() {
    let program = program();
    let (trace, pcs) = (work("partial.tandem"), work("partial.pcs"));
    let program_text = program.to_str().unwrap();
    let stderr = tracegen(&[
        "--format",
        "tandem",
        "--omit",
        "float,csrs,memory",
        "--pc-values",
        "--elf",
        program_text,
        "-o",
        trace.to_str().unwrap(),
        "--pcs-output",
        pcs.to_str().unwrap(),
    ]);
    assert!(stderr.contains("bytes of tandem trace"), "{stderr}");
    let expected = pcs_file(&pcs);
    assert!(expected.len() > 300_000);
    let bytes = std::fs::read(&trace).unwrap();
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    let mut decoded = Vec::new();
    while let Some(step) = steps.next_step().unwrap() {
        if let StepKind::Instruction { pc, .. } = step.kind {
            decoded.push(pc);
        }
    }
    assert!(decoded == expected, "the tandem trace's pcs are not QEMU's");
    assert_eq!(steps.shadow().register(Register::Float(0)), None);
    assert!(steps.shadow().register(Register::Integer(2)).is_some());
}

#[test]
fn a_debug_trace_ring_wraps_and_data_sequences_come_from_the_register_log() {
    let program = program();
    let image = image(&program);
    let program_text = program.to_str().unwrap();
    let (ring, pcs) = (work("ring.debug4"), work("ring.pcs"));
    let stderr = tracegen(&[
        "--format",
        "debug4",
        "--branch-reporting",
        "pc-pairs",
        "--buffer-size",
        "8192",
        "--elf",
        program_text,
        "-o",
        ring.to_str().unwrap(),
        "--pcs-output",
        pcs.to_str().unwrap(),
    ]);
    let wrap: u64 = stderr
        .split("--wrap-offset ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|offset| offset.parse().ok())
        .unwrap_or_else(|| panic!("no write pointer said: {stderr}"));
    let expected = pcs_file(&pcs);
    let bytes = std::fs::read(&ring).unwrap();
    assert_eq!(bytes.len(), 8192);
    let stream = StreamOptions::default()
        .with_buffer_bytes(Some(8192))
        .with_wrap_offset(Some(wrap));
    let (decoded, _) = debug4_pcs(
        &bytes,
        &image,
        DecoderOptions::new(stream, BranchReporting::PcPairs),
    );
    assert!(decoded.len() > 1000, "{} pcs", decoded.len());
    assert!(
        expected.ends_with(&decoded),
        "the ring's pcs are not the run's last"
    );

    let (linear, pcs) = (work("data.debug4"), work("data.pcs"));
    tracegen(&[
        "--format",
        "debug4",
        "--data",
        "all",
        "--elf",
        program_text,
        "-o",
        linear.to_str().unwrap(),
        "--pcs-output",
        pcs.to_str().unwrap(),
    ]);
    let bytes = std::fs::read(&linear).unwrap();
    let (decoded, accesses) = debug4_pcs(
        &bytes,
        &image,
        DecoderOptions::new(StreamOptions::default(), BranchReporting::TakenNotTaken),
    );
    assert!(
        decoded == pcs_file(&pcs),
        "the data trace's pcs are not QEMU's"
    );
    assert!(accesses > 50_000, "{accesses} memory accesses");
}

#[test]
fn a_bad_log_is_one_line_and_leaves_no_trace_file() {
    let program = program();
    let (log, trace) = (work("bad.log"), work("bad.tandem"));
    // A register dump cut after its pc line: the trace file was begun when it is read.
    std::fs::write(
        &log,
        " pc       0000000000010000\n x0/zero  0000000000000000\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_rvperf-tracegen"))
        .args(["--format", "tandem", "--elf"])
        .arg(&program)
        .arg("--qemu-log")
        .arg(&log)
        .arg("-o")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("line 1"), "{stderr}");
    assert!(!trace.exists());
    let mut temporary = trace.into_os_string();
    temporary.push(".tmp");
    assert!(!Path::new(&temporary).exists());
}
