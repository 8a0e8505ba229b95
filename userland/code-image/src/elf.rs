//! Loading ELF files into a [`CodeImage`], and reading once what decoding their code
//! needs.

use object::elf::{FileHeader32, FileHeader64};
use object::read::elf::FileHeader;
use object::{
    Endianness, FileKind, Object, ObjectSection, ObjectSegment, ObjectSymbol, SegmentFlags,
};

use crate::{CodeImage, Compressed, FileDecodeInfo, ImageError, Machine, RiscvCode};
use riscv_insn::{DecodeOptions, Xlen};

/// What the loader found in one ELF.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    pub file_index: usize,
    /// The file's instruction set and decode options, as the image keeps them too.
    pub machine: Machine,
    /// Entry point after relocation; `None` when relocation would move it out of the
    /// address space (an entry of 0 below a shared object's segments, say).
    pub entry: Option<u64>,
    /// Added, modulo 2^64, to every address of the file (0 for a file loaded where it
    /// was linked): the image address of link-time address `a` is `a + bias`.
    pub bias: u64,
    /// `Tag_RISCV_arch` from `.riscv.attributes`, e.g. `rv64i2p1_m2p0_a2p1_f2p2_d2p2_c2p0`.
    pub arch: Option<String>,
    pub build_id: Option<Vec<u8>>,
    /// Where each `PT_LOAD` segment went and which bytes of the file it holds: the
    /// mappings a process running the file would have (what a symbolizer needs to go
    /// from an address to a file offset).
    pub mappings: Vec<FileMapping>,
}

/// One loaded segment as a process maps it: `size` bytes from image address `start`,
/// backed by the file from `file_offset` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMapping {
    pub start: u64,
    pub size: u64,
    pub file_offset: u64,
    /// The segment holds code (`PF_X`).
    pub executable: bool,
}

impl ElfInfo {
    /// The RISC-V decode options of the file ([`load_elf`] loads RISC-V files only,
    /// so there they are always there).
    pub fn riscv(&self) -> Option<FileDecodeInfo> {
        self.machine.riscv()
    }

    /// The register width of a RISC-V file.
    pub fn xlen(&self) -> Option<Xlen> {
        self.riscv().map(|decode| decode.options.xlen)
    }

    /// The link-time address (what symbols and DWARF use) of `image_address`, an
    /// address inside one of this file's segments.
    pub fn link_address(&self, image_address: u64) -> u64 {
        // Exact for addresses of the file's segments: `load` placed each at
        // `link + bias` without overflow.
        image_address.wrapping_sub(self.bias)
    }
}

/// Which machines a load accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Accept {
    /// The trace decoders: anything else is refused with [`ImageError::NotRiscv`].
    Riscv,
    /// Every machine this build has an instruction set for.
    AnyMachine,
}

/// Maps every `PT_LOAD` segment of the RISC-V ELF `bytes` into `image`, with the
/// file's decode options. `load_address` is where the lowest loadable segment is
/// placed (like a shared object's load base); `None` loads the file at its link
/// addresses.
pub fn load_elf(
    image: &mut CodeImage,
    name: &str,
    bytes: &[u8],
    load_address: Option<u64>,
) -> Result<ElfInfo, ImageError> {
    load(image, name, bytes, load_address, Accept::Riscv)
}

/// [`load_elf`] for an ELF of any machine this build decodes: RISC-V, and x86_64 with
/// the `x86` feature ([`ImageError::UnsupportedMachine`] otherwise).
pub fn load_any_elf(
    image: &mut CodeImage,
    name: &str,
    bytes: &[u8],
    load_address: Option<u64>,
) -> Result<ElfInfo, ImageError> {
    load(image, name, bytes, load_address, Accept::AnyMachine)
}

fn load(
    image: &mut CodeImage,
    name: &str,
    bytes: &[u8],
    load_address: Option<u64>,
    accept: Accept,
) -> Result<ElfInfo, ImageError> {
    let not_elf = |reason: String| ImageError::NotElf {
        file: name.to_owned(),
        reason,
    };
    let mut aligned_copy = Vec::new();
    let bytes = aligned(bytes, &mut aligned_copy);
    let file = object::File::parse(bytes).map_err(|error| not_elf(error.to_string()))?;
    if file.format() != object::BinaryFormat::Elf {
        return Err(not_elf(format!("{:?} file", file.format())));
    }
    let header = elf_header(bytes).ok_or_else(|| not_elf("no ELF header".to_owned()))?;
    let kind = match (header.machine, accept) {
        (object::elf::EM_RISCV, _) => MachineKind::Riscv,
        (object::elf::EM_X86_64, Accept::AnyMachine) if cfg!(feature = "x86") => {
            MachineKind::X86_64
        }
        (_, Accept::Riscv) => {
            return Err(ImageError::NotRiscv {
                file: name.to_owned(),
                architecture: format!("{:?}", file.architecture()),
            })
        }
        (machine, Accept::AnyMachine) => {
            return Err(ImageError::UnsupportedMachine {
                file: name.to_owned(),
                machine,
            })
        }
    };

    let loadable: Vec<_> = file.segments().collect();
    // The lowest loadable segment's page goes to `load_address`; every other address
    // keeps its distance from it. Checked: a load address (or an ELF address) that
    // would move code past either end of the address space is refused, not wrapped.
    let lowest_page = loadable
        .iter()
        .map(|segment| segment.address())
        .min()
        .map(|lowest| lowest & !0xfff);
    let relocate = |address: u64| -> Option<u64> {
        match (load_address, lowest_page) {
            (Some(load), Some(page)) => address.checked_sub(page)?.checked_add(load),
            _ => Some(address),
        }
    };
    let bias = match (load_address, lowest_page) {
        (Some(load), Some(page)) => load.wrapping_sub(page),
        _ => 0,
    };
    let bad_load_address = || ImageError::BadLoadAddress {
        file: name.to_owned(),
        load_address: load_address.unwrap_or(0),
    };
    let mut jvt_base = None;
    for symbol in file.symbols() {
        if symbol.name() == Ok("__jvt_base$") {
            jvt_base = Some(relocate(symbol.address()).ok_or_else(bad_load_address)?);
        }
    }
    let machine = match kind {
        MachineKind::Riscv => Machine::Riscv(riscv_code(&file, &header, jvt_base)),
        MachineKind::X86_64 => Machine::X86_64,
    };

    let file_index = image.add_file_of_machine(name, machine);
    let mut has_code = false;
    let mut mappings = Vec::with_capacity(loadable.len());
    for segment in &loadable {
        let executable = match segment.flags() {
            SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
            _ => false,
        };
        let data = segment.data().map_err(|error| not_elf(error.to_string()))?;
        let start = relocate(segment.address())
            .filter(|start| start.checked_add(data.len() as u64).is_some())
            .ok_or_else(bad_load_address)?;
        has_code |= executable && !data.is_empty();
        let (file_offset, _) = segment.file_range();
        mappings.push(FileMapping {
            start,
            size: data.len() as u64,
            file_offset,
            executable,
        });
        image.add_segment(start, data.to_vec(), executable, file_index)?;
    }
    if !has_code {
        return Err(ImageError::NoCode {
            file: name.to_owned(),
        });
    }

    Ok(ElfInfo {
        file_index,
        machine,
        entry: relocate(file.entry()),
        bias,
        arch: riscv_arch(&file),
        build_id: file.build_id().ok().flatten().map(<[u8]>::to_vec),
        mappings,
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MachineKind {
    Riscv,
    X86_64,
}

/// The fields of the ELF header that say how the code decodes.
#[derive(Clone, Copy, Debug)]
struct ElfHeader {
    /// `e_machine`.
    machine: u16,
    /// `EI_CLASS`: the register width of a RISC-V file.
    class: Xlen,
    /// `e_flags`: for RISC-V, `EF_RISCV_RVC` among others.
    flags: u32,
}

/// The header of an ELF file, `None` for anything else.
fn elf_header(bytes: &[u8]) -> Option<ElfHeader> {
    match FileKind::parse(bytes).ok()? {
        FileKind::Elf32 => {
            let header = FileHeader32::<Endianness>::parse(bytes).ok()?;
            let endian = header.endian().ok()?;
            Some(ElfHeader {
                machine: header.e_machine(endian),
                class: Xlen::Rv32,
                flags: header.e_flags(endian),
            })
        }
        FileKind::Elf64 => {
            let header = FileHeader64::<Endianness>::parse(bytes).ok()?;
            let endian = header.endian().ok()?;
            Some(ElfHeader {
                machine: header.e_machine(endian),
                class: Xlen::Rv64,
                flags: header.e_flags(endian),
            })
        }
        _ => None,
    }
}

/// The one place a RISC-V ELF becomes decode options: the register width from the
/// ELF class, compressed instructions from `e_flags`, Zcmp/Zcmt from the arch
/// attribute (they reuse c.fsdsp/c.fldsp encodings, so only the arch string can tell
/// them apart) and the Zcmt jump table from `__jvt_base$`.
fn riscv_code<'data>(
    file: &object::File<'data>,
    header: &ElfHeader,
    jvt_base: Option<u64>,
) -> RiscvCode {
    let arch = riscv_arch(file);
    let has_extension = |extension: &str| {
        arch.as_deref()
            .is_some_and(|arch| arch.split('_').any(|part| part.starts_with(extension)))
    };
    let compressed = if header.flags & object::elf::EF_RISCV_RVC != 0 {
        Compressed::Allowed
    } else {
        Compressed::Absent
    };
    RiscvCode {
        decode: FileDecodeInfo {
            options: DecodeOptions {
                xlen: header.class,
                zcmp: has_extension("zcmp"),
                zcmt: has_extension("zcmt"),
            },
            jvt_base,
        },
        compressed,
    }
}

fn riscv_arch(file: &object::File<'_>) -> Option<String> {
    file.section_by_name(".riscv.attributes")
        .and_then(|section| section.data().ok())
        .and_then(arch_string)
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

    fn program() -> Vec<u8> {
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/ntrace/tiny-htm/program"
        ))
        .unwrap()
    }

    #[test]
    fn finds_the_arch_attribute() {
        let section = b"A\x3c\0\0\0riscv\0\x01\x32\0\0\0\x05rv64i2p1_m2p0_zca1p0_zcmp1p0\0\x06\x00";
        let arch = arch_string(section).unwrap();
        assert_eq!(arch, "rv64i2p1_m2p0_zca1p0_zcmp1p0");
    }

    #[test]
    fn loads_an_elf_at_any_alignment() {
        let program = program();
        for shift in 0..8 {
            let mut buffer = vec![0u8; shift];
            buffer.extend_from_slice(&program);
            let mut image = CodeImage::new();
            let info = load_elf(&mut image, "tiny", &buffer[shift..], None).unwrap();
            assert_eq!(info.xlen(), Some(Xlen::Rv64));
            let entry = info.entry.unwrap();
            assert!(image.segment_index(entry).is_some());
            assert_eq!(image.machine_at(entry), Some(info.machine));
        }
    }

    #[test]
    fn decode_options_come_from_the_header_and_attributes() {
        let mut image = CodeImage::new();
        let info = load_elf(&mut image, "tiny", &program(), None).unwrap();
        let Machine::Riscv(code) = info.machine else {
            panic!("{:?}", info.machine);
        };
        assert_eq!(code.compressed, Compressed::Allowed);
        assert_eq!(code.decode.options, DecodeOptions::new(Xlen::Rv64));
        assert_eq!(image.file_decode_infos(), vec![code.decode]);
    }

    #[test]
    fn rejects_what_is_not_an_elf() {
        let mut image = CodeImage::new();
        let error = load_elf(&mut image, "junk", b"not an elf at all", None).unwrap_err();
        assert!(
            error.to_string().starts_with("junk: not an ELF file"),
            "{error}"
        );
    }

    #[test]
    fn loads_below_and_above_the_link_address() {
        for load in [0x1000, 0x7f00_0000_0000] {
            let mut image = CodeImage::new();
            let linked = load_elf(&mut CodeImage::new(), "tiny", &program(), None).unwrap();
            let info = load_elf(&mut image, "tiny", &program(), Some(load)).unwrap();
            let entry = info.entry.unwrap();
            assert_eq!(info.link_address(entry), linked.entry.unwrap());
            assert_eq!(image.segments()[0].start & !0xfff, load);
        }
    }

    #[test]
    fn a_load_address_past_the_end_of_the_address_space_is_refused() {
        let mut image = CodeImage::new();
        let error = load_elf(&mut image, "tiny", &program(), Some(u64::MAX - 0xfff)).unwrap_err();
        assert!(
            matches!(error, ImageError::BadLoadAddress { .. }),
            "{error}"
        );
    }
}
