//! `rvperf daemon` on the riscv64 guest: the profiles `tools/vm/guest/daemon-tests.sh`
//! made there with the eBPF probes on the SBI PMU, read on the host by `go tool pprof`
//! and by the pprof crate. The hot program's merged profile names `hot_function` first
//! with the share the guest's `perf record -a -g` + `perf report` gave the same window,
//! every frame of its stacks is a function of the program, libc, ld.so or the kernel,
//! and its mapping carries the program's build id; 200 short-lived processes are named by
//! their own function; a two-entry stack map's overflow is counted in every interval; an
//! unprivileged start is refused in one line, and with `--fallback perf` profiles through
//! the perf ring recorder; SIGTERM leaves a last, complete interval.
//!
//! The profiles are this run's guest tier's (`RVPERF_DAEMON_GUEST`, with the guest's
//! programs in `RVPERF_DAEMON_GUEST_BINARIES`), or else the bundled fixture
//! `tests/fixtures/daemon-guest/` (its README says how it was made).

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    daemon_interval_counts, location_functions, named_kernel_locations, pprof_first, pprof_share,
    pprof_tool, repository,
};

fn results() -> PathBuf {
    std::env::var_os("RVPERF_DAEMON_GUEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| repository().join("tests/fixtures/daemon-guest"))
}

fn binaries() -> PathBuf {
    std::env::var_os("RVPERF_DAEMON_GUEST_BINARIES")
        .map(PathBuf::from)
        .unwrap_or_else(|| results().join("bin"))
}

fn profile(path: &Path) -> pprof::Profile {
    let bytes = std::fs::read(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    pprof::read(&bytes).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn text(profile: &pprof::Profile, index: i64) -> &str {
    &profile.string_table[usize::try_from(index).unwrap()]
}

/// What one frame of a sample is.
#[derive(Debug, PartialEq)]
enum Frame<'a> {
    /// A symbolized function.
    Function(&'a str),
    /// An address in a mapped file whose symbols do not cover it (Debian's libc and
    /// ld.so carry no .symtab): the file's name.
    InFile(&'a str),
    /// A named stand-in: `[unknown]` (an address in no mapping) or `[stack lost]`.
    StandIn(&'a str),
}

/// Each sample's frames, leaf first, with its count and its `comm` label.
fn samples(profile: &pprof::Profile) -> Vec<(Vec<Frame<'_>>, i64, &str)> {
    let location = |id: u64| {
        profile
            .location
            .iter()
            .find(|location| location.id == id)
            .unwrap()
    };
    let function_name = |id: u64| {
        let function = profile
            .function
            .iter()
            .find(|function| function.id == id)
            .unwrap();
        text(profile, function.name)
    };
    let mapping_file = |id: u64| {
        profile
            .mapping
            .iter()
            .find(|mapping| mapping.id == id)
            .map_or("", |mapping| text(profile, mapping.filename))
    };
    profile
        .sample
        .iter()
        .map(|sample| {
            let frames = sample
                .location_id
                .iter()
                .flat_map(|&id| {
                    let location = location(id);
                    if location.line.is_empty() {
                        vec![Frame::InFile(mapping_file(location.mapping_id))]
                    } else {
                        location
                            .line
                            .iter()
                            .map(|line| {
                                let name = function_name(line.function_id);
                                if name.starts_with('[') {
                                    Frame::StandIn(name)
                                } else {
                                    Frame::Function(name)
                                }
                            })
                            .collect()
                    }
                })
                .collect();
            let comm = sample
                .label
                .iter()
                .find(|label| text(profile, label.key) == "comm")
                .map_or("", |label| text(profile, label.str));
            (frames, sample.value[0], comm)
        })
        .collect()
}

/// Debian's libc and dynamic loader, which carry only dynamic symbols.
fn is_libc_or_loader(file: &str) -> bool {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.starts_with("libc.so") || name.starts_with("ld-linux")
}

/// The daemon's first line in `log` (`profiling every CPU (…)`).
fn start_line(log: &str) -> &str {
    log.lines()
        .find(|line| line.contains("profiling every CPU"))
        .unwrap_or_else(|| panic!("no start line: {log}"))
}

fn log(name: &str) -> String {
    let path = results().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_hot_function_leads_with_the_guest_perf_reports_share() {
    let merged = results().join("hot/merged.pb.gz");
    let top = pprof_tool(&["-top"], &merged);
    assert_eq!(pprof_first(&top), "hot_function", "{top}");
    let share = pprof_share(&top, "hot_function");
    let perf_share: f64 = log("hot-perf.share")
        .trim()
        .parse()
        .expect("the guest's perf report gave hot_function a share");
    assert!(
        (share - perf_share).abs() <= 3.0,
        "hot_function: {share}% in the daemon's profile, {perf_share}% in the guest's perf report"
    );
    println!("hot_function {share}% (the guest's perf report: {perf_share}%)");
    // Every frame of the hot program's stacks: a function (of the program, libc, ld.so or
    // the kernel), an address in libc or ld.so (which have no symbols there), and only
    // at the root, where the frame-pointer walk leaves libc's start-up code, `[unknown]`.
    let profile = profile(&merged);
    let (mut kept, mut lost, mut in_hot_function) = (0i64, 0i64, 0i64);
    for (frames, count, comm) in samples(&profile) {
        if comm != "hot" {
            continue;
        }
        if frames == [Frame::StandIn("[stack lost]")] {
            lost += count;
            continue;
        }
        kept += count;
        // hot_function anywhere: a sample taken in the kernel (an interrupt) while it
        // ran has it under the kernel's frames.
        if frames.contains(&Frame::Function("hot_function")) {
            in_hot_function += count;
        }
        for (depth, frame) in frames.iter().enumerate() {
            let allowed = match frame {
                Frame::Function(_) => true,
                Frame::InFile(file) => is_libc_or_loader(file),
                // The daemon's accounted stand-in for a part (user or kernel) the
                // kernel could not keep.
                Frame::StandIn("[stack lost]") => true,
                Frame::StandIn(name) => {
                    *name == "[unknown]"
                        && frames[depth + 1..]
                            .iter()
                            .all(|outer| matches!(outer, Frame::StandIn(_)))
                }
            };
            assert!(allowed, "frame {depth} of a stack of hot: {frames:?}");
        }
    }
    assert!(
        in_hot_function * 10 >= kept * 9,
        "{in_hot_function} of {kept} samples of hot under hot_function"
    );
    assert!(lost * 100 <= kept, "{lost} stacks of hot lost, {kept} kept");
    // The program's mapping carries its build id, as `readelf -n` reads it.
    let notes = Command::new("readelf")
        .arg("-n")
        .arg(binaries().join("hot"))
        .output()
        .expect("run readelf");
    let notes = String::from_utf8_lossy(&notes.stdout);
    let build_id = notes
        .lines()
        .find_map(|line| line.trim().strip_prefix("Build ID: "))
        .expect("hot has a build id");
    let raw = pprof_tool(&["-raw"], &merged);
    let mapping = raw
        .lines()
        .find(|line| line.contains("/opt/rvperf/bin/hot"))
        .unwrap_or_else(|| panic!("no mapping of hot:\n{raw}"));
    assert!(
        mapping.contains(build_id),
        "{mapping} (build id {build_id})"
    );
}

#[test]
fn short_lived_processes_are_named_by_their_function() {
    let profile = profile(&results().join("burst/interval-000001.pb.gz"));
    let (mut named, mut unnamed, mut in_program) = (0i64, 0i64, 0i64);
    // What a failure prints: the samples of each command, and burst's leaves.
    let mut per_command: BTreeMap<&str, i64> = BTreeMap::new();
    let mut burst_leaves: BTreeMap<String, i64> = BTreeMap::new();
    for (frames, count, comm) in samples(&profile) {
        *per_command.entry(comm).or_default() += count;
        if comm != "burst" {
            continue;
        }
        *burst_leaves
            .entry(format!("{:?}", frames.first()))
            .or_default() += count;
        // The leaf: a function, or an address in libc or ld.so (whose start-up code is
        // much of a process this short, and which carry no symbols in the guest), is
        // the process's own; `[unknown]` (an address in no mapping the daemon knew) or
        // another file's name is not.
        match frames.first() {
            Some(Frame::Function(name)) => {
                named += count;
                if *name == "burn_loop" {
                    in_program += count;
                }
            }
            Some(Frame::InFile(file)) if is_libc_or_loader(file) => named += count,
            Some(Frame::StandIn("[stack lost]")) => {}
            _ => unnamed += count,
        }
    }
    let mut leaves: Vec<(String, i64)> = burst_leaves.into_iter().collect();
    leaves.sort_by_key(|(_, count)| std::cmp::Reverse(*count));
    leaves.truncate(8);
    let counts = format!(
        "{in_program} samples of burst in burn_loop, {named} named, {unnamed} unnamed; \
         samples by command {per_command:?}; burst's leaves {leaves:?}"
    );
    assert!(in_program > 100, "few samples in burn_loop: {counts}");
    assert!(unnamed * 20 <= named, "too many unnamed: {counts}");
    let execs: u64 = log("burst.log")
        .lines()
        .find_map(|line| {
            let (before, _) = line.split_once(" execs")?;
            before.rsplit(' ').next()?.parse().ok()
        })
        .expect("an interval line with execs");
    assert!(execs >= 200, "{execs} execs seen");
}

/// The guest kernel runs the sampling program JIT-compiled, as distributions' kernels do
/// (`CONFIG_BPF_JIT_ALWAYS_ON`): interpreted, each sample cost the interrupted task
/// 45 to 52 µs in this guest, against 24 to 32 µs JIT-compiled. The daemon names an
/// interpreted sampler on its first line.
#[test]
fn the_sampling_program_runs_jit_compiled() {
    let log = log("hot.log");
    let first = start_line(&log);
    assert!(first.contains("eBPF"), "{first}");
    assert!(!first.contains("interpreted"), "{first}");
}

/// The guest kernel names the daemon's kernel addresses itself (`%pS` through
/// `bpf_snprintf`, in a program run on demand): no kallsyms is read, and the hot
/// program's kernel frames are functions (checked with its other frames above).
#[test]
fn the_guest_kernel_names_the_kernel_frames() {
    let log = log("hot.log");
    let first = start_line(&log);
    assert!(
        first.contains("kernel names from the running kernel"),
        "{first}"
    );
    let profile = profile(&results().join("hot/merged.pb.gz"));
    let named = named_kernel_locations(&profile);
    assert!(named >= 20, "{named} kernel locations named");
}

/// The guest daemon's default: a pprof location per function (mapping and inline
/// stack), however many of its instructions were sampled.
#[test]
fn the_guest_profile_has_a_location_per_function() {
    let profile = profile(&results().join("hot/merged.pb.gz"));
    let counted = location_functions(&profile);
    assert_eq!(
        counted.functions, counted.locations,
        "a function with two locations"
    );
    assert!(counted.locations >= 20, "{counted:?}");
}

#[test]
fn a_two_entry_stack_map_overflows_into_counted_drops() {
    let log = log("overflow.log");
    let dropped = daemon_interval_counts(&log, " dropped");
    assert_eq!(dropped.len(), 3, "{log}");
    assert!(dropped.iter().sum::<u64>() > 0, "nothing dropped: {log}");
    for interval in 1..=3 {
        let path = results().join(format!("overflow/interval-{interval:06}.pb.gz"));
        let raw = pprof_tool(&["-raw"], &path);
        assert!(raw.contains("samples/count"), "{raw}");
    }
}

#[test]
fn an_unprivileged_start_is_refused_in_one_line() {
    let log = log("unprivileged.log");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("BPF is unavailable"), "{log}");
}

#[test]
fn without_bpf_the_perf_ring_fallback_names_the_hot_function() {
    let log = log("fallback.log");
    let first = log.lines().next().unwrap_or_default();
    assert!(
        first.contains("perf ring recorder") && first.contains("BPF is unavailable"),
        "{log}"
    );
    // Without BPF no program names kernel addresses: kallsyms does.
    assert!(
        first.contains("kernel names from /proc/kallsyms)"),
        "{first}"
    );
    let top = pprof_tool(
        &["-top", "-tagfocus", "comm=hot"],
        &results().join("fallback/merged.pb.gz"),
    );
    assert_eq!(pprof_first(&top), "hot_function", "{top}");
}

#[test]
fn sigterm_leaves_a_last_complete_interval() {
    let directory = results().join("sigterm");
    let last_number = (3..)
        .take_while(|number| {
            directory
                .join(format!("interval-{number:06}.pb.gz"))
                .exists()
        })
        .last()
        .expect("no interval after the second");
    assert!(!directory
        .join(format!("interval-{:06}.pb.gz", last_number + 1))
        .exists());
    let total = |path: &Path| -> i64 {
        profile(path)
            .sample
            .iter()
            .map(|sample| sample.value[0])
            .sum()
    };
    let intervals: i64 = (1..=last_number)
        .map(|number| total(&directory.join(format!("interval-{number:06}.pb.gz"))))
        .sum();
    let last = directory.join(format!("interval-{last_number:06}.pb.gz"));
    assert!(total(&last) > 0);
    assert_eq!(total(&directory.join("merged.pb.gz")), intervals);
    // The hot program's samples are there, named. (Among them: it runs on one hart of
    // two, and the other hart's idle loop, as sampled as it, may lead the whole
    // interval's profile, the more so the less the daemon itself runs there.)
    let top = pprof_tool(&["-top", "-tagfocus", "comm=hot"], &last);
    assert_eq!(pprof_first(&top), "hot_function", "{top}");
    for entry in std::fs::read_dir(&directory).unwrap() {
        let name = entry.unwrap().file_name();
        let name = name.to_string_lossy();
        assert!(
            name.starts_with("interval-") || name.starts_with("merged."),
            "{name}"
        );
    }
}
