//! Shared by the integration tests: compiling the test programs with the
//! host and riscv64 toolchains, and running binutils to compare against.
//! A missing tool fails the test (tools/install-deps.sh installs them): a
//! test that skips itself would show as a pass.

#![allow(dead_code, reason = "each test binary uses a different part")]

use std::path::{Path, PathBuf};
use std::process::Command;

pub const INLINE_C: &str = include_str!("../programs/inline.c");
pub const KLASS_CPP: &str = include_str!("../programs/klass.cpp");

/// Runs `command`, panicking with its stderr when it fails; returns stdout.
pub fn run(command: &mut Command) -> String {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("cannot run {command:?}: {error}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("tool output is UTF-8")
}

/// Writes `source` as `dir/file_name` and compiles it with `compiler` and
/// `flags` into `dir/output`.
pub fn compile(
    dir: &Path,
    compiler: &str,
    file_name: &str,
    source: &str,
    output: &str,
    flags: &[&str],
) -> PathBuf {
    let source_path = dir.join(file_name);
    std::fs::write(&source_path, source).expect("write test source");
    let output_path = dir.join(output);
    run(Command::new(compiler)
        .args(flags)
        .arg("-o")
        .arg(&output_path)
        .arg(&source_path));
    output_path
}

/// The 1-based number of the one line of `source` containing `needle`.
pub fn line_of(source: &str, needle: &str) -> u32 {
    let lines: Vec<usize> = source
        .lines()
        .enumerate()
        .filter(|(_, line)| line.contains(needle))
        .map(|(index, _)| index + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{needle:?} must be on exactly one line");
    lines[0] as u32
}

/// One frame as binutils' addr2line prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceFrame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub discriminator: u32,
}

/// `addr2line -a -f -i [-C] -e elf addresses...`, one inline stack per
/// address, innermost first.
pub fn binutils_frames(
    addr2line: &str,
    elf: &Path,
    addresses: &[u64],
    demangle: bool,
) -> Vec<Vec<ReferenceFrame>> {
    let mut stacks = Vec::new();
    for chunk in addresses.chunks(500) {
        let mut command = Command::new(addr2line);
        command.args(["-a", "-f", "-i"]);
        if demangle {
            command.arg("-C");
        }
        command.arg("-e").arg(elf);
        command.args(chunk.iter().map(|address| format!("{address:#x}")));
        let output = run(&mut command);
        let mut lines = output.lines().peekable();
        while let Some(address) = lines.next() {
            assert!(address.starts_with("0x"), "unexpected line {address:?}");
            let mut frames = Vec::new();
            while lines.peek().is_some_and(|line| !line.starts_with("0x")) {
                let function = lines.next().unwrap_or_default();
                let location = lines.next().expect("a location follows each function");
                frames.push(parse_frame(function, location));
            }
            stacks.push(frames);
        }
    }
    assert_eq!(stacks.len(), addresses.len());
    stacks
}

fn parse_frame(function: &str, location: &str) -> ReferenceFrame {
    let (location, discriminator) = match location.split_once(" (discriminator ") {
        Some((location, rest)) => (
            location,
            rest.trim_end_matches(')').parse().expect("discriminator"),
        ),
        None => (location, 0),
    };
    let (file, line) = location.rsplit_once(':').expect("file:line");
    ReferenceFrame {
        function: (function != "??").then(|| function.to_owned()),
        file: (file != "??").then(|| file.to_owned()),
        line: line.parse().ok().filter(|line| *line != 0),
        discriminator,
    }
}

/// One row of `llvm-dwarfdump --debug-line`.
#[derive(Debug, Clone, Copy)]
pub struct LineRow {
    pub address: u64,
    pub line: u32,
    pub discriminator: u32,
    pub end_sequence: bool,
}

/// The line-table rows of `elf`, in table order.
pub fn llvm_line_rows(elf: &Path) -> Vec<LineRow> {
    let output = run(Command::new("llvm-dwarfdump-19")
        .arg("--debug-line")
        .arg(elf));
    output
        .lines()
        .filter(|line| line.starts_with("0x"))
        .map(|line| {
            // Address Line Column File ISA Discriminator OpIndex Flags...
            let fields: Vec<&str> = line.split_whitespace().collect();
            LineRow {
                address: u64::from_str_radix(&fields[0][2..], 16).expect("address"),
                line: fields[1].parse().expect("line"),
                discriminator: fields[5].parse().expect("discriminator"),
                end_sequence: fields.contains(&"end_sequence"),
            }
        })
        .collect()
}

/// The row covering `address`: the last row at the highest address not
/// above it, within a sequence that has not ended before it.
pub fn covering_row(rows: &[LineRow], address: u64) -> Option<LineRow> {
    let mut found = None;
    for pair in rows.windows(2) {
        let (row, next) = (pair[0], pair[1]);
        if !row.end_sequence && row.address <= address && address < next.address {
            found = Some(row);
        }
    }
    found
}

/// A `LOAD` program header as `readelf -lW` prints it: the reference the symbolizer's
/// own segment reading is checked against.
#[derive(Debug, Clone, Copy)]
pub struct LoadSegment {
    pub offset: u64,
    pub vaddr: u64,
    pub file_size: u64,
    pub executable: bool,
}

/// The `LOAD` program headers of `elf`, from binutils' readelf.
pub fn readelf_load_segments(elf: &Path) -> Vec<LoadSegment> {
    let headers = run(Command::new("readelf").arg("-lW").arg(elf));
    headers
        .lines()
        .filter(|line| line.trim_start().starts_with("LOAD"))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let number =
                |text: &str| u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap();
            LoadSegment {
                offset: number(fields[1]),
                vaddr: number(fields[2]),
                file_size: number(fields[4]),
                executable: fields[6..].iter().any(|flags| flags.contains('E')),
            }
        })
        .collect()
}
