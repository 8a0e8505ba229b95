//! perf.data read as Linux perf reads it: real riscv64 recordings written by Linux perf
//! 6.12 in the guest of tools/vm (tests/fixtures/perf-guest/, made by
//! tools/fixtures/make-perf-guest-fixtures.sh), each with the guest perf's own
//! `perf script` output of it recorded in the same boot. `rvperf script` must print
//! every line exactly as the guest's perf did: command name, pid/tid, cpu, time,
//! period, event, address and symbol. `rvperf report` is compared with its own golden
//! (RVPERF_BLESS=1 rewrites it) and checked against perf's rules: kernel symbols `[k]`,
//! one section per event with samples. The host's Linux perf reads the same files.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{repository, rvperf_binary, INSTALL_HINT};

/// One recording of the fixture directory.
struct Case {
    name: &'static str,
    /// The `-F` fields the guest's perf script printed.
    fields: &'static str,
    /// The kallsyms lines of the boot it was recorded in.
    kallsyms: &'static str,
    /// perf script options beyond the fields (`-G`: no call chains, as rvperf prints).
    perf_options: &'static [&'static str],
}

const TASK_FIELDS: &str = "comm,pid,tid,time,period,event,ip,sym";
const CPU_FIELDS: &str = "comm,pid,tid,cpu,time,period,event,ip,sym";

const FIXED_PERIOD: Case = Case {
    name: "fixed-period",
    fields: TASK_FIELDS,
    kallsyms: "single.kallsyms",
    perf_options: &["-G"],
};
const THREADS_FREQ: Case = Case {
    name: "threads-freq",
    fields: TASK_FIELDS,
    kallsyms: "single.kallsyms",
    perf_options: &[],
};
const SYSTEM_WIDE: Case = Case {
    name: "system-wide",
    fields: CPU_FIELDS,
    kallsyms: "smp.kallsyms",
    perf_options: &[],
};
const NO_SAMPLES: Case = Case {
    name: "no-samples",
    fields: TASK_FIELDS,
    kallsyms: "single.kallsyms",
    perf_options: &[],
};

fn fixtures() -> PathBuf {
    repository().join("tests/fixtures/perf-guest")
}

impl Case {
    fn data(&self) -> PathBuf {
        fixtures().join(format!("{}.data", self.name))
    }

    fn file(&self, extension: &str) -> PathBuf {
        fixtures().join(format!("{}.{extension}", self.name))
    }

    /// The guest perf's `perf script` output, recorded with the fixture.
    fn perf_script(&self) -> String {
        read(&self.file("perf-script"))
    }

    /// Runs `rvperf COMMAND` on the recording with its files; returns stdout and stderr.
    fn rvperf(&self, command: &str, extra: &[&str]) -> (String, String) {
        let fixtures = fixtures();
        let mut rvperf = Command::new(rvperf_binary());
        rvperf
            .arg(command)
            .arg("-i")
            .arg(self.data())
            .arg("--symfs")
            .arg(fixtures.join("symfs"))
            .arg("--kallsyms")
            .arg(fixtures.join(self.kallsyms))
            .args(extra);
        run(&mut rvperf)
    }

    fn rvperf_script(&self) -> String {
        self.rvperf("script", &["-F", self.fields]).0
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}

fn run(command: &mut Command) -> (String, String) {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error} ({INSTALL_HINT})"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{command:?} failed: {stderr}");
    (stdout, stderr)
}

/// One line of `perf script -F comm,pid,tid[,cpu],time,period,event,ip,sym`, split
/// into its fields (for messages and checks; lines are compared whole). The command
/// name may hold spaces and slashes: pid/tid is the first `DIGITS/DIGITS` word.
fn fields_of(line: &str) -> BTreeMap<&'static str, String> {
    let mut fields = BTreeMap::new();
    let words: Vec<&str> = line.split_whitespace().collect();
    let is_number = |text: &str| {
        let digits = text.strip_prefix('-').unwrap_or(text);
        !digits.is_empty() && digits.bytes().all(|byte| byte.is_ascii_digit())
    };
    let Some(at) = words.iter().position(|word| {
        word.split_once('/')
            .is_some_and(|(pid, tid)| is_number(pid) && is_number(tid))
    }) else {
        fields.insert("line", line.to_owned());
        return fields;
    };
    fields.insert("comm", words[..at].join(" "));
    let (pid, tid) = words[at].split_once('/').unwrap_or_default();
    fields.insert("pid", pid.to_owned());
    fields.insert("tid", tid.to_owned());
    let mut rest = &words[at + 1..];
    if let Some(cpu) = rest.first().filter(|word| word.starts_with('[')) {
        fields.insert("cpu", (*cpu).to_owned());
        rest = &rest[1..];
    }
    let names = ["time", "period", "event", "ip"];
    for (name, value) in names.iter().zip(rest) {
        fields.insert(name, (*value).to_owned());
    }
    fields.insert("sym", rest.get(names.len()..).unwrap_or_default().join(" "));
    fields
}

/// Every line of `ours` equals the same line of `theirs`; on a difference, names the
/// line and the fields that differ.
fn assert_same_lines(context: &str, theirs: &str, ours: &str) {
    let theirs: Vec<&str> = theirs.lines().collect();
    let ours: Vec<&str> = ours.lines().collect();
    let mut differences = Vec::new();
    for (number, (expected, got)) in theirs.iter().zip(&ours).enumerate() {
        if expected != got {
            let (expected_fields, got_fields) = (fields_of(expected), fields_of(got));
            let differing: Vec<String> = expected_fields
                .iter()
                .filter(|(name, value)| got_fields.get(*name) != Some(*value))
                .map(|(name, value)| {
                    format!(
                        "{name}: perf {value:?}, rvperf {:?}",
                        got_fields.get(name).map_or("", String::as_str)
                    )
                })
                .collect();
            differences.push(format!(
                "line {}: {}\n  perf:   {expected}\n  rvperf: {got}",
                number + 1,
                differing.join("; ")
            ));
        }
    }
    let shown = differences.len().min(8);
    assert!(
        differences.is_empty() && theirs.len() == ours.len(),
        "{context}: {} of {} lines differ, perf printed {} lines and rvperf {}:\n{}",
        differences.len(),
        theirs.len().min(ours.len()),
        theirs.len(),
        ours.len(),
        differences[..shown].join("\n")
    );
}

/// `rvperf script` prints exactly what the guest's perf script printed.
fn script_is_perfs(case: &Case) {
    let (theirs, renamed) = without_mapping_symbols(&case.perf_script());
    let ours = case.rvperf_script();
    assert_same_lines(
        &format!(
            "rvperf script -F {} -i {}.data (perf's mapping symbols on lines {:?} read as \
             their functions)",
            case.fields,
            case.name,
            renamed.iter().map(|(line, _)| line).collect::<Vec<_>>()
        ),
        &theirs,
        &ours,
    );
}

/// The functions of the fixture's workload ELF (start, end, name), and the RISC-V
/// mapping symbols (`$x...`, `$d...`) by address.
struct WorkloadSymbols {
    functions: Vec<(u64, u64, String)>,
    mapping_symbols: BTreeMap<u64, Vec<String>>,
}

fn workload_symbols() -> WorkloadSymbols {
    use object::{Object, ObjectSymbol, SymbolKind};
    let bytes = std::fs::read(fixtures().join("symfs/opt/perf-guest/threads")).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let mut symbols = WorkloadSymbols {
        functions: Vec::new(),
        mapping_symbols: BTreeMap::new(),
    };
    for symbol in elf.symbols() {
        let Ok(name) = symbol.name() else { continue };
        if name.starts_with("$x") || name.starts_with("$d") {
            symbols
                .mapping_symbols
                .entry(symbol.address())
                .or_default()
                .push(name.to_owned());
        } else if symbol.kind() == SymbolKind::Text && symbol.size() > 0 {
            symbols.functions.push((
                symbol.address(),
                symbol.address() + symbol.size(),
                name.to_owned(),
            ));
        }
    }
    symbols
}

/// perf 6.12 (before "perf symbols: Ignore mapping symbols on riscv", 2025) reads the RISC-V
/// mapping symbols (`$x`, `$xrv64i2p1_m2p0_...`, `$d`) of an ELF as functions: a
/// mapping symbol that starts where a function does takes that function's extent, and
/// of the two perf keeps the longer name, the mapping symbol's. rvperf names the
/// function, as perf does since. Returns perf's output with each such symbol replaced
/// by the function the workload ELF has there (the sample's address inside a function
/// that starts where a mapping symbol of exactly that name is), and the lines replaced
/// (1-based) with the function names.
fn without_mapping_symbols(script: &str) -> (String, Vec<(usize, String)>) {
    let symbols = workload_symbols();
    let mut renamed = Vec::new();
    let mut lines = Vec::new();
    for (index, line) in script.lines().enumerate() {
        let fields = fields_of(line);
        let symbol = fields.get("sym").map_or("", String::as_str);
        let function = (symbol.starts_with("$x") || symbol.starts_with("$d"))
            .then(|| u64::from_str_radix(&fields["ip"], 16).ok())
            .flatten()
            .and_then(|ip| {
                symbols
                    .functions
                    .iter()
                    .find(|(start, end, _)| (*start..*end).contains(&ip))
            })
            .filter(|(start, _, _)| {
                symbols
                    .mapping_symbols
                    .get(start)
                    .is_some_and(|names| names.iter().any(|name| name == symbol))
            });
        match function {
            Some((_, _, name)) => {
                let kept = line.strip_suffix(symbol).unwrap_or(line);
                lines.push(format!("{kept}{name}"));
                renamed.push((index + 1, name.clone()));
            }
            None => lines.push(line.to_owned()),
        }
    }
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    (text, renamed)
}

/// The period column of perf script lines, summed.
fn period_sum(script: &str) -> u64 {
    script
        .lines()
        .map(|line| {
            fields_of(line)["period"]
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("no period in {line:?}"))
        })
        .sum()
}

/// `rvperf flamegraph` weighs each sample by perf's period: the folded stacks hold as
/// many events as perf script's periods add up to.
fn flamegraph_weighs_perfs_periods(case: &Case) {
    let (folded, _) = case.rvperf("flamegraph", &["--folded", "-o", "-"]);
    let weight: u64 = folded
        .lines()
        .map(|line| {
            line.rsplit_once(' ')
                .and_then(|(_, count)| count.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("bad folded line {line:?}"))
        })
        .sum();
    assert_eq!(
        weight,
        period_sum(&case.perf_script()),
        "{}: flame graph weight against perf script's periods",
        case.name
    );
}

/// `rvperf report` is its golden (RVPERF_BLESS=1 rewrites it; a missing golden fails),
/// and follows perf's rules: a section per event with samples, headed with that event's
/// sample count as perf script counts it; kernel symbols `[k]`, user symbols `[.]`.
fn report_is_golden(case: &Case) {
    let (report, stderr) = case.rvperf("report", &["--top", "1000"]);
    let golden = case.file("rvperf-report");
    if std::env::var("RVPERF_BLESS").as_deref() == Ok("1") {
        std::fs::write(&golden, &report).unwrap();
    }
    assert!(
        golden.is_file(),
        "{} is missing: run RVPERF_BLESS=1 cargo test -p rvperf-tests --test perf_guest_golden, \
         and review it",
        golden.display()
    );
    assert_eq!(
        report,
        read(&golden),
        "rvperf report of {}.data against {} (RVPERF_BLESS=1 rewrites it)",
        case.name,
        golden.display()
    );

    let script = case.perf_script();
    let mut samples_per_event: BTreeMap<String, u64> = BTreeMap::new();
    for line in script.lines() {
        let event = fields_of(line)["event"].trim_end_matches(':').to_owned();
        *samples_per_event.entry(event).or_default() += 1;
    }
    let headers: Vec<&str> = report
        .lines()
        .filter(|line| line.starts_with("# Samples:"))
        .collect();
    let mut expected: Vec<String> = samples_per_event
        .iter()
        .map(|(event, samples)| format!("# Samples: {samples} of event '{event}'"))
        .collect();
    expected.sort_unstable();
    let mut sorted_headers = headers.clone();
    sorted_headers.sort_unstable();
    assert_eq!(sorted_headers, expected, "{}: report sections", case.name);
    if samples_per_event.is_empty() {
        assert!(stderr.contains("has no samples"), "{stderr}");
    }
    // Kernel symbols are [k], the others [.] (there is no hypervisor or guest here).
    for (event, rows) in report_rows(&report) {
        for (row, symbol) in rows {
            let kernel = row.contains(" [kernel.kallsyms] ");
            assert!(
                row.ends_with(if kernel { " [k]" } else { " [.]" }),
                "{} '{event}': {row} {symbol}",
                case.name
            );
        }
    }
}

/// A row of a report: `overhead comm dso [level]`, and the symbol.
type ReportRow = (String, String);

/// The rows of each event's section of a `perf report --stdio --sort comm,dso,sym` or
/// `rvperf report` output, sorted (rows of equal overhead come in no defined order).
fn report_rows(report: &str) -> BTreeMap<String, Vec<ReportRow>> {
    let mut sections: BTreeMap<String, Vec<ReportRow>> = BTreeMap::new();
    let mut event = None;
    for line in report.lines() {
        if let Some(header) = line.strip_prefix("# Samples: ") {
            let name = header
                .split_once(" of event '")
                .and_then(|(_, rest)| rest.strip_suffix('\''))
                .unwrap_or_else(|| panic!("bad header {line:?}"));
            event = Some(name.to_owned());
            sections.entry(name.to_owned()).or_default();
            continue;
        }
        // Rows start with their overhead; call graph lines under them do not.
        if line.starts_with('#')
            || !line
                .split_whitespace()
                .next()
                .is_some_and(|word| word.ends_with('%'))
        {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(level_at) = words
            .iter()
            .position(|word| word.len() == 3 && word.starts_with('[') && word.ends_with(']'))
            .filter(|&at| at >= 3)
        else {
            panic!("bad report row {line:?}");
        };
        let row = (
            format!(
                "{} {} {} {}",
                words[0],
                words[1..level_at - 1].join(" "),
                words[level_at - 1],
                words[level_at]
            ),
            words[level_at + 1..].join(" "),
        );
        let event = event
            .as_ref()
            .unwrap_or_else(|| panic!("row before a header: {line:?}"));
        sections.entry(event.clone()).or_default().push(row);
    }
    for rows in sections.values_mut() {
        rows.sort_unstable();
    }
    sections
}

/// `rvperf report` has the sections and rows the guest's `perf report` printed: the same
/// events, and in each the same overhead, command, shared object, level (`[k]` kernel,
/// `[.]` user) and symbol, functions of one name apart. A row perf named after a RISC-V
/// mapping symbol ([`without_mapping_symbols`]) must be a row of rvperf with all the
/// same but the symbol, which must be one of the functions perf script's lines named
/// that way.
fn report_rows_are_perfs(case: &Case) {
    let (report, _) = case.rvperf("report", &["--top", "100000"]);
    let theirs = report_rows(&read(&case.file("perf-report")));
    let ours = report_rows(&report);
    let (_, renamed) = without_mapping_symbols(&case.perf_script());
    let behind_mapping_symbols: Vec<&String> = renamed.iter().map(|(_, name)| name).collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "{}: the events of the report",
        case.name
    );
    for (event, their_rows) in &theirs {
        let mut our_rows = ours[event].clone();
        let mut only_perf = Vec::new();
        let mut mapping_named = Vec::new();
        for row in their_rows {
            if let Some(at) = our_rows.iter().position(|ours| ours == row) {
                our_rows.remove(at);
            } else if row.1.starts_with("$x") || row.1.starts_with("$d") {
                mapping_named.push(row);
            } else {
                only_perf.push(row);
            }
        }
        // What is left of ours pairs with perf's mapping-symbol rows.
        for row in mapping_named {
            match our_rows
                .iter()
                .position(|ours| ours.0 == row.0 && behind_mapping_symbols.contains(&&ours.1))
            {
                Some(at) => {
                    our_rows.remove(at);
                }
                None => only_perf.push(row),
            }
        }
        assert!(
            only_perf.is_empty() && our_rows.is_empty(),
            "{} '{event}': rvperf report rows differ from perf report's\nonly perf: \
             {only_perf:#?}\nonly rvperf: {our_rows:#?}",
            case.name
        );
    }
}

/// A copy of a perf.data file whose attrs section holds `perf_event_attr`s of 128 bytes
/// (PERF_ATTR_SIZE_VER7), the largest perf before 6.3 reads: perf 6.12 writes 136, with
/// `config3`, which must be 0 for the copy to mean the same. The section stays where it
/// is, shorter; EVENT_DESC keeps the long attrs, which perf reads whatever their size.
fn with_version7_attrs(bytes: &[u8]) -> Vec<u8> {
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let entry_size = usize::try_from(u64_at(16)).unwrap();
    let offset = usize::try_from(u64_at(24)).unwrap();
    let size = usize::try_from(u64_at(32)).unwrap();
    let mut packed = Vec::new();
    let entries = bytes[offset..offset + size].chunks_exact(entry_size);
    let count = entries.len();
    for entry in entries {
        let attr_size = u32::from_le_bytes(entry[4..8].try_into().unwrap()) as usize;
        // perf_file_attr: the attr, then the file section of its ids.
        assert_eq!(attr_size + 16, entry_size, "attr size against the file's");
        let kept = attr_size.min(128);
        assert!(
            entry[kept..attr_size].iter().all(|&byte| byte == 0),
            "an attr uses fields past perf_event_attr version 7 (config3)"
        );
        packed.extend_from_slice(&entry[..4]);
        packed.extend_from_slice(&(kept as u32).to_le_bytes());
        packed.extend_from_slice(&entry[8..kept]);
        packed.extend_from_slice(&entry[attr_size..]);
    }
    let mut copy = bytes.to_vec();
    copy[offset..offset + packed.len()].copy_from_slice(&packed);
    let new_entry_size = packed.len() / count.max(1);
    copy[16..24].copy_from_slice(&(new_entry_size as u64).to_le_bytes());
    copy[32..40].copy_from_slice(&(packed.len() as u64).to_le_bytes());
    copy
}

/// The host's Linux perf reads the recording as the guest's did. The host's perf is
/// older (6.1 on bookworm), which shows in three ways, each allowed for exactly: it
/// reads the file only with attrs of the size it knows ([`with_version7_attrs`]); it
/// prints pid/tid in narrower columns, so lines are compared with their runs of spaces
/// folded; and it keeps exited threads (perf 6.8 forgets them at EXIT), so a sample
/// perf 6.12 shows as `:TID` after its thread's EXIT may carry the name the thread had
/// before, as the guest printed it on an earlier line.
fn host_perf_agrees(case: &Case) {
    let fixtures = fixtures();
    let copy = common::scratch().join(format!(
        "perf-guest-{}-{}.data",
        case.name,
        std::process::id()
    ));
    std::fs::write(
        &copy,
        with_version7_attrs(&std::fs::read(case.data()).unwrap()),
    )
    .unwrap();
    let mut perf = common::perf_for_recordings();
    perf.arg("script")
        .arg("-i")
        .arg(&copy)
        .arg("--symfs")
        .arg(fixtures.join("symfs"))
        .arg("--kallsyms")
        .arg(fixtures.join(case.kallsyms))
        .args(["-F", case.fields])
        .args(case.perf_options);
    let (host, _) = run(&mut perf);
    let _ = std::fs::remove_file(&copy);
    let fold = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    let guest: Vec<String> = case.perf_script().lines().map(fold).collect();
    let host: Vec<String> = host.lines().map(fold).collect();
    // The name the guest last printed for each tid.
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut accepted = Vec::new();
    for (number, (theirs, ours)) in guest.iter().zip(&host).enumerate() {
        let (their_fields, mut our_fields) = (fields_of(theirs), fields_of(ours));
        let tid = their_fields.get("tid").cloned().unwrap_or_default();
        if theirs != ours && their_fields.get("comm") == Some(&format!(":{tid}")) {
            let earlier = names.get(&tid);
            if earlier.is_some() && our_fields.get("comm") == earlier {
                our_fields.insert("comm", format!(":{tid}"));
                if our_fields == their_fields {
                    accepted.push(number + 1);
                    continue;
                }
            }
        }
        if let Some(comm) = their_fields.get("comm") {
            names.insert(tid, comm.clone());
        }
    }
    let host_text: Vec<String> = host
        .iter()
        .enumerate()
        .map(|(index, line)| {
            if accepted.contains(&(index + 1)) {
                guest[index].clone()
            } else {
                line.clone()
            }
        })
        .collect();
    assert_same_lines(
        &format!(
            "host perf script of {}.data (lines {accepted:?} accepted as perf before 6.8 \
             prints them)",
            case.name
        ),
        &guest.join("\n"),
        &host_text.join("\n"),
    );
}

#[test]
fn fixed_period_script_is_perfs() {
    let case = FIXED_PERIOD;
    // The fixture is what it says: many samples, all of the attr's period, none with
    // PERIOD recorded.
    let script = case.perf_script();
    assert!(script.lines().count() > 200, "{script}");
    assert!(
        script
            .lines()
            .all(|line| fields_of(line)["period"] == "100000"),
        "perf printed another period than -c 100000"
    );
    script_is_perfs(&case);
}

#[test]
fn fixed_period_report_and_flamegraph_weigh_the_attrs_period() {
    report_rows_are_perfs(&FIXED_PERIOD);
    report_is_golden(&FIXED_PERIOD);
    flamegraph_weighs_perfs_periods(&FIXED_PERIOD);
}

#[test]
fn frequency_mode_threads_script_is_perfs() {
    let case = THREADS_FREQ;
    // The workers are sampled under the name they inherited and under their own.
    let script = case.perf_script();
    let comms: Vec<String> = script
        .lines()
        .map(|line| fields_of(line)["comm"].clone())
        .collect();
    assert!(
        comms.iter().any(|comm| comm == "threads")
            && (1..=3).all(|worker| comms.contains(&format!("worker-{worker}"))),
        "{comms:?}"
    );
    script_is_perfs(&case);
}

#[test]
fn frequency_mode_threads_report_and_flamegraph() {
    report_rows_are_perfs(&THREADS_FREQ);
    report_is_golden(&THREADS_FREQ);
    flamegraph_weighs_perfs_periods(&THREADS_FREQ);
}

#[test]
fn system_wide_two_events_script_is_perfs() {
    let case = SYSTEM_WIDE;
    // Two events, each sampled, each with its own fixed period.
    let script = case.perf_script();
    let mut periods: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for fields in script.lines().map(fields_of) {
        periods
            .entry(fields["event"].clone())
            .or_default()
            .insert(fields["period"].clone());
    }
    assert_eq!(periods.len(), 2, "{periods:?}");
    assert!(
        periods.values().all(|periods| periods.len() == 1)
            && periods
                .values()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == 2,
        "{periods:?}"
    );
    script_is_perfs(&case);
}

#[test]
fn system_wide_two_events_report_and_flamegraph() {
    report_rows_are_perfs(&SYSTEM_WIDE);
    report_is_golden(&SYSTEM_WIDE);
    flamegraph_weighs_perfs_periods(&SYSTEM_WIDE);
}

#[test]
fn a_file_without_samples_prints_nothing() {
    let case = NO_SAMPLES;
    assert_eq!(case.perf_script(), "", "the fixture has samples");
    script_is_perfs(&case);
    report_rows_are_perfs(&case);
    report_is_golden(&case);
}

#[test]
fn host_perf_reads_the_recordings_as_the_guest_perf_did() {
    for case in [FIXED_PERIOD, THREADS_FREQ, SYSTEM_WIDE, NO_SAMPLES] {
        host_perf_agrees(&case);
    }
}
