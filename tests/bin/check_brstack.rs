//! `rvperf-check-brstack`: checks a branch-stack recording, as Linux `perf script -F
//! comm,tid,ip,brstack` prints it, against the static riscv64 ELF that ran. Used by the
//! VM tier (tools/vm/test) on recordings made through the rvperf_ctr PMU.
//!
//!     rvperf-check-brstack --elf FILE --script FILE --comm NAME [--calls-only]
//!                          [--call-chain] [--user-only] [--edge CALLER:CALLEE]...
//!                          [--apart A:B [--apart-min N]]
//!                          [--min-entries N --min-share F] [--fresh-newest F]
//!                          [--ip-in FUNCTION[,FUNCTION...]] [--skip-kernel-entries]
//!
//! For every entry of every sample (not a sample of them): `from` is a control-transfer
//! instruction of the ELF and `to` a target it can reach (the encoded target of a direct
//! jump, call or branch; an instruction of the ELF for an indirect one). `--calls-only`:
//! every entry is a call; `--call-chain`: each sample is a call stack, newest first (the
//! call recorded after each one was made from inside its callee: CTR's RAS emulation);
//! `--user-only`: no kernel address anywhere; `--skip-kernel-entries`: entries with a
//! kernel address (recordings with kernel branches: traps, the kernel's own transfers)
//! are counted but not checked against the ELF; `--edge`: the call
//! from CALLER to CALLEE was recorded at least once; `--apart`: no sample mixes functions
//! named PREFIX_A* with functions named PREFIX_B* (two tasks that run alternately), and
//! with `--apart-min N` at least N samples touch A* functions and at least N touch B*
//! ones, so that the separation is not passed for want of data.
//!
//! Whole samples: `--min-entries N --min-share F`: at least the share F (0 to 1) of the
//! command's samples hold N or more entries (call stacks not cut: a program sitting at
//! recursion depth D under `-j call_stack` has D entries in nearly every sample); with
//! `--ip-in F[,F...]` only the samples whose ip lies in one of those functions count
//! (the program's own work, not its start-up and exit in the C library).
//! `--fresh-newest F`: of the samples whose ip is a user address of the ELF and that
//! hold an entry, at least the share F are fresh: their newest entry with a user
//! address leads to the ip (`to <= ip < to + 512`: a branch, or a return from a trap),
//! or is a trap taken at it (`from == ip`); kernel entries newer than it are the
//! kernel's own work after the trap. A record whose
//! branch history stopped (was frozen) at some earlier moment has a newest entry
//! unrelated to its ip. (Meant for recordings of every taken branch, `-j any`: with a
//! filter, the code after the newest recorded branch may have branched elsewhere.)
//! Each of these options prints one summary line with its figure.
//!
//! Samples of other commands (NAME is the ELF's) are counted and skipped. Prints a
//! summary; exits 1 naming the first violations.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use code_image::{load_elf, CodeImage};
use riscv_insn::{decode, ControlFlow, DecodeOptions, Xlen};
use symbolize::{FunctionTable, ObjectSymbolizer};

struct Options {
    comm: String,
    elf: String,
    script: String,
    calls_only: bool,
    call_chain: bool,
    user_only: bool,
    skip_kernel_entries: bool,
    edges: Vec<(String, String)>,
    apart: Option<(String, String)>,
    /// With `apart`: samples each side must have at least.
    apart_min: Option<u64>,
    /// Entries a sample must hold, and the share of samples that must.
    min_entries: Option<(usize, f64)>,
    /// With `min_entries`: only samples whose ip is in one of these functions count.
    ip_in: Vec<String>,
    /// The share of eligible samples whose newest entry must be fresh.
    fresh_newest: Option<f64>,
}

/// How far past the newest entry's target a fresh sample's ip may lie. With every taken
/// branch recorded, the ip is in the straight-line code that follows the target, which
/// 512 bytes (128 to 256 instructions) cover with room to spare.
const FRESH_WINDOW: u64 = 512;

/// A share given on the command line: a number from 0 to 1.
fn parse_share(name: &str, text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("{name} takes a share from 0 to 1, got {text}")),
    }
}

fn parse_count<T: std::str::FromStr>(name: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{name} takes a whole number, got {text}"))
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        comm: String::new(),
        elf: String::new(),
        script: String::new(),
        calls_only: false,
        call_chain: false,
        user_only: false,
        skip_kernel_entries: false,
        edges: Vec::new(),
        apart: None,
        apart_min: None,
        min_entries: None,
        ip_in: Vec::new(),
        fresh_newest: None,
    };
    let mut min_entries = None;
    let mut min_share = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--elf" => options.elf = value("--elf")?,
            "--comm" => options.comm = value("--comm")?,
            "--script" => options.script = value("--script")?,
            "--calls-only" => options.calls_only = true,
            "--call-chain" => options.call_chain = true,
            "--user-only" => options.user_only = true,
            "--skip-kernel-entries" => options.skip_kernel_entries = true,
            "--apart-min" => {
                options.apart_min = Some(parse_count(&arg, &value(&arg)?)?);
            }
            "--min-entries" => min_entries = Some(parse_count::<usize>(&arg, &value(&arg)?)?),
            "--ip-in" => {
                options.ip_in = value(&arg)?.split(',').map(str::to_owned).collect();
            }
            "--min-share" => min_share = Some(parse_share(&arg, &value(&arg)?)?),
            "--fresh-newest" => {
                options.fresh_newest = Some(parse_share(&arg, &value(&arg)?)?);
            }
            "--edge" | "--apart" => {
                let text = value(&arg)?;
                let (a, b) = text
                    .split_once(':')
                    .ok_or(format!("{arg} takes A:B, got {text}"))?;
                let pair = (a.to_owned(), b.to_owned());
                if arg == "--edge" {
                    options.edges.push(pair);
                } else {
                    options.apart = Some(pair);
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if options.elf.is_empty() || options.script.is_empty() || options.comm.is_empty() {
        return Err("--elf, --script and --comm are required".to_owned());
    }
    options.min_entries = match (min_entries, min_share) {
        (Some(entries), Some(share)) => Some((entries, share)),
        (None, None) => None,
        _ => return Err("--min-entries and --min-share go together".to_owned()),
    };
    if options.apart_min.is_some() && options.apart.is_none() {
        return Err("--apart-min needs --apart A:B".to_owned());
    }
    Ok(options)
}

/// One `0xFROM/0xTO/...` field of perf's brstack output.
fn parse_entry(field: &str) -> Option<(u64, u64)> {
    let mut parts = field.split('/');
    let from = u64::from_str_radix(parts.next()?.strip_prefix("0x")?, 16).ok()?;
    let to = u64::from_str_radix(parts.next()?.strip_prefix("0x")?, 16).ok()?;
    Some((from, to))
}

struct Checker {
    image: CodeImage,
    functions: FunctionTable,
    options: DecodeOptions,
}

impl Checker {
    fn function(&self, address: u64) -> Option<&str> {
        self.functions
            .lookup(address)
            .map(|(function, _)| function.name.as_str())
    }

    /// Whether function `from` reaches function `to` by tail calls (direct jumps
    /// without a link, which RAS emulation does not record), through at most three
    /// functions: a call stack in which `to` made the newer call while the older entry
    /// entered `from` is then whole. (`__libc_init_first` ending in a jump to
    /// `__init_misc`, for instance.)
    fn tail_calls(&self, from: &str, to: &str) -> bool {
        let mut frontier = vec![from.to_owned()];
        for _ in 0..3 {
            let mut next = Vec::new();
            for function in &frontier {
                for target in self.tail_jump_targets(function) {
                    if target == to {
                        return true;
                    }
                    next.push(target);
                }
            }
            frontier = next;
        }
        false
    }

    /// The functions that `name`'s direct jumps without a link land in, other than itself.
    fn tail_jump_targets(&self, name: &str) -> Vec<String> {
        let Some(symbol) = self.functions.named(name) else {
            return Vec::new();
        };
        let mut targets = Vec::new();
        let mut address = symbol.address;
        let end = symbol.address.saturating_add(symbol.size);
        while address < end {
            let Some(raw) = self.image.read_le::<4>(address).or_else(|| {
                self.image
                    .read_le::<2>(address)
                    .map(|half| [half[0], half[1], 0, 0])
            }) else {
                break;
            };
            let Ok(instruction) = decode(u32::from_le_bytes(raw), self.options) else {
                break;
            };
            if let ControlFlow::Jump { rd: 0, .. } = instruction.control_flow {
                if let Some(target) = instruction.direct_target(address, Xlen::Rv64) {
                    if let Some(function) = self.function(target) {
                        if function != name && !targets.iter().any(|t: &String| t == function) {
                            targets.push(function.to_owned());
                        }
                    }
                }
            }
            address += u64::from(instruction.length);
        }
        targets
    }

    fn executable(&self, address: u64) -> bool {
        self.image.segment_index(address).is_some()
    }

    /// Why (from, to) is not a transfer this ELF can make, or its control flow.
    fn check(&self, from: u64, to: u64) -> Result<ControlFlow, String> {
        let raw = self
            .image
            .read_le::<4>(from)
            .or_else(|| {
                // A 16-bit instruction at the very end of a segment.
                self.image
                    .read_le::<2>(from)
                    .map(|half| [half[0], half[1], 0, 0])
            })
            .ok_or(format!("from {from:#x} is outside the ELF"))?;
        let instruction = decode(u32::from_le_bytes(raw), self.options)
            .map_err(|error| format!("from {from:#x}: {error}"))?;
        match instruction.control_flow {
            ControlFlow::Sequential => Err(format!(
                "from {from:#x} ({}) is not a control transfer: {instruction}",
                self.function(from).unwrap_or("?")
            )),
            flow => {
                if let Some(target) = instruction.direct_target(from, Xlen::Rv64) {
                    if target != to {
                        return Err(format!(
                            "{from:#x} {instruction} goes to {target:#x}, recorded to {to:#x}"
                        ));
                    }
                } else if !self.executable(to) || to % 2 != 0 {
                    return Err(format!(
                        "{from:#x} {instruction}: target {to:#x} is not code of the ELF"
                    ));
                }
                Ok(flow)
            }
        }
    }
}

fn is_call(flow: &ControlFlow) -> bool {
    match flow {
        ControlFlow::Jump { rd, .. } | ControlFlow::JumpRegister { rd, .. } => {
            riscv_insn::is_link_register(*rd)
        }
        ControlFlow::TableJump { index } => *index >= 32,
        _ => false,
    }
}

fn run(options: &Options) -> Result<bool, String> {
    let bytes = std::fs::read(&options.elf).map_err(|e| format!("{}: {e}", options.elf))?;
    let mut image = CodeImage::new();
    let info = load_elf(&mut image, &options.elf, &bytes, None).map_err(|e| e.to_string())?;
    let functions = ObjectSymbolizer::new(&options.elf, bytes)
        .map_err(|e| e.to_string())?
        .function_table();
    let checker = Checker {
        image,
        functions,
        options: DecodeOptions {
            xlen: Xlen::Rv64,
            ..info.riscv().unwrap_or_default().options
        },
    };
    let script =
        std::fs::read_to_string(&options.script).map_err(|e| format!("{}: {e}", options.script))?;

    let mut samples = 0u64;
    let mut other_commands = 0u64;
    let mut entries = 0u64;
    let mut calls = 0u64;
    let mut violations = Vec::new();
    let mut edges: BTreeMap<(String, String), u64> = BTreeMap::new();
    // --min-entries: samples holding enough entries.
    let mut long_enough = 0u64;
    let mut counted_for_entries = 0u64;
    // --fresh-newest: samples it judges, those that are fresh, and the first stale ones.
    let mut fresh_eligible = 0u64;
    let mut fresh = 0u64;
    let mut stale = Vec::new();
    // --apart: samples touching each side's functions.
    let (mut touching_a, mut touching_b) = (0u64, 0u64);
    for (number, line) in script.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // comm, tid, ip, then the entries.
        if fields.len() < 3 {
            continue;
        }
        if fields[0] != options.comm {
            other_commands += 1;
            continue;
        }
        samples += 1;
        let ip = u64::from_str_radix(fields[2].trim_start_matches("0x"), 16).ok();
        let mut touched = BTreeSet::new();
        if let Some(function) = ip.and_then(|ip| checker.function(ip)) {
            touched.insert(function.to_owned());
        }
        let mut previous_caller: Option<String> = None;
        let mut sample_entries = 0usize;
        // Newest first: the first entry with a user address.
        let newest_user = fields
            .iter()
            .skip(3)
            .filter_map(|field| parse_entry(field))
            .find(|&(from, to)| from < 1 << 63 || to < 1 << 63);
        if let (Some(ip), Some((from, to))) = (ip, newest_user) {
            if ip < 1 << 63 && checker.executable(ip) {
                fresh_eligible += 1;
                if (to <= ip && ip < to.saturating_add(FRESH_WINDOW)) || from == ip {
                    fresh += 1;
                } else if stale.len() < 3 {
                    let name = |address| checker.function(address).unwrap_or("?");
                    stale.push(format!(
                        "line {}: ip {ip:#x} ({}), newest entry {from:#x} ({}) -> {to:#x} ({})",
                        number + 1,
                        name(ip),
                        name(from),
                        name(to)
                    ));
                }
            }
        }
        for field in &fields[3..] {
            let Some((from, to)) = parse_entry(field) else {
                violations.push(format!("line {}: unreadable entry {field}", number + 1));
                continue;
            };
            entries += 1;
            sample_entries += 1;
            if options.user_only && (from >= 1 << 63 || to >= 1 << 63) {
                violations.push(format!("line {}: kernel address in {field}", number + 1));
                continue;
            }
            if options.skip_kernel_entries && (from >= 1 << 63 || to >= 1 << 63) {
                continue;
            }
            match checker.check(from, to) {
                Ok(flow) => {
                    let call = is_call(&flow);
                    if call {
                        calls += 1;
                        if let (Some(caller), Some(callee)) =
                            (checker.function(from), checker.function(to))
                        {
                            *edges
                                .entry((caller.to_owned(), callee.to_owned()))
                                .or_default() += 1;
                        }
                    } else if options.calls_only {
                        violations.push(format!(
                            "line {}: {from:#x}->{to:#x} is not a call",
                            number + 1
                        ));
                    }
                }
                Err(why) => violations.push(format!("line {}: {why}", number + 1)),
            }
            if options.call_chain {
                // Newest first: this entry's call was made by the function that the
                // next (older) entry called.
                let callee = checker.function(to).map(str::to_owned);
                if let (Some(expected), Some(callee)) = (&previous_caller, &callee) {
                    if expected != callee && !checker.tail_calls(callee, expected) {
                        violations.push(format!(
                            "line {}: call stack broken: {field} enters {callee}, but the \
                             newer call was made from {expected}",
                            number + 1
                        ));
                    }
                }
                previous_caller = checker.function(from).map(str::to_owned);
            }
            for address in [from, to] {
                if let Some(function) = checker.function(address) {
                    touched.insert(function.to_owned());
                }
            }
        }
        let ip_counts = options.ip_in.is_empty()
            || ip
                .and_then(|ip| checker.function(ip))
                .is_some_and(|function| options.ip_in.iter().any(|name| name == function));
        if let (Some((minimum, _)), true) = (options.min_entries, ip_counts) {
            counted_for_entries += 1;
            long_enough += u64::from(sample_entries >= minimum);
        }
        if let Some((a, b)) = &options.apart {
            let has_a = touched.iter().any(|f| f.starts_with(a.as_str()));
            let has_b = touched.iter().any(|f| f.starts_with(b.as_str()));
            touching_a += u64::from(has_a);
            touching_b += u64::from(has_b);
            if has_a && has_b {
                violations.push(format!(
                    "line {}: one sample holds both {a}* and {b}* branches: {touched:?}",
                    number + 1
                ));
            }
        }
    }
    println!(
        "{samples} samples of {} ({other_commands} of other commands skipped), {entries} \
         branch entries, {calls} calls, {} distinct call edges",
        options.comm,
        edges.len()
    );
    for (caller, callee) in &options.edges {
        let count = edges
            .get(&(caller.clone(), callee.clone()))
            .copied()
            .unwrap_or(0);
        println!("call edge {caller} -> {callee}: {count}");
        if count == 0 {
            violations.push(format!("call edge {caller} -> {callee} never recorded"));
        }
    }
    if let Some((minimum, asked)) = options.min_entries {
        let found = share(long_enough, counted_for_entries);
        let which = if options.ip_in.is_empty() {
            String::new()
        } else {
            format!(" with the ip in {}", options.ip_in.join(", "))
        };
        println!(
            "samples{which} with {minimum} or more entries: {long_enough} of \
             {counted_for_entries} (share {found:.3}, at least {asked} asked)"
        );
        if counted_for_entries == 0 {
            violations.push(format!("no sample{which} to count entries of"));
        } else if found < asked {
            violations.push(format!(
                "only a share of {found:.3} of the samples{which} of {} hold {minimum} or \
                 more branch entries ({long_enough} of {counted_for_entries}), at least \
                 {asked} asked",
                options.comm
            ));
        }
    }
    if let Some(asked) = options.fresh_newest {
        let found = share(fresh, fresh_eligible);
        println!(
            "samples whose newest entry leads to their ip: {fresh} of {fresh_eligible} with \
             a user ip in the ELF and an entry (share {found:.3}, at least {asked} asked)"
        );
        if fresh_eligible == 0 {
            violations.push(
                "no sample has a user ip in the ELF and a branch entry: freshness cannot be \
                 judged"
                    .to_owned(),
            );
        } else if found < asked {
            violations.push(format!(
                "only a share of {found:.3} of the samples have a fresh newest entry ({fresh} \
                 of {fresh_eligible}), at least {asked} asked; stale: {}",
                stale.join("; ")
            ));
        }
    }
    if let Some((a, b)) = &options.apart {
        println!("samples touching {a}*: {touching_a}, touching {b}*: {touching_b}");
        if let Some(minimum) = options.apart_min {
            for (prefix, count) in [(a, touching_a), (b, touching_b)] {
                if count < minimum {
                    violations.push(format!(
                        "only {count} samples touch {prefix}* functions, at least {minimum} \
                         asked: too few to show the two apart"
                    ));
                }
            }
        }
    }
    if samples == 0 || entries == 0 {
        violations.push("no samples or no branch entries".to_owned());
    }
    for violation in violations.iter().take(20) {
        println!("VIOLATION {violation}");
    }
    if violations.len() > 20 {
        println!("... {} violations in all", violations.len());
    }
    Ok(violations.is_empty())
}

/// `part` over `whole`; 0 for nothing at all (the callers report that case apart).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn main() -> ExitCode {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("rvperf-check-brstack: {message}");
            return ExitCode::from(2);
        }
    };
    match run(&options) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("rvperf-check-brstack: {message}");
            ExitCode::from(2)
        }
    }
}
