//! Kernel symbols from a kallsyms file (`/proc/kallsyms`, or a copy taken
//! on the recording machine).

use crate::symbols::{
    is_function_name, Anchor, FunctionEntry, ListedSymbol, SymbolTable, ANCHOR_NAMES,
};
use crate::{FunctionSymbol, SymbolizeError};

/// The text symbols of a running kernel and its modules.
#[derive(Debug)]
pub struct KernelSymbols {
    symbols: SymbolTable,
    /// Address span of each module's text symbols, sorted by start.
    modules: Vec<ModuleSpan>,
}

#[derive(Debug)]
struct ModuleSpan {
    start: u64,
    end: u64,
    name: String,
}

impl KernelSymbols {
    /// Parses `address type name [module]` lines; text symbols (`t`, `T`,
    /// `w`, `W`) are kept. `name` is used in errors.
    pub fn parse(name: &str, text: &str) -> Result<KernelSymbols, SymbolizeError> {
        let mut parser = KallsymsParser::new(name);
        for line in text.lines() {
            parser.line(line)?;
        }
        parser.finish()
    }

    /// A table of no functions, filled by [`add_function`](Self::add_function).
    pub fn empty() -> KernelSymbols {
        KernelSymbols {
            symbols: SymbolTable::default(),
            modules: Vec::new(),
        }
    }

    /// Adds a function the running kernel named (`name` at `address`, `size` bytes,
    /// in `module` or the kernel itself), for a table filled as addresses are met
    /// rather than read from a kallsyms file. A function already listed at `address`
    /// stays.
    pub fn add_function(&mut self, address: u64, size: u64, name: &str, module: Option<&str>) {
        let added = self.symbols.insert_sized(address, size, name);
        if let (true, Some(module)) = (added, module) {
            let position = self.modules.partition_point(|span| span.start <= address);
            self.modules.insert(
                position,
                ModuleSpan {
                    start: address,
                    end: address.saturating_add(size.max(1)),
                    name: module.to_owned(),
                },
            );
        }
    }

    /// Number of text symbols.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function containing `address`.
    pub fn function(&self, address: u64) -> Option<FunctionSymbol> {
        self.symbols.function(address)
    }

    /// The function containing `address`, its name neither demangled nor copied.
    pub fn function_entry(&self, address: u64) -> Option<FunctionEntry<'_>> {
        self.symbols.lookup(address)
    }

    /// The module whose text contains `address`; `None` for the kernel itself.
    pub fn module(&self, address: u64) -> Option<&str> {
        let following = self.modules.partition_point(|span| span.start <= address);
        self.modules[..following]
            .last()
            .filter(|span| address < span.end)
            .map(|span| span.name.as_str())
    }

    /// The address of the text symbol `name` (such as `_text`).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.symbols.address_of(name)
    }
}

/// A kallsyms file parsed line by line as it is read, so that the text
/// (megabytes for a running kernel) is never held whole.
#[derive(Debug)]
pub struct KallsymsParser {
    file: String,
    lines: usize,
    symbols: Vec<ListedSymbol>,
    /// The names of `symbols`, end to end.
    names: String,
    anchors: Vec<Anchor>,
    modules: Vec<ModuleSpan>,
    any_address: bool,
}

impl KallsymsParser {
    /// A parser for the file `name` (used in errors).
    pub fn new(name: &str) -> KallsymsParser {
        KallsymsParser {
            file: name.to_owned(),
            lines: 0,
            symbols: Vec::new(),
            names: String::new(),
            anchors: Vec::new(),
            modules: Vec::new(),
            any_address: false,
        }
    }

    /// The next line (with or without its line break).
    pub fn line(&mut self, line: &str) -> Result<(), SymbolizeError> {
        self.lines += 1;
        let number = self.lines;
        let malformed = |reason| SymbolizeError::Kallsyms {
            file: self.file.clone(),
            line: number,
            reason,
        };
        let mut fields = line.split_ascii_whitespace();
        let Some(address) = fields.next() else {
            return Ok(());
        };
        let address = u64::from_str_radix(address, 16)
            .map_err(|_| malformed("the address is not hexadecimal"))?;
        let kind = fields.next().ok_or_else(|| malformed("no symbol type"))?;
        let symbol = fields.next().ok_or_else(|| malformed("no symbol name"))?;
        let module = fields
            .next()
            .map(|module| module.trim_start_matches('[').trim_end_matches(']'));
        self.any_address |= address != 0;
        if !matches!(kind, "t" | "T" | "w" | "W") {
            return Ok(());
        }
        if let Some(anchor) = ANCHOR_NAMES.iter().find(|anchor| **anchor == symbol) {
            self.anchors.push(Anchor {
                name: anchor,
                address,
            });
        }
        if !is_function_name(symbol) {
            return Ok(());
        }
        if let Some(module) = module {
            match self
                .modules
                .iter_mut()
                .rev()
                .find(|span| span.name == module)
            {
                Some(span) => {
                    span.start = span.start.min(address);
                    span.end = span.end.max(address);
                }
                None => self.modules.push(ModuleSpan {
                    start: address,
                    end: address,
                    name: module.to_owned(),
                }),
            }
        }
        let Ok(name_start) = u32::try_from(self.names.len()) else {
            return Err(malformed("over 4 GiB of symbol names"));
        };
        let name_len = symbol.len().min(u16::MAX as usize);
        let name = symbol.get(..name_len).unwrap_or(symbol);
        self.names.push_str(name);
        self.symbols.push(ListedSymbol {
            address,
            name_start,
            name_len: name.len() as u32,
        });
        Ok(())
    }

    /// The symbols of every line given. Of several text symbols at one
    /// address, the last listed names it, as perf shows them.
    pub fn finish(self) -> Result<KernelSymbols, SymbolizeError> {
        if !self.symbols.is_empty() && !self.any_address {
            return Err(SymbolizeError::KallsymsHidden { file: self.file });
        }
        let symbols = SymbolTable::from_listed(self.symbols, self.names, self.anchors);
        let mut modules = self.modules;
        for span in &mut modules {
            // The span ends where its last function does (an end is exclusive: a
            // span reaching the top of the address space ends there).
            span.end = symbols
                .lookup(span.end)
                .map_or(span.end.saturating_add(1), |function| {
                    function.address.saturating_add(function.size)
                });
        }
        modules.sort_by_key(|span| span.start);
        Ok(KernelSymbols { symbols, modules })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
ffffffff80000000 T _text
ffffffff80000000 T _start
ffffffff80001000 t handle_exception
ffffffff80001100 T memcpy
ffffffff80001100 T __memcpy
ffffffff80001100 T __pi_memcpy
ffffffff80001200 D some_data
ffffffff80001400 W arch_cpu_idle
ffffffff80002000 T _etext
ffffffff01000000 t helper\t[nf_tables]
ffffffff01000040 T nft_do_chain\t[nf_tables]
";

    #[test]
    fn text_symbols_with_extents_and_modules() {
        let symbols = KernelSymbols::parse("kallsyms", SAMPLE).unwrap();
        let function = symbols.function(0xffff_ffff_8000_1080).unwrap();
        assert_eq!(function.name, "handle_exception");
        assert_eq!(function.address, 0xffff_ffff_8000_1000);
        assert_eq!(function.size, 0x100);
        // Of aliases, the last listed, as perf shows them.
        assert_eq!(
            symbols.function(0xffff_ffff_8000_1104).unwrap().name,
            "__pi_memcpy"
        );
        assert_eq!(
            symbols.function(0xffff_ffff_8000_1404).unwrap().name,
            "arch_cpu_idle"
        );
        assert_eq!(
            symbols.function(0xffff_ffff_8000_0010).unwrap().name,
            "_start"
        );
        assert_eq!(
            symbols.function(0xffff_ffff_0100_0020).unwrap().name,
            "helper"
        );
        assert_eq!(symbols.module(0xffff_ffff_0100_0044), Some("nf_tables"));
        assert_eq!(symbols.module(0xffff_ffff_8000_1000), None);
        assert_eq!(symbols.symbol_address("_text"), Some(0xffff_ffff_8000_0000));
    }

    #[test]
    fn hidden_addresses_and_bad_lines_are_errors() {
        let hidden = "0000000000000000 T _text\n0000000000000000 t foo\n";
        assert!(matches!(
            KernelSymbols::parse("k", hidden),
            Err(SymbolizeError::KallsymsHidden { .. })
        ));
        assert!(matches!(
            KernelSymbols::parse("k", "ffffffff80000000 T _text\nxyz T foo\n"),
            Err(SymbolizeError::Kallsyms { line: 2, .. })
        ));
        assert!(matches!(
            KernelSymbols::parse("k", "ffffffff80000000\n"),
            Err(SymbolizeError::Kallsyms { line: 1, .. })
        ));
    }
}
