//! One ELF file, from its bytes: no I/O, no caching beyond what the DWARF
//! lookups build for themselves.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionIndex};

use crate::dwarf::{DebugInfo, DwarfSource, LoadError};
use crate::symbols::{
    is_anchor_name, may_be_function, Candidate, FunctionEntry, SymbolKind, SymbolTable,
};
use crate::{Frame, FunctionSymbol, FunctionTable, SymbolizeError};

/// `.gnu_debuglink`: the file name of the separate debug file and the CRC32
/// of its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugLink {
    pub file_name: String,
    pub crc: u32,
}

/// `.gnu_debugaltlink`: the supplementary file (made by dwz) holding DWARF
/// shared by several debug files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupplementaryLink {
    pub path: String,
    pub build_id: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
struct LoadSegment {
    file_offset: u64,
    file_size: u64,
    address: u64,
}

/// What one parse of an ELF file yields; the parsed `object::File` borrows
/// the bytes, so everything needed later is copied out of it here.
struct Parsed {
    build_id: Option<Vec<u8>>,
    debug_link: Option<DebugLink>,
    supplementary_link: Option<SupplementaryLink>,
    segments: Vec<LoadSegment>,
    symbols: SymbolTable,
    has_symbol_table: bool,
    dwarf: Option<DwarfSource>,
}

impl Parsed {
    fn new(name: &str, bytes: &Arc<[u8]>) -> Result<Parsed, SymbolizeError> {
        let file = object::File::parse(&**bytes).map_err(|source| SymbolizeError::Parse {
            file: name.to_owned(),
            source,
        })?;
        let mut parsed = Parsed::of_file(name, &file)?;
        parsed.dwarf = DwarfSource::from_object(&file, bytes);
        Ok(parsed)
    }

    /// Everything but the DWARF of the open file `file`, read in place: mapped, so
    /// that only the pages of the headers and symbol tables are read (or through a
    /// read cache when the file cannot be mapped).
    fn in_place(name: &str, file: &std::fs::File) -> Result<Parsed, SymbolizeError> {
        let parse_error = |source| SymbolizeError::Parse {
            file: name.to_owned(),
            source,
        };
        // SAFETY: the map is read-only and lives only while this function parses
        // it; everything kept is copied out (names into the symbol table's own
        // string). A file truncated by another process meanwhile ends this one
        // with SIGBUS, as it would perf, which maps the files it symbolizes too.
        if let Ok(map) = unsafe { memmap2::Mmap::map(file) } {
            let object = object::File::parse(&*map).map_err(parse_error)?;
            return Parsed::of_file(name, &object);
        }
        let cache = object::ReadCache::new(file);
        let object = object::File::parse(&cache).map_err(parse_error)?;
        Parsed::of_file(name, &object)
    }

    /// Everything but the DWARF, from a file read through any `ReadRef` (a whole
    /// buffer, or a cache that reads only the headers and tables it is asked for).
    fn of_file<'data, R: object::ReadRef<'data>>(
        name: &str,
        file: &object::File<'data, R>,
    ) -> Result<Parsed, SymbolizeError> {
        let parse_error = |source| SymbolizeError::Parse {
            file: name.to_owned(),
            source,
        };
        let build_id = file.build_id().map_err(parse_error)?.map(<[u8]>::to_vec);
        let debug_link = file
            .gnu_debuglink()
            .map_err(parse_error)?
            .map(|(file_name, crc)| DebugLink {
                file_name: String::from_utf8_lossy(file_name).into_owned(),
                crc,
            });
        let supplementary_link =
            file.gnu_debugaltlink()
                .map_err(parse_error)?
                .map(|(path, build_id)| SupplementaryLink {
                    path: String::from_utf8_lossy(path).into_owned(),
                    build_id: build_id.to_vec(),
                });
        let segments = file
            .segments()
            .filter_map(|segment| {
                let (file_offset, file_size) = segment.file_range();
                (file_size > 0).then(|| LoadSegment {
                    file_offset,
                    file_size,
                    address: segment.address(),
                })
            })
            .collect();
        let has_symbol_table = file.symbol_table().is_some();
        Ok(Parsed {
            build_id,
            debug_link,
            supplementary_link,
            segments,
            symbols: function_symbols(file),
            has_symbol_table,
            dwarf: None,
        })
    }
}

/// The function candidates of `.symtab` and `.dynsym` (a stripped file
/// still has the latter).
fn function_symbols<'data, R: object::ReadRef<'data>>(
    file: &object::File<'data, R>,
) -> SymbolTable {
    struct SectionInfo {
        end: u64,
        executable: bool,
    }
    let sections: HashMap<SectionIndex, SectionInfo> = file
        .sections()
        .map(|section| {
            let executable = match section.flags() {
                object::SectionFlags::Elf { sh_flags } => {
                    sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0
                }
                _ => section.kind() == object::SectionKind::Text,
            };
            let info = SectionInfo {
                end: section.address().saturating_add(section.size()),
                executable,
            };
            (section.index(), info)
        })
        .collect();
    let candidates = file
        .symbols()
        .chain(file.dynamic_symbols())
        .filter_map(|symbol| {
            let section = sections.get(&symbol.section_index()?)?;
            let kind = match symbol.kind() {
                object::SymbolKind::Text => SymbolKind::Function,
                object::SymbolKind::Unknown if section.executable => SymbolKind::Untyped,
                _ => return None,
            };
            let global = !symbol.is_local();
            let name = symbol.name_bytes().ok()?;
            // Most untyped symbols in code are local labels (on RISC-V, the
            // `$x` mapping symbols: two thirds of a Rust binary's symbols): dropped
            // here, before their names are made text.
            if !may_be_function(kind, global, symbol.size()) && !is_anchor_name(name) {
                return None;
            }
            Some(Candidate {
                name: symbol_name(name),
                address: symbol.address(),
                size: symbol.size(),
                kind,
                global,
                weak: symbol.is_weak(),
                section_end: Some(section.end),
            })
        });
    SymbolTable::new(candidates)
}

/// A symbol's name as text: borrowed when it is UTF-8, as nearly every name
/// is (`from_utf8` checks a word at a time, `from_utf8_lossy` a byte at a
/// time), else with U+FFFD for the bytes that are not.
fn symbol_name(name: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(name) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(name),
    }
}

/// Symbolizes addresses of one ELF file (executable, shared object, vmlinux
/// or separate debug file), given its bytes.
///
/// Function names come from the symbol table; source lines and inline
/// stacks from DWARF, which may live in a separate debug file
/// ([`attach_debug_file`](Self::attach_debug_file)) and a dwz supplementary
/// file ([`attach_supplementary_file`](Self::attach_supplementary_file)). The DWARF
/// is loaded (and decompressed) on the first [`frames`](Self::frames) call.
#[derive(Debug)]
pub struct ObjectSymbolizer {
    name: String,
    build_id: Option<Vec<u8>>,
    debug_link: Option<DebugLink>,
    segments: Vec<LoadSegment>,
    symbols: SymbolTable,
    has_symbol_table: bool,
    /// The file the DWARF comes from, for error messages.
    dwarf_name: String,
    dwarf: Option<DwarfSource>,
    supplementary_link: Option<SupplementaryLink>,
    supplementary: Option<DwarfSource>,
    debug_info: OnceCell<Result<DebugInfo, LoadError>>,
}

impl ObjectSymbolizer {
    /// Parses the ELF headers, segments and symbols of `bytes`; `name` is
    /// used in errors.
    pub fn new(name: &str, bytes: impl Into<Arc<[u8]>>) -> Result<Self, SymbolizeError> {
        let bytes = bytes.into();
        Ok(Self::from_parsed(name, Parsed::new(name, &bytes)?))
    }

    /// The headers, segments and symbols of the open file `file`, read in place: only
    /// the parts asked for are read, so a large binary costs the size of its symbol
    /// table, not of the file. Without DWARF: for function-level symbolization.
    pub fn symbols_only(name: &str, file: &std::fs::File) -> Result<Self, SymbolizeError> {
        Ok(Self::from_parsed(name, Parsed::in_place(name, file)?))
    }

    fn from_parsed(name: &str, parsed: Parsed) -> Self {
        ObjectSymbolizer {
            name: name.to_owned(),
            build_id: parsed.build_id,
            debug_link: parsed.debug_link,
            segments: parsed.segments,
            symbols: parsed.symbols,
            has_symbol_table: parsed.has_symbol_table,
            dwarf_name: name.to_owned(),
            dwarf: parsed.dwarf,
            supplementary_link: parsed.supplementary_link,
            supplementary: None,
            debug_info: OnceCell::new(),
        }
    }

    /// Takes DWARF (and the full symbol table, when this file has only
    /// `.dynsym`) from the separate debug file `bytes`, as found through
    /// [`debug_link`](Self::debug_link) or the build id. Fails, changing
    /// nothing, when both files have build ids and they differ.
    pub fn attach_debug_file(
        &mut self,
        name: &str,
        bytes: impl Into<Arc<[u8]>>,
    ) -> Result<(), SymbolizeError> {
        let bytes = bytes.into();
        let debug = Parsed::new(name, &bytes)?;
        self.attach_parsed(name, debug)
    }

    /// [`attach_debug_file`](Self::attach_debug_file) for function names only:
    /// the symbol table of the open debug file `file` (when this file has only
    /// `.dynsym`), read in place, without its DWARF.
    pub fn attach_debug_symbols(
        &mut self,
        name: &str,
        file: &std::fs::File,
    ) -> Result<(), SymbolizeError> {
        let debug = Parsed::in_place(name, file)?;
        self.attach_parsed(name, debug)
    }

    fn attach_parsed(&mut self, name: &str, debug: Parsed) -> Result<(), SymbolizeError> {
        if let (Some(expected), Some(found)) = (&self.build_id, &debug.build_id) {
            if expected != found {
                return Err(SymbolizeError::DebugFileMismatch {
                    file: self.name.clone(),
                    debug_file: name.to_owned(),
                    expected: expected.clone(),
                    found: found.clone(),
                });
            }
        }
        if !self.has_symbol_table && debug.has_symbol_table {
            self.symbols = debug.symbols;
            self.has_symbol_table = true;
        }
        if debug.dwarf.is_some() {
            self.dwarf = debug.dwarf;
            self.dwarf_name = name.to_owned();
            self.supplementary_link = debug.supplementary_link;
            self.supplementary = None;
            self.debug_info = OnceCell::new();
        }
        Ok(())
    }

    /// Adds the supplementary DWARF file named by
    /// [`supplementary_link`](Self::supplementary_link). Fails, changing
    /// nothing, when its build id is not the one the link names.
    pub fn attach_supplementary_file(
        &mut self,
        name: &str,
        bytes: impl Into<Arc<[u8]>>,
    ) -> Result<(), SymbolizeError> {
        let bytes = bytes.into();
        let supplementary = Parsed::new(name, &bytes)?;
        if let (Some(link), Some(found)) = (&self.supplementary_link, &supplementary.build_id) {
            if &link.build_id != found {
                return Err(SymbolizeError::DebugFileMismatch {
                    file: self.dwarf_name.clone(),
                    debug_file: name.to_owned(),
                    expected: link.build_id.clone(),
                    found: found.clone(),
                });
            }
        }
        self.supplementary = supplementary.dwarf;
        self.debug_info = OnceCell::new();
        Ok(())
    }

    /// The name given to [`new`](Self::new).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The GNU build id note, if the file has one.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// Whether there is DWARF to give lines and inline stacks; without it
    /// only function names are known.
    pub fn has_debug_info(&self) -> bool {
        self.dwarf.is_some()
    }

    /// Whether the file has a full symbol table (`.symtab`), not just `.dynsym`.
    pub fn has_symbol_table(&self) -> bool {
        self.has_symbol_table
    }

    /// Whether any function symbol is known.
    pub fn has_symbols(&self) -> bool {
        !self.symbols.is_empty()
    }

    /// The `.gnu_debuglink` of the file, naming its separate debug file.
    pub fn debug_link(&self) -> Option<&DebugLink> {
        self.debug_link.as_ref()
    }

    /// The `.gnu_debugaltlink` of the DWARF in use, naming the dwz
    /// supplementary file it refers to.
    pub fn supplementary_link(&self) -> Option<&SupplementaryLink> {
        self.supplementary_link.as_ref()
    }

    /// Link-time virtual address of a file offset, through the `PT_LOAD`
    /// segments: a sample's file offset (`address - start + pgoff` of its
    /// MMAP2 record) becomes the address symbols and DWARF use.
    pub fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        let inside = |segment: &&LoadSegment| {
            offset >= segment.file_offset && offset - segment.file_offset < segment.file_size
        };
        // `None` for a segment whose addresses pass the end of the 64-bit space.
        self.segments
            .iter()
            .find(inside)
            .and_then(|segment| segment.address.checked_add(offset - segment.file_offset))
    }

    /// The link-time address of the function symbol `name`.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.symbols.address_of(name)
    }

    /// The outermost function at `vaddr` from the symbol table: the fast
    /// path when inline frames and lines are not wanted.
    pub fn function(&self, vaddr: u64) -> Option<FunctionSymbol> {
        self.symbols.function(vaddr)
    }

    /// The function containing `vaddr`, its name neither demangled nor copied.
    pub fn function_entry(&self, vaddr: u64) -> Option<FunctionEntry<'_>> {
        self.symbols.lookup(vaddr)
    }

    /// Every function of the symbol table, each name demangled once: for naming
    /// many addresses, or walking the functions.
    pub fn function_table(&self) -> FunctionTable {
        FunctionTable::new(self.symbols.clone())
    }

    /// The inline stack at link-time address `vaddr`, innermost first.
    /// Without DWARF for the address, one frame from the symbol table (no
    /// line); empty when the address is in no function.
    pub fn frames(&self, vaddr: u64) -> Result<Vec<Frame>, SymbolizeError> {
        let mut frames = match self.debug_info()? {
            Some(debug_info) => {
                debug_info
                    .frames(vaddr)
                    .map_err(|source| SymbolizeError::Dwarf {
                        file: self.dwarf_name.clone(),
                        address: Some(vaddr),
                        source,
                    })?
            }
            None => Vec::new(),
        };
        let symbol = self.symbols.lookup(vaddr);
        match (frames.last_mut(), symbol) {
            (None, Some(symbol)) => {
                frames.push(Frame::from_linkage_name(symbol.linkage_name));
            }
            // A line without a function: the unit has a line table but no
            // DIE covering the address (assembly sources, for one).
            (Some(outermost), Some(symbol)) if outermost.function.is_none() => {
                outermost.function = Some(crate::demangle(symbol.linkage_name).into_owned());
                outermost.linkage_name = Some(symbol.linkage_name.to_owned());
            }
            _ => {}
        }
        Ok(frames)
    }

    /// The address ranges, in link-time addresses, of the DWARF function whose
    /// code is at `vaddr`: every range of every subprogram of its name (a function
    /// split into hot and cold parts has several). Empty without DWARF for the
    /// address.
    pub fn function_ranges(&self, vaddr: u64) -> Result<Vec<Range<u64>>, SymbolizeError> {
        let Some(debug_info) = self.debug_info()? else {
            return Ok(Vec::new());
        };
        debug_info
            .function_ranges(vaddr)
            .map_err(|source| SymbolizeError::Dwarf {
                file: self.dwarf_name.clone(),
                address: Some(vaddr),
                source,
            })
    }

    fn debug_info(&self) -> Result<Option<&DebugInfo>, SymbolizeError> {
        let Some(dwarf) = &self.dwarf else {
            return Ok(None);
        };
        let loaded = self
            .debug_info
            .get_or_init(|| DebugInfo::load(dwarf, self.supplementary.as_ref()));
        match loaded {
            Ok(debug_info) => Ok(Some(debug_info)),
            Err(error) => Err(self.load_error(*error)),
        }
    }

    fn load_error(&self, error: LoadError) -> SymbolizeError {
        let file = self.dwarf_name.clone();
        match error {
            LoadError::Section { section, source } => SymbolizeError::Section {
                file,
                section,
                source,
            },
            LoadError::Truncated { section } => SymbolizeError::SectionTruncated { file, section },
            LoadError::Dwarf(source) => SymbolizeError::Dwarf {
                file,
                address: None,
                source,
            },
        }
    }
}

#[cfg(test)]
mod symbols_only_tests {
    use super::*;

    /// Reading only the headers and symbol tables gives the same functions, segments
    /// and build id as reading the whole file, and no DWARF.
    #[test]
    fn symbols_only_matches_the_whole_file() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/ntrace/interp/program"
        );
        let whole = ObjectSymbolizer::new("program", std::fs::read(path).unwrap()).unwrap();
        let file = std::fs::File::open(path).unwrap();
        let partial = ObjectSymbolizer::symbols_only("program", &file).unwrap();
        assert_eq!(whole.build_id(), partial.build_id());
        assert!(!partial.has_debug_info());
        assert!(partial.has_symbols());
        assert_eq!(
            whole.vaddr_of_offset(0x1000),
            partial.vaddr_of_offset(0x1000)
        );
        let mut checked = 0;
        for address in (0x10000..0x40000).step_by(6) {
            assert_eq!(
                whole.function(address),
                partial.function(address),
                "{address:#x}"
            );
            checked += usize::from(whole.function(address).is_some());
        }
        assert!(checked > 1000, "only {checked} addresses in functions");
    }

    /// The function table names every address as `function` does, and finds
    /// functions by their demangled names.
    #[test]
    fn the_function_table_agrees_with_function() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/ntrace/interp/program"
        );
        let object = ObjectSymbolizer::new("program", std::fs::read(path).unwrap()).unwrap();
        let table = object.function_table();
        assert!(table.len() > 10);
        for address in (0x10000..0x40000).step_by(6) {
            let expected = object.function(address);
            let found = table.lookup(address);
            assert_eq!(found.map(|(function, _)| function), expected.as_ref());
            if let Some((function, offset)) = found {
                assert_eq!(function.address + offset, address);
                assert_eq!(
                    table.get(table.lookup_index(address).unwrap()),
                    Some(function)
                );
            }
        }
        let main = table.named("main").expect("main");
        assert_eq!(object.symbol_address("main"), Some(main.address));
        assert!(table
            .iter()
            .zip(table.iter().skip(1))
            .all(|(a, b)| a.address < b.address));
    }
}
