//! Function symbols by address.

/// A function symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub start: u64,
    /// Zero when the ELF did not say; the symbol then extends to the next one.
    pub size: u64,
    pub file: usize,
    pub name: String,
}

/// Function symbols of every loaded file, sorted for binary search.
#[derive(Clone, Debug, Default)]
pub struct SymbolTable {
    symbols: Vec<Symbol>,
    sorted: bool,
}

impl SymbolTable {
    /// Adds a symbol. RISC-V mapping symbols (`$x`, `$xrv64i2p1...`, `$d`) and local labels
    /// mark instruction/data regions, not functions, and are never taken as names.
    pub fn add(&mut self, name: &str, start: u64, size: u64, file: usize) {
        if name.is_empty() || name.starts_with('$') || name.starts_with(".L") {
            return;
        }
        let name = rustc_demangle::try_demangle(name)
            .map(|demangled| format!("{demangled:#}"))
            .unwrap_or_else(|_| name.to_owned());
        self.symbols.push(Symbol {
            start,
            size,
            file,
            name,
        });
        self.sorted = false;
    }

    /// Sorts and removes duplicate aliases at one address, preferring sized global names.
    pub fn finish(&mut self) {
        self.symbols
            .sort_by(|a, b| a.start.cmp(&b.start).then(b.size.cmp(&a.size)));
        self.symbols.dedup_by_key(|symbol| symbol.start);
        self.sorted = true;
    }

    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    pub fn get(&self, index: usize) -> Option<&Symbol> {
        self.symbols.get(index)
    }

    /// The index of the function containing `address`.
    pub fn lookup_index(&self, address: u64) -> Option<usize> {
        debug_assert!(self.sorted, "SymbolTable::finish was not called");
        let position = self
            .symbols
            .partition_point(|symbol| symbol.start <= address);
        let index = position.checked_sub(1)?;
        let symbol = &self.symbols[index];
        let inside = if symbol.size > 0 {
            address - symbol.start < symbol.size
        } else {
            self.symbols
                .get(index + 1)
                .is_none_or(|next| address < next.start)
        };
        inside.then_some(index)
    }

    /// The function containing `address` and the offset into it.
    pub fn lookup(&self, address: u64) -> Option<(&Symbol, u64)> {
        let symbol = &self.symbols[self.lookup_index(address)?];
        Some((symbol, address - symbol.start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_mapping_symbols_and_finds_containing_function() {
        let mut table = SymbolTable::default();
        table.add("$x", 0x100, 0, 0);
        table.add("$xrv64i2p1_m2p0", 0x100, 0, 0);
        table.add("$d", 0x180, 0, 0);
        table.add("main", 0x100, 0x40, 0);
        table.add("helper", 0x200, 0, 0);
        table.finish();
        assert_eq!(table.len(), 2);
        assert_eq!(
            table.lookup(0x13e).map(|(s, o)| (s.name.as_str(), o)),
            Some(("main", 0x3e))
        );
        assert_eq!(table.lookup(0x140), None, "past main's size");
        assert_eq!(
            table.lookup(0x9999).map(|(s, _)| s.name.as_str()),
            Some("helper")
        );
        assert_eq!(table.lookup(0x50), None);
    }

    #[test]
    fn demangles_rust_names() {
        let mut table = SymbolTable::default();
        table.add("_ZN4core3fmt5write17h0123456789abcdefE", 0x10, 4, 0);
        table.finish();
        assert_eq!(table.lookup(0x10).unwrap().0.name, "core::fmt::write");
    }
}
