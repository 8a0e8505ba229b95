//! Every function of one file, each demangled once: for callers that name many
//! addresses (a trace decoder printing each block's function) or walk the functions.

use crate::symbols::SymbolTable;
use crate::FunctionSymbol;

/// The function symbols of one ELF, with the choice of aliases and the extents of
/// [`ObjectSymbolizer::function`](crate::ObjectSymbolizer::function) (the same table),
/// each name demangled once. Addresses are link-time addresses.
#[derive(Clone, Default)]
pub struct FunctionTable {
    table: SymbolTable,
    /// By index in `table`: address order.
    functions: Vec<FunctionSymbol>,
}

/// The count, not every function.
impl std::fmt::Debug for FunctionTable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("FunctionTable")
            .field("functions", &self.functions.len())
            .finish_non_exhaustive()
    }
}

impl FunctionTable {
    pub(crate) fn new(table: SymbolTable) -> FunctionTable {
        let functions = (0..table.len())
            .filter_map(|index| table.entry(index))
            .map(|entry| entry.function())
            .collect();
        FunctionTable { table, functions }
    }

    pub fn len(&self) -> usize {
        self.functions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// The functions in address order.
    pub fn iter(&self) -> std::slice::Iter<'_, FunctionSymbol> {
        self.functions.iter()
    }

    /// The function at `index` (in address order).
    pub fn get(&self, index: usize) -> Option<&FunctionSymbol> {
        self.functions.get(index)
    }

    /// The index of the function containing link-time address `vaddr`.
    pub fn lookup_index(&self, vaddr: u64) -> Option<usize> {
        self.table.lookup_index(vaddr)
    }

    /// The function containing link-time address `vaddr` and the offset into it.
    pub fn lookup(&self, vaddr: u64) -> Option<(&FunctionSymbol, u64)> {
        let function = self.functions.get(self.lookup_index(vaddr)?)?;
        // `lookup_index` found `function.address <= vaddr`.
        Some((function, vaddr - function.address))
    }

    /// The first function (in address order) whose demangled name is `name`.
    pub fn named(&self, name: &str) -> Option<&FunctionSymbol> {
        self.functions.iter().find(|function| function.name == name)
    }
}

impl<'a> IntoIterator for &'a FunctionTable {
    type Item = &'a FunctionSymbol;
    type IntoIter = std::slice::Iter<'a, FunctionSymbol>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}
