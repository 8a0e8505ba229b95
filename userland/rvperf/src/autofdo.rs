//! `rvperf autofdo`: an AutoFDO profile of one binary from the branch stacks of a
//! recording (CTR through rvperf_ctr, or any perf.data with PERF_SAMPLE_BRANCH_STACK),
//! in LLVM's text or extensible binary format or the format GCC 12 reads.
//!
//! Branch stacks become fall-through ranges and branch counts (the LBR method), ranges
//! become per-instruction counts over the binary's instructions (RISC-V, or x86_64 for
//! recordings with Intel's LBR), and those are placed at their DWARF lines,
//! discriminators and inline stacks: discriminators as the format's compiler decodes
//! them (GCC's own for GCC, LLVM's base discriminators for the LLVM formats), and for
//! LLVM a 0 on every line of a sampled function that no sample reached, as
//! llvm-profgen writes.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use code_image::{CodeImage, ImageError, InstructionSet, Machine};
use perf_abi::{parse_record, Mmap2FileId, Record, SampleFormat};
use profiles::{
    build_sample_profile, Branch, BranchCountOptions, BranchCounts, Discriminators,
    PlacementOptions, SourceFrame,
};
use symbolize::ObjectSymbolizer;

use crate::output::write_atomically;
use crate::perf_input::{file_size, for_each_sample, open, Processes, SymbolOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// LLVM's text sample profile (`clang -fprofile-sample-use=FILE`).
    LlvmText,
    /// LLVM's extensible binary sample profile.
    LlvmExtbinary,
    /// GCC's gcov-based AutoFDO profile (`gcc -fauto-profile=FILE`), as GCC 12 reads it.
    Gcc,
}

#[derive(Debug, Args)]
pub struct AutofdoArgs {
    /// Input file (`-` for a pipe-mode stream on standard input).
    #[arg(short = 'i', long = "input", default_value = "perf.data")]
    input: PathBuf,
    /// The riscv64 or x86_64 binary to profile, with debug info (-g or
    /// -gline-tables-only), as it ran (matched to the recording by file name and build
    /// id).
    #[arg(long, value_name = "ELF")]
    binary: PathBuf,
    /// Output profile.
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    #[arg(long, value_enum, default_value = "llvm-text")]
    format: Format,
    /// Also write the execution count of every instruction (`0xADDRESS COUNT` lines,
    /// link-time addresses, sorted) to FILE.
    #[arg(long, value_name = "FILE")]
    instruction_counts: Option<PathBuf>,
    /// Use the binary even if its build id differs from the recording's.
    #[arg(long)]
    ignore_build_id: bool,
}

/// Where the binary is mapped in each recorded process.
#[derive(Default)]
struct BinaryMappings {
    /// pid -> (start, end, file offset at start)
    by_pid: HashMap<u32, Vec<(u64, u64, u64)>>,
    recorded_build_id: Option<Vec<u8>>,
}

impl BinaryMappings {
    fn observe(&mut self, binary_name: &str, record_type: u32, misc: u16, body: &[u8]) {
        let Ok(record) = parse_record(record_type, misc, body, &SampleFormat::default()) else {
            return;
        };
        let (pid, start, length, offset, filename, build_id) = match record {
            Record::Mmap(m) => (m.pid, m.addr, m.len, m.pgoff, m.filename, None),
            Record::Mmap2(m) => {
                let build_id = match m.file_id {
                    Mmap2FileId::BuildId(id) => Some(id.to_vec()),
                    Mmap2FileId::Inode { .. } => None,
                };
                (m.pid, m.addr, m.len, m.pgoff, m.filename, build_id)
            }
            Record::Fork(task) if task.pid != task.ppid => {
                // The child starts with the parent's mappings. Its own come after them
                // (later entries win), even when the file, written per CPU buffer,
                // has them before the FORK record.
                if let Some(mut inherited) = self.by_pid.get(&task.ppid).cloned() {
                    let own = self.by_pid.remove(&task.pid).unwrap_or_default();
                    inherited.extend(own);
                    self.by_pid.insert(task.pid, inherited);
                }
                return;
            }
            _ => return,
        };
        if file_name_of(&String::from_utf8_lossy(filename)) != binary_name {
            return;
        }
        if build_id.is_some() {
            self.recorded_build_id = build_id;
        }
        self.by_pid
            .entry(pid)
            .or_default()
            .push((start, start.saturating_add(length), offset));
    }

    /// The file offset of runtime address `address` of process `pid`, if in the binary.
    fn file_offset(&self, pid: u32, address: u64) -> Option<u64> {
        self.by_pid
            .get(&pid)?
            .iter()
            .rev()
            .find_map(|&(start, end, offset)| {
                (start..end)
                    .contains(&address)
                    .then(|| offset + (address - start))
            })
    }
}

fn file_name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut text, byte| {
        let _ = write!(text, "{byte:02x}");
        text
    })
}

/// Counts of what the profile could not use, reported once each.
#[derive(Default)]
struct Skipped {
    samples_without_branch_stack: u64,
    samples_outside_binary: u64,
    entries_outside_binary: u64,
}

pub fn run(arguments: &AutofdoArgs) -> Result<()> {
    let name = arguments.binary.display().to_string();
    let bytes: Arc<[u8]> = std::fs::read(&arguments.binary)
        .with_context(|| format!("cannot read {name}"))?
        .into();
    let symbolizer = ObjectSymbolizer::new(&name, bytes.clone())
        .with_context(|| format!("cannot read {name}"))?;
    if !symbolizer.has_debug_info() {
        bail!("{name}: no DWARF debug info: AutoFDO places counts at source lines (build with -g or -gline-tables-only)");
    }
    let code = BinaryCode::load(&name, &bytes)?;
    let binary_name = file_name_of(&name).to_owned();

    let reader = open(&arguments.input)?;
    let mut mappings = BinaryMappings {
        recorded_build_id: reader
            .info()
            .build_ids
            .iter()
            .find(|entry| file_name_of(&entry.filename) == binary_name)
            .map(|entry| entry.build_id.clone()),
        ..BinaryMappings::default()
    };
    let mut counts = BranchCounts::new(BranchCountOptions::default());
    let mut skipped = Skipped::default();
    let mut samples = 0u64;
    let mut stack: Vec<Branch> = Vec::new();
    let mut processes = Processes::new(SymbolOptions::default());
    // Side-band records (MMAP2, FORK) precede the samples that need them in file
    // order, and samples come back in time order: one pass over the side band first
    // gives every sample its mappings.
    let mut records = reader.records();
    while let Some(record) = records.next_record()? {
        if record.record_type != perf_abi::sys::bindings::PERF_RECORD_SAMPLE {
            mappings.observe(&binary_name, record.record_type, record.misc, record.body);
        }
    }
    for_each_sample(
        &reader,
        file_size(&arguments.input),
        &mut processes,
        |_, sampled| {
            let sample = &sampled.sample;
            samples += 1;
            let Some(branch_stack) = &sample.branch_stack else {
                skipped.samples_without_branch_stack += 1;
                return Ok(());
            };
            let pid = sample.pid.unwrap_or(u32::MAX);
            let to_vaddr = |address: u64| {
                mappings
                    .file_offset(pid, address)
                    .and_then(|offset| symbolizer.vaddr_of_offset(offset))
            };
            if sample.ip.and_then(to_vaddr).is_none() {
                skipped.samples_outside_binary += 1;
            }
            // An entry leaving or entering the binary (a library call, a trap) ends the
            // run of entries that bracket code of the binary: the stack is cut there.
            stack.clear();
            for entry in branch_stack.iter() {
                match (to_vaddr(entry.from), to_vaddr(entry.to)) {
                    (Some(from), Some(to)) => stack.push(Branch { from, to }),
                    _ => {
                        skipped.entries_outside_binary += 1;
                        counts.add_stack(stack.drain(..));
                    }
                }
            }
            counts.add_stack(stack.drain(..));
            Ok(())
        },
    )?;

    if let (Some(recorded), Some(actual)) = (&mappings.recorded_build_id, symbolizer.build_id()) {
        if recorded.as_slice() != actual {
            let message = format!(
                "{name}: build id {} differs from the recording's {} for {binary_name} ({samples} samples): not the binary that ran",
                hex(actual),
                hex(recorded)
            );
            if !arguments.ignore_build_id {
                bail!("{message}; --ignore-build-id uses it anyway");
            }
            eprintln!("rvperf: warning: {message}");
        }
    }
    if mappings.by_pid.is_empty() {
        bail!(
            "{}: no process of the recording mapped {binary_name}",
            arguments.input.display()
        );
    }

    let profiles::InstructionCounts {
        counts: instruction_counts,
        broken_ranges,
    } = counts.instruction_counts(|address| {
        code.instruction_at(address)
            .map(|instruction| u64::from(instruction.length))
    });
    let mut frame_errors = 0u64;
    // LLVM keys positions by its own reading of discriminators, and llvm-profgen
    // writes a 0 for every position of a sampled function no sample reached, which
    // clang reads as cold rather than unknown; GCC reads GCC's discriminators and
    // create_gcov writes executed positions only.
    let mut placement = PlacementOptions::default();
    if arguments.format != Format::Gcc {
        placement.discriminators = Discriminators::Llvm;
        let (instructions, errors) = instructions_of_sampled_functions(&symbolizer, &code, &counts);
        placement.unreached_instructions = instructions;
        frame_errors += errors;
    }
    let mut frame_cache: rustc_hash::FxHashMap<u64, Vec<SourceFrame>> =
        rustc_hash::FxHashMap::default();
    let mut frames = |address: u64| -> Vec<SourceFrame> {
        frame_cache
            .entry(address)
            .or_insert_with(|| match symbolizer.frames(address) {
                Ok(frames) => source_frames(&frames),
                Err(_) => {
                    frame_errors += 1;
                    Vec::new()
                }
            })
            .clone()
    };
    let (profile, stats) = build_sample_profile(
        &instruction_counts,
        &counts.branches,
        &mut frames,
        |address| {
            code.instruction_at(address)
                .is_some_and(|instruction| instruction.flow.is_call())
        },
        &placement,
    );

    let mut bytes = Vec::new();
    match arguments.format {
        Format::LlvmText => profiles::write_llvm_text(&profile, &mut bytes)?,
        Format::LlvmExtbinary => profiles::write_llvm_extbinary(&profile, &mut bytes)?,
        Format::Gcc => profiles::write_gcc_afdo(&profile, &mut bytes)?,
    }
    write_atomically(&arguments.output, |out| Ok(out.write_all(&bytes)?))
        .with_context(|| format!("cannot write {}", arguments.output.display()))?;
    if let Some(path) = &arguments.instruction_counts {
        let mut sorted: Vec<_> = instruction_counts.iter().collect();
        sorted.sort_unstable();
        write_atomically(path, |out| {
            for (address, count) in sorted {
                writeln!(out, "{address:#x} {count}")?;
            }
            Ok(())
        })
        .with_context(|| format!("cannot write {}", path.display()))?;
    }

    // Everything left out, once each, with counts.
    let warn = |what: String| eprintln!("rvperf: warning: {what}");
    if skipped.samples_without_branch_stack > 0 {
        warn(format!(
            "{} samples have no branch stack (record with -b or -j any,u)",
            skipped.samples_without_branch_stack
        ));
    }
    if skipped.samples_outside_binary > 0 {
        warn(format!(
            "{} samples were taken outside {binary_name} (other files or the kernel)",
            skipped.samples_outside_binary
        ));
    }
    if skipped.entries_outside_binary > 0 {
        warn(format!(
            "{} branch entries leave or enter {binary_name}; the stacks were cut there",
            skipped.entries_outside_binary
        ));
    }
    let refused = counts.refused;
    if refused.backwards + refused.too_long > 0 {
        warn(format!(
            "{} fall-through ranges ran backwards and {} were longer than {} bytes (a missed branch): not counted",
            refused.backwards,
            refused.too_long,
            BranchCountOptions::default().max_range_bytes
        ));
    }
    if broken_ranges > 0 {
        warn(format!(
            "{broken_ranges} ranges run into bytes that are not {} instructions of {binary_name}: counted up to there",
            code.machine.name()
        ));
    }
    if stats.unplaced_instructions > 0 || frame_errors > 0 {
        warn(format!(
            "{} executed instructions ({} executions) have no source line in the debug info ({frame_errors} DWARF errors)",
            stats.unplaced_instructions, stats.unplaced_count
        ));
    }
    eprintln!(
        "rvperf autofdo: {samples} samples, {} branch stacks, {} ranges, {} instructions placed, {} functions -> {}",
        counts.stacks,
        counts.ranges.len(),
        stats.placed_instructions,
        profile.by_hotness().len(),
        arguments.output.display()
    );
    Ok(())
}

/// The code of the profiled binary, decoded by its ELF machine (`code-image`'s
/// instruction sets): all the profile needs of an instruction is its length (to walk
/// a fall-through range) and whether it is a call (whose return lands after it).
struct BinaryCode {
    image: CodeImage,
    machine: Machine,
}

impl BinaryCode {
    fn load(name: &str, bytes: &[u8]) -> Result<BinaryCode> {
        let mut image = CodeImage::new();
        match code_image::load_any_elf(&mut image, name, bytes, None) {
            Ok(elf) => Ok(BinaryCode {
                image,
                machine: elf.machine,
            }),
            Err(ImageError::UnsupportedMachine { machine, .. }) => bail!(
                "{name}: rvperf autofdo profiles riscv64 and x86_64 binaries (e_machine {machine})"
            ),
            Err(error) => Err(error).with_context(|| format!("cannot load the code of {name}")),
        }
    }

    /// The instruction at link-time address `address`; `None` where no instruction
    /// of the binary is.
    fn instruction_at(&self, address: u64) -> Option<code_image::Instruction> {
        self.machine.instruction_at(&self.image, address)
    }
}

/// The DWARF function ranges of a longer extent are taken for broken debug info and
/// left out of the zero positions, rather than walked byte by byte.
const MAX_FUNCTION_RANGE_BYTES: u64 = 16 << 20;

/// Every instruction of every function a counted fall-through range starts in (its
/// DWARF address ranges, all parts of a split function): the instructions llvm-profgen
/// gives a 0 when no sample reached them. Also the number of DWARF errors met.
fn instructions_of_sampled_functions(
    symbolizer: &ObjectSymbolizer,
    code: &BinaryCode,
    counts: &BranchCounts,
) -> (Vec<u64>, u64) {
    let mut starts: Vec<u64> = counts.ranges.keys().map(|range| range.first).collect();
    starts.sort_unstable();
    starts.dedup();
    let mut walked: std::collections::BTreeSet<(u64, u64)> = std::collections::BTreeSet::new();
    let mut instructions = Vec::new();
    let mut errors = 0;
    for start in starts {
        let ranges = match symbolizer.function_ranges(start) {
            Ok(ranges) => ranges,
            Err(_) => {
                errors += 1;
                continue;
            }
        };
        for range in ranges {
            if range.end.saturating_sub(range.start) > MAX_FUNCTION_RANGE_BYTES
                || !walked.insert((range.start, range.end))
            {
                continue;
            }
            instructions.extend(code.machine.instruction_addresses(&code.image, range));
        }
    }
    (instructions, errors)
}

/// The profile's view of a symbolizer's inline stack: names as the compiler links
/// them, lines and discriminators; frames without a line cannot be placed.
fn source_frames(frames: &[symbolize::Frame]) -> Vec<SourceFrame> {
    let mut stack = Vec::with_capacity(frames.len());
    for frame in frames {
        let (Some(name), Some(line)) = (
            frame.linkage_name.as_ref().or(frame.function.as_ref()),
            frame.line,
        ) else {
            return Vec::new();
        };
        stack.push(SourceFrame {
            linkage_name: name.clone(),
            line,
            discriminator: frame.discriminator,
            function_start_line: frame.function_start_line.unwrap_or(line),
        });
    }
    stack
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_abi::sys::bindings::{PERF_RECORD_FORK, PERF_RECORD_MMAP2};

    fn mmap2_body(pid: u32, start: u64, length: u64, offset: u64, filename: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&pid.to_le_bytes());
        body.extend_from_slice(&pid.to_le_bytes());
        for value in [start, length, offset] {
            body.extend_from_slice(&value.to_le_bytes());
        }
        body.extend_from_slice(&[0; 24]); // maj, min, ino, ino_generation
        body.extend_from_slice(&[0; 8]); // prot, flags
        body.extend_from_slice(filename.as_bytes());
        body.resize(body.len().next_multiple_of(8) + 8, 0);
        body
    }

    fn fork_body(pid: u32, parent: u32) -> Vec<u8> {
        let mut body = Vec::new();
        for value in [pid, parent, pid, parent] {
            body.extend_from_slice(&value.to_le_bytes());
        }
        body.extend_from_slice(&0u64.to_le_bytes());
        body
    }

    /// perf.data is written per CPU buffer: a child's FORK may come after its own
    /// mmaps. It inherits the parent's mappings without losing its own.
    #[test]
    fn a_fork_after_the_childs_mmaps_keeps_them() {
        let mut mappings = BinaryMappings::default();
        let observe = |mappings: &mut BinaryMappings, record_type, body: Vec<u8>| {
            mappings.observe("prog", record_type, 0, &body);
        };
        observe(
            &mut mappings,
            PERF_RECORD_MMAP2,
            mmap2_body(1, 0x1000, 0x1000, 0, "/bin/prog"),
        );
        observe(
            &mut mappings,
            PERF_RECORD_MMAP2,
            mmap2_body(2, 0x5000, 0x1000, 0x3000, "/bin/prog"),
        );
        observe(&mut mappings, PERF_RECORD_FORK, fork_body(2, 1));
        assert_eq!(mappings.file_offset(2, 0x5010), Some(0x3010));
        assert_eq!(mappings.file_offset(2, 0x1010), Some(0x10));
        assert_eq!(mappings.file_offset(1, 0x5010), None);
    }
}
