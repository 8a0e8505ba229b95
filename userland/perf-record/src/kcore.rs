//! A copy of the running kernel's code, as `perf record --kcore` keeps one: a trace of
//! the kernel is decoded against the code that ran, and that is not vmlinux's. The
//! kernel patches its text at boot and after (alternatives, jump labels, ftrace), and
//! modules exist only where they were loaded. The code is read from `/proc/kcore`: the
//! kernel's text `[_stext, _etext)` and each module's memory from `/proc/modules`.
//!
//! The copy is written as one RISC-V ELF executable ([`KernelCode::to_elf`]): a `PT_LOAD`
//! segment and an executable section per range at its run-time address, a symbol table
//! of kallsyms' text symbols (so that every tool that names an ELF's functions names
//! the kernel's), and the kernel's notes (`/sys/kernel/notes`, with its build id). perf
//! copies kcore whole with kallsyms and modules beside it; one self-describing ELF needs
//! no reader of its own.

use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use object::elf;
use object::read::elf::{FileHeader as _, ProgramHeader as _};
use object::write::elf::{FileHeader, ProgramHeader, SectionHeader, SectionIndex, Sym, Writer};
use object::write::StringId;
use object::{Endianness, LittleEndian};

/// Where the running kernel is read from (the defaults: this machine's).
#[derive(Debug, Clone)]
pub struct KernelSources {
    pub kallsyms: PathBuf,
    pub modules: PathBuf,
    pub kcore: PathBuf,
    pub notes: PathBuf,
}

impl Default for KernelSources {
    fn default() -> Self {
        Self {
            kallsyms: PathBuf::from("/proc/kallsyms"),
            modules: PathBuf::from("/proc/modules"),
            kcore: PathBuf::from("/proc/kcore"),
            notes: PathBuf::from("/sys/kernel/notes"),
        }
    }
}

/// A range of the kernel's code: the kernel's text, or a module's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRange {
    /// `[kernel]`, or the module's name.
    pub owner: String,
    pub address: u64,
    pub bytes: Vec<u8>,
}

/// A text symbol of kallsyms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbol {
    pub address: u64,
    pub name: String,
    /// `T`/`W` rather than `t`/`w`.
    pub global: bool,
}

/// The running kernel's code, its symbols and notes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelCode {
    /// Sorted by address, not overlapping.
    pub ranges: Vec<CodeRange>,
    /// The symbols inside `ranges`, sorted by address.
    pub symbols: Vec<KernelSymbol>,
    /// The kernel's ELF notes (with its GNU build id), empty when unreadable.
    pub notes: Vec<u8>,
}

/// Why the kernel's code could not be copied.
#[derive(Debug, thiserror::Error)]
pub enum KcoreError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no _stext and _etext (addresses hidden: kptr_restrict, or not root)", path.display())]
    NoKernelText { path: PathBuf },
    #[error("{}: {what}", path.display())]
    Kcore { path: PathBuf, what: String },
    #[error("{} has no segment holding {size:#x} bytes at {address:#x} ({owner})", path.display())]
    NotInKcore {
        path: PathBuf,
        owner: String,
        address: u64,
        size: u64,
    },
    #[error("cannot lay the kernel's code out as an ELF file: {0}")]
    Write(String),
}

/// Where the running kernel's text is and which kernel it is: what perf's
/// `[kernel.kallsyms]_text` MMAP record says, so that a trace of the kernel recorded
/// without a copy of its code can be decoded against its vmlinux, found by the build
/// id and moved by the difference between the two `_text` addresses (KASLR).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPlace {
    /// `_text`'s run-time address.
    pub text: u64,
    /// `_etext`'s.
    pub end: u64,
    /// From the kernel's notes; `None` when they are unreadable.
    pub build_id: Option<Vec<u8>>,
}

impl KernelPlace {
    /// Reads the running kernel's place (kallsyms' addresses: root, or kptr_restrict 0).
    pub fn read(sources: &KernelSources) -> Result<Self, KcoreError> {
        let symbols = kallsyms_text_symbols(sources)?;
        match (
            address_of(&symbols, symbolize::KERNEL_TEXT_SYMBOL),
            address_of(&symbols, "_etext"),
        ) {
            (Some(text), Some(end)) if text < end => Ok(Self {
                text,
                end,
                build_id: std::fs::read(&sources.notes)
                    .ok()
                    .and_then(|notes| gnu_build_id(&notes)),
            }),
            _ => Err(KcoreError::NoKernelText {
                path: sources.kallsyms.clone(),
            }),
        }
    }
}

/// The text symbols of `sources.kallsyms`, sorted by address.
fn kallsyms_text_symbols(sources: &KernelSources) -> Result<Vec<KernelSymbol>, KcoreError> {
    let kallsyms =
        std::fs::read_to_string(&sources.kallsyms).map_err(|source| KcoreError::Read {
            path: sources.kallsyms.clone(),
            source,
        })?;
    Ok(text_symbols(&kallsyms))
}

/// The address of symbol `name`; `None` when absent or hidden (kptr_restrict shows 0).
fn address_of(symbols: &[KernelSymbol], name: &str) -> Option<u64> {
    symbols
        .iter()
        .find(|symbol| symbol.name == name)
        .map(|symbol| symbol.address)
        .filter(|&address| address != 0)
}

/// The GNU build id among ELF notes (`/sys/kernel/notes`, a `PT_NOTE`'s bytes).
pub fn gnu_build_id(notes: &[u8]) -> Option<Vec<u8>> {
    let mut iterator = object::read::elf::NoteIterator::<elf::FileHeader64<LittleEndian>>::new(
        LittleEndian,
        4,
        notes,
    )
    .ok()?;
    while let Ok(Some(note)) = iterator.next() {
        if note.name() == b"GNU" && note.n_type(LittleEndian) == elf::NT_GNU_BUILD_ID {
            return Some(note.desc().to_vec()).filter(|id| !id.is_empty());
        }
    }
    None
}

/// A module's memory larger than this is not a module's (a misread line): refused
/// rather than read.
const MODULE_SIZE_LIMIT: u64 = 256 << 20;

/// How far into a kcore its program headers may reach (a kcore has tens of segments;
/// more would be a misread header, refused rather than allocated).
const PROGRAM_HEADERS_LIMIT: u64 = 1 << 20;

/// `PT_LOAD` of a kcore's program header, as needed here.
#[derive(Debug, Clone, Copy)]
struct KcoreSegment {
    virtual_address: u64,
    file_offset: u64,
    size: u64,
}

impl KernelCode {
    /// Reads the running kernel's code (root, `CONFIG_PROC_KCORE`).
    pub fn read(sources: &KernelSources) -> Result<Self, KcoreError> {
        let mut symbols = kallsyms_text_symbols(sources)?;
        let (Some(start), Some(end)) = (
            address_of(&symbols, "_stext"),
            address_of(&symbols, "_etext"),
        ) else {
            return Err(KcoreError::NoKernelText {
                path: sources.kallsyms.clone(),
            });
        };
        if end <= start {
            return Err(KcoreError::NoKernelText {
                path: sources.kallsyms.clone(),
            });
        }
        let mut wanted = vec![("[kernel]".to_owned(), start, end - start)];
        // A module list is optional (a kernel without modules has none).
        if let Ok(modules) = std::fs::read_to_string(&sources.modules) {
            wanted.extend(module_ranges(&modules));
        }
        let kcore = std::fs::File::open(&sources.kcore).map_err(|source| KcoreError::Read {
            path: sources.kcore.clone(),
            source,
        })?;
        let segments = kcore_segments(&kcore, &sources.kcore)?;
        let mut ranges = Vec::new();
        for (owner, address, size) in wanted {
            let not_in_kcore = || KcoreError::NotInKcore {
                path: sources.kcore.clone(),
                owner: owner.clone(),
                address,
                size,
            };
            let segment = segments
                .iter()
                .find(|segment| {
                    segment.virtual_address <= address
                        && address
                            .checked_add(size)
                            .is_some_and(|end| end <= segment.virtual_address + segment.size)
                })
                .ok_or_else(not_in_kcore)?;
            let mut bytes = vec![0; usize::try_from(size).map_err(|_| not_in_kcore())?];
            kcore
                .read_exact_at(
                    &mut bytes,
                    segment.file_offset + (address - segment.virtual_address),
                )
                .map_err(|source| KcoreError::Read {
                    path: sources.kcore.clone(),
                    source,
                })?;
            ranges.push(CodeRange {
                owner,
                address,
                bytes,
            });
        }
        ranges.sort_by_key(|range| range.address);
        // Overlapping ranges would be one address with two bytes: never from a kernel.
        if ranges
            .windows(2)
            .any(|pair| pair[0].address + pair[0].bytes.len() as u64 > pair[1].address)
        {
            return Err(KcoreError::Kcore {
                path: sources.modules.clone(),
                what: "module memory overlaps the kernel's text or another module's".to_owned(),
            });
        }
        symbols.retain(|symbol| {
            ranges.iter().any(|range| {
                symbol.address >= range.address
                    && symbol.address - range.address < range.bytes.len() as u64
            })
        });
        let mut notes = Vec::new();
        // Without notes the copy has no build id: still the code that ran.
        if let Ok(mut file) = std::fs::File::open(&sources.notes) {
            let _ = file.read_to_end(&mut notes);
        }
        Ok(Self {
            ranges,
            symbols,
            notes,
        })
    }

    /// The copy as a RISC-V ELF executable (see the module's documentation).
    pub fn to_elf(&self) -> Result<Vec<u8>, KcoreError> {
        let mut buffer = Vec::new();
        let mut writer = Writer::new(Endianness::Little, true, &mut buffer);
        let with_notes = !self.notes.is_empty();
        // Layout: header, program headers, each range's bytes, the notes, then the
        // symbol and string tables and the section headers.
        writer.reserve_file_header();
        writer.reserve_program_headers(self.ranges.len() as u32 + u32::from(with_notes));
        let text_offsets: Vec<usize> = self
            .ranges
            .iter()
            .map(|range| writer.reserve(range.bytes.len(), 4096))
            .collect();
        let notes_offset = with_notes.then(|| writer.reserve(self.notes.len(), 4));
        writer.reserve_null_section_index();
        let text_name = writer.add_section_name(b".text");
        let text_sections: Vec<SectionIndex> = self
            .ranges
            .iter()
            .map(|_| writer.reserve_section_index())
            .collect();
        let notes_section = with_notes.then(|| {
            let name = writer.add_section_name(b".notes");
            (name, writer.reserve_section_index())
        });
        writer.reserve_null_symbol_index();
        let symbol_names: Vec<StringId> = self
            .symbols
            .iter()
            .map(|symbol| writer.add_string(symbol.name.as_bytes()))
            .collect();
        // Locals first: ELF wants them before the globals.
        let mut order: Vec<usize> = (0..self.symbols.len()).collect();
        order.sort_by_key(|&index| (self.symbols[index].global, self.symbols[index].address));
        for &index in &order {
            let section = self.section_of(self.symbols[index].address, &text_sections);
            writer.reserve_symbol_index(section);
        }
        writer.reserve_symtab_section_index();
        writer.reserve_symtab();
        writer.reserve_strtab_section_index();
        writer.reserve_strtab();
        writer.reserve_shstrtab_section_index();
        writer.reserve_shstrtab();
        writer.reserve_section_headers();

        writer
            .write_file_header(&FileHeader {
                os_abi: elf::ELFOSABI_NONE,
                abi_version: 0,
                e_type: elf::ET_EXEC,
                e_machine: elf::EM_RISCV,
                e_entry: 0,
                // Compressed instructions may be there (their length is in their bits
                // either way); the ABI is the kernel's, which uses no float registers.
                e_flags: elf::EF_RISCV_RVC,
            })
            .map_err(|error| KcoreError::Write(error.to_string()))?;
        writer.write_align_program_headers();
        for (range, &offset) in self.ranges.iter().zip(&text_offsets) {
            let size = range.bytes.len() as u64;
            writer.write_program_header(&ProgramHeader {
                p_type: elf::PT_LOAD,
                p_flags: elf::PF_R | elf::PF_X,
                p_offset: offset as u64,
                p_vaddr: range.address,
                p_paddr: range.address,
                p_filesz: size,
                p_memsz: size,
                p_align: 4096,
            });
        }
        if let Some(offset) = notes_offset {
            writer.write_program_header(&ProgramHeader {
                p_type: elf::PT_NOTE,
                p_flags: elf::PF_R,
                p_offset: offset as u64,
                p_vaddr: 0,
                p_paddr: 0,
                p_filesz: self.notes.len() as u64,
                p_memsz: 0,
                p_align: 4,
            });
        }
        for range in &self.ranges {
            writer.write_align(4096);
            writer.write(&range.bytes);
        }
        if with_notes {
            writer.write_align(4);
            writer.write(&self.notes);
        }
        writer.write_null_symbol();
        let globals_from = order
            .iter()
            .position(|&index| self.symbols[index].global)
            .unwrap_or(order.len());
        for &index in &order {
            let symbol = &self.symbols[index];
            let binding = if symbol.global {
                elf::STB_GLOBAL
            } else {
                elf::STB_LOCAL
            };
            writer.write_symbol(&Sym {
                name: Some(symbol_names[index]),
                section: self.section_of(symbol.address, &text_sections),
                st_info: (binding << 4) | elf::STT_FUNC,
                st_other: elf::STV_DEFAULT,
                st_shndx: 0,
                st_value: symbol.address,
                st_size: self.symbol_size(index),
            });
        }
        writer.write_strtab();
        writer.write_shstrtab();
        writer.write_null_section_header();
        for ((range, &offset), _) in self.ranges.iter().zip(&text_offsets).zip(&text_sections) {
            writer.write_section_header(&SectionHeader {
                name: Some(text_name),
                sh_type: elf::SHT_PROGBITS,
                sh_flags: u64::from(elf::SHF_ALLOC | elf::SHF_EXECINSTR),
                sh_addr: range.address,
                sh_offset: offset as u64,
                sh_size: range.bytes.len() as u64,
                sh_link: 0,
                sh_info: 0,
                sh_addralign: 4096,
                sh_entsize: 0,
            });
        }
        if let (Some((name, _)), Some(offset)) = (notes_section, notes_offset) {
            writer.write_section_header(&SectionHeader {
                name: Some(name),
                sh_type: elf::SHT_NOTE,
                sh_flags: 0,
                sh_addr: 0,
                sh_offset: offset as u64,
                sh_size: self.notes.len() as u64,
                sh_link: 0,
                sh_info: 0,
                sh_addralign: 4,
                sh_entsize: 0,
            });
        }
        writer.write_symtab_section_header(1 + globals_from as u32);
        writer.write_strtab_section_header();
        writer.write_shstrtab_section_header();
        debug_assert_eq!(writer.reserved_len(), writer.len());
        Ok(buffer)
    }

    /// The section of the range holding `address`.
    fn section_of(&self, address: u64, sections: &[SectionIndex]) -> Option<SectionIndex> {
        self.ranges
            .iter()
            .position(|range| {
                address >= range.address && address - range.address < range.bytes.len() as u64
            })
            .map(|index| sections[index])
    }

    /// Up to the next symbol at a higher address, or the end of its range: kallsyms
    /// gives no sizes.
    fn symbol_size(&self, index: usize) -> u64 {
        let address = self.symbols[index].address;
        let range_end = self
            .ranges
            .iter()
            .find(|range| {
                address >= range.address && address - range.address < range.bytes.len() as u64
            })
            .map_or(address, |range| range.address + range.bytes.len() as u64);
        let next = self.symbols[index..]
            .iter()
            .map(|symbol| symbol.address)
            .find(|&next| next > address)
            .unwrap_or(range_end);
        next.min(range_end) - address
    }
}

/// The text symbols (`t`, `T`, `w`, `W`) of a kallsyms file, sorted by address;
/// malformed lines are skipped (a copy is not the place to refuse a kernel's names).
fn text_symbols(kallsyms: &str) -> Vec<KernelSymbol> {
    let mut symbols: Vec<KernelSymbol> = kallsyms
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let address = u64::from_str_radix(fields.next()?, 16).ok()?;
            let kind = fields.next()?;
            let name = fields.next()?;
            matches!(kind, "t" | "T" | "w" | "W").then(|| KernelSymbol {
                address,
                name: name.to_owned(),
                global: matches!(kind, "T" | "W"),
            })
        })
        .collect();
    symbols.sort_by_key(|symbol| symbol.address);
    symbols
}

/// Each module's memory `(name, address, size)` from `/proc/modules` lines
/// (`name size refs deps state address`); modules whose address is hidden (0) or
/// that are not live are left out.
fn module_ranges(modules: &str) -> Vec<(String, u64, u64)> {
    modules
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let name = *fields.first()?;
            let size: u64 = fields.get(1)?.parse().ok()?;
            if *fields.get(4)? != "Live" {
                return None;
            }
            let address = u64::from_str_radix(fields.get(5)?.strip_prefix("0x")?, 16).ok()?;
            (address != 0 && size > 0 && size <= MODULE_SIZE_LIMIT)
                .then(|| (name.to_owned(), address, size))
        })
        .collect()
}

/// The `PT_LOAD` segments of a kcore file.
fn kcore_segments(file: &std::fs::File, path: &Path) -> Result<Vec<KcoreSegment>, KcoreError> {
    let bad = |what: &str| KcoreError::Kcore {
        path: path.to_owned(),
        what: what.to_owned(),
    };
    let read = |offset: u64, length: usize| {
        let mut bytes = vec![0; length];
        file.read_exact_at(&mut bytes, offset)
            .map_err(|source| KcoreError::Read {
                path: path.to_owned(),
                source,
            })?;
        Ok::<_, KcoreError>(bytes)
    };
    // The header's fixed part first: it says how far the program headers reach.
    let header_size = std::mem::size_of::<elf::FileHeader64<LittleEndian>>();
    let start = read(0, header_size)?;
    let header = elf::FileHeader64::<LittleEndian>::parse(start.as_slice())
        .map_err(|error| bad(&format!("not a little-endian 64-bit ELF file ({error})")))?;
    let table_end = header
        .e_phoff(LittleEndian)
        .checked_add(
            u64::from(header.e_phentsize(LittleEndian))
                .saturating_mul(u64::from(header.e_phnum(LittleEndian))),
        )
        .filter(|&end| end <= PROGRAM_HEADERS_LIMIT)
        .ok_or_else(|| bad("program header table out of reach"))?;
    // The header and its program headers, read once, for object to parse.
    let headers = read(0, table_end as usize)?;
    let header = elf::FileHeader64::<LittleEndian>::parse(headers.as_slice())
        .map_err(|error| bad(&error.to_string()))?;
    let segments = header
        .program_headers(LittleEndian, headers.as_slice())
        .map_err(|error| bad(&error.to_string()))?;
    Ok(segments
        .iter()
        .filter(|segment| segment.p_type(LittleEndian) == elf::PT_LOAD)
        .map(|segment| KcoreSegment {
            file_offset: segment.p_offset(LittleEndian),
            virtual_address: segment.p_vaddr(LittleEndian),
            size: segment.p_filesz(LittleEndian),
        })
        .filter(|segment| segment.virtual_address.checked_add(segment.size).is_some())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_read_from_their_lines_and_hidden_ones_left_out() {
        let modules = "rvtrace 81920 0 - Live 0xffffffff02a8e000\n\
                       hidden 4096 0 - Live 0x0000000000000000\n\
                       going 4096 0 - Unloading 0xffffffff02000000\n\
                       rvperf_ctr 20480 1 rvtrace, Live 0xffffffff02a80000 (O)\n";
        assert_eq!(
            module_ranges(modules),
            vec![
                ("rvtrace".to_owned(), 0xffff_ffff_02a8_e000, 81920),
                ("rvperf_ctr".to_owned(), 0xffff_ffff_02a8_0000, 20480),
            ]
        );
    }

    #[test]
    fn text_symbols_are_kept_sorted_and_others_dropped() {
        let kallsyms = "ffffffff80002000 T _stext\n\
                        ffffffff80001000 t handle_exception\n\
                        ffffffff80200000 D some_data\n\
                        ffffffff02a8e000 t rvtrace_open\t[rvtrace]\n\
                        not a line\n";
        let symbols = text_symbols(kallsyms);
        let names: Vec<(u64, &str, bool)> = symbols
            .iter()
            .map(|symbol| (symbol.address, symbol.name.as_str(), symbol.global))
            .collect();
        assert_eq!(
            names,
            vec![
                (0xffff_ffff_02a8_e000, "rvtrace_open", false),
                (0xffff_ffff_8000_1000, "handle_exception", false),
                (0xffff_ffff_8000_2000, "_stext", true),
            ]
        );
    }

    /// A GNU build-id note as the kernel's notes hold one.
    fn build_id_note(id: &[u8]) -> Vec<u8> {
        let mut note = Vec::new();
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(&(id.len() as u32).to_le_bytes());
        note.extend_from_slice(&elf::NT_GNU_BUILD_ID.to_le_bytes());
        note.extend_from_slice(b"GNU\0");
        note.extend_from_slice(id);
        note
    }

    #[test]
    fn the_kernels_place_is_its_text_and_its_build_id() {
        let directory = tempfile::tempdir().unwrap();
        let path = |name: &str| directory.path().join(name);
        std::fs::write(
            path("kallsyms"),
            "ffffffff81000000 T _text\n\
             ffffffff81002000 T _stext\n\
             ffffffff81800000 T _etext\n",
        )
        .unwrap();
        let id: Vec<u8> = (1..=20).collect();
        // Another note first: the build id is found among several.
        let mut notes = Vec::new();
        notes.extend_from_slice(&6u32.to_le_bytes());
        notes.extend_from_slice(&4u32.to_le_bytes());
        notes.extend_from_slice(&6u32.to_le_bytes());
        notes.extend_from_slice(b"Linux\0\0\0");
        notes.extend_from_slice(&[0, 1, 2, 3]);
        notes.extend(build_id_note(&id));
        std::fs::write(path("notes"), &notes).unwrap();
        let sources = KernelSources {
            kallsyms: path("kallsyms"),
            modules: path("modules"),
            kcore: path("kcore"),
            notes: path("notes"),
        };
        assert_eq!(
            KernelPlace::read(&sources).unwrap(),
            KernelPlace {
                text: 0xffff_ffff_8100_0000,
                end: 0xffff_ffff_8180_0000,
                build_id: Some(id),
            }
        );
        // Hidden addresses (all zero) are refused, not recorded as 0.
        std::fs::write(
            path("kallsyms"),
            "0000000000000000 T _text\n0000000000000000 T _etext\n",
        )
        .unwrap();
        assert!(matches!(
            KernelPlace::read(&sources),
            Err(KcoreError::NoKernelText { .. })
        ));
        assert_eq!(
            gnu_build_id(&notes[..20]),
            None,
            "a cut note is no build id"
        );
    }

    /// A fake /proc: a kcore whose one segment covers the kernel and a module, with
    /// known bytes, and kallsyms/modules naming them. The copy reads exactly those
    /// bytes, and binutils' readelf (an independent reader) sees its segments, symbols
    /// and build id.
    #[test]
    fn the_copy_is_the_running_code_as_an_elf_that_readelf_reads() {
        let directory = tempfile::tempdir().unwrap();
        let base = 0xffff_ffff_0000_0000u64;
        let memory: Vec<u8> = (0..0x8000u32)
            .map(|index| (index * 7 % 251) as u8)
            .collect();
        // The fake kcore is written by the same writer: a kcore is an ELF with PT_LOADs.
        let kcore = KernelCode {
            ranges: vec![CodeRange {
                owner: "all".to_owned(),
                address: base,
                bytes: memory.clone(),
            }],
            symbols: Vec::new(),
            notes: Vec::new(),
        }
        .to_elf()
        .unwrap();
        let path = |name: &str| directory.path().join(name);
        std::fs::write(path("kcore"), kcore).unwrap();
        std::fs::write(
            path("kallsyms"),
            format!(
                "{:016x} T _stext\n{:016x} t handle_exception\n{:016x} T do_trap_ecall_u\n{:016x} T _etext\n{:016x} t rvtrace_open\t[rvtrace]\n{:016x} D data\n",
                base + 0x1000,
                base + 0x1000,
                base + 0x1400,
                base + 0x3000,
                base + 0x6010,
                base + 0x2000
            ),
        )
        .unwrap();
        std::fs::write(
            path("modules"),
            format!("rvtrace 8192 0 - Live {:#x}\n", base + 0x6000),
        )
        .unwrap();
        let build_id = [0x5a; 20];
        std::fs::write(path("notes"), build_id_note(&build_id)).unwrap();
        let sources = KernelSources {
            kallsyms: path("kallsyms"),
            modules: path("modules"),
            kcore: path("kcore"),
            notes: path("notes"),
        };
        let code = KernelCode::read(&sources).unwrap();
        assert_eq!(
            code.ranges,
            vec![
                CodeRange {
                    owner: "[kernel]".to_owned(),
                    address: base + 0x1000,
                    bytes: memory[0x1000..0x3000].to_vec(),
                },
                CodeRange {
                    owner: "rvtrace".to_owned(),
                    address: base + 0x6000,
                    bytes: memory[0x6000..0x8000].to_vec(),
                },
            ]
        );
        // _etext is past the text: not a symbol of the copy.
        let names: Vec<&str> = code
            .symbols
            .iter()
            .map(|symbol| symbol.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "_stext",
                "handle_exception",
                "do_trap_ecall_u",
                "rvtrace_open"
            ]
        );

        let elf_path = path("copy.elf");
        std::fs::write(&elf_path, code.to_elf().unwrap()).unwrap();
        let Ok(output) = std::process::Command::new("readelf")
            .args(["--wide", "-l", "-s", "-n"])
            .arg(&elf_path)
            .output()
        else {
            panic!("readelf (binutils) is needed to check the copy");
        };
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "readelf: {text}");
        let loads: Vec<&str> = text
            .lines()
            .filter(|line| line.trim_start().starts_with("LOAD"))
            .collect();
        assert_eq!(loads.len(), 2, "{text}");
        assert!(
            loads[0].contains("0xffffffff00001000") && loads[0].contains("0x002000 R E"),
            "{text}"
        );
        assert!(loads[1].contains("0xffffffff00006000"), "{text}");
        for (value, size, binding, name) in [
            ("ffffffff00001000", "1024", "GLOBAL", "_stext"),
            ("ffffffff00001000", "1024", "LOCAL", "handle_exception"),
            ("ffffffff00001400", "7168", "GLOBAL", "do_trap_ecall_u"),
            ("ffffffff00006010", "8176", "LOCAL", "rvtrace_open"),
        ] {
            assert!(
                text.lines().any(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    fields.get(1) == Some(&value)
                        && fields.get(2) == Some(&size)
                        && fields.get(3) == Some(&"FUNC")
                        && fields.get(4) == Some(&binding)
                        && fields.get(7) == Some(&name)
                }),
                "{name} at {value}, {size} bytes, {binding}: {text}"
            );
        }
        assert!(text.contains(&"5a".repeat(20)), "the build id: {text}");
    }

    #[test]
    fn hidden_addresses_are_refused_in_one_line() {
        let directory = tempfile::tempdir().unwrap();
        let kallsyms = directory.path().join("kallsyms");
        std::fs::write(
            &kallsyms,
            "0000000000000000 T _stext\n0000000000000000 T _etext\n",
        )
        .unwrap();
        let sources = KernelSources {
            kallsyms,
            ..KernelSources::default()
        };
        let error = KernelCode::read(&sources).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no _stext and _etext (addresses hidden"),
            "{error}"
        );
    }
}
