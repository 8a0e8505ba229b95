//! Kernel symbols from a kallsyms file (`/proc/kallsyms`, or a copy taken
//! on the recording machine).

use crate::symbols::{AliasChoice, Candidate, SymbolKind, SymbolTable};
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
        let malformed = |line: usize, reason| SymbolizeError::Kallsyms {
            file: name.to_owned(),
            line,
            reason,
        };
        let mut candidates = Vec::new();
        let mut modules: Vec<ModuleSpan> = Vec::new();
        let mut any_address = false;
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let mut fields = line.split_whitespace();
            let Some(address) = fields.next() else {
                continue;
            };
            let address = u64::from_str_radix(address, 16)
                .map_err(|_| malformed(number, "the address is not hexadecimal"))?;
            let kind = fields
                .next()
                .ok_or_else(|| malformed(number, "no symbol type"))?;
            let symbol = fields
                .next()
                .ok_or_else(|| malformed(number, "no symbol name"))?;
            let module = fields
                .next()
                .map(|module| module.trim_start_matches('[').trim_end_matches(']'));
            any_address |= address != 0;
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            if let Some(module) = module {
                match modules.iter_mut().find(|span| span.name == module) {
                    Some(span) => {
                        span.start = span.start.min(address);
                        span.end = span.end.max(address);
                    }
                    None => modules.push(ModuleSpan {
                        start: address,
                        end: address,
                        name: module.to_owned(),
                    }),
                }
            }
            candidates.push(Candidate {
                name: symbol.to_owned(),
                address,
                size: 0,
                kind: SymbolKind::Function,
                global: kind.chars().all(|letter| letter.is_ascii_uppercase()),
                // As perf reads kallsyms: only `W` is weak (`w` is local).
                weak: kind == "W",
                section_end: None,
            });
        }
        if !candidates.is_empty() && !any_address {
            return Err(SymbolizeError::KallsymsHidden {
                file: name.to_owned(),
            });
        }
        let symbols = SymbolTable::with_alias_choice(candidates, AliasChoice::LastListed);
        for span in &mut modules {
            // The span ends where its last function does.
            span.end = symbols
                .lookup(span.end)
                .map_or(span.end + 1, |(_, start, size)| start + size);
        }
        modules.sort_by_key(|span| span.start);
        Ok(KernelSymbols { symbols, modules })
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
