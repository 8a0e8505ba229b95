//! `rvperf autofdo` of an x86_64 binary: tests/programs/host/autofdo.c, built with the
//! host compiler, runs under `qemu-x86_64` one instruction per block for its exact instruction
//! stream, and the profile is checked with the consumers (llvm-profdata 19 reads it,
//! clang 19 compiles the program with it), against llvm-profgen 19 on the same
//! recording, and against the run's exact per-instruction counts (overlap >= 0.90).
//!
//! The one synthesized piece is the hardware register boundary: the LBR. This host
//! (a VM without a PMU) cannot `perf record -b`, so the branch stacks Intel's LBR would
//! hold are derived from the real run: every taken branch of the QEMU stream (the next
//! PC is not the fall-through of the instruction, whose length iced-x86 decodes from
//! the ELF), the last 16 of them newest first, sampled every ~2000 instructions. The
//! program, its run, the perf.data (the workspace's writer, read by Linux perf), rvperf
//! and every consumer are real.

mod common;

use std::collections::{HashMap, VecDeque};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::consumers::{
    assert_entry_counts_are_head_counts, assert_profgen_agrees_except_where_it_drops,
    clang_ir_with_profile, function_entry_count, parse_text_profile, perf_script_branch_stacks,
    run_tool,
};
use common::{repository, rvperf_binary, scratch};
use object::{Object, ObjectSegment, SegmentFlags};
use perf_abi::sys::bindings::{
    perf_event_attr, PERF_COUNT_HW_CPU_CYCLES, PERF_RECORD_MISC_USER, PERF_SAMPLE_BRANCH_ANY,
    PERF_SAMPLE_BRANCH_STACK, PERF_SAMPLE_BRANCH_USER, PERF_SAMPLE_IP, PERF_SAMPLE_PERIOD,
    PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_TYPE_HARDWARE,
};
use perf_abi::{BranchEntry, BranchStack, CommRecord, Mmap2FileId, Mmap2Record, Sample, SampleId};
use perf_data::{BuildIdEntry, EventDesc, Metadata, PerfDataWriter};

/// PERF_RECORD_MISC_USER as `perf_event_header.misc`.
const MISC_USER: u16 = PERF_RECORD_MISC_USER as u16;
use trace_gen::qemu::{ExecLogReader, QemuUser};

const INSTALL: &str =
    "run tools/install-deps.sh (cc, clang-19, llvm-19, linux-perf, qemu-user for qemu-x86_64)";

/// The hot function of the program: the most entered and the most executed.
const HOT: &str = "hot_step";
/// Entries in Intel's LBR on the processors that have 16 (Skylake has 32; 16 is enough).
const LBR_ENTRIES: usize = 16;
/// The mean sampling period in instructions; each period is varied around it so that
/// samples do not fall at one phase of the program's fixed-length loops.
const PERIOD: u64 = 2000;
/// The recorded process.
const PID: u32 = 4242;

fn run(command: &mut Command) -> Output {
    run_tool(command, INSTALL)
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn source() -> PathBuf {
    repository().join("tests/programs/host/autofdo.c")
}

/// The executable PT_LOAD segments of the binary: (address, file offset, bytes).
struct Code {
    segments: Vec<(u64, u64, Vec<u8>)>,
    build_id: Option<Vec<u8>>,
}

impl Code {
    fn load(binary: &Path) -> Code {
        let bytes = std::fs::read(binary).unwrap();
        let file = object::File::parse(&*bytes).unwrap();
        let segments = file
            .segments()
            .filter(|segment| {
                matches!(segment.flags(), SegmentFlags::Elf { p_flags } if p_flags & object::elf::PF_X != 0)
            })
            .map(|segment| {
                let (offset, _) = segment.file_range();
                (segment.address(), offset, segment.data().unwrap().to_vec())
            })
            .collect();
        Code {
            segments,
            build_id: file.build_id().unwrap().map(<[u8]>::to_vec),
        }
    }

    fn contains(&self, address: u64) -> bool {
        self.segments
            .iter()
            .any(|(start, _, bytes)| (*start..start + bytes.len() as u64).contains(&address))
    }

    /// The length of the instruction at `address`, decoded by iced-x86 from the ELF.
    fn length(&self, address: u64) -> Option<u64> {
        let (start, _, bytes) = self
            .segments
            .iter()
            .find(|(start, _, bytes)| (*start..start + bytes.len() as u64).contains(&address))?;
        let offset = (address - start) as usize;
        let window = &bytes[offset..bytes.len().min(offset + 15)];
        let instruction =
            iced_x86::Decoder::with_ip(64, window, address, iced_x86::DecoderOptions::NONE)
                .decode();
        (!instruction.is_invalid()).then(|| instruction.len() as u64)
    }
}

/// Everything made once: the binary, the exact counts of its run, the perf.data with
/// the branch stacks of that run, and rvperf's profile of it.
struct Recording {
    work: PathBuf,
    binary: PathBuf,
    data: PathBuf,
    profile: PathBuf,
    /// rvperf's `--instruction-counts`.
    profile_counts: PathBuf,
    /// Executions per instruction address of the whole run, from QEMU.
    truth: HashMap<u64, u64>,
}

fn recording() -> &'static Recording {
    static RECORDING: OnceLock<Recording> = OnceLock::new();
    RECORDING.get_or_init(|| {
        let work = scratch().join(format!("autofdo-x86_64-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        // Static and not position-independent: the addresses QEMU logs are the
        // link-time addresses, with no loader or relocation between them.
        let binary = work.join("autofdo");
        run(Command::new("cc")
            .args([
                "-O1",
                "-g",
                "-fno-omit-frame-pointer",
                "-fno-inline",
                "-static",
                "-no-pie",
                "-o",
            ])
            .arg(&binary)
            .arg(source()));
        let code = Code::load(&binary);

        let log = work.join("exec.log");
        // The one-instruction flag depends on the installed QEMU (7.2: -singlestep).
        let qemu = QemuUser::detect_named("qemu-x86_64")
            .unwrap_or_else(|error| panic!("{error}: {INSTALL}"));
        let emulated = qemu
            .run_logged(&binary, &[], &log)
            .expect("qemu-x86_64 runs");
        assert!(
            emulated.success(),
            "{} {} exited with {}: {}",
            qemu.binary.display(),
            qemu.one_insn_flag(),
            emulated.status_code,
            String::from_utf8_lossy(&emulated.stderr)
        );
        let mut pcs: Vec<u64> = ExecLogReader::open(&log)
            .expect("open the exec log")
            .collect::<Result<_, _>>()
            .expect("parse the exec log");
        let _ = std::fs::remove_file(&log);
        // A `rep` string instruction re-enters its translation block once per
        // iteration; it is one instruction to the LBR and to a range count.
        pcs.dedup();
        assert!(
            (100_000..5_000_000).contains(&pcs.len()),
            "{} instructions executed",
            pcs.len()
        );
        let mut truth: HashMap<u64, u64> = HashMap::new();
        for &pc in &pcs {
            *truth.entry(pc).or_default() += 1;
        }

        let data = work.join("perf.data");
        write_recording(&data, &binary, &code, &pcs);
        let profile = work.join("profile.txt");
        let profile_counts = work.join("instruction.counts");
        let output = run(Command::new(rvperf_binary()).args([
            "autofdo",
            "-i",
            text(&data),
            "--binary",
            text(&binary),
            "--format",
            "llvm-text",
            "-o",
            text(&profile),
            "--instruction-counts",
            text(&profile_counts),
        ]));
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        Recording {
            work,
            binary,
            data,
            profile,
            profile_counts,
            truth,
        }
    })
}

/// A perf.data as `perf record -e cycles:u -b` of the run would be on a processor with
/// LBR: the process's COMM and the MMAP2 of the binary's code, then a SAMPLE with the
/// last 16 taken branches every ~PERIOD instructions.
fn write_recording(data: &Path, binary: &Path, code: &Code, pcs: &[u64]) {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: u64::from(PERF_COUNT_HW_CPU_CYCLES),
        sample_type: u64::from(
            PERF_SAMPLE_IP
                | PERF_SAMPLE_TID
                | PERF_SAMPLE_TIME
                | PERF_SAMPLE_PERIOD
                | PERF_SAMPLE_BRANCH_STACK,
        ),
        branch_sample_type: u64::from(PERF_SAMPLE_BRANCH_ANY | PERF_SAMPLE_BRANCH_USER),
        ..Default::default()
    };
    attr.sample_period = PERIOD;
    attr.set_disabled(1);
    attr.set_mmap(1);
    attr.set_comm(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr.set_mmap2(1);
    attr.set_comm_exec(1);
    let event = EventDesc {
        attr,
        name: "cycles:u".to_owned(),
        ids: vec![1],
    };
    let file = std::fs::File::create(data).unwrap();
    let mut writer = PerfDataWriter::new(BufWriter::new(file), vec![event]).unwrap();
    let side_band = SampleId {
        pid: Some(PID),
        tid: Some(PID),
        ..SampleId::default()
    };
    writer
        .write_comm(
            0,
            &CommRecord {
                pid: PID,
                tid: PID,
                comm: b"autofdo",
                exec: true,
                sample_id: side_band,
            },
        )
        .unwrap();
    let path = std::fs::canonicalize(binary).unwrap();
    const PAGE: u64 = 4096;
    for &(address, offset, ref bytes) in &code.segments {
        // As the loader maps it: whole pages, the offset the page's.
        let start = address & !(PAGE - 1);
        writer
            .write_mmap2(
                0,
                MISC_USER,
                &Mmap2Record {
                    pid: PID,
                    tid: PID,
                    addr: start,
                    len: (address + bytes.len() as u64 - start).div_ceil(PAGE) * PAGE,
                    pgoff: offset - (address - start),
                    file_id: code.build_id.as_deref().map_or(
                        Mmap2FileId::Inode {
                            maj: 0,
                            min: 0,
                            ino: 0,
                            ino_generation: 0,
                        },
                        Mmap2FileId::BuildId,
                    ),
                    prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
                    flags: libc::MAP_PRIVATE as u32,
                    filename: text(&path).as_bytes(),
                    sample_id: side_band,
                },
            )
            .unwrap();
    }

    // The LBR: taken branches, newest at the front.
    let mut lbr: VecDeque<BranchEntry> = VecDeque::with_capacity(LBR_ENTRIES);
    let mut random = 0x2545_f491_u64;
    let mut next_period = || {
        random = random
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        PERIOD / 2 + (random >> 33) % PERIOD
    };
    let mut until_sample = next_period();
    let mut samples = 0u64;
    for (index, pair) in pcs.windows(2).enumerate() {
        let (pc, next) = (pair[0], pair[1]);
        let taken = match code.length(pc) {
            Some(length) => next != pc + length,
            // Outside the binary's code (a vDSO): no length, so anything but a short
            // step forward is a branch.
            None => !(pc + 1..=pc + 15).contains(&next),
        };
        if taken {
            if lbr.len() == LBR_ENTRIES {
                lbr.pop_back();
            }
            lbr.push_front(BranchEntry {
                from: pc,
                to: next,
                ..BranchEntry::default()
            });
        }
        until_sample -= 1;
        if until_sample == 0 {
            let period = next_period();
            until_sample = period;
            samples += 1;
            let entries: Vec<u8> = lbr.iter().flat_map(BranchEntry::to_bytes).collect();
            writer
                .write_sample(
                    0,
                    &Sample {
                        ip: Some(next),
                        pid: Some(PID),
                        tid: Some(PID),
                        time: Some(1_000_000 + index as u64),
                        period: Some(period),
                        branch_stack: BranchStack::from_bytes(None, &entries),
                        misc: MISC_USER,
                        ..Sample::default()
                    },
                )
                .unwrap();
        }
    }
    assert!(samples >= 100, "only {samples} samples");
    let mut metadata = Metadata::from_host("rvperf-tests", vec!["autofdo".to_owned()]);
    if let Some(build_id) = &code.build_id {
        metadata.build_ids.push(BuildIdEntry {
            pid: -1,
            misc: MISC_USER,
            build_id: build_id.clone(),
            filename: text(&path).to_owned(),
        });
    }
    writer.finish(&metadata).unwrap();
}

#[test]
fn linux_perf_reads_the_recording() {
    let recording = recording();
    let stacks = perf_script_branch_stacks(&recording.data, INSTALL);
    let with_branches = stacks.lines().count();
    assert!(
        with_branches >= 100,
        "perf script shows {with_branches} branch stacks:\n{stacks}"
    );
}

#[test]
fn llvm_profdata_reads_the_profile_and_the_hot_function_is_hottest() {
    let recording = recording();
    let show =
        run(Command::new("llvm-profdata-19").args(["show", "--sample", text(&recording.profile)]));
    let shown = String::from_utf8(show.stdout).unwrap();
    let ours = parse_text_profile(&std::fs::read_to_string(&recording.profile).unwrap());
    for (name, (total, head, _)) in &ours {
        assert!(
            shown.contains(&format!("Function: {name}: {total}, {head},")),
            "llvm-profdata does not show {name}: {total}, {head}:\n{shown}"
        );
    }
    let (hottest_total, _) = ours.iter().max_by_key(|(_, (total, _, _))| *total).unwrap();
    let (most_entered, _) = ours.iter().max_by_key(|(_, (_, head, _))| *head).unwrap();
    assert_eq!(hottest_total, HOT, "largest total count: {ours:#?}");
    assert_eq!(most_entered, HOT, "largest head count: {ours:#?}");
}

#[test]
fn clang_compiles_the_program_with_the_profile_and_carries_its_counts() {
    let recording = recording();
    let ours = parse_text_profile(&std::fs::read_to_string(&recording.profile).unwrap());
    let ir = clang_ir_with_profile(
        "x86_64-linux-gnu",
        &source(),
        &recording.profile,
        &recording.work.join("autofdo.ll"),
        INSTALL,
    );
    let checked = assert_entry_counts_are_head_counts(&ir, &ours, "x86_64");
    assert!(
        function_entry_count(&ir, HOT).is_some(),
        "{HOT} has no entry count in the IR"
    );
    assert!(
        checked >= 3,
        "only {checked} profiled functions found in the IR"
    );
}

#[test]
fn llvm_profgen_agrees_line_by_line_except_where_it_drops_ranges() {
    let recording = recording();
    // llvm-profgen reads perf script's text of the same recording and agrees line by
    // line but where it drops code.
    let ours = parse_text_profile(&std::fs::read_to_string(&recording.profile).unwrap());
    let theirs = assert_profgen_agrees_except_where_it_drops(
        &recording.binary,
        &recording.data,
        &recording.work,
        &ours,
        1,
        INSTALL,
    );
    // Head counts come from the same call branches on both sides. The totals are not
    // compared: llvm-profgen's total sums the count of every instruction byte,
    // rvperf's (like the AutoFDO tool's) the count of every line.
    for (name, (_, head, _)) in &ours {
        assert_eq!(
            Some(head),
            theirs.get(name).map(|(_, head, _)| head),
            "head count of {name}"
        );
    }
}

#[test]
fn sampled_counts_overlap_the_exact_counts_by_at_least_0_90() {
    let recording = recording();
    let code = Code::load(&recording.binary);
    let sampled: HashMap<u64, u64> = std::fs::read_to_string(&recording.profile_counts)
        .unwrap()
        .lines()
        .map(|line| {
            let (address, count) = line.split_once(' ').unwrap();
            (
                u64::from_str_radix(address.trim_start_matches("0x"), 16).unwrap(),
                count.parse().unwrap(),
            )
        })
        .collect();
    // Instruction by instruction over the binary's code: a range count gives every
    // instruction of a basic block the same count, so this is the block overlap
    // weighted by block length.
    let normalised = |counts: &HashMap<u64, u64>| -> HashMap<u64, f64> {
        let inside: Vec<(u64, u64)> = counts
            .iter()
            .filter(|(address, _)| code.contains(**address))
            .map(|(&address, &count)| (address, count))
            .collect();
        let total: u64 = inside.iter().map(|(_, count)| count).sum();
        inside
            .into_iter()
            .map(|(address, count)| (address, count as f64 / total as f64))
            .collect()
    };
    let (truth, profile) = (normalised(&recording.truth), normalised(&sampled));
    let overlap: f64 = truth
        .iter()
        .map(|(address, p)| p.min(profile.get(address).copied().unwrap_or(0.0)))
        .sum();
    eprintln!(
        "instruction-level overlap with the exact counts: {overlap:.3} ({} instructions executed, {} in the profile)",
        truth.len(),
        profile.len()
    );
    assert!(overlap >= 0.90, "overlap {overlap:.3} < 0.90");
}

/// An ELF for neither riscv64 nor x86_64: one line naming its e_machine.
#[test]
fn other_machines_are_refused_in_one_line() {
    let recording = recording();
    let mut elf = std::fs::read(&recording.binary).unwrap();
    // e_machine is the little-endian u16 at offset 18; 183 is EM_AARCH64.
    elf[18..20].copy_from_slice(&object::elf::EM_AARCH64.to_le_bytes());
    let directory = recording.work.join("aarch64");
    std::fs::create_dir_all(&directory).unwrap();
    let binary = directory.join("autofdo");
    std::fs::write(&binary, elf).unwrap();
    let output_file = directory.join("profile.txt");
    let output = Command::new(rvperf_binary())
        .args([
            "autofdo",
            "-i",
            text(&recording.data),
            "--binary",
            text(&binary),
            "-o",
        ])
        .arg(&output_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "accepted: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("rvperf autofdo profiles riscv64 and x86_64 binaries (e_machine 183)"),
        "{stderr}"
    );
    assert!(!output_file.exists(), "a profile was written");
}
