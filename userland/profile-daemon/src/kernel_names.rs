//! Kernel frames named by the running kernel: the probes' `name_kernel_addresses`
//! program, run through `BPF_PROG_TEST_RUN` (never attached), has the kernel print each
//! address the daemon asks about as `%pS` does (`function+0xoffset/0xsize [module]`),
//! so the daemon learns each sampled kernel function, its extent and its module
//! without reading `/proc/kallsyms`. Every read of that file has the kernel format all
//! of its lines (50,000 in the riscv64 guest, 0.2 to 0.5 s of the daemon's start-up
//! there), and the daemon needs the few thousand functions its samples are in.

use aya::maps::{Array, MapData, MapError};
use aya::programs::{ProgramError, RawTracePoint, RawTracePointRunOptions, TestRun};
use aya::Ebpf;
use aya_probes_common::{
    program_name, KernelSymbolBatch, KERNEL_SYMBOLS_INDEX, KERNEL_SYMBOL_BATCH,
};
use rustc_hash::FxHashSet;
use symbolize::Symbolizer;

/// A function the kernel named: the text of `%pS` for an address in it, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedFunction<'a> {
    pub name: &'a str,
    pub start: u64,
    pub size: u64,
    /// The module it is in; `None` for the kernel itself.
    pub module: Option<&'a str>,
}

/// Parses the kernel's `%pS` text of `address`: `name+0xoffset/0xsize`, then
/// ` [module]` for a module's function (` [bpf]` for a BPF program's). `None` for an
/// address in no function (the kernel then prints the address alone, `0x…`) or a
/// text without its offset and size (cut at the buffer's end).
pub fn parse_symbol_text(address: u64, text: &str) -> Option<NamedFunction<'_>> {
    let (symbol, module) = match text.strip_suffix(']') {
        Some(rest) => {
            let (symbol, module) = rest.rsplit_once(" [")?;
            (symbol, Some(module))
        }
        None => (text, None),
    };
    let (name, extent) = symbol.rsplit_once('+')?;
    let (offset, size) = extent.split_once('/')?;
    let hex = |field: &str| u64::from_str_radix(field.strip_prefix("0x")?, 16).ok();
    let (offset, size) = (hex(offset)?, hex(size)?);
    if name.is_empty() || offset >= size.max(1) {
        return None;
    }
    Some(NamedFunction {
        name,
        start: address.checked_sub(offset)?,
        size,
        module: module.filter(|module| !module.is_empty()),
    })
}

/// Why the kernel could not name addresses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KernelNamesError {
    #[error("no program {program} in the eBPF object")]
    MissingProgram { program: &'static str },
    #[error("no map {map} in the eBPF object")]
    MissingMap { map: &'static str },
    /// The kernel refused to load or run the program (or it is of another kind).
    #[error("{program}: {source}")]
    Program {
        program: &'static str,
        #[source]
        source: ProgramError,
    },
    #[error("{map}: {source}")]
    Map {
        map: &'static str,
        #[source]
        source: MapError,
    },
}

const PROGRAM: &str = program_name::NAME_KERNEL_ADDRESSES;
const MAP: &str = aya_probes_common::map_name::KERNEL_SYMBOLS;

fn program_error(source: ProgramError) -> KernelNamesError {
    KernelNamesError::Program {
        program: PROGRAM,
        source,
    }
}

fn map_error(source: MapError) -> KernelNamesError {
    KernelNamesError::Map { map: MAP, source }
}

/// The loaded `name_kernel_addresses` program and its `KERNEL_SYMBOLS` map.
pub struct KernelNamer {
    batches: Array<MapData, KernelSymbolBatch>,
    /// The batch written to the map, kept for its 16 KiB of room.
    batch: Box<KernelSymbolBatch>,
    /// Addresses asked about already: each is asked once, named or not.
    asked: FxHashSet<u64>,
}

impl std::fmt::Debug for KernelNamer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KernelNamer")
            .field("asked", &self.asked.len())
            .finish_non_exhaustive()
    }
}

impl KernelNamer {
    /// Loads the program (left in `ebpf`, which runs it) and takes its map.
    pub fn load(ebpf: &mut Ebpf) -> Result<KernelNamer, KernelNamesError> {
        let program: &mut RawTracePoint = ebpf
            .program_mut(PROGRAM)
            .ok_or(KernelNamesError::MissingProgram { program: PROGRAM })?
            .try_into()
            .map_err(program_error)?;
        program.load().map_err(program_error)?;
        // Run once, naming nothing: a kernel that loads the program but cannot run
        // it (no `BPF_PROG_TEST_RUN` for raw tracepoints without `CONFIG_NET`) is
        // found here, while kallsyms can still take its place.
        program
            .test_run(RawTracePointRunOptions::new())
            .map_err(program_error)?;
        let batches = Array::try_from(
            ebpf.take_map(MAP)
                .ok_or(KernelNamesError::MissingMap { map: MAP })?,
        )
        .map_err(map_error)?;
        Ok(KernelNamer {
            batches,
            batch: Box::new(KernelSymbolBatch::EMPTY),
            asked: FxHashSet::default(),
        })
    }

    /// Has the kernel name each of `addresses` that neither `symbolizer` knows a
    /// function of nor was asked about before, and adds each function named to
    /// `symbolizer` ([`Symbolizer::add_kernel_function`]).
    pub fn name(
        &mut self,
        ebpf: &Ebpf,
        addresses: impl IntoIterator<Item = u64>,
        symbolizer: &mut Symbolizer,
    ) -> Result<(), KernelNamesError> {
        let program: &RawTracePoint = ebpf
            .program(PROGRAM)
            .ok_or(KernelNamesError::MissingProgram { program: PROGRAM })?
            .try_into()
            .map_err(program_error)?;
        let mut addresses = addresses.into_iter().peekable();
        while addresses.peek().is_some() {
            let mut count = 0;
            for address in addresses.by_ref() {
                if symbolizer.knows_kernel_function(address) || !self.asked.insert(address) {
                    continue;
                }
                let slot = &mut self.batch.slots[count];
                slot.address = address;
                slot.text.fill(0);
                count += 1;
                if count == KERNEL_SYMBOL_BATCH as usize {
                    break;
                }
            }
            if count == 0 {
                break;
            }
            // One write, one run and one read a batch: each is a system call.
            self.batches
                .set(KERNEL_SYMBOLS_INDEX, self.batch.as_ref(), 0)
                .map_err(map_error)?;
            let mut options = RawTracePointRunOptions::new();
            options.args[0] = count as u64;
            program.test_run(options).map_err(program_error)?;
            let named = self
                .batches
                .get(&KERNEL_SYMBOLS_INDEX, 0)
                .map_err(map_error)?;
            for slot in &named.slots[..count] {
                let length = slot
                    .text
                    .iter()
                    .position(|&byte| byte == 0)
                    .unwrap_or(slot.text.len());
                let Ok(text) = std::str::from_utf8(&slot.text[..length]) else {
                    continue;
                };
                if let Some(function) = parse_symbol_text(slot.address, text) {
                    symbolizer.add_kernel_function(
                        function.start,
                        function.size,
                        function.name,
                        function.module,
                    );
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_symbol_texts_parse() {
        assert_eq!(
            parse_symbol_text(0xffff_ffff_8000_1234, "do_sys_openat2+0x34/0x120"),
            Some(NamedFunction {
                name: "do_sys_openat2",
                start: 0xffff_ffff_8000_1200,
                size: 0x120,
                module: None,
            })
        );
        assert_eq!(
            parse_symbol_text(0xffff_ffff_0100_0044, "rvtrace_read+0x44/0x80 [rvtrace]"),
            Some(NamedFunction {
                name: "rvtrace_read",
                start: 0xffff_ffff_0100_0000,
                size: 0x80,
                module: Some("rvtrace"),
            })
        );
        // A name with `+` in it, and a function's first byte.
        assert_eq!(
            parse_symbol_text(0x1000, "a+b+0x0/0x10")
                .map(|function| (function.name, function.start)),
            Some(("a+b", 0x1000))
        );
    }

    #[test]
    fn unnamed_and_cut_texts_are_refused() {
        // No function: the kernel prints the address.
        assert_eq!(
            parse_symbol_text(0xffff_ffff_8000_1234, "0xffffffff80001234"),
            None
        );
        // Cut before the size, or an offset past the size, or before address 0.
        assert_eq!(
            parse_symbol_text(0x1000, "some_long_function+0x34/0x1"),
            None
        );
        assert_eq!(parse_symbol_text(0x1000, "some_long_function+0x34"), None);
        assert_eq!(parse_symbol_text(0x10, "f+0x20/0x40"), None);
        assert_eq!(parse_symbol_text(0x10, "+0x0/0x40"), None);
        assert_eq!(parse_symbol_text(0x10, "f+0x0/0x40 [mod"), None);
    }
}
