//! `rvperf tandem-compare A B`: the first place two tandem-verification traces of the
//! same program (a core's and a reference model's) differ, as a tandem verifier reports
//! it; `tandem_flow::compare` does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use tandem_flow::{compare, CompareOptions, Difference, StepDecoder, TimerComparison, Trace};
use tandem_message::{csr_name, Parameters, Register, RegisterName};

use crate::trace_file::TraceFile;

#[derive(Debug, Args)]
pub struct TandemCompareArgs {
    /// The first trace (the implementation under test, say).
    a: PathBuf,
    /// The second trace (the reference model's, say).
    b: PathBuf,
    /// A register whose values may differ between the two (state the traced hart's
    /// environment changes): an ABI or CSR name (`a0`, `ft3`, `mip`), `xN`, `fN`, or a
    /// CSR address (`0x344`). Repeat. Counters, `time` and the interrupt-pending CSRs are
    /// ignored unless --compare-all.
    #[arg(long = "ignore", value_name = "REGISTER")]
    ignore: Vec<String>,
    /// Compare every register, counters and interrupt-pending bits included, and mtime.
    #[arg(long)]
    compare_all: bool,
    /// The harts' XLEN (both traces'; FLEN and MLEN are 64).
    #[arg(long, value_enum, default_value = "64")]
    xlen: XlenChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum XlenChoice {
    #[value(name = "32")]
    Bits32,
    #[value(name = "64")]
    Bits64,
}

/// What the comparison found: the exit status says it, as `cmp`'s does.
pub enum Outcome {
    Agree,
    Diverge,
}

impl Outcome {
    pub fn exit(self) -> ExitCode {
        match self {
            Outcome::Agree => ExitCode::SUCCESS,
            Outcome::Diverge => ExitCode::from(1),
        }
    }
}

/// The register a command-line name means.
fn parse_register(name: &str) -> Result<Register> {
    let lower = name.to_ascii_lowercase();
    if let Some(hex) = lower.strip_prefix("0x") {
        if let Ok(address) = u16::from_str_radix(hex, 16) {
            if address < 0x1000 {
                return Ok(Register::Csr(address));
            }
        }
    }
    for index in 0..32u8 {
        if lower == format!("x{index}")
            || lower == riscv_insn::integer_register_name(index)
            || (index == 8 && lower == "fp")
        {
            return Ok(Register::Integer(index));
        }
        if lower == format!("f{index}") || lower == riscv_insn::float_register_name(index) {
            return Ok(Register::Float(index));
        }
    }
    if let Some(address) = (0..0x1000u16).find(|&address| csr_name(address) == Some(lower.as_str()))
    {
        return Ok(Register::Csr(address));
    }
    bail!("--ignore {name}: not a register name (a0, x10, fa0, f10, mip, 0x344)")
}

fn register_text(register: Register) -> String {
    match register {
        Register::Integer(index) => format!("{} (x{index})", RegisterName(register)),
        Register::Float(index) => format!("{} (f{index})", RegisterName(register)),
        Register::Csr(address) => format!("{} (csr {address:#05x})", RegisterName(register)),
        Register::Other(_) => RegisterName(register).to_string(),
    }
}

fn value<T: std::fmt::LowerHex>(value: Option<T>) -> String {
    value.map_or_else(|| "none".to_owned(), |value| format!("{value:#x}"))
}

fn describe(difference: &Difference, names: [&str; 2]) -> String {
    let [a, b] = names;
    match difference {
        Difference::StepKind {
            a: kind_a,
            b: kind_b,
        } => {
            format!("different steps: {a} {kind_a:?}, {b} {kind_b:?}")
        }
        Difference::Pc { a: pc_a, b: pc_b } => {
            format!("pc: {a} {}, {b} {}", value(*pc_a), value(*pc_b))
        }
        Difference::Instruction {
            a: bits_a,
            b: bits_b,
        } => format!("instruction: {a} {:#x}, {b} {:#x}", bits_a.raw, bits_b.raw),
        Difference::NextPc { a: pc_a, b: pc_b } => {
            format!("next pc: {a} {}, {b} {}", value(*pc_a), value(*pc_b))
        }
        Difference::Register {
            register,
            a: value_a,
            b: value_b,
        } => format!(
            "register {}: {a} {}, {b} {}",
            register_text(*register),
            value(*value_a),
            value(*value_b)
        ),
        Difference::Privilege {
            a: mode_a,
            b: mode_b,
        } => {
            format!("privilege: {a} {mode_a:?}, {b} {mode_b:?}")
        }
        Difference::Memory {
            a: change_a,
            b: change_b,
        } => format!("memory: {a} {change_a:?}, {b} {change_b:?}"),
        Difference::Timer {
            a: time_a,
            b: time_b,
        } => {
            format!("mtime: {a} {}, {b} {}", value(*time_a), value(*time_b))
        }
        Difference::TraceEnds { which } => {
            let (ended, went_on) = match which {
                Trace::A => (a, b),
                Trace::B => (b, a),
            };
            format!("{ended} ends here; {went_on} goes on")
        }
    }
}

pub fn run(arguments: &TandemCompareArgs) -> Result<Outcome> {
    let parameters = match arguments.xlen {
        XlenChoice::Bits64 => Parameters::default(),
        XlenChoice::Bits32 => Parameters::new(
            tandem_message::Xlen::Bits32,
            tandem_message::Flen::Bits64,
            tandem_message::AddressWidth::Bits40,
        ),
    };
    let mut options = if arguments.compare_all {
        CompareOptions::default()
            .without_ignored_registers()
            .with_timer(TimerComparison::Compare)
    } else {
        CompareOptions::default()
    };
    for name in &arguments.ignore {
        options = options.with_ignored_register(parse_register(name)?);
    }
    let file_a = TraceFile::open(&arguments.a)?;
    let file_b = TraceFile::open(&arguments.b)?;
    let name_a = arguments.a.display().to_string();
    let name_b = arguments.b.display().to_string();
    let comparison = compare(
        StepDecoder::new(file_a.bytes(), parameters),
        StepDecoder::new(file_b.bytes(), parameters),
        &options,
    )
    .map_err(|error| {
        let name = match error.trace {
            Trace::A => &name_a,
            Trace::B => &name_b,
        };
        anyhow::anyhow!("{name}: {}", error.error)
    })?;
    let Some(divergence) = comparison.divergence else {
        println!(
            "{name_a} and {name_b} agree: {} steps",
            comparison.steps_compared
        );
        return Ok(Outcome::Agree);
    };
    println!(
        "{name_a} and {name_b} diverge at step {} (the {} steps before it agree)",
        divergence.step, comparison.steps_compared
    );
    for (name, position) in [
        (&name_a, divergence.position_a),
        (&name_b, divergence.position_b),
    ] {
        println!(
            "  {name}: byte offset {:#x}, pc {}",
            position.offset,
            value(position.pc)
        );
    }
    println!("  {}", describe(&divergence.difference, [&name_a, &name_b]));
    Ok(Outcome::Diverge)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_names_on_the_command_line() {
        assert_eq!(parse_register("a0").unwrap(), Register::Integer(10));
        assert_eq!(parse_register("X31").unwrap(), Register::Integer(31));
        assert_eq!(parse_register("fp").unwrap(), Register::Integer(8));
        assert_eq!(parse_register("fa1").unwrap(), Register::Float(11));
        assert_eq!(parse_register("f3").unwrap(), Register::Float(3));
        assert_eq!(parse_register("mip").unwrap(), Register::Csr(0x344));
        assert_eq!(parse_register("0x7c0").unwrap(), Register::Csr(0x7c0));
        assert!(parse_register("q9").is_err());
    }
}
