//! `rvperf-check-brstack`: checks a branch-stack recording, as Linux `perf script -F
//! comm,tid,ip,brstack` prints it, against the static riscv64 ELF that ran. Used by the
//! VM tier (tools/vm/test) on recordings made through the rvperf_ctr PMU.
//!
//!     rvperf-check-brstack --elf FILE --script FILE --comm NAME [--calls-only]
//!                          [--user-only] [--edge CALLER:CALLEE]... [--apart A:B]
//!
//! For every entry of every sample (not a sample of them): `from` is a control-transfer
//! instruction of the ELF and `to` a target it can reach (the encoded target of a direct
//! jump, call or branch; an instruction of the ELF for an indirect one). `--calls-only`:
//! every entry is a call; `--call-chain`: each sample is a call stack, newest first (the
//! call recorded after each one was made from inside its callee: CTR's RAS emulation);
//! `--user-only`: no kernel address anywhere; `--edge`: the call
//! from CALLER to CALLEE was recorded at least once; `--apart`: no sample mixes functions
//! named PREFIX_A* with functions named PREFIX_B* (two tasks that run alternately).
//! Samples of other commands (NAME is the ELF's) are counted and skipped. Prints a
//! summary; exits 1 naming the first violations.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;

use code_image::{load_elf, CodeImage, SymbolTable};
use riscv_insn::{decode, ControlFlow, DecodeOptions, Xlen};

struct Options {
    comm: String,
    elf: String,
    script: String,
    calls_only: bool,
    call_chain: bool,
    user_only: bool,
    edges: Vec<(String, String)>,
    apart: Option<(String, String)>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        comm: String::new(),
        elf: String::new(),
        script: String::new(),
        calls_only: false,
        call_chain: false,
        user_only: false,
        edges: Vec::new(),
        apart: None,
    };
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
    symbols: SymbolTable,
    options: DecodeOptions,
}

impl Checker {
    fn function(&self, address: u64) -> Option<&str> {
        self.symbols
            .lookup(address)
            .map(|(symbol, _)| symbol.name.as_str())
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
    let mut symbols = SymbolTable::default();
    let info = load_elf(&mut image, &mut symbols, &options.elf, &bytes, None)
        .map_err(|e| e.to_string())?;
    symbols.finish();
    let checker = Checker {
        image,
        symbols,
        options: DecodeOptions {
            xlen: Xlen::Rv64,
            zcmp: info.zcmp,
            zcmt: info.zcmt,
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
        for field in &fields[3..] {
            let Some((from, to)) = parse_entry(field) else {
                violations.push(format!("line {}: unreadable entry {field}", number + 1));
                continue;
            };
            entries += 1;
            if options.user_only && (from >= 1 << 63 || to >= 1 << 63) {
                violations.push(format!("line {}: kernel address in {field}", number + 1));
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
                    if expected != callee {
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
        if let Some((a, b)) = &options.apart {
            let has_a = touched.iter().any(|f| f.starts_with(a.as_str()));
            let has_b = touched.iter().any(|f| f.starts_with(b.as_str()));
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
