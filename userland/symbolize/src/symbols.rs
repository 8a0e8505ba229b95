//! Function symbols sorted by address: the answer when there is no DWARF,
//! and the fast path when only the outermost function is wanted.

use std::borrow::Cow;

use crate::FunctionSymbol;

/// How sure we are that a symbol names a function; a better kind wins when
/// several symbols share an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum SymbolKind {
    /// `STT_FUNC` / `STT_GNU_IFUNC`, or a kallsyms text symbol.
    Function,
    /// `STT_NOTYPE` in executable code, as assembly entry points often are.
    Untyped,
}

/// A symbol offered to the table; [`SymbolTable::new`] decides whether it is
/// a function.
#[derive(Debug, Clone)]
pub(crate) struct Candidate<'a> {
    /// Borrowed from the symbol table or kallsyms text where possible: a
    /// vmlinux or kallsyms has over 100,000 of them.
    pub name: Cow<'a, str>,
    pub address: u64,
    /// `st_size`, 0 when unknown.
    pub size: u64,
    pub kind: SymbolKind,
    pub global: bool,
    /// `STB_WEAK`, or a kallsyms `W`.
    pub weak: bool,
    /// End of the symbol's section: a size-less symbol does not extend past it.
    pub section_end: Option<u64>,
}

#[derive(Debug, Clone)]
struct Entry {
    address: u64,
    end: u64,
    /// `names[name_start..name_start + name_len]`.
    name_start: u32,
    name_len: u32,
}

/// A function of a symbol table: its linkage name (borrowed, not demangled: what
/// per-address lookups need) and extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionEntry<'a> {
    pub linkage_name: &'a str,
    pub address: u64,
    /// Bytes from `address` to the end: at least 1.
    pub size: u64,
}

impl FunctionEntry<'_> {
    /// The entry with its name demangled.
    pub fn function(self) -> FunctionSymbol {
        FunctionSymbol {
            linkage_name: self.linkage_name.to_owned(),
            name: crate::demangle(self.linkage_name).into_owned(),
            address: self.address,
            size: self.size,
        }
    }
}

/// A symbol whose address is asked for by name ([`ANCHOR_NAMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Anchor {
    pub name: &'static str,
    pub address: u64,
}

/// Functions sorted by start address, each with its extent.
#[derive(Default, Clone)]
pub(crate) struct SymbolTable {
    entries: Vec<Entry>,
    /// Every name, end to end: one allocation instead of one per symbol.
    names: String,
    /// Addresses of the symbols in [`ANCHOR_NAMES`], which deduplication
    /// may have dropped in favour of an alias at the same address.
    anchors: Vec<Anchor>,
}

/// The count, not every symbol of a vmlinux.
impl std::fmt::Debug for SymbolTable {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("SymbolTable")
            .field("functions", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// Symbols whose address is asked for by name: the start of kernel text,
/// from which the KASLR offset between vmlinux and a running kernel follows.
pub(crate) const ANCHOR_NAMES: [&str; 2] = ["_text", "_stext"];

/// How far back a lookup looks for an enclosing symbol when the nearest one
/// below the address ends before it (a large function with a small alias or
/// label symbol inside it).
const ENCLOSING_LOOKBACK: usize = 8;

/// Extent given to the last size-less symbol when nothing bounds it
/// (kallsyms has no sizes and no section ends): one page, as perf does.
const UNBOUNDED_EXTENT: u64 = 4096;

/// A function of a list without sizes (kallsyms), its name in a names
/// string.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListedSymbol {
    pub address: u64,
    pub name_start: u32,
    pub name_len: u32,
}

impl SymbolTable {
    pub fn new<'a>(candidates: impl IntoIterator<Item = Candidate<'a>>) -> SymbolTable {
        let mut anchors = Vec::new();
        let mut candidates: Vec<Candidate<'a>> = candidates
            .into_iter()
            .map(without_version)
            .inspect(|candidate| {
                if let Some(name) = ANCHOR_NAMES.iter().find(|name| **name == &*candidate.name) {
                    anchors.push(Anchor {
                        name,
                        address: candidate.address,
                    });
                }
            })
            .filter(|candidate| {
                is_function_name(&candidate.name)
                    && may_be_function(candidate.kind, candidate.global, candidate.size)
            })
            .collect();
        // The best symbol of each address first: functions over untyped
        // symbols, then perf's choice among aliases (sized over size-less,
        // strong over weak, global over local, fewer leading underscores,
        // the longer name), so that frames read as they do in `perf report`.
        // Lazily (`then_with`): most pairs differ in address, and the name keys scan.
        candidates.sort_by(|a, b| {
            a.address
                .cmp(&b.address)
                .then_with(|| a.kind.cmp(&b.kind))
                .then_with(|| (b.size > 0).cmp(&(a.size > 0)))
                .then_with(|| a.weak.cmp(&b.weak))
                .then_with(|| b.global.cmp(&a.global))
                .then_with(|| leading_underscores(&a.name).cmp(&leading_underscores(&b.name)))
                .then_with(|| b.name.len().cmp(&a.name.len()))
                .then_with(|| a.name.cmp(&b.name))
        });
        candidates.dedup_by_key(|candidate| candidate.address);

        let mut entries = Vec::with_capacity(candidates.len());
        let mut names = String::with_capacity(
            candidates
                .iter()
                .map(|candidate| candidate.name.len())
                .sum(),
        );
        for (index, candidate) in candidates.iter().enumerate() {
            let end = if candidate.size > 0 {
                candidate.address.saturating_add(candidate.size)
            } else {
                let next_function = candidates[index + 1..]
                    .iter()
                    .find(|next| next.kind == SymbolKind::Function)
                    .map(|next| next.address);
                match (next_function, candidate.section_end) {
                    (Some(next), Some(section_end)) => next.min(section_end),
                    (Some(next), None) => next,
                    (None, Some(section_end)) => section_end,
                    (None, None) => candidate.address.saturating_add(UNBOUNDED_EXTENT),
                }
            };
            // Names longer than 64 KiB are cut (at a character boundary):
            // no linkage name is that long, and the entry stays small.
            let name = truncate_at_char_boundary(&candidate.name, u16::MAX as usize);
            let Ok(name_start) = u32::try_from(names.len()) else {
                // Over 4 GiB of names: the table ends here.
                break;
            };
            names.push_str(name);
            entries.push(Entry {
                address: candidate.address,
                end: end.max(candidate.address.saturating_add(1)),
                name_start,
                name_len: name.len() as u32,
            });
        }
        SymbolTable {
            entries,
            names,
            anchors,
        }
    }

    /// Functions listed without sizes (kallsyms), their names in `names`:
    /// each extends to the next one's address. Of several at one address,
    /// the one listed last names it: what perf ends up with, since it
    /// sizes each alias but the last to zero and then prefers the sized one.
    pub fn from_listed(
        mut listed: Vec<ListedSymbol>,
        names: String,
        anchors: Vec<Anchor>,
    ) -> SymbolTable {
        // A stable sort of the reversed list puts the last listed alias first.
        listed.reverse();
        listed.sort_by_key(|symbol| symbol.address);
        listed.dedup_by_key(|symbol| symbol.address);
        let entries = listed
            .iter()
            .enumerate()
            .map(|(index, symbol)| Entry {
                address: symbol.address,
                end: listed.get(index + 1).map_or_else(
                    || symbol.address.saturating_add(UNBOUNDED_EXTENT),
                    |next| next.address,
                ),
                name_start: symbol.name_start,
                name_len: symbol.name_len,
            })
            .collect();
        SymbolTable {
            entries,
            names,
            anchors,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the function `name` at `address` of `size` bytes (at least one), kept in
    /// address order; a function already listed at `address` stays. For a table
    /// filled as its functions are met (kernel functions the kernel names one by
    /// one), not for a whole symbol table (which `new` sorts once). Whether it was
    /// added.
    pub fn insert_sized(&mut self, address: u64, size: u64, name: &str) -> bool {
        let position = self
            .entries
            .partition_point(|entry| entry.address < address);
        if self
            .entries
            .get(position)
            .is_some_and(|entry| entry.address == address)
        {
            return false;
        }
        let (Ok(name_start), Ok(name_len)) =
            (u32::try_from(self.names.len()), u32::try_from(name.len()))
        else {
            return false;
        };
        self.names.push_str(name);
        self.entries.insert(
            position,
            Entry {
                address,
                end: address.saturating_add(size.max(1)),
                name_start,
                name_len,
            },
        );
        true
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The function containing `address`.
    pub fn lookup(&self, address: u64) -> Option<FunctionEntry<'_>> {
        self.lookup_index(address)
            .and_then(|index| self.entry(index))
    }

    /// The index (in address order) of the function containing `address`.
    pub fn lookup_index(&self, address: u64) -> Option<usize> {
        let above = self
            .entries
            .partition_point(|entry| entry.address <= address);
        self.entries[..above]
            .iter()
            .rev()
            .take(ENCLOSING_LOOKBACK)
            .position(|entry| address < entry.end)
            .map(|back| above - 1 - back)
    }

    /// The function at `index` (in address order).
    pub fn entry(&self, index: usize) -> Option<FunctionEntry<'_>> {
        // `end > address` for every entry (see `new` and `from_listed`).
        self.entries.get(index).map(|entry| FunctionEntry {
            linkage_name: self.name(entry),
            address: entry.address,
            size: entry.end - entry.address,
        })
    }

    pub fn function(&self, address: u64) -> Option<FunctionSymbol> {
        self.lookup(address).map(FunctionEntry::function)
    }

    fn name(&self, entry: &Entry) -> &str {
        let start = entry.name_start as usize;
        self.names
            .get(start..start + entry.name_len as usize)
            .unwrap_or_default()
    }

    /// The address of the symbol named `name`, if there is one.
    pub fn address_of(&self, name: &str) -> Option<u64> {
        let anchor = self.anchors.iter().find(|anchor| anchor.name == name);
        anchor.map(|anchor| anchor.address).or_else(|| {
            self.entries
                .iter()
                .find(|entry| self.name(entry) == name)
                .map(|entry| entry.address)
        })
    }
}

fn leading_underscores(name: &str) -> usize {
    name.bytes().take_while(|byte| *byte == b'_').count()
}

/// Whether a symbol of this kind, binding and size can be a function
/// [`SymbolTable::new`] keeps: a typed function, or an untyped one that is
/// global or sized (a local size-less label inside code is not a function).
/// Callers may drop the others before they read their names, as long as
/// [`is_anchor_name`] ones still reach [`SymbolTable::new`].
pub(crate) fn may_be_function(kind: SymbolKind, global: bool, size: u64) -> bool {
    kind == SymbolKind::Function || global || size > 0
}

/// Whether `name` is one of [`ANCHOR_NAMES`], whose address is kept whatever
/// its symbol is.
pub(crate) fn is_anchor_name(name: &[u8]) -> bool {
    ANCHOR_NAMES.iter().any(|anchor| anchor.as_bytes() == name)
}

/// `dn_comp` of `dn_comp@@GLIBC_2.34`: `.symtab` spells symbol versions
/// into the name, where `.dynsym` keeps them apart. No C, C++ or Rust
/// linkage name contains `@` otherwise.
fn without_version(mut candidate: Candidate<'_>) -> Candidate<'_> {
    if let Some(at) = candidate.name.find('@').filter(|at| *at > 0) {
        match &mut candidate.name {
            Cow::Borrowed(name) => *name = &name[..at],
            Cow::Owned(name) => name.truncate(at),
        }
    }
    candidate
}

fn truncate_at_char_boundary(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Names that never name a function: mapping symbols (`$x`, `$d`,
/// `$xrv64i2p1_m2p0...` on RISC-V, `$a`/`$t` on Arm), assembler-local labels
/// (`.L...`) and empty names.
pub(crate) fn is_function_name(name: &str) -> bool {
    !(name.is_empty() || name.starts_with('$') || name.starts_with(".L"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(linkage_name: &str, address: u64, size: u64) -> FunctionEntry<'_> {
        FunctionEntry {
            linkage_name,
            address,
            size,
        }
    }

    fn candidate(name: &str, address: u64, size: u64, kind: SymbolKind) -> Candidate<'_> {
        Candidate {
            name: Cow::Borrowed(name),
            address,
            size,
            kind,
            global: true,
            weak: false,
            section_end: Some(0x1000),
        }
    }

    #[test]
    fn mapping_symbols_and_labels_are_never_functions() {
        let table = SymbolTable::new([
            candidate("$x", 0x100, 0, SymbolKind::Untyped),
            candidate("$xrv64i2p1_m2p0_a2p1", 0x100, 0, SymbolKind::Function),
            candidate("$d", 0x180, 0, SymbolKind::Untyped),
            candidate(".L42", 0x190, 0, SymbolKind::Function),
            candidate("f", 0x100, 0x100, SymbolKind::Function),
        ]);
        assert_eq!(table.len(), 1);
        assert_eq!(table.lookup(0x190), Some(entry("f", 0x100, 0x100)));
    }

    #[test]
    fn size_less_symbols_extend_to_the_next_function() {
        let table = SymbolTable::new([
            candidate("a", 0x100, 0, SymbolKind::Function),
            candidate("label", 0x140, 0, SymbolKind::Untyped),
            candidate("b", 0x200, 0x10, SymbolKind::Function),
            candidate("c", 0x300, 0, SymbolKind::Function),
        ]);
        assert_eq!(table.lookup(0x13f), Some(entry("a", 0x100, 0x100)));
        assert_eq!(table.lookup(0x150), Some(entry("label", 0x140, 0xc0)));
        assert_eq!(table.lookup(0x210), None);
        assert_eq!(table.lookup(0xfff), Some(entry("c", 0x300, 0xd00)));
        assert_eq!(table.lookup(0x1000), None);
        assert_eq!(table.lookup(0x50), None);
    }

    #[test]
    fn symbol_versions_are_not_part_of_the_name() {
        let table = SymbolTable::new([candidate(
            "dn_comp@@GLIBC_2.34",
            0x100,
            8,
            SymbolKind::Function,
        )]);
        assert_eq!(table.lookup(0x100), Some(entry("dn_comp", 0x100, 8)));
    }

    #[test]
    fn functions_win_over_aliases_and_enclose_small_symbols() {
        let table = SymbolTable::new([
            candidate("alias", 0x100, 0, SymbolKind::Untyped),
            candidate("big", 0x100, 0x200, SymbolKind::Function),
            candidate("inner", 0x180, 0x8, SymbolKind::Function),
        ]);
        assert_eq!(
            table.lookup(0x104).map(|found| found.linkage_name),
            Some("big")
        );
        assert_eq!(
            table.lookup(0x184).map(|found| found.linkage_name),
            Some("inner")
        );
        assert_eq!(
            table.lookup(0x190).map(|found| found.linkage_name),
            Some("big")
        );
    }

    #[test]
    fn aliases_are_chosen_as_perf_chooses_them() {
        let named = |name: &'static str, global: bool, weak: bool| Candidate {
            global,
            weak,
            ..candidate(name, 0x100, 0x40, SymbolKind::Function)
        };
        let best = |candidates: Vec<Candidate<'static>>| {
            SymbolTable::new(candidates)
                .lookup(0x100)
                .map(|found| found.linkage_name.to_owned())
        };
        // (name, global, weak) of each alias, and the one perf shows.
        let cases = [
            // Fewer leading underscores, then the longer name.
            (
                [("__libc_malloc", true, false), ("malloc", true, false)],
                "malloc",
            ),
            (
                [
                    ("__memcpy_avx_unaligned_erms", false, false),
                    ("__memmove_avx_unaligned_erms", false, false),
                ],
                "__memmove_avx_unaligned_erms",
            ),
            // Strong over weak, global over local, before any name rule.
            (
                [("free", true, true), ("__libc_free", true, false)],
                "__libc_free",
            ),
            (
                [("local", false, false), ("__global", true, false)],
                "__global",
            ),
        ];
        for (aliases, expected) in cases {
            let candidates = aliases
                .iter()
                .map(|&(name, global, weak)| named(name, global, weak))
                .collect();
            assert_eq!(best(candidates).as_deref(), Some(expected), "{aliases:?}");
        }
    }
}
