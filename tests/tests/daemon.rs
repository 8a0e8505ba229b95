//! `rvperf daemon` on this machine's own kernel (real BPF, real perf events, as root):
//! its merged pprof, read by `go tool pprof -top`, names the hot program's hot function
//! first with the share Linux perf's `perf record -a` + `perf report` gives the same
//! run; 200 short-lived processes are named by their own functions, not `[unknown]`;
//! a tiny stack map overflows into an accounted count while the daemon keeps going; an
//! unprivileged start is refused in one line; SIGTERM ends the run with a last interval
//! that is complete, valid pprof.
//!
//! The tests run one at a time: each profiles the whole machine.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{
    daemon_interval_counts, kernel_mapping_ids, location_functions, named_kernel_locations,
    perf_for_recordings, pprof_first, pprof_share, pprof_tool, repository, rvperf_binary,
};

const BPF_HINT: &str = "run tools/install-bpf-toolchain.sh (as root): aya-probes/build.sh needs Debian's rustc-web, libstd-rust-web-dev-bpf and bpf-linker";

/// One system-wide profiler at a time.
fn machine() -> MutexGuard<'static, ()> {
    static MACHINE: Mutex<()> = Mutex::new(());
    MACHINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn scratch() -> PathBuf {
    let directory = repository().join("target/tmp/daemon-tests");
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// The eBPF object, built by aya-probes/build.sh (once per test process).
fn probes() -> &'static Path {
    static PROBES: OnceLock<PathBuf> = OnceLock::new();
    PROBES.get_or_init(|| {
        let output = Command::new("bash")
            .arg(repository().join("aya-probes/build.sh"))
            .arg(repository().join("target/aya-probes"))
            .output()
            .expect("run aya-probes/build.sh");
        assert!(
            output.status.success(),
            "aya-probes/build.sh failed ({BPF_HINT}): {}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

/// tests/programs/host/NAME.c, or a program of `source`, built with frame pointers.
fn program(name: &str, source: &str) -> PathBuf {
    let out = scratch().join(format!("{name}-{}", std::process::id()));
    let source_path = scratch().join(format!("{name}-{}.c", std::process::id()));
    std::fs::write(&source_path, source).unwrap();
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&out)
        .arg(&source_path)
        .status()
        .expect("run cc (install build-essential)");
    assert!(status.success());
    out
}

fn hot_program() -> PathBuf {
    program(
        "hot",
        &std::fs::read_to_string(repository().join("tests/programs/host/hot.c")).unwrap(),
    )
}

fn daemon(output: &Path, arguments: &[&str]) -> Command {
    daemon_loading(probes(), output, arguments)
}

/// [`daemon`] with the eBPF object `probes`.
fn daemon_loading(probes: &Path, output: &Path, arguments: &[&str]) -> Command {
    let mut command = Command::new(rvperf_binary());
    command
        .args(["daemon", "--output"])
        .arg(output)
        .arg("--probes")
        .arg(probes)
        // This machine's PMU may count no cycles (a virtual machine): the clock.
        .args(["-e", "cpu-clock"])
        .args(arguments);
    command
}

/// Starts `command` and waits until its standard error has printed a line containing
/// `marker`; the child and the lines so far.
fn start_until(command: &mut Command, marker: &str) -> (Child, Vec<String>) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("ended before {marker:?}: {lines:?}");
        }
        let found = line.contains(marker);
        lines.push(line);
        if found {
            break;
        }
    }
    // The rest of its output goes on being read, so it never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        while reader.read_line(&mut rest).is_ok_and(|read| read > 0) {}
    });
    (child, lines)
}

/// Starts the daemon `command` and checks that its first line (`profiling every CPU
/// (…)`) says `words`, and is one line (it ends as that line does).
fn start_saying(command: &mut Command, words: &str) -> Child {
    let (child, lines) = start_until(command, "profiling every CPU");
    let first = lines.last().unwrap();
    assert!(first.contains(words), "{first}");
    assert!(first.trim_end().ends_with(" s intervals"), "{first}");
    child
}

/// Runs the shell `script` to its end while the daemon `child` profiles, then ends
/// the daemon with SIGTERM (its last interval written) and checks it exited cleanly.
fn run_then_stop(script: &str, child: &mut Child) {
    let status = Command::new("sh").args(["-c", script]).status().unwrap();
    assert!(status.success(), "{script}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
}

#[test]
fn the_hot_function_leads_with_perf_reports_share() {
    let _machine = machine();
    let hot = hot_program();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    // The workload runs through both profilers' whole windows.
    let workload = Running::start(Command::new(&hot));
    let perf_data = directory.path().join("perf.data");
    let mut perf = Command::new("perf")
        .args(["record", "-a", "-g", "-e", "cpu-clock", "-F", "499", "-o"])
        .arg(&perf_data)
        .args(["--", "sleep", "4"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run perf (install linux-perf)");
    let result = daemon(
        &output,
        &["-F", "499", "--interval", "4", "--intervals", "1"],
    )
    .output()
    .unwrap();
    assert!(perf.wait().unwrap().success(), "perf record failed");
    drop(workload);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    // The probe (its `bpf_loop` walk) and userland name every stack by the same hash.
    assert!(!stderr.contains("do not hash"), "{stderr}");
    let merged = output.join("merged.pb.gz");
    let top = pprof_tool(&["-top"], &merged);
    assert_eq!(pprof_first(&top), "hot_function", "{top}");
    let share = pprof_share(&top, "hot_function");
    // (perf_for_recordings: under tools/ci/fresh-machine's chroot, plain perf would look
    // for the program in another mount namespace and name none of its functions.)
    let report = perf_for_recordings()
        .args(["report", "--stdio", "--no-children", "--sort", "sym", "-i"])
        .arg(&perf_data)
        .env("PAGER", "cat")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&report.stdout);
    let perf_share: f64 = report
        .lines()
        .find(|line| line.trim_end().ends_with("] hot_function"))
        .and_then(|line| line.split_whitespace().next())
        .map(|percent| percent.trim_end_matches('%').parse().unwrap())
        .unwrap_or_else(|| panic!("no hot_function in perf report:\n{report}"));
    assert!(
        (share - perf_share).abs() <= 3.0,
        "hot_function: {share}% in the daemon's profile, {perf_share}% in perf report"
    );
    // Every frame of the hot program's stacks is a function (of the program, libc or
    // the kernel), up to where libc's code without frame pointers ends the walk.
    let folded = std::fs::read_to_string(output.join("merged.folded")).unwrap();
    let hot_name = hot.file_name().unwrap().to_str().unwrap();
    let hot_stacks: Vec<&str> = folded
        .lines()
        .filter(|line| line.starts_with(&format!("{};", &hot_name[..hot_name.len().min(15)])))
        .collect();
    assert!(!hot_stacks.is_empty(), "{folded}");
    // A stack the kernel could not keep is counted under `[stack lost]`: rare.
    let (mut named, mut lost) = (0u64, 0u64);
    for stack in &hot_stacks {
        let (frames, weight) = stack.rsplit_once(' ').unwrap();
        let weight: u64 = weight.parse().unwrap();
        let leaf = frames.rsplit(';').next().unwrap();
        if leaf == "[stack lost]" {
            lost += weight;
        } else {
            assert!(
                !leaf.starts_with('['),
                "a frame without a function: {stack}"
            );
            named += weight;
        }
    }
    assert!(
        lost * 100 <= named,
        "{lost} samples of the hot program lost, {named} kept"
    );
}

#[test]
fn short_lived_processes_are_named_by_their_functions() {
    let _machine = machine();
    let burn = program(
        "burn",
        "volatile long sink;\n__attribute__((noinline)) void burn_loop(void) { for (long i = 0; i < 3000000; i++) sink += i; }\nint main(void) { burn_loop(); return 0; }\n",
    );
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let (mut child, _) = start_until(
        &mut daemon(&output, &["-F", "999", "--interval", "60"]),
        "profiling every CPU",
    );
    // 200 processes of a few milliseconds each, every one gone before the interval ends.
    let script = format!("for i in $(seq 200); do {}; done", burn.display());
    run_then_stop(&script, &mut child);
    let folded = std::fs::read_to_string(output.join("interval-000001.folded")).unwrap();
    let name = burn.file_name().unwrap().to_str().unwrap();
    let comm = &name[..name.len().min(15)];
    // Each sample's leaf: a function of the program, of ld.so or libc, or of the
    // kernel; `[unknown]` or a file's name would mean the process's mappings were
    // gone (or never known) when its interval was symbolized.
    let (mut named, mut unnamed, mut in_program) = (0u64, 0u64, 0u64);
    for line in folded
        .lines()
        .filter(|line| line.starts_with(&format!("{comm};")))
    {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let weight: u64 = weight.parse().unwrap();
        let leaf = stack.rsplit(';').next().unwrap();
        if leaf == "burn_loop" {
            in_program += weight;
        }
        if leaf.starts_with('[') {
            if leaf != profile_daemon_stack_lost() {
                unnamed += weight;
            }
        } else {
            named += weight;
        }
    }
    assert!(
        in_program > 100,
        "few samples in burn_loop: {in_program}\n{folded}"
    );
    assert!(
        unnamed * 20 <= named,
        "{unnamed} samples of {comm} unnamed against {named} named (frames named only by \
         ld.so's or libc's file need glibc's debug symbols, libc6-dbg, which \
         tools/install-deps.sh installs):\n{folded}"
    );
}

/// The text functions of this machine's `/proc/kallsyms` by address, each address with
/// every name listed at it (aliases).
fn kallsyms_functions() -> std::collections::BTreeMap<u64, Vec<String>> {
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut functions: std::collections::BTreeMap<u64, Vec<String>> = Default::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let (Some(address), Some(kind), Some(name)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if matches!(kind, "t" | "T" | "w" | "W") {
            let address = u64::from_str_radix(address, 16).unwrap();
            functions.entry(address).or_default().push(name.to_owned());
        }
    }
    functions
}

/// Kernel work of many kinds: files listed and read (leaves that are many
/// instructions of few kernel functions).
const KERNEL_WORK: &str = "for i in $(seq 10); do ls -lR /usr/include >/dev/null; \
                           cat /usr/bin/* >/dev/null 2>&1 || true; done";

/// The merged profile of a daemon started with `-F 999 --interval 60` and
/// `arguments`, whose first line says `words`, over the shell `script`.
fn merged_profile_over(arguments: &[&str], words: &str, script: &str) -> pprof::Profile {
    merged_profile_loading(probes(), arguments, words, script)
}

/// [`merged_profile_over`] with the eBPF object `probes`.
fn merged_profile_loading(
    probes: &Path,
    arguments: &[&str],
    words: &str,
    script: &str,
) -> pprof::Profile {
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let mut options = vec!["-F", "999", "--interval", "60"];
    options.extend_from_slice(arguments);
    let mut child = start_saying(&mut daemon_loading(probes, &output, &options), words);
    run_then_stop(script, &mut child);
    let bytes = std::fs::read(output.join("merged.pb.gz")).unwrap();
    pprof::read(&bytes).unwrap()
}

/// By default the daemon reads no kallsyms: the running kernel names each sampled
/// kernel address (`name_kernel_addresses`, run through `BPF_PROG_TEST_RUN`). Every
/// kernel location of its profile carries the function `/proc/kallsyms` places the
/// address in (one of the names at that function's address: the kernel names an alias
/// by the first listed); an address in no kallsyms function (a value a user stack's
/// frame-pointer walk read) is left without one.
#[test]
fn kernel_frames_are_named_by_the_running_kernel_as_kallsyms_places_them() {
    let _machine = machine();
    // Twice the usual kernel work: every kind of kernel location seen more often.
    let script = format!("{KERNEL_WORK}; {KERNEL_WORK}");
    let profile = merged_profile_over(&[], "kernel names from the running kernel", &script);
    let text = |index: i64| profile.string_table[usize::try_from(index).unwrap()].as_str();
    let kernel_mappings = kernel_mapping_ids(&profile);
    // What reading kallsyms (the daemon's way before) makes of each address.
    let kallsyms = std::fs::read("/proc/kallsyms").unwrap();
    let kallsyms =
        symbolize::KernelSymbols::parse("/proc/kallsyms", &String::from_utf8_lossy(&kallsyms))
            .unwrap();
    let aliases = kallsyms_functions();
    let (mut checked, mut outside) = (0usize, 0usize);
    for location in &profile.location {
        if !kernel_mappings.contains(&location.mapping_id) {
            continue;
        }
        let name = location.line.first().map(|line| {
            let function = profile
                .function
                .iter()
                .find(|function| function.id == line.function_id)
                .unwrap();
            text(function.name)
        });
        // The sampling program's own frames: gone from kallsyms with the daemon.
        if name.is_some_and(|name| name.starts_with("bpf_prog_")) {
            continue;
        }
        match kallsyms.function(location.address) {
            // Not kernel code (a user stack's frame-pointer walk reads such values):
            // unnamed either way.
            None => {
                assert_eq!(name, None, "{:#x}: not in kallsyms", location.address);
                outside += 1;
            }
            Some(function) => {
                let names = &aliases[&function.address];
                assert!(
                    name.is_some_and(|name| names.iter().any(|listed| listed == name)),
                    "{:#x}: named {name:?}, kallsyms has {names:?} at {:#x}",
                    location.address,
                    function.address
                );
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} kernel locations ({outside} outside)"
    );
    println!("{checked} kernel locations named as kallsyms places them, {outside} outside the kernel's code");
}

/// By default a location is a function (its mapping and inline stack), as folded
/// stacks count frames: one location for every sampled instruction of a function,
/// with no line numbers. `--locations address` keeps a location per instruction.
#[test]
fn a_location_is_a_function_unless_addresses_are_asked_for() {
    let _machine = machine();
    let by_function = merged_profile_over(&[], "profiling every CPU", KERNEL_WORK);
    let counted = location_functions(&by_function);
    assert_eq!(
        counted.functions, counted.locations,
        "a function with two locations"
    );
    assert!(
        by_function
            .location
            .iter()
            .flat_map(|location| &location.line)
            .all(|line| line.line == 0),
        "a line number in a profile by function"
    );
    let named = named_kernel_locations(&by_function);
    assert!(named >= 20, "{named} kernel locations named");

    let by_address = merged_profile_over(
        &["--locations", "address"],
        "profiling every CPU",
        KERNEL_WORK,
    );
    let by_address_counted = location_functions(&by_address);
    assert!(
        by_address_counted.functions < by_address_counted.locations,
        "no function with two sampled addresses in {} locations",
        by_address_counted.locations
    );
    println!(
        "by function: {} locations; by address: {} locations of {} functions",
        counted.locations, by_address_counted.locations, by_address_counted.functions
    );
}

/// Given `--kallsyms`, the daemon names kernel frames from that file, as before the
/// running kernel named them, and says so on its first line.
#[test]
fn given_a_kallsyms_file_the_daemon_names_kernel_frames_from_it() {
    let _machine = machine();
    let profile = merged_profile_over(
        &["--kallsyms", "/proc/kallsyms"],
        "kernel names from /proc/kallsyms)",
        KERNEL_WORK,
    );
    let named = named_kernel_locations(&profile);
    assert!(named >= 20, "{named} kernel locations named");
}

/// Where the running kernel refuses the namer program, the daemon names kernel frames
/// from `/proc/kallsyms` instead, and its first line says why. The refusal is the
/// kernel's own: the object's `name_kernel_addresses` ends in an instruction the
/// verifier does not take (its last, an `exit`, made an unknown opcode), and the rest
/// of the object loads as built.
#[test]
fn where_the_kernel_refuses_the_namer_kallsyms_names_kernel_frames() {
    let _machine = machine();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let refused = directory.path().join("probes-namer-refused.o");
    std::fs::write(
        &refused,
        namer_made_unverifiable(&std::fs::read(probes()).unwrap()),
    )
    .unwrap();
    // The line says the verifier's reason, on the line.
    let profile = merged_profile_loading(
        &refused,
        &[],
        "kernel names from /proc/kallsyms (the running kernel cannot name them: \
         name_kernel_addresses: the BPF_PROG_LOAD syscall returned Invalid argument \
         (os error 22). Verifier output: last insn is not an exit or jmp",
        KERNEL_WORK,
    );
    let named = named_kernel_locations(&profile);
    assert!(named >= 20, "{named} kernel locations named");
}

/// The eBPF object `object` with the last instruction of the namer program (section
/// `raw_tp`) made an opcode no BPF instruction has, which the verifier refuses ("last
/// insn is not an exit or jmp").
fn namer_made_unverifiable(object: &[u8]) -> Vec<u8> {
    use object::{Object, ObjectSection};
    /// `BPF_JMP | BPF_EXIT`: `exit`, the opcode byte of a program's last instruction.
    const EXIT: u8 = 0x95;
    /// Class `BPF_ALU64` with operation 0xf0, which no instruction has.
    const UNKNOWN_OPCODE: u8 = 0xff;
    /// Bytes of a BPF instruction.
    const INSTRUCTION: u64 = 8;
    let file = object::File::parse(object).unwrap();
    let (offset, size) = file
        .section_by_name("raw_tp")
        .expect("the namer program's section, raw_tp")
        .file_range()
        .unwrap();
    let last = usize::try_from(offset + size - INSTRUCTION).unwrap();
    assert_eq!(object[last], EXIT, "raw_tp does not end in exit");
    let mut bytes = object.to_vec();
    bytes[last] = UNKNOWN_OPCODE;
    bytes
}

/// The frame the daemon puts where the kernel could not keep a stack.
fn profile_daemon_stack_lost() -> &'static str {
    "[stack lost]"
}

#[test]
fn a_full_stack_map_is_counted_and_the_daemon_goes_on() {
    let _machine = machine();
    let hot = hot_program();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let workload = Running::start(Command::new(&hot));
    // Stacks of a busy system: far more than two distinct keys per interval.
    let busy = Command::new("sh")
        .args([
            "-c",
            "for i in $(seq 300); do ls -R /usr/lib >/dev/null; done",
        ])
        .spawn();
    let result = daemon(
        &output,
        &[
            "-F",
            "999",
            "--interval",
            "1",
            "--intervals",
            "3",
            "--max-stacks",
            "2",
        ],
    )
    .output()
    .unwrap();
    drop(workload);
    if let Ok(mut busy) = busy {
        let _ = busy.kill();
        let _ = busy.wait();
    }
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let dropped = daemon_interval_counts(&stderr, " dropped");
    assert_eq!(dropped.len(), 3, "{stderr}");
    assert!(dropped.iter().sum::<u64>() > 0, "nothing dropped: {stderr}");
    for interval in 1..=3 {
        let path = output.join(format!("interval-{interval:06}.pb.gz"));
        pprof_tool(&["-raw"], &path);
    }
}

#[test]
fn an_unprivileged_start_is_refused_in_one_line() {
    let _machine = machine();
    // Copies nobody can read: the checkout may be in root's home (as under
    // tools/ci/fresh-machine), and a refusal to read the object is not the one tested.
    let shared = SharedCopies::new();
    let output = shared.directory.path().join("profiles");
    let result = as_nobody(&shared.rvperf)
        .args(["daemon", "--output"])
        .arg(&output)
        .arg("--probes")
        .arg(&shared.probes)
        .args(["-e", "cpu-clock"])
        .output()
        .expect("run setpriv");
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("BPF is unavailable"), "{stderr}");
    assert!(!output.exists(), "an output directory was left");
}

#[test]
fn sigterm_writes_a_last_complete_interval() {
    let _machine = machine();
    let hot = hot_program();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let mut workload = Running::start(Command::new(&hot));
    let (mut child, _) = start_until(
        &mut daemon(&output, &["-F", "499", "--interval", "1"]),
        "profiling every CPU",
    );
    // Two whole intervals, then SIGTERM during the next.
    let merged = output.join("merged.pb.gz");
    let second = output.join("interval-000002.pb.gz");
    while !second.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the daemon ended before its second interval"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Into the third interval by 0.3 s of the hot program's own CPU time (the daemon
    // stops at once on the signal, and an interval of a few milliseconds would have no
    // samples to check): about 150 of its samples at 499 Hz however busy the machine.
    let started = cpu_ticks(workload.0.id());
    while cpu_ticks(workload.0.id()) < started + 30 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the daemon ended during its third interval"
        );
        assert!(
            workload.0.try_wait().unwrap().is_none(),
            "the hot program ended before the third interval had its samples"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    drop(workload);
    assert!(status.success(), "{status}");
    // The interval SIGTERM fell in is the last: however fast this machine ran, it is
    // the third or later, and none follows it.
    let last_number = (3..)
        .take_while(|number| output.join(format!("interval-{number:06}.pb.gz")).exists())
        .last()
        .expect("no interval after the second");
    let last = output.join(format!("interval-{last_number:06}.pb.gz"));
    // Complete: every interval's samples are in the merged profile, and pprof reads
    // each file.
    let total = |path: &Path| -> i64 {
        let profile = pprof::read(&std::fs::read(path).unwrap()).unwrap();
        profile.sample.iter().map(|sample| sample.value[0]).sum()
    };
    let intervals: i64 = (1..=last_number)
        .map(|number| total(&output.join(format!("interval-{number:06}.pb.gz"))))
        .sum();
    assert!(total(&last) > 0);
    assert_eq!(total(&merged), intervals);
    // Go's reader takes it, and it has the hot program's samples (which leads is the
    // business of the test against perf: another program may share this machine).
    let top = pprof_tool(&["-top"], &last);
    assert!(pprof_share(&top, "hot_function") > 0.0, "{top}");
    // No temporary file of an interrupted write is left.
    for entry in std::fs::read_dir(&output).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        assert!(
            name.starts_with("interval-") || name.starts_with("merged."),
            "{name}"
        );
    }
}

#[test]
fn the_merged_profile_stays_under_its_cap_and_counts_the_rest() {
    let _machine = machine();
    let hot = hot_program();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let workload = Running::start(Command::new(&hot));
    // Many distinct stacks: a busy file-system walk beside the hot program.
    let busy = Command::new("sh")
        .args([
            "-c",
            "for i in $(seq 300); do ls -R /usr/lib >/dev/null; done",
        ])
        .spawn();
    let cap = 20;
    let result = daemon(
        &output,
        &[
            "-F",
            "999",
            "--interval",
            "1",
            "--intervals",
            "3",
            "--max-merged-stacks",
            &cap.to_string(),
        ],
    )
    .output()
    .unwrap();
    drop(workload);
    if let Ok(mut busy) = busy {
        let _ = busy.kill();
        let _ = busy.wait();
    }
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let over_cap = i64::try_from(
        daemon_interval_counts(&stderr, " merged under")
            .iter()
            .sum::<u64>(),
    )
    .unwrap();
    let total = |path: &Path| -> i64 {
        let profile = pprof::read(&std::fs::read(path).unwrap()).unwrap();
        profile.sample.iter().map(|sample| sample.value[0]).sum()
    };
    let merged = pprof::read(&std::fs::read(output.join("merged.pb.gz")).unwrap()).unwrap();
    // At most the cap, plus one stand-in per command whose new stacks came over it.
    let commands = merged
        .sample
        .iter()
        .flat_map(|sample| sample.label.iter().map(|label| label.str))
        .collect::<std::collections::HashSet<i64>>()
        .len();
    assert!(
        merged.sample.len() <= cap + commands,
        "{} samples in the merged profile (cap {cap}, {commands} commands)",
        merged.sample.len()
    );
    // Nothing is lost: the merged total is the intervals', and what went over the cap
    // is what the stand-in holds.
    let intervals: i64 = (1..=3)
        .map(|number| total(&output.join(format!("interval-{number:06}.pb.gz"))))
        .sum();
    assert_eq!(
        merged
            .sample
            .iter()
            .map(|sample| sample.value[0])
            .sum::<i64>(),
        intervals
    );
    assert!(over_cap > 0, "nothing over the cap: {stderr}");
    // merged.folded, kept interval by interval, is capped as the profile is: the same
    // total, and the same samples under the stand-in.
    let folded = std::fs::read_to_string(output.join("merged.folded")).unwrap();
    let (mut folded_total, mut folded_stand_in) = (0i64, 0i64);
    for line in folded.lines() {
        let (stack, weight) = line.rsplit_once(' ').unwrap();
        let weight: i64 = weight.parse().unwrap();
        folded_total += weight;
        if stack.ends_with(";[merged profile full]") {
            folded_stand_in += weight;
        }
    }
    assert_eq!(folded_total, intervals, "{folded}");
    assert_eq!(folded_stand_in, over_cap, "{folded}");
    let stand_in = pprof_tool(
        &["-top", "-focus", "merged profile full"],
        &output.join("merged.pb.gz"),
    );
    assert!(stand_in.contains("[merged profile full]"), "{stand_in}");
}

/// A workload killed when the test ends, however it ends: a failed assertion must not
/// leave it running on the machine (where it would load every later test, and hold
/// the test's output pipe open).
struct Running(Child);

impl Running {
    /// The hot program `command` runs, for long enough to outlast any test.
    fn start(mut command: Command) -> Running {
        Running(command.arg("100000").stdout(Stdio::null()).spawn().unwrap())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A sysctl set for a test and put back after it, however the test ends.
struct Sysctl {
    path: &'static str,
    saved: String,
}

impl Sysctl {
    fn set(path: &'static str, value: &str) -> Sysctl {
        let saved = std::fs::read_to_string(path).unwrap();
        std::fs::write(path, value).unwrap();
        Sysctl { path, saved }
    }
}

impl Drop for Sysctl {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, self.saved.trim());
    }
}

/// `command` as nobody (uid and gid 65534), without any capability.
fn as_nobody(program: &Path) -> Command {
    let mut command = Command::new("setpriv");
    command
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(program);
    command
}

/// rvperf, the eBPF object and what else a test runs as nobody, copied where nobody
/// can read them (the checkout may be in root's home, as under tools/ci/fresh-machine),
/// in a directory it can write.
struct SharedCopies {
    directory: tempfile::TempDir,
    rvperf: PathBuf,
    probes: PathBuf,
}

impl SharedCopies {
    fn new() -> SharedCopies {
        use std::os::unix::fs::PermissionsExt;
        let directory = tempfile::Builder::new()
            .prefix("rvperf-daemon-nobody")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(directory.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut shared = SharedCopies {
            directory,
            rvperf: PathBuf::new(),
            probes: PathBuf::new(),
        };
        shared.rvperf = shared.share(&rvperf_binary(), "rvperf", 0o755);
        shared.probes = shared.share(probes(), "probes.o", 0o644);
        shared
    }

    /// A copy of `path` named `name`, with `mode`.
    fn share(&self, path: &Path, name: &str, mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let copy = self.directory.path().join(name);
        std::fs::copy(path, &copy).unwrap();
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(mode)).unwrap();
        copy
    }
}

#[test]
fn without_bpf_the_perf_ring_fallback_profiles_and_says_so() {
    let _machine = machine();
    let shared = SharedCopies::new();
    let (rvperf, probes) = (&shared.rvperf, &shared.probes);
    let hot = shared.share(&hot_program(), "hot", 0o755);
    let output = shared.directory.path().join("profiles");
    // Unprivileged BPF stays off (kernel.unprivileged_bpf_disabled); system-wide perf
    // events and kernel addresses are opened to every user, as an administrator who
    // allows the fallback would.
    let _paranoid = Sysctl::set("/proc/sys/kernel/perf_event_paranoid", "-1");
    let _pointers = Sysctl::set("/proc/sys/kernel/kptr_restrict", "0");
    // The workload is nobody's too: another user's mappings are not its to read.
    let workload = Running::start(as_nobody(&hot));
    let result = as_nobody(rvperf)
        .args(["daemon", "--output"])
        .arg(&output)
        .arg("--probes")
        .arg(probes)
        .args([
            "-e",
            "cpu-clock",
            "-F",
            "499",
            "--interval",
            "2",
            "--intervals",
            "1",
        ])
        .args(["--fallback", "perf"])
        .output()
        .unwrap();
    drop(workload);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains("perf ring recorder") && first.contains("BPF is unavailable"),
        "{stderr}"
    );
    // The hot program's own samples (whatever else this machine ran) are named: its
    // hot function first.
    let top = pprof_tool(
        &["-top", "-tagfocus", "comm=hot"],
        &output.join("merged.pb.gz"),
    );
    assert_eq!(pprof_first(&top), "hot_function", "{top}");
    // Without the fallback the same start is refused in one line.
    let refused = as_nobody(rvperf)
        .args(["daemon", "--output"])
        .arg(shared.directory.path().join("refused"))
        .arg("--probes")
        .arg(probes)
        .args(["-e", "cpu-clock"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert_eq!(String::from_utf8_lossy(&refused.stderr).lines().count(), 1);
}

#[test]
fn the_merged_profile_is_written_every_few_intervals_and_after_the_last() {
    let _machine = machine();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let merged = output.join("merged.pb.gz");
    let (mut child, lines) = start_until(
        &mut daemon(
            &output,
            &["-F", "99", "--interval", "1", "--merged-every", "2"],
        ),
        "interval 1:",
    );
    // After the first interval: its files, not the merged profile's.
    assert!(output.join("interval-000001.pb.gz").exists(), "{lines:?}");
    assert!(
        !merged.exists(),
        "the merged profile written after interval 1"
    );
    while !merged.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the daemon ended before its second interval"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    // After the last (the third or later, whatever its number): the whole run.
    let total = |path: &Path| -> i64 {
        let profile = pprof::read(&std::fs::read(path).unwrap()).unwrap();
        profile.sample.iter().map(|sample| sample.value[0]).sum()
    };
    let intervals: i64 = (1..)
        .map(|number| output.join(format!("interval-{number:06}.pb.gz")))
        .take_while(|path| path.exists())
        .map(|path| total(&path))
        .sum();
    assert_eq!(total(&merged), intervals);
}

/// The kernel's maps are drained as seldom as their load allows (drain.rs): the period
/// doubles while a drain finds the maps under a sixteenth full (512 of 8,192 stacks, 256
/// of 4,096 keys), up to as long as the maps hold the sampling rate, every sample new,
/// at most 4 s. At S samples a second over all CPUs, S at most 20, that is 4 s (the
/// maps hold 4,096 / 20 = 204 s), and a 4 s drain holds at most 160 stacks and 80 keys:
/// the period reaches 4 s within 6.3 s of the start (0.1 + 0.2 + ... + 3.2) and stays
/// there. An interval of 9 s after the first then takes 3 drains (4 s apart, and its
/// end's), not the 9 of a one-second period or the 90 of a tenth of a second.
#[test]
fn a_lightly_loaded_machine_is_drained_every_few_seconds() {
    let _machine = machine();
    let cpus = std::thread::available_parallelism().map_or(1, |count| count.get());
    assert!(
        cpus <= 20,
        "the bound assumes at most 20 samples a second at 1 Hz per CPU; {cpus} CPUs"
    );
    let frequency = (20 / cpus).max(1).to_string();
    let directory = tempfile::tempdir_in(scratch()).unwrap();
    let output = directory.path().join("profiles");
    let result = daemon(
        &output,
        &["-F", &frequency, "--interval", "9", "--intervals", "3"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    let drains = daemon_interval_counts(&stderr, " map drains");
    assert_eq!(drains.len(), 3, "{stderr}");
    for (index, &count) in drains.iter().enumerate().skip(1) {
        assert!(
            (2..=4).contains(&count),
            "interval {}: {count} drains\n{stderr}",
            index + 1
        );
    }
    // Its few stacks wait in the stack map for the interval's end: one read of the
    // map's buckets an interval, not one a drain.
    let stack_map_reads = daemon_interval_counts(&stderr, " stack map reads");
    assert_eq!(stack_map_reads, [1, 1, 1], "{stderr}");
}

/// User and system time of process `pid` so far, in clock ticks (`/proc/PID/stat`
/// fields 14 and 15; 100 a second on Linux).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The command name (field 2) is in parentheses and may hold spaces.
    let (_, after_name) = stat.rsplit_once(')').unwrap();
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are 11 and 12.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}
