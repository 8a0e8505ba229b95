//! What every command that decodes a trace reads: the ELF files that ran (`--elf
//! FILE[@LOAD_ADDR]`), the trace (`--trace`) and the encoder's settings, as one
//! flattened argument group ([`TraceArgs`]), and the code image and function table
//! loaded from the ELFs ([`LoadedCode`]).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use code_image::{load_elf, CodeImage, Xlen};
use ntrace_flow::{DecoderOptions, FileDecodeInfo};
use ntrace_message::{AddressWidth, MessageOptions};
use symbolize::{FunctionTable, ImageFunctions, MappedRange, ObjectSymbolizer};

/// The trace and the code it ran: `#[command(flatten)]` into a command's arguments.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// An ELF file the traced code came from; `FILE@LOAD_ADDR` places its lowest loadable
    /// segment at LOAD_ADDR (for shared objects and PIE). Repeat for several files.
    #[arg(long = "elf", value_name = "FILE[@LOAD_ADDR]")]
    pub elf: Vec<String>,
    /// The N-Trace byte stream (raw MSEO/MDO bytes, as captured from the trace buffer).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Width of the SRC field (trTeSrcBits); 0 when the encoder sends none.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=12))]
    pub src_bits: u8,
    /// Messages carry TSTAMP fields (trTsEnable); timestamps are shown in blocks/insns output.
    #[arg(long)]
    pub timestamps: bool,
    /// Addresses use the MSB extension of spec 8.2 (trTeInstExtendAddrMSB).
    #[arg(long)]
    pub addr_ext: bool,
    /// Depth of the implicit-return stack; at least the encoder's (0 disables implicit returns).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u16).range(0..=1024))]
    pub max_stack: u16,
}

impl TraceArgs {
    /// The wire options the flags give, for addresses of `address_width`.
    pub fn message_options(&self, address_width: AddressWidth) -> MessageOptions {
        MessageOptions::default()
            .with_src_bits(self.src_bits)
            .with_timestamps(self.timestamps)
            .with_address_msb_extension(self.addr_ext)
            .with_address_width(address_width)
    }

    /// The flow decoder's options the flags give (instruction ranges on, errors
    /// returned: callers choose their recovery).
    pub fn decoder_options(&self, address_width: AddressWidth) -> DecoderOptions {
        DecoderOptions::default()
            .with_message(self.message_options(address_width))
            .with_return_stack_depth(usize::from(self.max_stack))
    }

    /// The `--elf` files loaded ([`load_code`]).
    pub fn load_code(&self) -> Result<LoadedCode> {
        load_code(&self.elf)
    }
}

/// One `--elf` file as loaded.
#[derive(Debug)]
pub struct LoadedElf {
    pub path: PathBuf,
    /// Added to every link address of the file (`code_image::ElfInfo::bias`).
    pub bias: u64,
}

#[derive(Debug)]
pub struct LoadedCode {
    pub image: CodeImage,
    /// The functions of every loaded ELF, from `symbolize`: the table `rvperf report`
    /// names functions by, looked up at the ELF's load address.
    pub symbols: ImageFunctions,
    pub files: Vec<FileDecodeInfo>,
    pub address_width: AddressWidth,
    /// The files in `--elf` order (the image's file numbers).
    pub elves: Vec<LoadedElf>,
}

/// `FILE` or `FILE@LOAD_ADDR` of `--elf`.
#[derive(Debug, PartialEq, Eq)]
pub struct ElfArgument {
    pub path: PathBuf,
    /// Where the lowest loadable segment goes; `None` for the link addresses.
    pub load_address: Option<u64>,
}

pub fn parse_elf_argument(argument: &str) -> Result<ElfArgument> {
    if let Some((path, address)) = argument.rsplit_once('@') {
        let digits = address
            .strip_prefix("0x")
            .or_else(|| address.strip_prefix("0X"));
        let parsed = match digits {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => address.parse::<u64>(),
        };
        return match parsed {
            Ok(load) => Ok(ElfArgument {
                path: PathBuf::from(path),
                load_address: Some(load),
            }),
            Err(_) => {
                bail!("--elf {argument}: LOAD_ADDR {address:?} is not a number (use 0x... for hex)")
            }
        };
    }
    Ok(ElfArgument {
        path: PathBuf::from(argument),
        load_address: None,
    })
}

pub fn load_code(elves: &[String]) -> Result<LoadedCode> {
    let mut image = CodeImage::new();
    let mut symbols = ImageFunctions::new();
    let mut first_xlen = None;
    let mut loaded = Vec::with_capacity(elves.len());
    for argument in elves {
        let ElfArgument { path, load_address } = parse_elf_argument(argument)?;
        let bytes =
            std::fs::read(&path).with_context(|| format!("cannot read ELF {}", path.display()))?;
        let name = path.display().to_string();
        let elf = load_elf(&mut image, &name, &bytes, load_address)?;
        // load_elf read the file as an ELF already: what the symbolizer refuses of it
        // (a malformed note, say) leaves the code decodable, without names.
        let functions = match ObjectSymbolizer::new(&name, bytes) {
            Ok(object) => object.function_table(),
            Err(error) => {
                eprintln!("rvperf: warning: {error}: functions are not named");
                FunctionTable::default()
            }
        };
        // One image file per ELF: the numbers agree with the segments' `file`.
        let file = symbols.add_file(functions, elf.bias);
        debug_assert_eq!(file, elf.file_index);
        if first_xlen.is_none() {
            first_xlen = Some(elf.xlen());
        }
        loaded.push(LoadedElf {
            path,
            bias: elf.bias,
        });
    }
    let address_width = match first_xlen.flatten() {
        Some(Xlen::Rv32) => AddressWidth::Bits32,
        _ => AddressWidth::Bits64,
    };
    let decode_infos = image.file_decode_infos();
    for segment in image.segments() {
        symbols.add_range(MappedRange {
            start: segment.start,
            end: segment.end,
            file: segment.file,
        });
    }
    Ok(LoadedCode {
        image,
        symbols,
        files: decode_infos,
        address_width,
        elves: loaded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elf_arguments_with_and_without_a_load_address() {
        assert_eq!(
            parse_elf_argument("lib.so@0x4000").unwrap(),
            ElfArgument {
                path: PathBuf::from("lib.so"),
                load_address: Some(0x4000)
            }
        );
        assert_eq!(
            parse_elf_argument("a@b@4096").unwrap(),
            ElfArgument {
                path: PathBuf::from("a@b"),
                load_address: Some(4096)
            }
        );
        assert_eq!(parse_elf_argument("prog").unwrap().load_address, None);
        assert!(parse_elf_argument("prog@0xzz").is_err());
    }
}
