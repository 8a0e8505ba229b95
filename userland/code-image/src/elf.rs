//! Loading RISC-V ELF files into a [`CodeImage`].

use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SegmentFlags, SymbolKind};

use crate::{CodeImage, ImageError, SymbolTable};

/// Register width of the ELF's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Xlen {
    Rv32,
    Rv64,
}

/// What the decoder needs to know about one loaded ELF.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    pub file_index: usize,
    pub xlen: Xlen,
    /// Entry point after relocation by `bias`.
    pub entry: u64,
    /// Added to every address of the file (0 for a file loaded where it was linked).
    pub bias: u64,
    /// `Tag_RISCV_arch` from `.riscv.attributes`, e.g. `rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0`.
    pub arch: Option<String>,
    /// Zcmp/Zcmt reuse c.fsdsp/c.fldsp encodings, so only the arch string can tell them apart.
    pub zcmp: bool,
    pub zcmt: bool,
    /// Base of the Zcmt jump vector table (`__jvt_base$`), needed to follow `cm.jt`/`cm.jalt`.
    pub jvt_base: Option<u64>,
    pub build_id: Option<Vec<u8>>,
}

/// Maps every `PT_LOAD` segment of `bytes` into `image` and its function symbols into
/// `symbols`. `load_address` is where the lowest loadable segment is placed (like a
/// shared object's load base); `None` loads the file at its link addresses.
pub fn load_elf(
    image: &mut CodeImage,
    symbols: &mut SymbolTable,
    name: &str,
    bytes: &[u8],
    load_address: Option<u64>,
) -> Result<ElfInfo, ImageError> {
    let not_elf = |reason: String| ImageError::NotElf {
        file: name.to_owned(),
        reason,
    };
    // `object` reads headers in place and needs them aligned; bytes from include_bytes!
    // or from inside another buffer may not be.
    let mut aligned_copy = Vec::new();
    let bytes = if bytes.as_ptr().align_offset(8) == 0 {
        bytes
    } else {
        aligned_copy.resize(bytes.len() + 8, 0u8);
        let shift = aligned_copy.as_ptr().align_offset(8);
        aligned_copy[shift..shift + bytes.len()].copy_from_slice(bytes);
        &aligned_copy[shift..shift + bytes.len()]
    };
    let file = object::File::parse(bytes).map_err(|error| not_elf(error.to_string()))?;
    if file.format() != object::BinaryFormat::Elf {
        return Err(not_elf(format!("{:?} file", file.format())));
    }
    let xlen = match file.architecture() {
        object::Architecture::Riscv64 => Xlen::Rv64,
        object::Architecture::Riscv32 => Xlen::Rv32,
        other => {
            return Err(ImageError::NotRiscv {
                file: name.to_owned(),
                architecture: format!("{other:?}"),
            })
        }
    };
    let loadable: Vec<_> = file.segments().collect();
    let lowest = loadable.iter().map(|segment| segment.address()).min();
    let bias = match (load_address, lowest) {
        (Some(load), Some(lowest)) => load.wrapping_sub(lowest & !0xfff),
        _ => 0,
    };
    let file_index = image.add_file(name);
    let mut has_code = false;
    for segment in &loadable {
        let executable = match segment.flags() {
            SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
            _ => false,
        };
        let data = segment.data().map_err(|error| not_elf(error.to_string()))?;
        let start = segment
            .address()
            .checked_add(bias)
            .filter(|start| start.checked_add(data.len() as u64).is_some())
            .ok_or(ImageError::BadLoadAddress {
                file: name.to_owned(),
                load_address: load_address.unwrap_or(0),
            })?;
        has_code |= executable && !data.is_empty();
        image.add_segment(start, data.to_vec(), executable, file_index)?;
    }
    if !has_code {
        return Err(ImageError::NoCode {
            file: name.to_owned(),
        });
    }

    let mut jvt_base = None;
    for symbol in file.symbols() {
        let Ok(symbol_name) = symbol.name() else {
            continue;
        };
        if symbol_name == "__jvt_base$" {
            jvt_base = Some(symbol.address().wrapping_add(bias));
            continue;
        }
        let is_code = matches!(symbol.kind(), SymbolKind::Text)
            || (symbol.kind() == SymbolKind::Unknown && symbol.is_definition());
        if !is_code || symbol.address() == 0 || !symbol.is_definition() {
            continue;
        }
        symbols.add(
            symbol_name,
            symbol.address().wrapping_add(bias),
            symbol.size(),
            file_index,
        );
    }
    symbols.finish();

    let arch = file
        .section_by_name(".riscv.attributes")
        .and_then(|section| section.data().ok())
        .and_then(arch_string);
    let has_extension = |extension: &str| {
        arch.as_deref()
            .is_some_and(|arch| arch.split('_').any(|part| part.starts_with(extension)))
    };
    Ok(ElfInfo {
        file_index,
        xlen,
        entry: file.entry().wrapping_add(bias),
        bias,
        zcmp: has_extension("zcmp"),
        zcmt: has_extension("zcmt"),
        arch,
        jvt_base,
        build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
    })
}

/// `object` reads headers in place and needs them aligned; bytes from include_bytes!
/// or from inside another buffer may not be, and are then copied into `storage`.
fn aligned<'a>(bytes: &'a [u8], storage: &'a mut Vec<u8>) -> &'a [u8] {
    if bytes.as_ptr().align_offset(8) == 0 {
        return bytes;
    }
    storage.resize(bytes.len() + 8, 0u8);
    let shift = storage.as_ptr().align_offset(8);
    storage[shift..shift + bytes.len()].copy_from_slice(bytes);
    &storage[shift..shift + bytes.len()]
}

/// A loadable segment: where a file offset lands in the ELF's virtual addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSegment {
    pub vaddr: u64,
    pub offset: u64,
    pub file_size: u64,
}

/// Function symbols of an ELF of any architecture, for symbolizing samples of
/// processes: mapped at run time wherever the loader put them.
#[derive(Clone, Debug, Default)]
pub struct ElfSymbols {
    pub symbols: SymbolTable,
    pub segments: Vec<LoadSegment>,
    pub build_id: Option<Vec<u8>>,
}

impl ElfSymbols {
    /// The link-time address of the byte at `offset` in the file.
    pub fn vaddr_of_offset(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|segment| {
                offset >= segment.offset && offset - segment.offset < segment.file_size.max(1)
            })
            .map(|segment| segment.vaddr + (offset - segment.offset))
    }
}

/// Reads the function symbols, loadable segments and build id of any ELF file.
pub fn load_symbols(name: &str, bytes: &[u8]) -> Result<ElfSymbols, ImageError> {
    let mut aligned_copy = Vec::new();
    let bytes = aligned(bytes, &mut aligned_copy);
    let file = object::File::parse(bytes).map_err(|error| ImageError::NotElf {
        file: name.to_owned(),
        reason: error.to_string(),
    })?;
    let mut symbols = SymbolTable::default();
    for symbol in file.symbols().chain(file.dynamic_symbols()) {
        let Ok(symbol_name) = symbol.name() else {
            continue;
        };
        if symbol.kind() == SymbolKind::Text && symbol.is_definition() && symbol.address() != 0 {
            symbols.add(symbol_name, symbol.address(), symbol.size(), 0);
        }
    }
    symbols.finish();
    let segments = file
        .segments()
        .map(|segment| {
            let (offset, file_size) = segment.file_range();
            LoadSegment {
                vaddr: segment.address(),
                offset,
                file_size,
            }
        })
        .collect();
    Ok(ElfSymbols {
        symbols,
        segments,
        build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
    })
}

/// Finds the `Tag_RISCV_arch` string in a `.riscv.attributes` section. Scanning for the
/// NUL-terminated `rv32`/`rv64` string is enough: no other attribute holds such text, and
/// it avoids depending on the exact sub-section layout that toolchains have varied.
fn arch_string(section: &[u8]) -> Option<String> {
    let start = section
        .windows(4)
        .position(|window| window == b"rv64" || window == b"rv32")?;
    let rest = &section[start..];
    let end = rest
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end]).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_arch_attribute() {
        let section = b"A\x3c\0\0\0riscv\0\x01\x32\0\0\0\x05rv64i2p1_m2p0_zca1p0_zcmp1p0\0\x06\x00";
        let arch = arch_string(section).unwrap();
        assert_eq!(arch, "rv64i2p1_m2p0_zca1p0_zcmp1p0");
    }

    #[test]
    fn loads_an_elf_at_any_alignment() {
        let program = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/ntrace/tiny-htm/program"
        ))
        .unwrap();
        for shift in 0..8 {
            let mut buffer = vec![0u8; shift];
            buffer.extend_from_slice(&program);
            let mut image = CodeImage::new();
            let mut symbols = SymbolTable::default();
            let info = load_elf(&mut image, &mut symbols, "tiny", &buffer[shift..], None).unwrap();
            assert_eq!(info.xlen, Xlen::Rv64);
            assert!(symbols
                .lookup(info.entry)
                .is_some_and(|(symbol, _)| symbol.name == "_start"));
        }
    }

    #[test]
    fn rejects_what_is_not_an_elf() {
        let mut image = CodeImage::new();
        let mut symbols = SymbolTable::default();
        let error =
            load_elf(&mut image, &mut symbols, "junk", b"not an elf at all", None).unwrap_err();
        assert!(
            error.to_string().starts_with("junk: not an ELF file"),
            "{error}"
        );
    }
}
