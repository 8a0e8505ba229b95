//! Traces made in the riscv64 guest by the emulated N-Trace hardware
//! (`tools/qemu-ntrace`, driven by `rvtrace-ctl` through the PCI BAR with the Trace
//! Control Interface's sequences), decoded on the host and compared with the exact
//! retired-PC sequence `qemu-riscv64` gives for the same binary and arguments: an
//! independent ground truth. Over the program's `main` (from its first instruction to
//! the call of `exit`), the decoded sequence must be exactly that one.
//!
//! The captures come from this run's guest tier (`RVPERF_NTRACE_CAPTURES`, with the
//! guest's binaries in `RVPERF_NTRACE_BINARIES`), or else from the bundled fixture
//! `tests/fixtures/ntrace-guest/` (its README says how it was made).

mod common;

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use code_image::{load_elf, CodeImage};
use common::{assert_same_pcs, repository, retired_pcs_of, Code};
use ntrace_flow::{DecoderOptions, Recovery};
use ntrace_message::{AddressWidth, MessageOptions};
use object::{Object, ObjectSegment, ObjectSymbol};
use trace_elements::{ElementKind, TraceElement};

/// Where `rvtrace-ctl` is linked (away from the workloads' 0x10000).
const CONTROL_TOOL: &str = "rvtrace-ctl";
/// OpenSBI as QEMU's `-bios default` loads it (the opensbi package's build of the same
/// firmware, position-independent, at the start of RAM).
const OPENSBI_ELF: &str = "/usr/lib/riscv64-linux-gnu/opensbi/generic/fw_dynamic.elf";
const OPENSBI_BASE: u64 = 0x8000_0000;

struct Capture {
    name: String,
    /// Each program run, with its arguments (several for the two-hart capture).
    programs: Vec<(String, Vec<String>)>,
    trace: Vec<u8>,
    info: HashMap<String, String>,
}

impl Capture {
    fn info(&self, key: &str) -> &str {
        self.info
            .get(key)
            .unwrap_or_else(|| panic!("{}: no {key} in its info file", self.name))
    }

    fn flag(&self, key: &str) -> bool {
        self.info(key) == "1"
    }

    /// What made the capture: `rvtrace-ctl` (through the BAR) or `rvperf trace record`
    /// (through the rvtrace driver), whose code runs on the traced hart too.
    fn recorder(&self) -> &str {
        self.info
            .get("recorder")
            .map_or(CONTROL_TOOL, String::as_str)
    }

    /// Bytes the sink overwrote before the recorder read them.
    fn lost_bytes(&self) -> u64 {
        self.info
            .get("lost_bytes")
            .map_or(0, |value| value.parse().expect("lost_bytes"))
    }
}

fn captures_directory() -> PathBuf {
    std::env::var_os("RVPERF_NTRACE_CAPTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("tests/fixtures/ntrace-guest"))
}

fn binaries_directory() -> PathBuf {
    std::env::var_os("RVPERF_NTRACE_BINARIES")
        .map(PathBuf::from)
        .unwrap_or_else(captures_directory)
}

fn captures() -> Vec<Capture> {
    let directory = captures_directory();
    let manifest = std::fs::read_to_string(directory.join("manifest"))
        .unwrap_or_else(|error| panic!("{}/manifest: {error}", directory.display()));
    manifest
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next().expect("a capture name").to_string();
            let mut programs = Vec::new();
            let mut current: Option<(String, Vec<String>)> = None;
            for word in words {
                match (&mut current, word) {
                    (Some(program), "::") => {
                        programs.push(std::mem::take(program));
                        current = None;
                    }
                    (Some((_, args)), _) => args.push(word.to_string()),
                    (None, _) => {
                        let base = Path::new(word)
                            .file_name()
                            .expect("a program")
                            .to_string_lossy();
                        current = Some((base.into_owned(), Vec::new()));
                    }
                }
            }
            programs.extend(current);
            let trace_path = directory.join(format!("{name}.nt"));
            let trace = std::fs::read(&trace_path)
                .unwrap_or_else(|error| panic!("{}: {error}", trace_path.display()));
            let info = std::fs::read_to_string(directory.join(format!("{name}.nt.info")))
                .unwrap_or_else(|error| panic!("{name}.nt.info: {error}"))
                .lines()
                .filter_map(|line| line.split_once('='))
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect();
            Capture {
                name,
                programs,
                trace,
                info,
            }
        })
        .collect()
}

/// The code a capture ran: its programs, the control tool, and for a trace of every
/// privilege level the kernel and OpenSBI.
fn code_of(capture: &Capture, with_kernel: bool) -> Code {
    let mut image = CodeImage::new();
    let binaries = binaries_directory();
    let mut files: Vec<(PathBuf, Option<u64>)> = vec![(binaries.join(capture.recorder()), None)];
    let mut seen = Vec::new();
    for (program, _) in &capture.programs {
        if !seen.contains(program) {
            seen.push(program.clone());
            files.push((binaries.join(program), None));
        }
    }
    if with_kernel {
        // The kernel as it ran: its text from the guest's /proc/kcore (vmlinux's bytes
        // are not what runs: alternatives, jump labels and ftrace patch them at boot).
        let text_path = captures_directory().join(format!("{}.kernel-text", capture.name));
        let text = std::fs::read(&text_path)
            .unwrap_or_else(|error| panic!("{}: {error}", text_path.display()));
        let address = std::fs::read_to_string(text_path.with_extension("kernel-text.info"))
            .expect("the kernel text's info file")
            .lines()
            .find_map(|line| line.strip_prefix("address=0x"))
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .expect("the kernel text's address");
        let file = image.add_file("kernel text (/proc/kcore)");
        image
            .add_segment(address, text, true, file)
            .expect("the kernel text's segment");
        // Machine mode, when the kernel called the firmware in the window (with Sstc's
        // timer it need not): OpenSBI comes with QEMU, but not on a host without it.
        if Path::new(OPENSBI_ELF).exists() {
            files.push((PathBuf::from(OPENSBI_ELF), Some(OPENSBI_BASE)));
        }
    }
    for (path, base) in files {
        let bytes =
            std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        load_elf(&mut image, &path.display().to_string(), &bytes, base)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    }
    let files = image.file_decode_infos();
    Code { image, files }
}

fn decoder_options(capture: &Capture) -> DecoderOptions {
    let src_bits = capture.info("src_bits").parse().expect("src_bits");
    let message = MessageOptions::default()
        .with_src_bits(src_bits)
        .with_timestamps(capture.flag("timestamps"))
        .with_address_msb_extension(capture.flag("msb_extension"))
        .with_address_width(AddressWidth::Bits64);
    let depth = if capture.flag("implicit_return") {
        capture
            .info("return_stack_depth")
            .parse()
            .expect("return_stack_depth")
    } else {
        0
    };
    DecoderOptions::default()
        .with_message(message)
        .with_return_stack_depth(depth)
        .with_all_jumps(capture.flag("all_jumps"))
        .with_recovery(Recovery::ReturnError)
}

/// Every element of the whole trace with the PCs of its ranges; any decode error fails.
fn decode(capture: &Capture, code: &Code) -> Vec<(TraceElement, Vec<u64>)> {
    decode_with(capture, code, Recovery::ReturnError)
}

/// [`decode`] with a recovery policy: with [`Recovery::Resync`], an error is a gap
/// element and decoding goes on at the next synchronisation (what a buffer that wrapped
/// holds before its first one, the rest of a message the wrap cut, is such a gap).
fn decode_with(
    capture: &Capture,
    code: &Code,
    recovery: Recovery,
) -> Vec<(TraceElement, Vec<u64>)> {
    common::decode_elements(
        &capture.trace,
        code,
        decoder_options(capture).with_recovery(recovery),
    )
    .unwrap_or_else(|error| panic!("{}: decode error: {error}", capture.name))
}

fn symbol(elf: &Path, name: &str) -> u64 {
    let bytes = std::fs::read(elf).expect("read ELF");
    let file = object::File::parse(&*bytes).expect("parse ELF");
    file.symbols()
        .find(|symbol| symbol.name() == Ok(name))
        .unwrap_or_else(|| panic!("{}: no symbol {name}", elf.display()))
        .address()
}

/// The addresses of the instructions of a riscv64 ELF's text sections matching
/// `wanted` (read as 32-bit instructions; compressed ones are skipped).
fn instructions_where(elf: &Path, wanted: impl Fn(u32) -> bool) -> HashSet<u64> {
    use object::ObjectSection;
    let bytes = std::fs::read(elf).expect("read ELF");
    let file = object::File::parse(&*bytes).expect("parse ELF");
    let mut found = HashSet::new();
    for section in file
        .sections()
        .filter(|section| section.kind() == object::SectionKind::Text)
    {
        let data = section.data().expect("section data");
        let mut offset = 0;
        while offset + 2 <= data.len() {
            let compressed = data[offset] & 3 != 3;
            if !compressed && offset + 4 <= data.len() {
                let word =
                    u32::from_le_bytes(data[offset..offset + 4].try_into().expect("4 bytes"));
                if wanted(word) {
                    found.insert(section.address() + offset as u64);
                }
            }
            offset += if compressed { 2 } else { 4 };
        }
    }
    found
}

/// `lr.w`/`lr.d`: the AMO opcode with funct5 00010.
fn is_load_reserved(word: u32) -> bool {
    word & 0x7f == 0x2f && word >> 27 == 0b00010
}

/// The retired PCs without the iterations of load-reserved/store-conditional loops
/// whose store-conditional failed, and how many there were. A full system fails some
/// that a user-mode emulator never does: Linux clears the reservation on every return
/// from a trap, so a trap between the `lr` and the `sc` sends the loop round again. The
/// one the captures show is glibc's stdio lock at the program's first `printf`: its `sc`
/// is the first store to a copy-on-write page, which faults. Every other instruction is
/// compared as it is.
fn without_failed_store_conditionals(
    pcs: &[u64],
    load_reserved: &HashSet<u64>,
) -> (Vec<u64>, usize) {
    // An lr/sc loop is a few instructions: lr, a compare, sc, the branch back.
    const LOOP_BYTES: u64 = 32;
    const LOOP_INSTRUCTIONS: usize = 8;
    let mut kept = Vec::with_capacity(pcs.len());
    let mut retries = 0;
    let mut index = 0;
    while index < pcs.len() {
        let pc = pcs[index];
        if load_reserved.contains(&pc) {
            let again = pcs[index + 1..]
                .iter()
                .take(LOOP_INSTRUCTIONS)
                .take_while(|&&next| next >= pc && next < pc + LOOP_BYTES)
                .position(|&next| next == pc);
            if let Some(again) = again {
                // pcs[index..=index + again] went round once and came back to the lr.
                index += again + 1;
                retries += 1;
                continue;
            }
        }
        kept.push(pc);
        index += 1;
    }
    (kept, retries)
}

/// Compares a decoded `main` with the ground truth's, exactly but for failed
/// store-conditional iterations (see [`without_failed_store_conditionals`]); returns how
/// many more of those the trace had than the ground truth.
fn assert_same_execution(context: &str, elf: &Path, truth: &[u64], decoded: &[u64]) -> usize {
    let load_reserved = instructions_where(elf, is_load_reserved);
    let (truth, truth_retries) = without_failed_store_conditionals(truth, &load_reserved);
    let (decoded, decoded_retries) = without_failed_store_conditionals(decoded, &load_reserved);
    assert_same_pcs(context, &truth, &decoded);
    decoded_retries.saturating_sub(truth_retries)
}

/// The workload's own instructions: not the recorder's (`rvtrace-ctl` is linked at
/// 0x40000000, the guest's rvperf at 0x60000000), which can run on the same hart
/// between the workload's time slices.
fn program_pcs(pcs: &[u64]) -> Vec<u64> {
    pcs.iter().copied().filter(|&pc| pc < 0x4000_0000).collect()
}

/// `main`: from its first instruction to the first call of `exit` after it.
fn window(pcs: &[u64], main: u64, exit: u64) -> Option<&[u64]> {
    let start = pcs.iter().position(|&pc| pc == main)?;
    let end = pcs[start..]
        .iter()
        .position(|&pc| pc == exit)
        .map_or(pcs.len(), |end| start + end);
    Some(&pcs[start..end])
}

/// The oldest `qemu-riscv64` whose runs are the guest's: 7.2 (bookworm's) gives a
/// program another auxiliary vector than Linux (`_dl_aux_init` loops otherwise), its
/// start-up allocates otherwise and glibc's malloc trims the heap at other points than
/// in the guest (`qsort 1`: a `systrim` 103 instructions longer); 10.0
/// (bookworm-backports, what tools/install-deps.sh installs) agrees with the guest's
/// Linux on every capture.
const GROUND_TRUTH_QEMU: (u32, u32, u32) = (10, 0, 0);

/// The program's `main` as `qemu-riscv64` runs it, and the addresses that bound it.
fn ground_truth(program: &str, args: &[String]) -> (Vec<u64>, u64, u64) {
    let elf = binaries_directory().join(program);
    let pcs = exact_run(&elf, args);
    let (main, exit) = (symbol(&elf, "main"), symbol(&elf, "exit"));
    let truth = window(&pcs, main, exit)
        .expect("main in the ground truth")
        .to_vec();
    (truth, main, exit)
}

/// `program`'s exact run under `qemu-riscv64` from `main` to the process's end (past
/// `exit`: its handlers and stdio's flush), and `main`'s address.
fn ground_truth_to_the_end(program: &str, args: &[String]) -> (Vec<u64>, u64) {
    let elf = binaries_directory().join(program);
    let pcs = exact_run(&elf, args);
    let main = symbol(&elf, "main");
    let start = pcs
        .iter()
        .position(|&pc| pc == main)
        .expect("main in the ground truth");
    (pcs[start..].to_vec(), main)
}

/// Every PC `elf` retires when `qemu-riscv64` runs it with `args`.
fn exact_run(elf: &Path, args: &[String]) -> Vec<u64> {
    let qemu = trace_gen::qemu::QemuUser::detect().expect("qemu-riscv64 (tools/install-deps.sh)");
    assert!(
        qemu.version() >= GROUND_TRUTH_QEMU,
        "{} is QEMU {:?}: the ground truth of the guest's traces needs QEMU {GROUND_TRUTH_QEMU:?} or later user mode, whose programs run as under the guest's Linux (tools/install-deps.sh installs it from bookworm-backports)",
        qemu.binary.display(),
        qemu.version()
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    retired_pcs_of(elf, &args)
}

/// The PCs of one hart's stream (all of them when the trace has no SRC field).
fn pcs_of_hart(elements: &[(TraceElement, Vec<u64>)], hart: u16) -> Vec<u64> {
    elements
        .iter()
        .filter(|(element, _)| element.hart == hart)
        .flat_map(|(_, pcs)| pcs.iter().copied())
        .collect()
}

fn check_user_mode(capture: &Capture) {
    let code = code_of(capture, false);
    let elements = decode(capture, &code);
    let all = pcs_of_hart(&elements, 0);
    // Privilege filtering: no instruction outside the user-mode ELFs.
    assert!(
        all.iter().all(|&pc| pc < 0x8000_0000),
        "{}: an address outside user space",
        capture.name
    );
    let pcs = program_pcs(&all);
    let (program, args) = &capture.programs[0];
    let (truth, main, exit) = ground_truth(program, args);
    let context = format!("{} ({program} {})", capture.name, args.join(" "));
    let decoded =
        window(&pcs, main, exit).unwrap_or_else(|| panic!("{context}: main not in the trace"));
    let elf = binaries_directory().join(program);
    let retries = assert_same_execution(&context, &elf, &truth, decoded);
    eprintln!(
        "{context}: {} instructions of main exact ({retries} failed store-conditionals retried; {} instructions in the whole trace)",
        truth.len(),
        all.len()
    );
}

fn user_captures() -> Vec<Capture> {
    captures()
        .into_iter()
        .filter(|capture| {
            capture.info("privileges") == "1"
                && capture.info("harts") == "1"
                && !capture.flag("wrapped")
                && capture.lost_bytes() == 0
        })
        .collect()
}

#[test]
fn user_mode_traces_are_the_exact_execution_of_main() {
    let captures = user_captures();
    assert!(
        !captures.is_empty(),
        "no user-mode captures in {}",
        captures_directory().display()
    );
    for capture in &captures {
        check_user_mode(capture);
    }
}

/// The `rvperf decode` arguments that describe a capture's encoder configuration, as a
/// user reads them from `rvtrace-ctl`'s info file.
fn decode_arguments(capture: &Capture) -> Vec<String> {
    let mut arguments: Vec<String> = ["decode", "--output", "pcs", "--jobs", "2"]
        .map(String::from)
        .into();
    arguments.extend(["--src-bits".into(), capture.info("src_bits").to_string()]);
    let depth = if capture.flag("implicit_return") {
        capture.info("return_stack_depth")
    } else {
        "0"
    };
    arguments.extend(["--max-stack".into(), depth.to_string()]);
    for (key, flag) in [
        ("timestamps", "--timestamps"),
        ("msb_extension", "--addr-ext"),
        ("all_jumps", "--all-jumps"),
    ] {
        if capture.flag(key) {
            arguments.push(flag.into());
        }
    }
    let binaries = binaries_directory();
    let mut programs: Vec<&str> = vec![capture.recorder()];
    for (program, _) in &capture.programs {
        if !programs.contains(&program.as_str()) {
            programs.push(program);
        }
    }
    for program in programs {
        arguments.push("--elf".into());
        arguments.push(binaries.join(program).display().to_string());
    }
    arguments.push("--trace".into());
    arguments.push(
        captures_directory()
            .join(format!("{}.nt", capture.name))
            .display()
            .to_string(),
    );
    arguments
}

/// The issue's own words: `rvperf decode` of a guest trace against the program's ELF
/// prints exactly what `qemu-riscv64` runs over `main`, and for the circular sink that
/// wrapped, the end of it from the first synchronisation on (with one warning for the
/// cut message before it).
#[test]
fn rvperf_decode_of_guest_traces_prints_the_exact_execution() {
    let captures: Vec<Capture> = captures()
        .into_iter()
        .filter(|capture| {
            capture.info("privileges") == "1"
                && capture.info("harts") == "1"
                && !capture.flag("stop_on_wrap")
                && capture.lost_bytes() == 0
        })
        .collect();
    assert!(
        captures.iter().any(|capture| capture.flag("wrapped"))
            && captures.iter().any(|capture| !capture.flag("wrapped")),
        "a wrapped and an unwrapped user-mode capture in {}",
        captures_directory().display()
    );
    for capture in &captures {
        let output = std::process::Command::new(common::rvperf_binary())
            .args(decode_arguments(capture))
            .output()
            .expect("run rvperf decode");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{}: rvperf decode failed: {stderr}",
            capture.name
        );
        let pcs: Vec<u64> = String::from_utf8(output.stdout)
            .expect("UTF-8 output")
            .lines()
            .map(|line| {
                let hex = line.strip_prefix("0x").expect("0x + hex");
                u64::from_str_radix(hex, 16).expect("an address")
            })
            .collect();
        let pcs = program_pcs(&pcs);
        let (program, args) = &capture.programs[0];
        let (truth, main, exit) = ground_truth(program, args);
        let elf = binaries_directory().join(program);
        let exact = if capture.flag("wrapped") {
            assert!(
                stderr.lines().count() <= 1,
                "{}: more than the cut message's warning: {stderr}",
                capture.name
            );
            let end = pcs.iter().position(|&pc| pc == exit).unwrap_or(pcs.len());
            let tail = &pcs[..end];
            assert!(
                tail.len() > 1000 && tail.len() < truth.len() && !tail.contains(&main),
                "{}: {} of main's {} instructions",
                capture.name,
                tail.len(),
                truth.len()
            );
            assert_same_execution(
                &capture.name,
                &elf,
                &truth[truth.len() - tail.len()..],
                tail,
            );
            tail.len()
        } else {
            assert!(stderr.is_empty(), "{}: {stderr}", capture.name);
            let decoded = window(&pcs, main, exit)
                .unwrap_or_else(|| panic!("{}: main not in the output", capture.name));
            assert_same_execution(&capture.name, &elf, &truth, decoded);
            truth.len()
        };
        eprintln!(
            "{}: rvperf decode printed {exact} of main's {} instructions, exactly",
            capture.name,
            truth.len()
        );
    }
}

#[test]
fn a_wrapped_circular_sink_decodes_from_its_first_synchronisation() {
    let captures = captures();
    let capture = captures
        .iter()
        .find(|capture| {
            capture.flag("wrapped")
                && !capture.flag("stop_on_wrap")
                && capture.recorder() == CONTROL_TOOL
        })
        .expect("a circular capture that wrapped");
    let code = code_of(capture, false);
    let elements = decode_with(capture, &code, Recovery::Resync);
    // The decoder reports the rest of the message the wrap cut as a gap at offset 0,
    // before anything is decoded; after the first synchronisation there is none.
    let first_range = elements
        .iter()
        .position(|(element, _)| matches!(element.kind, ElementKind::InstructionRange { .. }))
        .expect("instructions in the trace");
    let late_gaps = elements[first_range..]
        .iter()
        .filter(|(element, _)| matches!(element.kind, ElementKind::Gap { .. }))
        .count();
    assert_eq!(
        late_gaps, 0,
        "{}: gaps after the first synchronisation",
        capture.name
    );
    let pcs = pcs_of_hart(&elements, 0);
    let (program, args) = &capture.programs[0];
    let (truth, main, exit) = ground_truth(program, args);
    // The oldest part of main is gone: what is decoded ends main exactly.
    let start = pcs
        .iter()
        .position(|&pc| (0x1_0000..0x4000_0000).contains(&pc))
        .expect("program code in the trace");
    let end = pcs[start..]
        .iter()
        .position(|&pc| pc == exit)
        .map_or(pcs.len(), |end| start + end);
    let tail = &pcs[start..end];
    assert!(
        !pcs.contains(&main),
        "{}: main's start should have been overwritten",
        capture.name
    );
    assert!(
        tail.len() > 1000 && tail.len() < truth.len(),
        "{}: {} of {} instructions",
        capture.name,
        tail.len(),
        truth.len()
    );
    assert_same_pcs(&capture.name, &truth[truth.len() - tail.len()..], tail);
}

#[test]
fn a_stop_on_wrap_sink_stops_and_reports_the_overflow() {
    let captures = captures();
    let capture = captures
        .iter()
        .find(|capture| capture.flag("stop_on_wrap"))
        .expect("a stop-on-wrap capture");
    assert!(
        capture.flag("stopped_on_wrap"),
        "{}: the sink did not stop",
        capture.name
    );
    assert_eq!(
        capture.info("overflow_harts"),
        "1",
        "{}: trTeInstStallOrOverflow",
        capture.name
    );
    assert_eq!(
        capture.trace.len().to_string(),
        capture.info("sink_bytes"),
        "{}: a full sink",
        capture.name
    );
    let code = code_of(capture, false);
    // The last message may be cut where the sink filled: decode what is whole.
    let elements = decode_with(capture, &code, Recovery::Resync);
    let gaps = elements
        .iter()
        .filter(|(element, _)| matches!(element.kind, ElementKind::Gap { .. }))
        .count();
    let pcs: Vec<u64> = elements
        .iter()
        .flat_map(|(_, pcs)| pcs.iter().copied())
        .collect();
    assert!(
        gaps <= 1,
        "{}: {gaps} gaps (at most the cut last message)",
        capture.name
    );
    let (program, args) = &capture.programs[0];
    let (truth, main, _) = ground_truth(program, args);
    let start = pcs
        .iter()
        .position(|&pc| pc == main)
        .expect("main in the trace");
    let head = &pcs[start..];
    assert!(
        head.len() < truth.len(),
        "{}: the whole of main fitted",
        capture.name
    );
    assert_same_pcs(&capture.name, &truth[..head.len()], head);
}

#[test]
fn two_harts_through_the_funnel_each_decode_exactly() {
    let captures = captures();
    let capture = captures
        .iter()
        .find(|capture| capture.info("harts") == "2")
        .expect("a two-hart capture");
    let code = code_of(capture, false);
    let elements = decode(capture, &code);
    for (hart, (program, args)) in capture.programs.iter().enumerate() {
        let hart = u16::try_from(hart).expect("hart");
        let pcs = program_pcs(&pcs_of_hart(&elements, hart));
        let (truth, main, exit) = ground_truth(program, args);
        let context = format!(
            "{} hart {hart} ({program} {})",
            capture.name,
            args.join(" ")
        );
        let decoded =
            window(&pcs, main, exit).unwrap_or_else(|| panic!("{context}: main not in the trace"));
        let elf = binaries_directory().join(program);
        let retries = assert_same_execution(&context, &elf, &truth, decoded);
        eprintln!(
            "{context}: {} instructions of main exact ({retries} failed store-conditionals retried)",
            truth.len()
        );
    }
    let sources: std::collections::BTreeSet<u16> =
        elements.iter().map(|(element, _)| element.hart).collect();
    assert_eq!(
        sources.into_iter().collect::<Vec<_>>(),
        vec![0, 1],
        "{}: SRC fields",
        capture.name
    );
}

/// Needs the kernel's text as it ran (4 MB from the guest's /proc/kcore), which the
/// bundled fixture does not carry: the guest tier runs it on every run's captures.
#[test]
#[ignore = "needs this run's guest captures: tools/vm/test runs it with --include-ignored"]
fn kernel_and_user_traces_decode_without_a_gap() {
    let captures: Vec<Capture> = captures()
        .into_iter()
        .filter(|capture| capture.info("privileges") == "0")
        .collect();
    assert!(
        !captures.is_empty(),
        "a capture of every privilege level (RVPERF_NTRACE_CAPTURES)"
    );
    for capture in &captures {
        check_kernel_and_user(capture);
    }
}

/// One trace of every privilege level: no gap, the program's user-mode instructions
/// exact, every system call a trap into the kernel.
fn check_kernel_and_user(capture: &Capture) {
    let code = code_of(capture, true);
    let elements = decode(capture, &code);
    let gaps = elements
        .iter()
        .filter(|(element, _)| matches!(element.kind, ElementKind::Gap { .. }))
        .count();
    assert_eq!(gaps, 0, "{}: gaps", capture.name);
    let (program, args) = &capture.programs[0];
    let (truth, main, exit) = ground_truth(program, args);
    // The program's user-mode instructions, in order, are the ground truth; between
    // them the kernel handles its system calls: a trap at each ecall, a return after.
    let user: Vec<u64> = elements
        .iter()
        .flat_map(|(_, pcs)| pcs.iter().copied())
        .filter(|&pc| pc < 0x4000_0000)
        .collect();
    let decoded = window(&user, main, exit).expect("main in the trace");
    let elf = binaries_directory().join(program);
    assert_same_execution(&capture.name, &elf, &truth, decoded);
    let ecall_addresses = ecalls(&elf);
    let system_calls = truth
        .iter()
        .filter(|pc| ecall_addresses.contains(pc))
        .count();
    // Every ecall of the program traps into the kernel (its handler in kernel space).
    let traps_from_ecalls = elements
        .iter()
        .filter(|(element, _)| match element.kind {
            ElementKind::Trap {
                from: Some(from),
                handler,
                ..
            } => ecall_addresses.contains(&from) && handler >= 0xffff_ffff_0000_0000,
            _ => false,
        })
        .count();
    assert!(
        system_calls > 100 && traps_from_ecalls >= system_calls,
        "{}: {traps_from_ecalls} traps from the program's ecalls for {system_calls} system calls of main",
        capture.name
    );
    let machine_mode = elements
        .iter()
        .flat_map(|(_, pcs)| pcs.iter())
        .filter(|&&pc| (OPENSBI_BASE..OPENSBI_BASE + 0x100_0000).contains(&pc))
        .count();
    let kernel = elements
        .iter()
        .flat_map(|(_, pcs)| pcs.iter())
        .filter(|&&pc| pc >= 0xffff_ffff_0000_0000)
        .count();
    eprintln!(
        "{}: {} instructions of main exact, {system_calls} system calls each a trap into the kernel ({kernel} kernel instructions, {machine_mode} in OpenSBI)",
        capture.name,
        truth.len()
    );
}

/// The addresses of the `ecall` instructions of a riscv64 ELF.
fn ecalls(elf: &Path) -> HashSet<u64> {
    instructions_where(elf, |word| word == 0x0000_0073)
}

/// A second, independent encoder: the N-Trace task group's reference code encodes the
/// sequence the guest's hardware traced, and rvperf decodes the two traces to the same
/// instructions. (The guest's workloads are the host tests' builds of tests/programs,
/// whose objdump the reference code reads: checked first.)
#[test]
fn the_reference_encoder_agrees_with_the_guest_hardware() {
    let captures = user_captures();
    let capture = captures
        .iter()
        .find(|capture| capture.programs[0].0 == "recursion")
        .or_else(|| captures.first())
        .expect("a user-mode capture");
    let (program, _) = &capture.programs[0];
    let guest_elf = binaries_directory().join(program);
    assert_eq!(
        text_of(&guest_elf),
        text_of(&common::program(program)),
        "{}: the guest's {program} is not the host tests' build",
        capture.name
    );
    let code = code_of(capture, false);
    let pcs = program_pcs(&pcs_of_hart(&decode(capture, &code), 0));
    let (main, exit) = (symbol(&guest_elf, "main"), symbol(&guest_elf, "exit"));
    let traced = window(&pcs, main, exit).expect("main in the trace");
    let sequence = common::nexrv::PcSequence::new(program, traced);
    let reference = sequence.encode(&[]);
    let host_code = common::load(program);
    let decoded = common::decode_pcs(
        &reference,
        &host_code,
        DecoderOptions::default().with_return_stack_depth(0),
    )
    .unwrap_or_else(|error| panic!("{}: the reference encoder's trace: {error}", capture.name));
    assert_same_pcs(&format!("{}: NexRv -enco", capture.name), traced, &decoded);
    eprintln!(
        "{}: NexRv's trace of the {} traced instructions decodes to them ({} bytes against the hardware's {})",
        capture.name,
        traced.len(),
        reference.len(),
        capture.trace.len()
    );
}

/// The bytes of an ELF's text sections.
fn text_of(elf: &Path) -> Vec<u8> {
    use object::ObjectSection;
    let bytes = std::fs::read(elf).expect("read ELF");
    let file = object::File::parse(&*bytes).expect("parse ELF");
    file.sections()
        .filter(|section| section.kind() == object::SectionKind::Text)
        .flat_map(|section| section.data().expect("section data").to_vec())
        .collect()
}

/// Where `slice` occurs in `truth` at or after `from` (the first such place).
fn find_run(truth: &[u64], slice: &[u64], from: usize) -> Option<usize> {
    const KEY: usize = 32;
    let key = &slice[..slice.len().min(KEY)];
    (from..truth.len().saturating_sub(slice.len() - 1))
        .filter(|&start| truth[start..].starts_with(key))
        .find(|&start| truth[start..].starts_with(slice))
}

/// `rvperf trace record` with a sink far smaller than the trace and a reader that drains
/// it rarely: the driver counted the wraps, the reader recorded what it lost as gaps (in
/// the info file: drained offset and bytes lost), never a torn or repeated byte. Decoded
/// piece by piece between the gaps, each piece resynchronises and is a run of
/// `qemu-riscv64`'s exact execution, in order.
#[test]
#[ignore = "needs the guest tier's rvtrace driver captures (tools/vm/test runs it)"]
fn an_overrun_sink_is_recorded_with_gaps_and_decodes_between_them() {
    let captures = captures();
    let capture = captures
        .iter()
        .find(|capture| capture.recorder() == "rvperf" && capture.lost_bytes() > 0)
        .unwrap_or_else(|| {
            panic!(
                "no rvperf capture that lost bytes in {}",
                captures_directory().display()
            )
        });
    assert!(
        capture.info("wraps").parse::<u64>().expect("wraps") > 1,
        "{}: the sink wrapped",
        capture.name
    );
    check_pieces_between_gaps(capture, 2);
}

/// A capture with gaps (info `gaps`: offset in the trace and bytes lost), decoded piece
/// by piece: each piece resynchronises and is a run of `qemu-riscv64`'s exact execution
/// of main, after the one before; at least `minimum` pieces of main are checked.
fn check_pieces_between_gaps(capture: &Capture, minimum: usize) {
    let gaps: Vec<(usize, u64)> = capture
        .info("gaps")
        .split(',')
        .map(|gap| {
            let (offset, lost) = gap.split_once(':').expect("OFFSET:LOST");
            let offset =
                usize::from_str_radix(offset.trim_start_matches("0x"), 16).expect("offset");
            (offset, lost.parse().expect("lost"))
        })
        .collect();
    assert!(!gaps.is_empty(), "{}: bytes were lost", capture.name);
    let code = code_of(capture, false);
    let (program, args) = &capture.programs[0];
    // From main to the process's end, past `exit`: the trace lost there too, and a
    // piece may begin after `exit` was called (in `call_fini`, flushing stdout).
    let (truth, main) = ground_truth_to_the_end(program, args);
    let elf = binaries_directory().join(program);
    let load_reserved = instructions_where(&elf, is_load_reserved);
    let (truth, _) = without_failed_store_conditionals(&truth, &load_reserved);
    let mut bounds: Vec<usize> = gaps.iter().map(|(offset, _)| *offset).collect();
    bounds.insert(0, 0);
    bounds.push(capture.trace.len());
    let mut pieces = Vec::new();
    for window_bounds in bounds.windows(2) {
        let bytes = &capture.trace[window_bounds[0]..window_bounds[1]];
        let elements = common::decode_elements(
            bytes,
            &code,
            decoder_options(capture).with_recovery(Recovery::Resync),
        )
        .unwrap_or_else(|error| panic!("{}: decode error between gaps: {error}", capture.name));
        let pcs = program_pcs(&pcs_of_hart(&elements, 0));
        pieces.push(without_failed_store_conditionals(&pcs, &load_reserved).0);
    }
    // Before main: start-up, whose length depends on the environment, is not compared.
    let main_piece = pieces.iter().position(|pcs| pcs.contains(&main));
    let mut position = 0;
    let mut checked = 0;
    let mut instructions = 0;
    for (index, pcs) in pieces.iter().enumerate() {
        let mut run = &pcs[..];
        match main_piece {
            Some(piece) if index < piece => continue,
            Some(piece) if index == piece => {
                run = &run[run.iter().position(|&pc| pc == main).expect("main")..];
            }
            None if index == 0 => continue,
            _ => {}
        }
        if run.len() < 64 {
            continue;
        }
        let start = find_run(&truth, run, position).unwrap_or_else(|| {
            panic!(
                "{}: piece {index} ({} instructions from {:#x}) is not a run of the exact execution after instruction {position}",
                capture.name,
                run.len(),
                run[0]
            )
        });
        position = start + run.len();
        checked += 1;
        instructions += run.len();
    }
    assert!(
        checked >= minimum,
        "{}: only {checked} pieces between gaps decoded",
        capture.name
    );
    eprintln!(
        "{}: {} gaps ({} bytes lost); {checked} pieces, {instructions} of the {} instructions from main to the end decoded exactly, in order",
        capture.name,
        gaps.len(),
        capture.lost_bytes(),
        truth.len()
    );
}

/// The PCs `rvperf decode -i --output pcs` printed: `0xPC` lines (`HART 0xPC` with
/// several harts), under a `# thread ...` line per thread.
fn printed_pcs(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let pc = line.split_whitespace().last().expect("a PC");
            let hex = pc.strip_prefix("0x").expect("0x + hex");
            u64::from_str_radix(hex, 16).expect("an address")
        })
        .collect()
}

/// A perf.data recording as a [`Capture`] (the info keys from its AUXTRACE_INFO, the
/// trace its pieces one after the other, each gap at the offset of the piece after it).
fn capture_of_recording(name: &str, programs: Vec<(String, Vec<String>)>, path: &Path) -> Capture {
    use perf_abi::ntrace::feature;
    let reader = perf_data::PerfDataReader::open(path).expect("read the perf.data");
    let recording = perf_session::read_ntrace_recording(&reader).expect("an N-Trace recording");
    let info = &recording.info;
    let flag = |bit: u64| if info.has(bit) { "1" } else { "0" }.to_string();
    let (trace, gaps) = recording.joined_trace();
    let gaps: Vec<String> = gaps
        .iter()
        .map(|gap| format!("{:#x}:{}", gap.position, gap.lost))
        .collect();
    let info_map = HashMap::from([
        ("recorder".to_string(), "rvperf".to_string()),
        ("src_bits".to_string(), info.src_bits.to_string()),
        ("timestamps".to_string(), flag(feature::TIMESTAMPS)),
        ("msb_extension".to_string(), flag(feature::MSB_EXTENSION)),
        ("all_jumps".to_string(), flag(feature::ALL_JUMPS)),
        (
            "implicit_return".to_string(),
            flag(feature::IMPLICIT_RETURN),
        ),
        (
            "return_stack_depth".to_string(),
            info.return_stack_depth.to_string(),
        ),
        ("lost_bytes".to_string(), recording.lost_bytes.to_string()),
        ("gaps".to_string(), gaps.join(",")),
    ]);
    Capture {
        name: name.to_string(),
        programs,
        trace,
        info: info_map,
    }
}

/// `rvperf trace record`'s perf.data (the trace as AUXTRACE, the encoder configuration
/// in AUXTRACE_INFO, the side-band with the files that ran) decoded by `rvperf decode
/// -i` with no other input than the target's root (`--symfs`): the program's `main` is
/// exactly `qemu-riscv64`'s run; with a sink overrun, it is runs of that run, in order,
/// and the decode says bytes were lost.
#[test]
#[ignore = "needs the guest tier's perf.data recordings (tools/vm/test runs it)"]
fn rvperf_trace_record_perf_data_decodes_with_no_flags_to_the_exact_execution() {
    let directory = captures_directory();
    let symfs = std::env::var_os("RVPERF_NTRACE_SYMFS")
        .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files");
    let manifest = std::fs::read_to_string(directory.join("perf-data-manifest"))
        .unwrap_or_else(|error| panic!("{}/perf-data-manifest: {error}", directory.display()));
    let mut checked = 0;
    for line in manifest.lines().filter(|line| !line.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let name = words.next().expect("a name");
        let program = Path::new(words.next().expect("a program"))
            .file_name()
            .expect("a file name")
            .to_string_lossy()
            .into_owned();
        let args: Vec<String> = words.map(String::from).collect();
        let recording = directory.join(format!("{name}.perf.data"));
        // A recording with timestamps is split by thread: the program's alone is
        // decoded (--comm), against its own files; one without is one address space.
        let timed = {
            let reader = perf_data::PerfDataReader::open(&recording).expect("read the perf.data");
            let info = perf_session::read_ntrace_recording(&reader)
                .expect("an N-Trace recording")
                .info;
            info.has(perf_abi::ntrace::feature::TIMESTAMPS)
        };
        let mut command = std::process::Command::new(common::rvperf_binary());
        command
            .args(["decode", "--output", "pcs", "--jobs", "2", "-i"])
            .arg(&recording)
            .arg("--symfs")
            .arg(&symfs);
        if timed {
            command.args(["--comm", &program]);
        }
        let output = command.output().expect("run rvperf decode");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{name}: rvperf decode -i failed: {stderr}"
        );
        let stdout = String::from_utf8(output.stdout).expect("UTF-8");
        if timed {
            let header = stdout.lines().next().unwrap_or_default();
            assert!(
                header.starts_with(&format!("# thread {program}-")),
                "{name}: {header}"
            );
            assert_eq!(
                stdout.lines().filter(|line| line.starts_with('#')).count(),
                1
            );
        } else {
            assert!(
                stderr.contains("not split by thread"),
                "{name}: no note that the trace is one address space: {stderr}"
            );
        }
        let pcs = printed_pcs(&stdout);
        let (truth, main, exit) = ground_truth(&program, &args);
        let elf = binaries_directory().join(&program);
        let pcs = program_pcs(&pcs);
        if name.contains("overrun") {
            // rvperf decode -i says what was lost; the pieces between the gaps are each
            // checked exactly through the library that read them.
            assert!(
                stderr.contains("bytes of trace were lost"),
                "{name}: no lost-bytes warning: {stderr}"
            );
            let capture =
                capture_of_recording(name, vec![(program.clone(), args.clone())], &recording);
            check_pieces_between_gaps(&capture, 2);
        } else {
            if timed {
                // The program's process alone: every gap would be a lost stretch of it.
                assert_no_gap(name, &stderr);
            }
            let decoded =
                window(&pcs, main, exit).unwrap_or_else(|| panic!("{name}: main not decoded"));
            let retries = assert_same_execution(name, &elf, &truth, decoded);
            eprintln!("{name}: rvperf decode -i printed {} of main's instructions, exactly ({retries} failed store-conditionals retried)", truth.len());
        }
        checked += 1;
    }
    assert!(
        checked >= 2,
        "{checked} perf.data recordings in {}",
        directory.display()
    );
}

/// A function's address range, from its symbol.
fn function_range(elf: &Path, name: &str) -> std::ops::Range<u64> {
    let bytes = std::fs::read(elf).expect("read ELF");
    let file = object::File::parse(&*bytes).expect("parse ELF");
    let symbol = file
        .symbols()
        .find(|symbol| symbol.name() == Ok(name))
        .unwrap_or_else(|| panic!("{}: no symbol {name}", elf.display()));
    symbol.address()..symbol.address() + symbol.size()
}

/// Runs rvperf on the host, which must succeed; its standard output.
fn rvperf_on_host(arguments: &[&std::ffi::OsStr]) -> Vec<u8> {
    let output = std::process::Command::new(common::rvperf_binary())
        .args(arguments)
        .output()
        .expect("run rvperf");
    assert!(
        output.status.success(),
        "rvperf {arguments:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// `0xADDRESS COUNT` lines of `rvperf autofdo --instruction-counts`.
fn parse_instruction_counts(text: &str) -> HashMap<u64, u64> {
    text.lines()
        .map(|line| {
            let (address, count) = line.split_once(' ').expect("ADDRESS COUNT");
            (
                u64::from_str_radix(address.trim_start_matches("0x"), 16).expect("an address"),
                count.parse().expect("a count"),
            )
        })
        .collect()
}

/// What `rvperf flamegraph`, `autofdo` and `script` make of a recording in the guest
/// (`-i` with no other input): the flame graph's stacks under `main` weigh exactly the
/// instructions `main` ran in `qemu-riscv64`'s run; the AutoFDO profile counts each
/// instruction only `main` ran exactly as often as that run; clang 19 and GCC 12 take
/// the profile; perf script's reading of `rvperf inject --itrace` of the recording is
/// `rvperf script -i`'s line for line. And the host's rvperf, reading the same recording
/// against the guest's root (`--symfs`), makes the same bytes as the guest's.
#[test]
#[ignore = "needs the guest tier's perf.data recordings (tools/vm/test runs it)"]
fn products_of_a_recording_made_in_the_guest_are_exact_and_the_hosts() {
    use common::consumers::{
        assert_entry_counts_are_head_counts, assert_gcc_takes_the_head_counts,
        clang_ir_with_profile, parse_text_profile, run_tool,
    };
    const INSTALL: &str =
        "run tools/install-deps.sh (clang-19, llvm-19, gcc-riscv64-linux-gnu, linux-perf)";
    let name = "rvperf-autofdo-perf";
    let directory = captures_directory();
    let products = directory.join("products");
    let symfs = PathBuf::from(
        std::env::var_os("RVPERF_NTRACE_SYMFS")
            .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files"),
    );
    let recording = directory.join(format!("{name}.perf.data"));
    let elf = binaries_directory().join("autofdo");
    let args = ["60".to_string()];
    let product = |suffix: &str| {
        let path = products.join(format!("{name}.{suffix}"));
        std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    };
    let work = common::scratch().join(format!("ntrace-products-{}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    let os = |text: &str| std::ffi::OsString::from(text);

    // The flame graph: every decoded instruction once, main's exactly as qemu ran them.
    let (truth, main, _) = ground_truth("autofdo", &args);
    let main_range = function_range(&elf, "main");
    // The window ends at the call of exit: the instructions of __libc_start_call_main
    // after main returned are not under main.
    let after_main = truth
        .iter()
        .rev()
        .take_while(|pc| !main_range.contains(pc))
        .count();
    let under_main = (truth.len() - after_main) as u64;
    let folded = String::from_utf8(product("folded")).expect("UTF-8");
    let mut weight_under_main = 0;
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').expect("STACK WEIGHT");
        let weight: u64 = weight.parse().expect("a weight");
        // The program's own process (the recorder and the shell are in the trace too).
        if stack.starts_with("autofdo;") && stack.split(';').any(|frame| frame == "main") {
            weight_under_main += weight;
        }
    }
    assert_eq!(
        weight_under_main, under_main,
        "the guest's flame graph under main against qemu-riscv64's run of main ({main:#x})"
    );
    let host_folded = work.join("host.folded");
    rvperf_on_host(&[
        &os("flamegraph"),
        &os("-i"),
        recording.as_os_str(),
        &os("--symfs"),
        symfs.as_os_str(),
        &os("--folded"),
        &os("-o"),
        host_folded.as_os_str(),
    ]);
    assert_eq!(
        std::fs::read_to_string(&host_folded).unwrap(),
        folded,
        "the host's flame graph of the recording"
    );

    // AutoFDO: the instructions only main ran, counted exactly; the host's profile is
    // the guest's.
    let whole_run = retired_pcs_of(&elf, &["60"]);
    let mut in_run: HashMap<u64, u64> = HashMap::new();
    for &pc in &whole_run {
        *in_run.entry(pc).or_default() += 1;
    }
    let mut in_main: HashMap<u64, u64> = HashMap::new();
    for &pc in &truth {
        *in_main.entry(pc).or_default() += 1;
    }
    let counts = parse_instruction_counts(&String::from_utf8(product("counts")).unwrap());
    let mut checked = 0;
    for (pc, count) in &in_main {
        if in_run[pc] != *count {
            continue;
        }
        assert_eq!(
            counts.get(pc),
            Some(count),
            "the guest's profile's count of {pc:#x}, which only main ran"
        );
        checked += 1;
    }
    assert!(checked >= 200, "only {checked} instructions only main ran");
    let host_profile = work.join("host.afdo.txt");
    let host_gcc = work.join("host.gcov");
    for (format, output) in [("llvm-text", &host_profile), ("gcc", &host_gcc)] {
        rvperf_on_host(&[
            &os("autofdo"),
            &os("-i"),
            recording.as_os_str(),
            &os("--symfs"),
            symfs.as_os_str(),
            &os("--binary"),
            elf.as_os_str(),
            &os("--format"),
            &os(format),
            &os("-o"),
            output.as_os_str(),
        ]);
    }
    assert_eq!(
        std::fs::read(&host_profile).unwrap(),
        product("afdo.txt"),
        "the host's LLVM profile of the recording"
    );
    assert_eq!(
        std::fs::read(&host_gcc).unwrap(),
        product("gcov"),
        "the host's GCC profile of the recording"
    );
    let guest_profile = products.join(format!("{name}.afdo.txt"));
    let ours = parse_text_profile(&String::from_utf8(product("afdo.txt")).unwrap());
    let shown = String::from_utf8(
        run_tool(
            std::process::Command::new("llvm-profdata-19")
                .args(["show", "--sample"])
                .arg(&guest_profile),
            INSTALL,
        )
        .stdout,
    )
    .unwrap();
    for (function, (total, head, _)) in &ours {
        assert!(
            shown.contains(&format!("Function: {function}: {total}, {head},")),
            "llvm-profdata does not show {function}: {total}, {head}"
        );
    }
    let source = repository().join("tests/programs/vm/autofdo.c");
    let ir = clang_ir_with_profile(
        "riscv64-linux-gnu",
        &source,
        &guest_profile,
        &work.join("autofdo.ll"),
        INSTALL,
    );
    let entered = assert_entry_counts_are_head_counts(&ir, &ours, "the guest's profile");
    assert!(
        entered >= 5,
        "only {entered} profiled functions in clang's IR"
    );
    assert_gcc_takes_the_head_counts(
        &source,
        &products.join(format!("{name}.gcov")),
        &ours,
        &work,
        INSTALL,
    );

    // perf script: the host's rvperf script -i is the guest's, and Linux perf reads
    // rvperf inject --itrace of the recording as the same samples.
    let script = String::from_utf8(product("script")).unwrap();
    let host_script = rvperf_on_host(&[
        &os("script"),
        &os("-i"),
        recording.as_os_str(),
        &os("--symfs"),
        symfs.as_os_str(),
        &os("--itrace=997"),
        &os("-F"),
        &os("ip,brstack"),
    ]);
    assert_eq!(String::from_utf8(host_script).unwrap(), script);
    let injected = work.join("injected.data");
    rvperf_on_host(&[
        &os("inject"),
        &os("-i"),
        recording.as_os_str(),
        &os("--symfs"),
        symfs.as_os_str(),
        &os("--itrace=997"),
        &os("-o"),
        injected.as_os_str(),
    ]);
    let theirs = String::from_utf8(
        run_tool(
            common::perf_for_recordings()
                .args(["script", "-F", "ip,brstack", "-i"])
                .arg(&injected),
            INSTALL,
        )
        .stdout,
    )
    .unwrap();
    let samples = script.lines().count();
    assert!(
        samples as u64 >= truth.len() as u64 / 997,
        "{samples} samples of {} instructions of main alone",
        truth.len()
    );
    for (index, (ours, theirs)) in script.lines().zip(theirs.lines()).enumerate() {
        assert_eq!(ours.trim(), theirs.trim(), "sample {index}");
    }
    assert_eq!(
        samples,
        theirs.lines().count(),
        "samples perf script printed"
    );
    eprintln!(
        "{name}: flame graph under main {weight_under_main} instructions, exactly; {checked} instructions only main ran counted exactly; {entered} functions with clang's entry counts; {samples} samples as perf script reads them"
    );
}

/// `rvperf trace record -a` on two harts: `qsort 2` and `autofdo 200`, both static
/// executables at 0x10000, take turns on CPU 1 while `hot` keeps CPU 0 busy. Split by
/// thread (timestamps against the context switches), each program's trace decodes
/// against its own ELF alone to exactly `qemu-riscv64`'s run of its `main`, with no gap;
/// the side-band shows they did alternate; no message is left without a task or a
/// CPU, or unreadable.
#[test]
#[ignore = "needs the guest tier's two-hart recording (tools/vm/test runs it)"]
fn rvperf_trace_record_a_attributes_each_instruction_to_its_process() {
    let directory = captures_directory();
    let recording = directory.join("rvperf-alternating.perf.data");
    let symfs = std::env::var_os("RVPERF_NTRACE_SYMFS")
        .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files");
    let (parsed, attribution) = split_recording(&recording);
    let unattributed = attribution.unattributed;
    assert_eq!(
        unattributed.no_task_messages
            + unattributed.unknown_hart_messages
            + unattributed.unreadable_messages,
        0,
        "{unattributed:?}"
    );
    let pid_of = |comm: &str| {
        attribution
            .threads
            .iter()
            .find(|thread| thread.comm == comm && thread.run.execs > 0)
            .unwrap_or_else(|| {
                panic!(
                    "no {comm} among {:?}",
                    attribution
                        .threads
                        .iter()
                        .map(|thread| (&thread.comm, thread.run))
                        .collect::<Vec<_>>()
                )
            })
            .run
            .pid
    };
    let (qsort, autofdo) = (pid_of("qsort"), pid_of("autofdo"));
    assert!(
        attribution
            .threads
            .iter()
            .any(|thread| thread.comm == "hot" && thread.messages > 0),
        "the other hart's busy program is in the trace"
    );
    // They took turns: the CPU went from one to the other more than once.
    let turns = parsed
        .switches
        .iter()
        .filter(|switch| {
            let pids = (
                switch.previous.map(|task| task.pid),
                switch.next.map(|task| task.pid),
            );
            pids == (Some(qsort), Some(autofdo)) || pids == (Some(autofdo), Some(qsort))
        })
        .count();
    assert!(turns >= 2, "qsort and autofdo switched {turns} times");
    for (program, args) in [("qsort", "2"), ("autofdo", "200")] {
        let exact = assert_thread_decodes_exactly(&recording, program, args, &symfs);
        eprintln!(
            "rvperf-alternating: {program} decoded alone to {} instructions of main, exactly ({} failed store-conditionals retried), {turns} turns on its CPU",
            exact.main_instructions, exact.retries
        );
    }
}

/// Fails when `rvperf decode`'s `stderr` reports a gap (lost trace, or a place the
/// decoder could not follow), with the lines that say why first: CI shows only part of
/// a long message.
fn assert_no_gap(what: &str, stderr: &str) {
    assert!(!stderr.contains("gap"), "{what}: {}", gaps_first(stderr));
}

/// `stderr` with its lines about gaps and lost trace first.
fn gaps_first(stderr: &str) -> String {
    let (gaps, others): (Vec<&str>, Vec<&str>) = stderr
        .lines()
        .partition(|line| line.contains("gap") || line.contains("lost"));
    gaps.into_iter()
        .chain(others)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What [`assert_thread_decodes_exactly`] found.
struct ExactThread {
    main_instructions: usize,
    retries: usize,
    /// Instructions of the thread's trace outside the program (the kernel's).
    other_instructions: usize,
    stderr: String,
}

/// Decodes the thread of `program` (run with `args`) in a guest recording on the host
/// and checks that it succeeds with no gap and that the program's own instructions
/// from `main` to `exit` are exactly `qemu-riscv64`'s run.
fn assert_thread_decodes_exactly(
    recording: &Path,
    program: &str,
    args: &str,
    symfs: &OsStr,
) -> ExactThread {
    let DecodedThread {
        success,
        pcs,
        stderr,
    } = decode_thread(recording, program, Some(symfs), None);
    assert!(success, "{program}: {}", gaps_first(&stderr));
    assert_no_gap(program, &stderr);
    let own = program_pcs(&pcs);
    let (truth, main, exit) = ground_truth(program, &[args.to_string()]);
    let elf = binaries_directory().join(program);
    let decoded = window(&own, main, exit).unwrap_or_else(|| panic!("{program}: main not decoded"));
    let retries = assert_same_execution(program, &elf, &truth, decoded);
    ExactThread {
        main_instructions: truth.len(),
        retries,
        other_instructions: pcs.len() - own.len(),
        stderr,
    }
}

/// `rvperf trace record -a --context` on two harts, the kernel traced too: the `rvtrace`
/// driver writes the thread each hart switches to (and each exec's new program) into the
/// encoder's context register, and Ownership messages name it. Every Ownership message's
/// thread is the one the side-band (PERF_RECORD_SWITCH_CPU_WIDE) says runs on the hart's
/// CPU at the message's time, or the one that CPU switches to next (the driver writes at
/// the scheduler's `sched_switch` tracepoint, before perf's switch records); no hart says
/// "unknown" once it named a thread; `qsort` and `autofdo` are named on CPU 1, each in two
/// programs (the forked shell's, then its own after exec).
#[test]
#[ignore = "needs the guest tier's two-hart recording (tools/vm/test runs it)"]
fn task_contexts_name_the_thread_the_side_band_says_runs() {
    use ntrace_message::{Body, ProcessFormat};
    use perf_abi::ntrace::{feature, task_context};

    let recording = captures_directory().join("rvperf-contexts.perf.data");
    let reader = perf_data::PerfDataReader::open(&recording)
        .unwrap_or_else(|error| panic!("{}: {error}", recording.display()));
    let parsed = perf_session::read_ntrace_recording(&reader).expect("an N-Trace recording");
    assert!(parsed.info.has(feature::CONTEXT) && parsed.info.has(feature::CONTEXT_TASK));
    let options = MessageOptions::default()
        .with_src_bits(parsed.info.src_bits)
        .with_timestamps(true)
        .with_address_width(AddressWidth::Bits64);
    let mut switches: HashMap<u32, Vec<perf_session::TaskSwitch>> = HashMap::new();
    for switch in &parsed.switches {
        switches.entry(switch.cpu).or_default().push(*switch);
    }
    for list in switches.values_mut() {
        list.sort_by_key(|switch| switch.time);
    }
    // Who runs on `cpu` at `time`, and who it switches to next; `None` before the
    // side-band's first switch there (the trace starts first, and who ran then is not
    // recorded).
    let schedule = |cpu: u32, time: u64| {
        let list = &switches[&cpu];
        let after = list.partition_point(|switch| switch.time <= time);
        let running = list[after.checked_sub(1)?].next;
        Some((running, list.get(after).and_then(|switch| switch.next)))
    };
    let (mut running_named, mut next_named, mut unknown, mut unsynchronised) = (0, 0, 0, 0);
    let (mut before_side_band, mut side_band_unnamed) = (0, 0);
    let mut named_on: HashMap<u32, HashSet<u64>> = HashMap::new();
    let mut named_before: HashSet<u16> = HashSet::new();
    for piece in &parsed.pieces {
        for timed in perf_session::TimedMessages::new(&piece.bytes, options) {
            let perf_session::TimedMessage::Read { message, time } = timed else {
                continue;
            };
            let hart = message.src;
            let Body::Ownership { process } = message.body else {
                continue;
            };
            if process.format != ProcessFormat::Scontext {
                continue;
            }
            let Some(time) = time else {
                unsynchronised += 1;
                continue;
            };
            let Some(tid) = task_context::tid(process.context) else {
                assert!(
                    !named_before.contains(&hart),
                    "hart {hart} says unknown at offset {} after naming a thread",
                    message.offset
                );
                unknown += 1;
                continue;
            };
            named_before.insert(hart);
            let cpu = parsed.info.cpu_of_hart(hart).expect("a Linux CPU");
            let perf_time = parsed
                .info
                .perf_time_of_timestamp(time)
                .expect("a time conversion");
            let Some((running, next)) = schedule(cpu, perf_time) else {
                before_side_band += 1;
                continue;
            };
            if running.is_some_and(|task| task.tid == tid) {
                running_named += 1;
            } else if next.is_some_and(|task| task.tid == tid) {
                next_named += 1;
            } else if running.is_none() || next.is_none() {
                // A switch record that names no task (perf's -1: the task was exiting).
                side_band_unnamed += 1;
            } else {
                panic!(
                    "offset {}: hart {hart} (CPU {cpu}) names thread {tid} at perf time {perf_time}, where {running:?} runs and {next:?} is next",
                    message.offset
                );
            }
            named_on.entry(tid).or_default().insert(process.context);
        }
    }
    for program in ["qsort", "autofdo"] {
        let tid = parsed
            .comms
            .iter()
            .find(|comm| comm.exec && comm.comm == program)
            .unwrap_or_else(|| panic!("no exec of {program}"))
            .task
            .tid;
        let values = named_on.get(&tid).cloned().unwrap_or_default();
        let generations: HashSet<u32> = values
            .iter()
            .map(|&context| task_context::exec_generation(context))
            .collect();
        assert!(
            generations.len() >= 2,
            "{program} (tid {tid}) named in exec generations {generations:?}: before and after its exec"
        );
    }
    assert!(
        running_named > 100,
        "{running_named} contexts named the running thread"
    );
    eprintln!(
        "rvperf-contexts: {running_named} Ownership messages name the thread running on their CPU, {next_named} the one it switches to next, {unknown} say unknown, {unsynchronised} unsynchronised, {before_side_band} before the side-band's first switch on their CPU, {side_band_unnamed} where it names no task; {} threads named",
        named_on.len()
    );
}

/// The same recording decoded by `rvperf decode -i`: split at the context switches its
/// Ownership messages report (`perf_session::ntrace_task_contexts`), decoded with the
/// kernel's copy (`--kcore`) shared and each process's files, `qsort`'s and `autofdo`'s
/// user-mode instructions are each exactly `qemu-riscv64`'s run of their `main`, with no
/// gap, though the trace follows the kernel through every switch between them.
#[test]
#[ignore = "needs the guest tier's two-hart recording (tools/vm/test runs it)"]
fn task_contexts_attribute_a_kernel_trace_to_each_thread_exactly() {
    let recording = captures_directory().join("rvperf-contexts.perf.data");
    let symfs = std::env::var_os("RVPERF_NTRACE_SYMFS")
        .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files");
    for (program, args) in [("qsort", "1"), ("autofdo", "100")] {
        let exact = assert_thread_decodes_exactly(&recording, program, args, &symfs);
        assert!(
            exact.stderr.contains("split at its context switches"),
            "{program}: {}",
            exact.stderr
        );
        assert!(
            exact.other_instructions > 0,
            "{program}: its kernel work is in its trace"
        );
        eprintln!(
            "rvperf-contexts: {program} split by context to {} instructions of main, exactly ({} failed store-conditionals retried), and {} kernel instructions",
            exact.main_instructions, exact.retries, exact.other_instructions
        );
    }
}

/// `rvperf decode -i` finds a recorded file by its build id in perf's cache
/// (`~/.debug/.build-id/xx/rest/elf`, as `perf buildid-cache` keeps it), with no
/// `--symfs`: the program's thread decodes exactly.
#[test]
#[ignore = "needs the guest tier's perf.data recordings (tools/vm/test runs it)"]
fn a_recording_finds_its_files_in_the_build_id_cache() {
    let recording = captures_directory().join("rvperf-autofdo-perf.perf.data");
    let elf = binaries_directory().join("autofdo");
    let build_id = perf_session::elf_build_id(&std::fs::read(&elf).unwrap()).expect("a build id");
    let hex: String = build_id.iter().map(|byte| format!("{byte:02x}")).collect();
    let home = common::scratch().join(format!("build-id-cache-{}", std::process::id()));
    let cached = symbolize::build_id_link(&home.join(".debug"), &build_id).expect("a link");
    std::fs::create_dir_all(&cached).unwrap();
    let _ = std::fs::remove_file(cached.join("elf"));
    std::os::unix::fs::symlink(&elf, cached.join("elf")).unwrap();
    let DecodedThread {
        success,
        pcs,
        stderr,
    } = decode_thread(&recording, "autofdo", None, Some(&home));
    assert!(success, "{stderr}");
    assert_no_gap("the recording", &stderr);
    let (truth, main, exit) = ground_truth("autofdo", &["60".to_string()]);
    let decoded = window(&pcs, main, exit).expect("main decoded");
    assert_same_execution("build-id cache", &elf, &truth, decoded);
    eprintln!(
        "rvperf-autofdo-perf: found by build id {hex} in the cache, {} instructions of main exact",
        truth.len()
    );
}

/// `rvperf trace record --kernel --kcore` in the guest: a perf.data directory whose
/// `kcore_dir/kcore` is the kernel's code as it ran (its text and the modules', named
/// by kallsyms). The traced program's kernel work decodes against that copy alone with
/// no gap: every instruction is in the copy, the program's system calls each enter the
/// kernel at its trap handler, and the flame graph names the kernel's functions and
/// weighs every decoded instruction. The same trace without the copy cannot be decoded,
/// and says so.
#[test]
#[ignore = "needs the guest tier's kernel recording (tools/vm/test runs it)"]
fn a_kernel_recording_decodes_against_its_copy_of_the_running_kernel() {
    let recording = captures_directory().join("rvperf-syscalls-kernel.perf.data");
    let symfs = std::env::var_os("RVPERF_NTRACE_SYMFS")
        .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files");
    let kcore = recording.join("kcore_dir/kcore");
    let bytes =
        std::fs::read(&kcore).unwrap_or_else(|error| panic!("{}: {error}", kcore.display()));
    let copy = object::File::parse(&*bytes).expect("the copy is an ELF file");
    assert_eq!(copy.architecture(), object::Architecture::Riscv64);
    let ranges: Vec<std::ops::Range<u64>> = copy
        .segments()
        .map(|segment| segment.address()..segment.address() + segment.size())
        .collect();
    assert!(
        ranges.len() >= 2,
        "the kernel's text and the rvtrace module's: {ranges:x?}"
    );
    let handler = copy
        .symbols()
        .find(|symbol| symbol.name() == Ok("handle_exception"))
        .expect("kallsyms' names in the copy")
        .address();

    let DecodedThread {
        success,
        pcs,
        stderr,
    } = decode_thread(&recording, "syscalls", Some(&symfs), None);
    assert!(success, "rvperf decode -i: {stderr}");
    assert_no_gap("the recording", &stderr);
    let outside: Vec<&u64> = pcs
        .iter()
        .filter(|pc| !ranges.iter().any(|range| range.contains(pc)))
        .take(5)
        .collect();
    assert!(outside.is_empty(), "PCs outside the copy: {outside:x?}");
    let entries = pcs.iter().filter(|&&pc| pc == handler).count();
    let (truth, _, _) = ground_truth("syscalls", &[]);
    let ecall_addresses = ecalls(&binaries_directory().join("syscalls"));
    let system_calls = truth
        .iter()
        .filter(|pc| ecall_addresses.contains(pc))
        .count();
    assert!(
        system_calls > 100 && entries >= system_calls,
        "{entries} entries at handle_exception ({handler:#x}) for {system_calls} system calls of main"
    );

    let folded_path = common::scratch().join(format!("kernel-{}.folded", std::process::id()));
    rvperf_on_host(&[
        OsStr::new("flamegraph"),
        OsStr::new("-i"),
        recording.as_os_str(),
        OsStr::new("--symfs"),
        symfs.as_os_str(),
        OsStr::new("--comm"),
        OsStr::new("syscalls"),
        OsStr::new("--folded"),
        OsStr::new("-o"),
        folded_path.as_os_str(),
    ]);
    let folded = std::fs::read_to_string(&folded_path).expect("the folded stacks");
    let mut weight = 0;
    let mut frames = HashSet::new();
    for line in folded.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("STACK WEIGHT");
        weight += count.parse::<u64>().expect("a weight");
        frames.extend(stack.split(';').map(str::to_owned));
    }
    assert_eq!(
        weight,
        pcs.len() as u64,
        "the flame graph weighs every decoded instruction"
    );
    for function in ["handle_exception", "do_trap_ecall_u"] {
        assert!(frames.contains(function), "{function} in the flame graph");
    }

    // The recording's data alone, without the copy: the kernel's code is missing.
    let alone = common::scratch().join(format!(
        "kernel-data-alone-{}.perf.data",
        std::process::id()
    ));
    std::fs::copy(recording.join("data"), &alone).expect("copy the data file");
    let stderr = decode_thread(&alone, "syscalls", Some(&symfs), None).stderr;
    assert!(
        stderr.contains("has no copy of its code") && stderr.contains("gap"),
        "without the copy: {stderr}"
    );

    // The data alone, with the kernel's vmlinux where a debug package puts it
    // (`/usr/lib/debug/.build-id/xx/rest.debug` of a symfs root): found by the build
    // id the recording's kernel mapping carries, and the kernel decodes, but for the
    // places it patched itself where it ran (gaps, which the copy has none of).
    let vmlinux = PathBuf::from(
        std::env::var_os("RVPERF_NTRACE_VMLINUX")
            .expect("RVPERF_NTRACE_VMLINUX: the guest's vmlinux"),
    );
    let build_id = perf_session::elf_build_id(&std::fs::read(&vmlinux).expect("read vmlinux"))
        .expect("vmlinux's build id");
    let hex: String = build_id.iter().map(|byte| format!("{byte:02x}")).collect();
    let debug_root = common::scratch().join(format!("vmlinux-symfs-{}", std::process::id()));
    let link = debug_root
        .join("usr/lib/debug/.build-id")
        .join(&hex[..2])
        .join(format!("{}.debug", &hex[2..]));
    std::fs::create_dir_all(link.parent().expect("a directory")).expect("debug directory");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&vmlinux, &link).expect("link vmlinux");
    // The program's own files, from the guest's root.
    let programs = debug_root.join("opt");
    let _ = std::fs::remove_file(&programs);
    std::os::unix::fs::symlink(Path::new(&symfs).join("opt"), &programs).expect("link /opt");
    let with_vmlinux = decode_thread(&alone, "syscalls", Some(debug_root.as_os_str()), None);
    let _ = std::fs::remove_file(&alone);
    let _ = std::fs::remove_dir_all(&debug_root);
    assert!(
        with_vmlinux.stderr.contains("the kernel's code is")
            && !with_vmlinux.stderr.contains("has no copy of its code"),
        "vmlinux by its build id: {}",
        with_vmlinux.stderr
    );
    let vmlinux_text = elf_code_ranges(&vmlinux);
    assert!(
        with_vmlinux
            .pcs
            .iter()
            .all(|pc| vmlinux_text.iter().any(|range| range.contains(pc))),
        "every instruction decoded against vmlinux is in its text"
    );
    assert!(
        with_vmlinux.pcs.len() * 10 > pcs.len(),
        "{} of {} kernel instructions decoded against vmlinux",
        with_vmlinux.pcs.len(),
        pcs.len()
    );
    eprintln!(
        "rvperf-syscalls-kernel: against vmlinux found by its build id, {} of the {} kernel instructions the copy gives",
        with_vmlinux.pcs.len(),
        pcs.len()
    );
    eprintln!(
        "rvperf-syscalls-kernel: {} kernel instructions of syscalls decoded against the copy ({} bytes, {} ranges) with no gap, {entries} entries at handle_exception for {system_calls} system calls of main, {} functions in the flame graph",
        pcs.len(),
        bytes.len(),
        ranges.len(),
        frames.len()
    );
}

/// A user-mode trace through the vDSO (`clock`'s `clock_gettime` calls): the recorder
/// kept the vDSO's image in perf's build-id cache (the guest's `~/.debug`, brought
/// back), and `decode -i` finds it there by the recorded build id: the program's thread
/// decodes with no gap, through the vDSO at every call, and its own instructions are
/// `qemu-riscv64`'s exactly. Without the cache, the decode says that the vDSO has no
/// image, and loses the trace after the first call.
#[test]
#[ignore = "needs the guest tier's vDSO recording (tools/vm/test runs it)"]
fn a_trace_through_the_vdso_is_decoded_with_the_recorders_copy() {
    let directory = captures_directory();
    let recording = directory.join("rvperf-clock-vdso.perf.data");
    let home = directory.join("debug-home");
    let symfs = std::env::var_os("RVPERF_NTRACE_SYMFS")
        .expect("RVPERF_NTRACE_SYMFS: the guest's root for the recorded files");
    let (parsed, attribution) = split_recording(&recording);
    let run = attribution
        .threads
        .iter()
        .find(|thread| thread.comm == "clock")
        .expect("clock's thread")
        .run;
    let vdso = parsed
        .mappings_of(run)
        .into_iter()
        .find(|mapping| mapping.filename == "[vdso]")
        .expect("clock's [vdso] mapping in the side-band");
    assert!(vdso.build_id.is_some(), "the vDSO's build id is recorded");
    let vdso_range = vdso.start..vdso.start + vdso.length;

    let DecodedThread {
        success,
        pcs,
        stderr,
    } = decode_thread(&recording, "clock", Some(&symfs), Some(&home));
    assert!(success, "{stderr}");
    assert_no_gap("the recording", &stderr);
    let in_vdso = pcs.iter().filter(|pc| vdso_range.contains(pc)).count();
    let elf = binaries_directory().join("clock");
    let in_elf = |pcs: &[u64]| -> Vec<u64> {
        let ranges = elf_code_ranges(&elf);
        pcs.iter()
            .copied()
            .filter(|pc| ranges.iter().any(|range| range.contains(pc)))
            .collect()
    };
    let (truth, main, exit) = ground_truth("clock", &[]);
    let decoded = in_elf(window(&pcs, main, exit).expect("main decoded"));
    let truth = in_elf(&truth);
    assert!(
        in_vdso >= 2000,
        "{in_vdso} instructions in the vDSO for 2000 calls"
    );
    assert_same_execution("clock through the vDSO", &elf, &truth, &decoded);

    // No cache: the vDSO has no image, and the trace is lost from its first call on.
    let empty = common::scratch().join(format!("empty-home-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let DecodedThread {
        pcs: without,
        stderr,
        ..
    } = decode_thread(&recording, "clock", Some(&symfs), Some(&empty));
    assert!(
        stderr.contains("no image of the vDSO") && stderr.contains("gap"),
        "without the cache: {stderr}"
    );
    assert!(
        without.len() < pcs.len(),
        "without the cache, less is decoded"
    );
    eprintln!(
        "rvperf-clock-vdso: {} instructions of main exact through the vDSO ({in_vdso} instructions there, image found by build id); without it {} of {} instructions decoded",
        truth.len(),
        without.len(),
        pcs.len()
    );
}

/// The address ranges of an ELF's executable segments.
fn elf_code_ranges(elf: &Path) -> Vec<std::ops::Range<u64>> {
    let bytes = std::fs::read(elf).expect("read ELF");
    let file = object::File::parse(&*bytes).expect("parse ELF");
    file.segments()
        .filter(|segment| {
            matches!(segment.flags(), object::SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
        })
        .map(|segment| segment.address()..segment.address() + segment.size())
        .collect()
}

/// A perf.data recording of the guest, read and split by thread.
fn split_recording(recording: &Path) -> (perf_session::NtraceRecording, perf_session::Attribution) {
    let reader = perf_data::PerfDataReader::open(recording)
        .unwrap_or_else(|error| panic!("{}: {error}", recording.display()));
    let parsed = perf_session::read_ntrace_recording(&reader).expect("an N-Trace recording");
    let options = MessageOptions::default()
        .with_src_bits(parsed.info.src_bits)
        .with_timestamps(true)
        .with_address_width(AddressWidth::Bits64);
    let attribution = parsed
        .attribute(options)
        .expect("the trace split by thread");
    (parsed, attribution)
}

/// What `rvperf decode --output pcs --comm COMM -i RECORDING` printed.
struct DecodedThread {
    success: bool,
    pcs: Vec<u64>,
    stderr: String,
}

/// Decodes the threads named `comm` of a guest recording on the host, with the guest's
/// files under `symfs` (if given) and `home` as `HOME` (its `.debug` is the build-id
/// cache; if not given, this process's).
fn decode_thread(
    recording: &Path,
    comm: &str,
    symfs: Option<&OsStr>,
    home: Option<&Path>,
) -> DecodedThread {
    let mut command = std::process::Command::new(common::rvperf_binary());
    command
        .args(["decode", "--output", "pcs", "--comm", comm, "-i"])
        .arg(recording);
    if let Some(symfs) = symfs {
        command.arg("--symfs").arg(symfs);
    }
    if let Some(home) = home {
        command.env("HOME", home);
    }
    let output = command.output().expect("run rvperf decode");
    DecodedThread {
        success: output.status.success(),
        pcs: printed_pcs(&String::from_utf8(output.stdout).expect("UTF-8")),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}
