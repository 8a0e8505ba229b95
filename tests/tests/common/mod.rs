//! Shared test support: real riscv64 programs built with the cross compiler, their
//! retired-instruction streams from `qemu-riscv64`, and rvperf's pieces to replay them.
//! Missing tools are a failure with the command that installs them, never a skip.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of this module"
)]

pub mod consumers;
// The GCC 12 afdo-dump reader the profiles crate's consumer tests use too.
#[path = "../../../userland/profiles/tests/common/gcc_dump.rs"]
pub mod gcc_dump;
pub mod kernel_switch;
pub mod nexrv;
// The side-band records perf-session's recording tests build.
#[path = "../../../userland/perf-session/tests/common/side_band.rs"]
pub mod side_band;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use code_image::{load_elf, CodeImage};
use ntrace_flow::{
    BranchMode, DecoderOptions, EncoderOptions, EncoderStatistics, FileDecodeInfo, FlowDecoder,
    FlowError, TraceEncoder,
};
use ntrace_message::{AddressWidth, MessageOptions};
use perf_abi::ctr::CtrBranch;
use perf_abi::BranchStack;
use trace_elements::{ElementKind, TraceElement};
use trace_gen::qemu::{ExecLogReader, QemuUser};

pub const INSTALL_HINT: &str =
    "run tools/install-deps.sh (as root) to install gcc-riscv64-linux-gnu and qemu-user";

pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn scratch() -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rvperf-e2e");
    std::fs::create_dir_all(&directory).expect("create scratch directory");
    directory
}

/// Builds all test programs once per test process and returns their directory.
pub fn programs() -> &'static Path {
    static DIRECTORY: OnceLock<PathBuf> = OnceLock::new();
    DIRECTORY.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testprogs");
        let status = Command::new("bash")
            .arg(repository().join("tools/testprogs/build.sh"))
            .arg(&out)
            .stdin(Stdio::null())
            .status()
            .expect("cannot run bash tools/testprogs/build.sh");
        assert!(
            status.success(),
            "tools/testprogs/build.sh failed ({status}): {INSTALL_HINT}"
        );
        out
    })
}

pub fn program(name: &str) -> PathBuf {
    programs().join(name)
}

/// The exact retired-PC sequence of `name`, from QEMU with one instruction per
/// translation block. Cached per test process (several tests replay the same run).
pub fn retired_pcs(name: &str) -> Vec<u64> {
    static CACHE: Mutex<Vec<(String, Vec<u64>)>> = Mutex::new(Vec::new());
    if let Some((_, pcs)) = CACHE
        .lock()
        .unwrap()
        .iter()
        .find(|(cached, _)| cached == name)
    {
        return pcs.clone();
    }
    let pcs = retired_pcs_of(&program(name), &[]);
    assert!(
        pcs.len() > 100_000,
        "{name}: only {} instructions retired",
        pcs.len()
    );
    CACHE.lock().unwrap().push((name.to_owned(), pcs.clone()));
    pcs
}

/// The exact retired-PC sequence of `program ARGS` under QEMU (not cached).
pub fn retired_pcs_of(program: &Path, args: &[&str]) -> Vec<u64> {
    let qemu = QemuUser::detect().unwrap_or_else(|error| panic!("{error}: {INSTALL_HINT}"));
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let log = scratch().join(format!(
        "{}.{}.{run}.exec.log",
        program.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let run = qemu
        .run_logged(program, args, &log)
        .expect("qemu-riscv64 run");
    assert!(
        run.success(),
        "{} exited with {}",
        program.display(),
        run.status_code
    );
    let pcs: Vec<u64> = ExecLogReader::open(&log)
        .expect("open exec log")
        .collect::<Result<_, _>>()
        .expect("parse exec log");
    let _ = std::fs::remove_file(&log);
    pcs
}

/// Runs `program ARGS` under QEMU logging every register before each instruction and
/// calls `visit` with each state in turn, streamed (a million instructions log about
/// 1.7 GB of text); returns how many there were.
pub fn for_each_cpu_state(
    program: &Path,
    args: &[&str],
    mut visit: impl FnMut(&trace_gen::cpu_log::CpuState) + Send,
) -> u64 {
    let qemu = QemuUser::detect().unwrap_or_else(|error| panic!("{error}: {INSTALL_HINT}"));
    let (run, count) = qemu
        .run_streamed(
            program,
            args,
            trace_gen::qemu::LogContent::Registers,
            &scratch(),
            |log| {
                let mut count = 0u64;
                for state in trace_gen::cpu_log::CpuLogReader::new(log) {
                    let state = state.expect("parse QEMU's register log");
                    visit(&state);
                    count += 1;
                }
                count
            },
        )
        .expect("qemu-riscv64 run");
    assert!(
        run.success(),
        "{} exited with {}",
        program.display(),
        run.status_code
    );
    count
}

pub struct Code {
    pub image: CodeImage,
    pub files: Vec<FileDecodeInfo>,
}

/// The instruction at `address` of `code`, decoded (panics where there is none).
pub fn instruction_at(code: &Code, address: u64) -> riscv_insn::Instruction {
    let mut bytes = [0u8; 4];
    let read = code.image.read(address, &mut bytes);
    assert!(read >= 2, "no code at {address:#x}");
    riscv_insn::decode(
        u32::from_le_bytes(bytes),
        riscv_insn::DecodeOptions::default(),
    )
    .unwrap_or_else(|_| panic!("undecodable instruction at {address:#x}"))
}

/// A small deterministic generator (xorshift64*), so that failures reproduce.
pub struct Random(pub u64);

impl Random {
    pub fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

pub fn load(name: &str) -> Code {
    load_file(&program(name))
}

/// The code of the riscv64 ELF at `path`, at its link addresses.
pub fn load_file(path: &Path) -> Code {
    let bytes = std::fs::read(path).expect("read program ELF");
    let mut image = CodeImage::new();
    load_elf(&mut image, &path.display().to_string(), &bytes, None).expect("load ELF");
    let files = image.file_decode_infos();
    Code { image, files }
}

/// `pcs` (a retired-PC stream of `code`) encoded by rvperf's encoder model.
pub fn encode(code: &Code, pcs: &[u64], options: EncoderOptions) -> (Vec<u8>, EncoderStatistics) {
    let mut encoder =
        TraceEncoder::new(&code.image, code.files.clone(), options).expect("encoder options");
    let mut bytes = Vec::new();
    for (index, &pc) in pcs.iter().enumerate() {
        encoder
            .retire(pc)
            .unwrap_or_else(|error| panic!("encoding #{index}: {error}"));
        if index % 65536 == 0 {
            bytes.extend(encoder.take_output());
        }
    }
    let (rest, statistics) = encoder.finish().expect("finish");
    bytes.extend(rest);
    (bytes, statistics)
}

/// Decodes `trace` fully and returns every element (errors stop the decode).
pub fn decode_elements(
    trace: &[u8],
    code: &Code,
    options: DecoderOptions,
) -> Result<Vec<(TraceElement, Vec<u64>)>, FlowError> {
    let mut decoder = FlowDecoder::new(trace, &code.image, code.files.clone(), options);
    let mut elements = Vec::new();
    while let Some(element) = decoder.next_element()? {
        let mut pcs = Vec::new();
        if let ElementKind::InstructionRange {
            start,
            instructions,
            ..
        } = element.kind
        {
            assert!(decoder.for_each_instruction(start, instructions, |pc| pcs.push(pc)));
        }
        elements.push((element, pcs));
    }
    Ok(elements)
}

/// Decodes `trace` and returns the retired PCs of every hart in order.
pub fn decode_pcs(
    trace: &[u8],
    code: &Code,
    options: DecoderOptions,
) -> Result<Vec<u64>, FlowError> {
    Ok(decode_elements(trace, code, options)?
        .into_iter()
        .flat_map(|(_, pcs)| pcs)
        .collect())
}

/// Panics with the first difference, in a readable form.
pub fn assert_same_pcs(context: &str, expected: &[u64], decoded: &[u64]) {
    if expected == decoded {
        return;
    }
    let first = expected
        .iter()
        .zip(decoded)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(decoded.len()));
    let window = |pcs: &[u64]| {
        pcs[first.saturating_sub(3)..(first + 3).min(pcs.len())]
            .iter()
            .map(|pc| format!("{pc:#x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    panic!(
        "{context}: decoded {} PCs, expected {}; first difference at #{first}: expected [{}] decoded [{}]",
        decoded.len(),
        expected.len(),
        window(expected),
        window(decoded)
    );
}

/// The rvperf binary of this source tree, next to this test executable. `cargo test`
/// does not build other packages' binaries, so it is built (or found up to date) here:
/// testing a stale binary would test old code.
pub fn rvperf_binary() -> PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY
        .get_or_init(|| {
            let executable = std::env::current_exe().expect("current_exe");
            let profile_directory = executable
                .parent()
                .and_then(Path::parent)
                .expect("target profile directory");
            let binary = profile_directory.join("rvperf");
            {
                let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
                // The binary of the profile the tests were built with (a `--release`
                // test run would otherwise use a stale release binary).
                let profile = profile_directory
                    .file_name()
                    .and_then(|name| name.to_str())
                    .map_or("dev", |name| if name == "debug" { "dev" } else { name });
                let status = Command::new(cargo)
                    .current_dir(repository())
                    .args([
                        "build",
                        "--locked",
                        "--profile",
                        profile,
                        "-p",
                        "rvperf",
                        "--bin",
                        "rvperf",
                    ])
                    .status()
                    .expect("run cargo build -p rvperf");
                assert!(status.success(), "cargo build -p rvperf failed");
            }
            assert!(binary.is_file(), "{} was not built", binary.display());
            binary
        })
        .clone()
}

/// CTR branches (entries of an rvperf_ctr record) as the perf branch-stack entries they
/// are converted to (`struct perf_branch_entry` after another, for
/// `perf_abi::BranchStack::from_bytes`): the same addresses and flags words.
pub fn branch_entries(branches: &[CtrBranch]) -> Vec<u8> {
    branches
        .iter()
        .flat_map(|branch| [branch.from, branch.to, branch.flags_word])
        .flat_map(u64::to_ne_bytes)
        .collect()
}

/// A perf branch stack as the CTR branches it was converted from, flags words bit for bit.
pub fn ctr_branches(stack: &BranchStack<'_>) -> Vec<CtrBranch> {
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().unwrap());
    stack
        .as_bytes()
        .chunks_exact(24)
        .map(|entry| CtrBranch {
            from: word(&entry[..8]),
            to: word(&entry[8..16]),
            flags_word: word(&entry[16..]),
        })
        .collect()
}

/// Runs `program ARGS` under QEMU and writes its exact retired-PC stream to `trace` as an
/// encoder set up for profiling sends it (HTM, a 32-entry implicit-return stack,
/// repeated history, full 64-bit addresses). Returns the stream, the ground truth.
pub fn write_profiling_trace(program: &Path, args: &[&str], trace: &Path) -> Vec<u64> {
    let pcs = retired_pcs_of(program, args);
    let code = load_file(program);
    let mut options = EncoderOptions::default();
    options.mode = BranchMode::Htm;
    options.return_stack_depth = 32;
    options.repeated_history = true;
    options.message = MessageOptions::default().with_address_width(AddressWidth::Bits64);
    let (bytes, statistics) = encode(&code, &pcs, options);
    assert_eq!(statistics.instructions, pcs.len() as u64);
    std::fs::write(trace, bytes).unwrap();
    pcs
}

/// A trace of `pcs` (a run of `code`) as an encoder under trace control writes it (HTM,
/// periodic synchronisation, Ownership after each): trace disabled after the first
/// third (ProgTraceCorrelation EVCODE=4), `untraced` instructions not traced, enabled
/// again (ProgTraceSync SYNC=5); in the middle of the rest the FIFO overruns: some
/// messages lost, an Error message (ETYPE 0, ECODE "program trace lost"), the next
/// synchronisation sent as SYNC=7. Returns the trace and the index in `pcs` where
/// trace was disabled and where it was enabled again.
pub fn stop_start_and_overrun_trace(
    code: &Code,
    pcs: &[u64],
    untraced: usize,
) -> (Vec<u8>, usize, usize) {
    use ntrace_message::{Body, CorrelationEvent, MessageDecoder, MessageEncoder, SyncReason};
    let mut options = EncoderOptions::default();
    options.periodic_sync = 16;
    options.context = Some(42);
    let message_options = options.message;
    let stop = pcs.len() / 3;
    let start = stop + untraced;
    let bodies = |trace: &[u8]| -> Vec<Body> {
        let mut messages = MessageDecoder::new(trace, message_options);
        let mut bodies = Vec::new();
        while let Some(message) = messages.next_message().expect("encoder output") {
            assert_eq!(message.timestamp, None);
            bodies.push(message.body);
        }
        bodies
    };
    let mut first = bodies(&encode(code, &pcs[..stop], options).0);
    let mut second = bodies(&encode(code, &pcs[start..], options).0);
    // The stop that ends the first part: trace disabled (not debug mode).
    match first.last_mut() {
        Some(Body::ProgTraceCorrelation { evcode, .. }) => {
            *evcode = CorrelationEvent::TRACE_DISABLED;
        }
        other => panic!("the encoder ended with {other:?}"),
    }
    // The start of the second: trace enabled.
    match second.first_mut() {
        Some(Body::ProgTraceSync { sync, .. }) => *sync = SyncReason::TRACE_ENABLE,
        other => panic!("the encoder started with {other:?}"),
    }
    // The overrun: from the middle of the second part, the messages up to the next
    // periodic synchronisation are lost.
    let lost_from = second.len() / 2;
    let restart = (lost_from + 4..second.len())
        .find(|&index| second[index].sync_reason().is_some())
        .expect("a periodic synchronisation");
    match &mut second[restart] {
        Body::ProgTraceSync { sync, .. }
        | Body::DirectBranchSync { sync, .. }
        | Body::IndirectBranchSync { sync, .. }
        | Body::IndirectBranchHistSync { sync, .. } => {
            *sync = SyncReason::RESTART_FROM_FIFO_OVERRUN;
        }
        _ => unreachable!(),
    }
    second.splice(
        lost_from..restart,
        [Body::Error {
            etype: 0,
            ecode: 0b100,
        }],
    );
    let encoder = MessageEncoder::new(message_options);
    let mut trace = Vec::new();
    for body in first.iter().chain(&second) {
        encoder.encode(0, body, None, &mut trace).unwrap();
    }
    (trace, stop, start)
}

/// Linux `perf`, to read a recording made on another machine (the riscv64 guest, a
/// fixture), with `PAGER=cat`.
///
/// perf looks for a recorded thread's files in the mount namespace of *this* machine's
/// process that has the thread's pid (`/proc/PID/ns/mnt`, meant for containers). Where
/// such a process lives in another mount namespace (every process, when the tests run in
/// a chroot with mounts of its own as `tools/ci/fresh-machine` runs them), perf enters
/// it, finds nothing and prints every sample of that thread as `[unknown]`. Without
/// CAP_SYS_ADMIN it cannot enter (`setns` fails) and stays where the files are: root
/// runs it through `setpriv --bounding-set=-sys_admin`; anyone else lacks the
/// capability already and runs it plainly.
pub fn perf_for_recordings() -> Command {
    static CAN_DROP: OnceLock<bool> = OnceLock::new();
    let can_drop = *CAN_DROP.get_or_init(|| {
        Command::new("setpriv")
            .args(["--bounding-set=-sys_admin", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    });
    let mut command = if can_drop {
        let mut command = Command::new("setpriv");
        command.args(["--bounding-set=-sys_admin", "perf"]);
        command
    } else {
        Command::new("perf")
    };
    command.env("PAGER", "cat");
    command
}

/// Debian's Go (golang-1.23-go, from bookworm-backports, keeps it off PATH), else one on
/// PATH: `go tool pprof` reads the profiles rvperf writes.
pub fn go() -> PathBuf {
    let debian = PathBuf::from("/usr/lib/go-1.23/bin/go");
    if debian.exists() {
        return debian;
    }
    let found = Command::new("go").arg("version").output();
    assert!(
        found.is_ok_and(|output| output.status.success()),
        "no go: run tools/install-deps.sh (as root): it installs golang-1.23-go from bookworm-backports"
    );
    PathBuf::from("go")
}

/// `go tool pprof ARGS PROFILE`'s standard output; pprof must succeed. Its home and
/// temporary directory are the test's own, and it never symbolizes again.
pub fn pprof_tool(arguments: &[&str], profile: &Path) -> String {
    let home = tempfile::tempdir().expect("temporary directory");
    let output = Command::new(go())
        .args(["tool", "pprof", "-symbolize=none"])
        .args(arguments)
        .arg(profile)
        .env("HOME", home.path())
        .env("PPROF_TMPDIR", home.path())
        .env("GOTOOLCHAIN", "local")
        .output()
        .expect("run go tool pprof");
    assert!(
        output.status.success(),
        "go tool pprof {arguments:?} {}: {}",
        profile.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The function of a `go tool pprof -top` row: what follows its five figures (a Rust
/// name may hold spaces).
fn pprof_top_function(line: &str) -> String {
    line.split_whitespace()
        .skip(5)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The flat share (percent) `go tool pprof -top` gives `function`; panics when it is
/// not listed.
pub fn pprof_share(top: &str, function: &str) -> f64 {
    top.lines()
        .find(|line| pprof_top_function(line) == function)
        .and_then(|line| line.split_whitespace().nth(1))
        .map(|share| share.trim_end_matches('%').parse().unwrap())
        .unwrap_or_else(|| panic!("no {function} in:\n{top}"))
}

/// The first function of `go tool pprof -top`.
pub fn pprof_first(top: &str) -> String {
    top.lines()
        .skip_while(|line| !line.trim_start().starts_with("flat"))
        .nth(1)
        .map(pprof_top_function)
        .unwrap_or_default()
}

/// The ids of `profile`'s mappings of the kernel (`[kernel.kallsyms]`).
pub fn kernel_mapping_ids(profile: &pprof::Profile) -> Vec<u64> {
    let text = |index: i64| profile.string_table[usize::try_from(index).unwrap()].as_str();
    profile
        .mapping
        .iter()
        .filter(|mapping| text(mapping.filename) == "[kernel.kallsyms]")
        .map(|mapping| mapping.id)
        .collect()
}

/// How many of a profile's locations have a function, and how many distinct
/// (mapping, inline stack of functions) they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocationFunctions {
    pub locations: usize,
    pub functions: usize,
}

/// The locations of `profile` that have a function, by their mapping and inline
/// stack's functions (innermost first).
pub fn location_functions(profile: &pprof::Profile) -> LocationFunctions {
    let keys: Vec<(u64, Vec<u64>)> = profile
        .location
        .iter()
        .filter(|location| !location.line.is_empty())
        .map(|location| {
            let functions = location.line.iter().map(|line| line.function_id).collect();
            (location.mapping_id, functions)
        })
        .collect();
    let distinct: std::collections::HashSet<_> = keys.iter().collect();
    LocationFunctions {
        locations: keys.len(),
        functions: distinct.len(),
    }
}

/// How many of `profile`'s locations in the kernel's mapping have a function.
pub fn named_kernel_locations(profile: &pprof::Profile) -> usize {
    let kernel = kernel_mapping_ids(profile);
    profile
        .location
        .iter()
        .filter(|location| kernel.contains(&location.mapping_id) && !location.line.is_empty())
        .count()
}

/// The number before `label` (as " dropped", " map drains") on each of `rvperf daemon`'s
/// interval lines, in order.
pub fn daemon_interval_counts(log: &str, label: &str) -> Vec<u64> {
    log.lines()
        .filter(|line| line.contains(": interval "))
        .map(|line| {
            let (before, _) = line
                .split_once(label)
                .unwrap_or_else(|| panic!("no {label:?} in {line:?}"));
            before.rsplit(' ').next().unwrap().parse().unwrap()
        })
        .collect()
}
