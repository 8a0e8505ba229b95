//! Running the AutoFDO consumers and reading what they print: shared by the riscv64
//! and x86_64 AutoFDO tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Mutex;

/// Runs `command`, which must succeed; `hint` says how to install it when missing.
pub fn run_tool(command: &mut Command, hint: &str) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error} ({hint})"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `perf script -F ip,brstack` of `data`, only the lines with branch entries: the text
/// llvm-profgen reads.
pub fn perf_script_branch_stacks(data: &Path, hint: &str) -> String {
    let script = run_tool(
        super::perf_for_recordings()
            .args(["script", "-F", "ip,brstack", "-i"])
            .arg(data),
        hint,
    );
    String::from_utf8_lossy(&script.stdout)
        .lines()
        .filter(|line| line.contains('/'))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The `function_entry_count` of `define ... @name(` in LLVM IR text.
pub fn function_entry_count(ir: &str, name: &str) -> Option<u64> {
    let define = ir
        .lines()
        .find(|line| line.starts_with("define ") && line.contains(&format!("@{name}(")))?;
    let reference = define.split("!prof ").nth(1)?.split([' ', ',']).next()?;
    let metadata = ir
        .lines()
        .find(|line| line.starts_with(&format!("{reference} = ")))?;
    metadata
        .split("function_entry_count\", i64 ")
        .nth(1)?
        .trim_end_matches('}')
        .parse()
        .ok()
}

/// Whether LLVM IR text defines `@name` (a `define` line, not a `declare`).
pub fn defines_function(ir: &str, name: &str) -> bool {
    ir.lines()
        .any(|line| line.starts_with("define ") && line.contains(&format!("@{name}(")))
}

/// A range of code llvm-profgen dropped, by its own account (`--show-detailed-warning`:
/// "warning: [start, end]: reason"), addresses inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRange {
    pub start: u64,
    pub end: u64,
    pub reason: String,
}

/// The ranges llvm-profgen's stderr names as dropped.
pub fn profgen_dropped_ranges(stderr: &str) -> Vec<DroppedRange> {
    stderr
        .lines()
        .filter_map(|line| {
            let (range, reason) = line
                .strip_prefix("warning: [")
                .and_then(|rest| rest.split_once("]: "))?;
            let mut ends = range
                .split(',')
                .map(|end| u64::from_str_radix(end.trim().trim_start_matches("0x"), 16));
            let (Some(Ok(start)), Some(Ok(end))) = (ends.next(), ends.next()) else {
                return None;
            };
            Some(DroppedRange {
                start,
                end,
                reason: reason.to_owned(),
            })
        })
        .collect()
}

/// The profile lines, (function, line offset from the function's first line), that the
/// code of `ranges` belongs to, by `llvm-symbolizer-19` over every `step`-th address:
/// the outermost frame's function and line (an inlined instruction counts on its call
/// site's line, as the profiles' top-level lines do).
pub fn profile_lines_of(
    binary: &Path,
    ranges: &[DroppedRange],
    step: u64,
    hint: &str,
) -> std::collections::BTreeSet<(String, u32)> {
    use std::io::Write;
    let mut addresses = String::new();
    for range in ranges {
        // Inverted or huge "ranges" (a profile and binary mismatch) name no code here.
        if range.end < range.start || range.end - range.start > 1 << 16 {
            continue;
        }
        for address in (range.start..=range.end).step_by(step as usize) {
            addresses.push_str(&format!("{address:#x}\n"));
        }
    }
    let mut child = Command::new("llvm-symbolizer-19")
        .arg(format!("--obj={}", binary.display()))
        .args(["--verbose", "--inlining", "--functions=linkage"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run llvm-symbolizer-19: {error} ({hint})"));
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(addresses.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success(), "llvm-symbolizer-19 failed");
    let mut lines = std::collections::BTreeSet::new();
    // One block per address, blank-line separated; in it one frame per unindented
    // function name, innermost first, each followed by indented fields.
    for block in String::from_utf8_lossy(&output.stdout).split("\n\n") {
        let (mut function, mut start_line, mut line) = (None, None, None);
        for text in block.lines() {
            if !text.starts_with(' ') {
                (function, start_line, line) = (Some(text.trim()), None, None);
            } else if let Some(value) = text.trim().strip_prefix("Function start line: ") {
                start_line = value.parse::<u32>().ok();
            } else if let Some(value) = text.trim().strip_prefix("Line: ") {
                line = value.parse::<u32>().ok();
            }
        }
        if let (Some(function), Some(start), Some(line)) = (function, start_line, line) {
            if function != "??" && line >= start && start > 0 {
                lines.insert((function.to_owned(), line - start));
            }
        }
    }
    lines
}

/// Top-level functions of an LLVM text profile: name -> (total, head, (line offset,
/// discriminator) -> count), every line as written, zeros included. rvperf and
/// llvm-profgen both key lines by LLVM's base discriminator (GCC's discriminator 3 in a
/// GCC-built binary's DWARF is LLVM's base 0), so lines compare as written. Inlined
/// instances are left out: they are compared through their functions' own copies.
pub type TextProfile = BTreeMap<String, (u64, u64, BTreeMap<(u32, u32), u64>)>;

/// The function entered most often per rvperf's profile, with its head count.
pub fn hottest_entered(profile: &TextProfile) -> (String, u64) {
    profile
        .iter()
        .filter(|(name, _)| name.as_str() != "main")
        .map(|(name, (_, head, _))| (name.clone(), *head))
        .max_by_key(|(name, head)| (*head, std::cmp::Reverse(name.clone())))
        .unwrap()
}

pub fn parse_text_profile(profile: &str) -> TextProfile {
    let mut functions = TextProfile::new();
    let mut current: Option<String> = None;
    for line in profile.lines() {
        if !line.starts_with(' ') {
            let mut fields = line.rsplitn(3, ':');
            let head = fields.next().unwrap().parse().unwrap();
            let total = fields.next().unwrap().parse().unwrap();
            let name = fields.next().unwrap().to_owned();
            functions.insert(name.clone(), (total, head, BTreeMap::new()));
            current = Some(name);
        } else if line.starts_with("  ") {
            continue;
        } else {
            let (location, rest) = line.trim_start().split_once(": ").unwrap();
            let Some(count) = rest.split(' ').next().and_then(|c| c.parse::<u64>().ok()) else {
                continue; // an inlined call site: ` offset: callee:total`
            };
            let (offset, discriminator) = location.split_once('.').unwrap_or((location, "0"));
            let key = (offset.parse().unwrap(), discriminator.parse().unwrap());
            let function = functions.get_mut(current.as_ref().unwrap()).unwrap();
            assert!(
                function.2.insert(key, count).is_none(),
                "{line}: a second line at the same location"
            );
        }
    }
    functions
}

/// The functions of a profile with a nonzero line.
pub fn sampled_functions(profile: &TextProfile) -> Vec<String> {
    profile
        .iter()
        .filter(|(_, (_, _, lines))| lines.values().any(|&count| count > 0))
        .map(|(name, _)| name.clone())
        .collect()
}

/// A line of a top-level function that rvperf's and llvm-profgen's profiles do not
/// agree on; `None`: the profile has no such line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineDifference {
    pub function: String,
    pub offset: u32,
    pub discriminator: u32,
    pub rvperf: Option<u64>,
    pub profgen: Option<u64>,
}

/// Every line either profile has, both ways (a line only llvm-profgen has differs as
/// much as one only rvperf has, a 0 included): how many are equal, and the others.
pub fn compare_lines(ours: &TextProfile, theirs: &TextProfile) -> (usize, Vec<LineDifference>) {
    let mut equal = 0;
    let mut differing = Vec::new();
    let no_lines = BTreeMap::new();
    let functions: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    for name in functions {
        let our_lines = ours.get(name).map_or(&no_lines, |(_, _, lines)| lines);
        let their_lines = theirs.get(name).map_or(&no_lines, |(_, _, lines)| lines);
        let locations: BTreeSet<&(u32, u32)> = our_lines.keys().chain(their_lines.keys()).collect();
        for &(offset, discriminator) in locations {
            let (rvperf, profgen) = (
                our_lines.get(&(offset, discriminator)).copied(),
                their_lines.get(&(offset, discriminator)).copied(),
            );
            if rvperf == profgen {
                equal += 1;
            } else {
                differing.push(LineDifference {
                    function: name.clone(),
                    offset,
                    discriminator,
                    rvperf,
                    profgen,
                });
            }
        }
    }
    (equal, differing)
}

/// Each difference must be on a line whose code llvm-profgen dropped (`covered`, from
/// [`profile_lines_of`] over [`profgen_dropped_ranges`]), and there rvperf's count must
/// be the larger: no other difference is allowed.
pub fn assert_differences_only_where_profgen_dropped(
    differing: &[LineDifference],
    covered: &BTreeSet<(String, u32)>,
) {
    for difference in differing {
        let LineDifference {
            function,
            offset,
            discriminator,
            rvperf,
            profgen,
        } = difference;
        assert!(
            covered.contains(&(function.clone(), *offset)),
            "{function}:{offset}.{discriminator}: rvperf {rvperf:?}, llvm-profgen {profgen:?}, \
             and no range llvm-profgen dropped covers the line"
        );
        assert!(
            rvperf.unwrap_or(0) >= profgen.unwrap_or(0),
            "llvm-profgen counts more than rvperf at {function}:{offset}.{discriminator}: \
             {profgen:?} > {rvperf:?}"
        );
    }
}

/// llvm-profgen-19's text profile of the recording `data` of `binary`, made from perf
/// script's text of it (both written into `work`), checked against rvperf's `ours`
/// line by line: the same functions have samples; every line either profile has is
/// compared, both ways (both write a 0 for every line of a sampled function that no
/// sample reached: llvm-profgen's preprocessRangeCounter, "to be consistent with
/// compiler that interpret zero count as unexecuted (cold)"), so a line at 0 compares
/// like any other; a difference only where llvm-profgen dropped code of that very line
/// (by its own account, the dropped ranges symbolized every `step` bytes), and there
/// rvperf's count is the larger; and at least four equal lines per differing one.
/// Returns llvm-profgen's profile.
pub fn assert_profgen_agrees_except_where_it_drops(
    binary: &Path,
    data: &Path,
    work: &Path,
    ours: &TextProfile,
    step: u64,
    hint: &str,
) -> TextProfile {
    let script_path = work.join("perf-script.txt");
    std::fs::write(&script_path, perf_script_branch_stacks(data, hint)).unwrap();
    let theirs_path = work.join("llvm-profgen.txt");
    let profgen = run_tool(
        Command::new("llvm-profgen-19").args([
            &format!("--binary={}", binary.display()),
            &format!("--perfscript={}", script_path.display()),
            "--format=text",
            "--show-detailed-warning",
            &format!("--output={}", theirs_path.display()),
        ]),
        hint,
    );
    // The ranges llvm-profgen drops, by its own account: "[ start, end]: Range ...".
    let dropped = profgen_dropped_ranges(&String::from_utf8_lossy(&profgen.stderr));
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for range in &dropped {
        *reasons.entry(range.reason.as_str()).or_default() += 1;
    }
    eprintln!("llvm-profgen dropped ranges: {reasons:#?}");
    // The lines the dropped code belongs to: the only ones where the profiles may differ.
    let covered = profile_lines_of(binary, &dropped, step, hint);
    let theirs = parse_text_profile(&std::fs::read_to_string(&theirs_path).unwrap());
    assert_eq!(
        sampled_functions(ours),
        sampled_functions(&theirs),
        "the same functions have samples"
    );
    let (equal, differing) = compare_lines(ours, &theirs);
    eprintln!("{equal} lines equal; differing: {differing:#?}");
    assert_differences_only_where_profgen_dropped(&differing, &covered);
    assert!(
        equal >= 4 * differing.len(),
        "{equal} lines equal, {} differ: {differing:#?}",
        differing.len()
    );
    theirs
}

/// GCC 12 compiles `source` with the AutoFDO profile `gcc_profile` silently, and sets
/// the entry block count of the function entered most often (per `ours`, the same
/// profile in LLVM's text format) to its head count, as its afdo dump shows. The
/// compile and dump go under `work`.
pub fn assert_gcc_takes_the_head_counts(
    source: &Path,
    gcc_profile: &Path,
    ours: &TextProfile,
    work: &Path,
    hint: &str,
) {
    let dump_directory = work.join("gcc-dump");
    std::fs::create_dir_all(&dump_directory).unwrap();
    let output = run_tool(
        Command::new("riscv64-linux-gnu-gcc")
            .args(["-O2", "-g", "-fno-inline", "-Wall"])
            .arg(format!("-fauto-profile={}", gcc_profile.display()))
            .args(["-fdump-ipa-afdo", "-dumpdir"])
            .arg(format!("{}/", dump_directory.display()))
            .arg("-c")
            .arg(source)
            .arg("-o")
            .arg(work.join("gcc-profiled.o")),
        hint,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "gcc warned: {stderr}");
    let dump = super::gcc_dump::read_afdo_dump(&dump_directory).expect("GCC wrote no afdo dump");
    // GCC sets the entry block's count of each profiled function from its head count.
    let (hottest, head) = hottest_entered(ours);
    assert_eq!(
        super::gcc_dump::gcc_block_counts(&dump, &hottest).first(),
        Some(&head),
        "{hottest}'s entry block in GCC's dump"
    );
}

/// The LLVM IR clang 19 makes of `source` for `target` (`riscv64-linux-gnu`,
/// `x86_64-linux-gnu`) with the sample profile `profile` (`-O2 -g -fno-inline`), written
/// to `ir`; clang must say nothing.
pub fn clang_ir_with_profile(
    target: &str,
    source: &Path,
    profile: &Path,
    ir: &Path,
    hint: &str,
) -> String {
    let output = run_tool(
        Command::new("clang-19")
            .arg(format!("--target={target}"))
            .args(["-O2", "-g", "-fno-inline", "-S", "-emit-llvm"])
            .arg(format!("-fprofile-sample-use={}", profile.display()))
            .arg(source)
            .arg("-o")
            .arg(ir),
        hint,
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "clang warned: {stderr}");
    std::fs::read_to_string(ir).unwrap()
}

/// Every function of `ours` that `ir` defines carries its entry count (LLVM adds 1 to
/// the head count, so that a profiled function is never 0): a defined function without
/// one is a profile clang ignored. (Functions of the binary the source does not define,
/// libc's, are not in the IR.) Returns how many functions were checked.
pub fn assert_entry_counts_are_head_counts(ir: &str, ours: &TextProfile, context: &str) -> usize {
    let mut checked = 0;
    for (name, (_, head, _)) in ours {
        if !defines_function(ir, name) {
            continue;
        }
        let count = function_entry_count(ir, name).unwrap_or_else(|| {
            panic!("{context}: clang defines {name} without function_entry_count")
        });
        assert_eq!(count, head + 1, "{context}: function_entry_count of {name}");
        checked += 1;
    }
    checked
}

/// Instructions a clang 19 build of `source` (riscv64, `-O2`, static) with the sample
/// profile `profile` (or none) retires on `args` under QEMU, a deterministic count.
///
/// Every build runs as `work/measured/PROGRAM`: the C library's start-up reads the
/// program's path (`_dl_get_origin`, `strchr`) and the initial stack's alignment follows
/// the strings above it (`memset` of a stack array), so a path one byte longer alone
/// moves the count by tens of instructions, as much as the profiles differ by.
pub fn instructions_of_clang_build(
    source: &Path,
    profile: Option<&Path>,
    args: &[&str],
    work: &Path,
    hint: &str,
) -> u64 {
    static MEASURING: Mutex<()> = Mutex::new(());
    let stem = source.file_stem().unwrap().to_str().unwrap();
    let label = match profile {
        Some(profile) => profile.file_stem().unwrap().to_str().unwrap(),
        None => "no-profile",
    };
    let built = work.join(format!("{stem}-clang-{label}"));
    let mut clang = Command::new("clang-19");
    clang.args([
        "--target=riscv64-linux-gnu",
        "-O2",
        // Debian bookworm's riscv64 GNU ld crashes on clang's DWARF 5 line tables.
        "-gdwarf-4",
        "-static",
    ]);
    if let Some(profile) = profile {
        clang.arg(format!("-fprofile-sample-use={}", profile.display()));
    }
    run_tool(clang.arg(source).arg("-o").arg(&built), hint);
    let qemu =
        trace_gen::qemu::QemuUser::detect().unwrap_or_else(|error| panic!("{error}: {hint}"));
    let _measuring = MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let measured = work.join("measured");
    std::fs::create_dir_all(&measured).unwrap();
    let program = measured.join(stem);
    std::fs::copy(&built, &program).unwrap();
    rvperf_tests::execution_counts::instruction_counts(&qemu, &program, args)
        .unwrap_or_else(|error| panic!("{}: {error}", built.display()))
        .instructions
}
