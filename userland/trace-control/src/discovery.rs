//! The discovery table at offset 0 of rvperf's trace block (`docs/trace-device.md`): what
//! components the block has and where their registers and the RAM sink's memory are.
//!
//! The specification leaves discovery of component bases to the platform; this table is
//! the emulated block's answer. All values are little-endian.

use core::fmt;

use crate::component::{implementation_type, ComponentType, COMPONENT_SIZE};

/// The table's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"RVTRACE1";
/// The table version this crate reads and writes.
pub const TABLE_VERSION: u32 = 1;
/// The table occupies the block's first page; component registers start after it.
pub const TABLE_SIZE: usize = COMPONENT_SIZE;
/// Size of one component entry.
pub const ENTRY_SIZE: usize = 16;
/// `hart` of a component that is not an encoder.
pub const NO_HART: u32 = 0xffff_ffff;
/// The most components a [`DiscoveryTable`] holds. A block with one funnel has at most 16
/// encoders (`trFunnelDisInput` has 16 bits), the funnel and the sink; 32 leaves room and
/// keeps the table small enough (about 0.5 KiB) for a kernel stack.
pub const MAX_COMPONENTS: usize = 32;

/// Byte offsets of the header fields.
pub mod offset {
    /// `MAGIC`, 8 bytes.
    pub const MAGIC: usize = 0x00;
    /// u32: the table version, [`TABLE_VERSION`](super::TABLE_VERSION).
    pub const VERSION: usize = 0x08;
    /// u32: the number of component entries.
    pub const COMPONENT_COUNT: usize = 0x0c;
    /// u64: size of the whole trace block in bytes.
    pub const BLOCK_SIZE: usize = 0x10;
    /// u64: where the RAM sink's memory starts in the block.
    pub const SINK_OFFSET: usize = 0x18;
    /// u64: size of the RAM sink's memory in bytes.
    pub const SINK_SIZE: usize = 0x20;
    /// The first component entry; entry *i* is at `COMPONENTS + ENTRY_SIZE × i`.
    pub const COMPONENTS: usize = 0x40;
}

/// Byte offsets of the fields of a component entry.
pub mod entry {
    /// u32: the `tr??CompType` value.
    pub const COMPONENT_TYPE: usize = 0;
    /// u32: the component's `tr??Impl` value at reset.
    pub const IMPLEMENTATION: usize = 4;
    /// u32: offset of the component's register block in the trace block.
    pub const REGISTERS: usize = 8;
    /// u32: the traced hart of an encoder, [`NO_HART`](super::NO_HART) otherwise.
    pub const HART: usize = 12;
}

/// One component of the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ComponentEntry {
    pub component_type: ComponentType,
    /// `tr??Impl` at reset; its `tr??CompType` is `component_type`.
    pub implementation: u32,
    /// Offset of the register block in the trace block, a multiple of [`COMPONENT_SIZE`].
    pub registers: u32,
    /// The hart (`mhartid`) an encoder traces; `None` for other components.
    pub hart: Option<u32>,
}

/// The decoded table. Built by the device with [`DiscoveryTable::new`] and
/// [`DiscoveryTable::push`] and written with [`DiscoveryTable::write`]; read by software
/// with [`DiscoveryTable::parse`]. Both check the same rules, so what `write` accepts
/// `parse` reads back equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiscoveryTable {
    /// Size of the whole trace block in bytes.
    pub block_size: u64,
    /// Where the RAM sink's memory starts in the block.
    pub sink_offset: u64,
    /// Size of the RAM sink's memory in bytes.
    pub sink_size: u64,
    components: [ComponentEntry; MAX_COMPONENTS],
    component_count: usize,
}

/// Why a table was refused. Every variant names the byte offset (in the table) of the
/// field at fault, [`DiscoveryError::offset`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// The `length` bytes of a field at `offset` run past the end of the input (or of the
    /// output buffer when writing).
    Truncated { offset: usize, length: usize },
    /// The first 8 bytes are not [`MAGIC`].
    BadMagic { offset: usize },
    /// A table version this crate does not know.
    UnsupportedVersion { offset: usize, version: u32 },
    /// More than [`MAX_COMPONENTS`] entries.
    TooManyComponents { offset: usize, count: u64 },
    /// The block is too small to hold the table's own page.
    BlockTooSmall { offset: usize, block_size: u64 },
    /// The sink's memory is empty, not aligned to a trace word, overlaps the table or
    /// registers' pages, or ends past the block.
    BadSinkMemory {
        offset: usize,
        sink_offset: u64,
        sink_size: u64,
    },
    /// A component type the specification does not define.
    UnknownComponentType { offset: usize, value: u32 },
    /// The entry's `tr??Impl` names another component type than the entry.
    ImplementationMismatch {
        offset: usize,
        component_type: u32,
        implementation: u32,
    },
    /// A register block not aligned to a page, on the table's page, or not before the
    /// sink's memory.
    BadRegisters { offset: usize, registers: u32 },
    /// Two entries with the same register block.
    DuplicateRegisters { offset: usize, registers: u32 },
    /// An encoder without a hart.
    MissingHart { offset: usize },
    /// A hart on a component that is not an encoder, or a second encoder for a hart.
    UnexpectedHart { offset: usize, hart: u32 },
}

impl DiscoveryError {
    /// Byte offset in the table of the field at fault.
    pub const fn offset(&self) -> usize {
        match *self {
            DiscoveryError::Truncated { offset, .. }
            | DiscoveryError::BadMagic { offset }
            | DiscoveryError::UnsupportedVersion { offset, .. }
            | DiscoveryError::TooManyComponents { offset, .. }
            | DiscoveryError::BlockTooSmall { offset, .. }
            | DiscoveryError::BadSinkMemory { offset, .. }
            | DiscoveryError::UnknownComponentType { offset, .. }
            | DiscoveryError::ImplementationMismatch { offset, .. }
            | DiscoveryError::BadRegisters { offset, .. }
            | DiscoveryError::DuplicateRegisters { offset, .. }
            | DiscoveryError::MissingHart { offset }
            | DiscoveryError::UnexpectedHart { offset, .. } => offset,
        }
    }
}

impl fmt::Display for DiscoveryError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DiscoveryError::Truncated { offset, length } => write!(
                formatter,
                "trace discovery table truncated: the {length} bytes at offset {offset:#x} run past the end"
            ),
            DiscoveryError::BadMagic { offset } => {
                write!(formatter, "no trace discovery table: bad magic at offset {offset:#x}")
            }
            DiscoveryError::UnsupportedVersion { offset, version } => write!(
                formatter,
                "trace discovery table version {version} at offset {offset:#x} is not supported (expected {TABLE_VERSION})"
            ),
            DiscoveryError::TooManyComponents { offset, count } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: {count} components, at most {MAX_COMPONENTS} supported"
            ),
            DiscoveryError::BlockTooSmall { offset, block_size } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: block of {block_size:#x} bytes cannot hold the table"
            ),
            DiscoveryError::BadSinkMemory { offset, sink_offset, sink_size } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: sink memory of {sink_size:#x} bytes at {sink_offset:#x} is not inside the block after the registers"
            ),
            DiscoveryError::UnknownComponentType { offset, value } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: unknown component type {value:#x}"
            ),
            DiscoveryError::ImplementationMismatch { offset, component_type, implementation } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: implementation {implementation:#010x} is not of component type {component_type:#x}"
            ),
            DiscoveryError::BadRegisters { offset, registers } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: register block at {registers:#x} is not a page between the table and the sink memory"
            ),
            DiscoveryError::DuplicateRegisters { offset, registers } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: register block at {registers:#x} belongs to an earlier component"
            ),
            DiscoveryError::MissingHart { offset } => {
                write!(formatter, "trace discovery table at offset {offset:#x}: encoder without a hart")
            }
            DiscoveryError::UnexpectedHart { offset, hart } => write!(
                formatter,
                "trace discovery table at offset {offset:#x}: unexpected hart {hart:#x} (not an encoder, or a second encoder of it)"
            ),
        }
    }
}

impl core::error::Error for DiscoveryError {}

/// A placeholder for unused slots of the component array.
const EMPTY_ENTRY: ComponentEntry = ComponentEntry {
    component_type: ComponentType::Encoder,
    implementation: 0,
    registers: 0,
    hart: None,
};

impl DiscoveryTable {
    /// A table without components.
    pub const fn new(block_size: u64, sink_offset: u64, sink_size: u64) -> DiscoveryTable {
        DiscoveryTable {
            block_size,
            sink_offset,
            sink_size,
            components: [EMPTY_ENTRY; MAX_COMPONENTS],
            component_count: 0,
        }
    }

    /// Appends a component (checked by [`Self::write`], not here).
    pub fn push(&mut self, component: ComponentEntry) -> Result<(), DiscoveryError> {
        let Some(slot) = self.components.get_mut(self.component_count) else {
            return Err(DiscoveryError::TooManyComponents {
                offset: offset::COMPONENT_COUNT,
                count: self.component_count as u64 + 1,
            });
        };
        *slot = component;
        self.component_count += 1;
        Ok(())
    }

    /// The components, in table order.
    pub fn components(&self) -> &[ComponentEntry] {
        &self.components[..self.component_count]
    }

    /// The encoder of `hart`.
    pub fn encoder(&self, hart: u32) -> Option<&ComponentEntry> {
        self.components().iter().find(|component| {
            component.component_type == ComponentType::Encoder && component.hart == Some(hart)
        })
    }

    /// The encoders, in table order (which is the funnel's input order).
    pub fn encoders(&self) -> impl Iterator<Item = &ComponentEntry> {
        self.of_type(ComponentType::Encoder)
    }

    /// The first funnel.
    pub fn funnel(&self) -> Option<&ComponentEntry> {
        self.of_type(ComponentType::Funnel).next()
    }

    /// The first RAM sink.
    pub fn ram_sink(&self) -> Option<&ComponentEntry> {
        self.of_type(ComponentType::RamSink).next()
    }

    fn of_type(&self, component_type: ComponentType) -> impl Iterator<Item = &ComponentEntry> {
        self.components()
            .iter()
            .filter(move |component| component.component_type == component_type)
    }

    /// Bytes [`Self::write`] writes.
    pub fn encoded_len(&self) -> usize {
        offset::COMPONENTS + ENTRY_SIZE * self.component_count
    }

    /// Reads a table from the start of `bytes` (the block's first page or more). Never
    /// panics: every read and every sum is checked.
    pub fn parse(bytes: &[u8]) -> Result<DiscoveryTable, DiscoveryError> {
        let magic = read_bytes::<8>(bytes, offset::MAGIC)?;
        if magic != MAGIC {
            return Err(DiscoveryError::BadMagic {
                offset: offset::MAGIC,
            });
        }
        let version = read_u32(bytes, offset::VERSION)?;
        if version != TABLE_VERSION {
            return Err(DiscoveryError::UnsupportedVersion {
                offset: offset::VERSION,
                version,
            });
        }
        let count = read_u32(bytes, offset::COMPONENT_COUNT)?;
        let mut table = DiscoveryTable::new(
            read_u64(bytes, offset::BLOCK_SIZE)?,
            read_u64(bytes, offset::SINK_OFFSET)?,
            read_u64(bytes, offset::SINK_SIZE)?,
        );
        let count = check_count(count as u64)?;
        table.check_header()?;
        for index in 0..count {
            let at = entry_offset(index);
            let value = read_u32(bytes, at + entry::COMPONENT_TYPE)?;
            let component_type =
                ComponentType::from_value(value).ok_or(DiscoveryError::UnknownComponentType {
                    offset: at + entry::COMPONENT_TYPE,
                    value,
                })?;
            // Fields in byte order, so that a cut input is reported at the first field cut.
            let implementation = read_u32(bytes, at + entry::IMPLEMENTATION)?;
            let registers = read_u32(bytes, at + entry::REGISTERS)?;
            let hart = read_u32(bytes, at + entry::HART)?;
            let component = ComponentEntry {
                component_type,
                implementation,
                registers,
                hart: (hart != NO_HART).then_some(hart),
            };
            table.check_component(index, &component)?;
            table.push(component)?;
        }
        Ok(table)
    }

    /// Writes the table to the start of `out` and returns the bytes written
    /// ([`Self::encoded_len`]); the rest of `out` is left alone. Refuses a table
    /// [`Self::parse`] would refuse, with the same error.
    pub fn write(&self, out: &mut [u8]) -> Result<usize, DiscoveryError> {
        let count = check_count(self.component_count as u64)?;
        self.check_header()?;
        for (index, component) in self.components().iter().enumerate() {
            self.check_component(index, component)?;
        }
        let length = self.encoded_len();
        if out.len() < length {
            return Err(DiscoveryError::Truncated { offset: 0, length });
        }
        out[offset::MAGIC..offset::MAGIC + 8].copy_from_slice(&MAGIC);
        write_u32(out, offset::VERSION, TABLE_VERSION);
        write_u32(out, offset::COMPONENT_COUNT, count as u32);
        write_u64(out, offset::BLOCK_SIZE, self.block_size);
        write_u64(out, offset::SINK_OFFSET, self.sink_offset);
        write_u64(out, offset::SINK_SIZE, self.sink_size);
        out[offset::SINK_SIZE + 8..offset::COMPONENTS].fill(0);
        for (index, component) in self.components().iter().enumerate() {
            let at = entry_offset(index);
            write_u32(
                out,
                at + entry::COMPONENT_TYPE,
                component.component_type.value(),
            );
            write_u32(out, at + entry::IMPLEMENTATION, component.implementation);
            write_u32(out, at + entry::REGISTERS, component.registers);
            write_u32(out, at + entry::HART, component.hart.unwrap_or(NO_HART));
        }
        Ok(length)
    }

    /// Block size and sink memory.
    fn check_header(&self) -> Result<(), DiscoveryError> {
        if self.block_size < TABLE_SIZE as u64 {
            return Err(DiscoveryError::BlockTooSmall {
                offset: offset::BLOCK_SIZE,
                block_size: self.block_size,
            });
        }
        let bad_sink = |offset| DiscoveryError::BadSinkMemory {
            offset,
            sink_offset: self.sink_offset,
            sink_size: self.sink_size,
        };
        let alignment = crate::ram_sink::ADDRESS_ALIGNMENT;
        if self.sink_offset < TABLE_SIZE as u64 || self.sink_offset % alignment != 0 {
            return Err(bad_sink(offset::SINK_OFFSET));
        }
        let fits = self
            .sink_offset
            .checked_add(self.sink_size)
            .is_some_and(|end| end <= self.block_size);
        if self.sink_size == 0 || self.sink_size % alignment != 0 || !fits {
            return Err(bad_sink(offset::SINK_SIZE));
        }
        Ok(())
    }

    /// Entry `index`, checked against the header and the entries before it.
    fn check_component(
        &self,
        index: usize,
        component: &ComponentEntry,
    ) -> Result<(), DiscoveryError> {
        let at = entry_offset(index);
        if implementation_type(component.implementation) != Some(component.component_type) {
            return Err(DiscoveryError::ImplementationMismatch {
                offset: at + entry::IMPLEMENTATION,
                component_type: component.component_type.value(),
                implementation: component.implementation,
            });
        }
        let registers = component.registers as u64;
        let page = COMPONENT_SIZE as u64;
        if registers % page != 0
            || registers < TABLE_SIZE as u64
            || registers + page > self.sink_offset
        {
            return Err(DiscoveryError::BadRegisters {
                offset: at + entry::REGISTERS,
                registers: component.registers,
            });
        }
        let earlier = &self.components[..index.min(self.component_count)];
        if earlier
            .iter()
            .any(|other| other.registers == component.registers)
        {
            return Err(DiscoveryError::DuplicateRegisters {
                offset: at + entry::REGISTERS,
                registers: component.registers,
            });
        }
        let is_encoder = component.component_type == ComponentType::Encoder;
        match component.hart {
            None if is_encoder => {
                return Err(DiscoveryError::MissingHart {
                    offset: at + entry::HART,
                })
            }
            Some(hart) if !is_encoder || hart == NO_HART => {
                return Err(DiscoveryError::UnexpectedHart {
                    offset: at + entry::HART,
                    hart,
                })
            }
            Some(hart) if earlier.iter().any(|other| other.hart == Some(hart)) => {
                return Err(DiscoveryError::UnexpectedHart {
                    offset: at + entry::HART,
                    hart,
                })
            }
            _ => {}
        }
        Ok(())
    }
}

/// The component count as an index bound, if the table holds that many.
fn check_count(count: u64) -> Result<usize, DiscoveryError> {
    if count > MAX_COMPONENTS as u64 {
        return Err(DiscoveryError::TooManyComponents {
            offset: offset::COMPONENT_COUNT,
            count,
        });
    }
    Ok(count as usize)
}

/// Offset of entry `index` (< `MAX_COMPONENTS`, so no overflow).
const fn entry_offset(index: usize) -> usize {
    offset::COMPONENTS + ENTRY_SIZE * index
}

fn read_bytes<const N: usize>(bytes: &[u8], offset: usize) -> Result<[u8; N], DiscoveryError> {
    offset
        .checked_add(N)
        .and_then(|end| bytes.get(offset..end))
        .and_then(|field| field.try_into().ok())
        .ok_or(DiscoveryError::Truncated { offset, length: N })
}

fn read_u32(bytes: &[u8], offset: usize) -> Result<u32, DiscoveryError> {
    read_bytes(bytes, offset).map(u32::from_le_bytes)
}

fn read_u64(bytes: &[u8], offset: usize) -> Result<u64, DiscoveryError> {
    read_bytes(bytes, offset).map(u64::from_le_bytes)
}

/// Callers checked that `out` holds the whole table.
fn write_u32(out: &mut [u8], offset: usize, value: u32) {
    out[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
}

/// Callers checked that `out` holds the whole table.
fn write_u64(out: &mut [u8], offset: usize, value: u64) {
    out[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::component::{implementation_value, Version};

    const ENCODER: u32 = implementation_value(ComponentType::Encoder, Version::V1_0);
    const FUNNEL: u32 = implementation_value(ComponentType::Funnel, Version::V1_0);
    const SINK: u32 = implementation_value(ComponentType::RamSink, Version::V1_0);

    /// The table of a two-hart block of 64 KiB: encoders at pages 1 and 2, the funnel at
    /// 3, the sink at 4, its memory from page 5 on.
    fn two_harts() -> DiscoveryTable {
        let mut table = DiscoveryTable::new(0x1_0000, 0x5000, 0xb000);
        for hart in 0..2 {
            table
                .push(ComponentEntry {
                    component_type: ComponentType::Encoder,
                    implementation: ENCODER | 0x2001_0000,
                    registers: 0x1000 * (1 + hart),
                    hart: Some(hart),
                })
                .unwrap();
        }
        let funnel = ComponentEntry {
            component_type: ComponentType::Funnel,
            implementation: FUNNEL,
            registers: 0x3000,
            hart: None,
        };
        table.push(funnel).unwrap();
        let sink = ComponentEntry {
            component_type: ComponentType::RamSink,
            implementation: SINK | 0x2000,
            registers: 0x4000,
            hart: None,
        };
        table.push(sink).unwrap();
        table
    }

    fn encoded(table: &DiscoveryTable) -> [u8; TABLE_SIZE] {
        let mut page = [0u8; TABLE_SIZE];
        assert_eq!(table.write(&mut page), Ok(table.encoded_len()));
        page
    }

    #[test]
    fn round_trip_and_byte_layout() {
        let table = two_harts();
        let page = encoded(&table);
        // The layout of docs/trace-device.md, byte for byte.
        assert_eq!(&page[0..8], b"RVTRACE1");
        assert_eq!(page[0x08..0x0c], 1u32.to_le_bytes());
        assert_eq!(page[0x0c..0x10], 4u32.to_le_bytes());
        assert_eq!(page[0x10..0x18], 0x1_0000u64.to_le_bytes());
        assert_eq!(page[0x18..0x20], 0x5000u64.to_le_bytes());
        assert_eq!(page[0x20..0x28], 0xb000u64.to_le_bytes());
        assert!(page[0x28..0x40].iter().all(|&byte| byte == 0));
        assert_eq!(
            page[0x50..0x60],
            [1, 0, 0, 0, 0x01, 0x01, 0x01, 0x20, 0, 0x20, 0, 0, 1, 0, 0, 0]
        );
        assert_eq!(page[0x6c..0x70], NO_HART.to_le_bytes());
        assert_eq!(table.encoded_len(), 0x80);

        let parsed = DiscoveryTable::parse(&page).unwrap();
        assert_eq!(parsed, table);
        assert_eq!(parsed.encoder(1).unwrap().registers, 0x2000);
        assert_eq!(parsed.encoders().count(), 2);
        assert_eq!(parsed.funnel().unwrap().registers, 0x3000);
        assert_eq!(parsed.ram_sink().unwrap().registers, 0x4000);
        assert!(parsed.encoder(2).is_none());
        // Only the table's bytes are needed.
        assert_eq!(DiscoveryTable::parse(&page[..0x80]), Ok(table));
    }

    #[test]
    fn every_truncation_names_the_field_that_is_cut() {
        let page = encoded(&two_harts());
        for length in 0..0x80 {
            let error = DiscoveryTable::parse(&page[..length]).unwrap_err();
            let DiscoveryError::Truncated {
                offset,
                length: field,
            } = error
            else {
                panic!("{length} bytes: {error:?}");
            };
            // Bytes 0x28..0x40 are reserved: a cut there is reported at the first entry.
            assert!(
                offset <= length.max(0x40) && offset + field > length,
                "{length} bytes: {error:?}"
            );
        }
        let mut small = [0u8; 0x7f];
        assert_eq!(
            two_harts().write(&mut small),
            Err(DiscoveryError::Truncated {
                offset: 0,
                length: 0x80
            })
        );
    }

    /// `page` with the u32 at `offset` replaced.
    fn patched(offset: usize, value: u32) -> Result<DiscoveryTable, DiscoveryError> {
        let mut page = encoded(&two_harts());
        page[offset..offset + 4].copy_from_slice(&value.to_le_bytes());
        DiscoveryTable::parse(&page)
    }

    #[test]
    fn header_errors_name_their_offset() {
        assert_eq!(patched(4, 0), Err(DiscoveryError::BadMagic { offset: 0 }));
        assert_eq!(
            patched(8, 2),
            Err(DiscoveryError::UnsupportedVersion {
                offset: 8,
                version: 2
            })
        );
        assert_eq!(
            patched(0x0c, 33),
            Err(DiscoveryError::TooManyComponents {
                offset: 0x0c,
                count: 33
            })
        );
        assert_eq!(
            patched(0x0c, u32::MAX),
            Err(DiscoveryError::TooManyComponents {
                offset: 0x0c,
                count: u32::MAX as u64
            })
        );
        assert_eq!(
            patched(0x10, 0xfff),
            Err(DiscoveryError::BlockTooSmall {
                offset: 0x10,
                block_size: 0xfff
            })
        );
        // Sink memory on the table's page, misaligned, empty, past the block, or wrapping.
        for (offset, value) in [
            (0x18, 0x800),
            (0x18, 0x5002),
            (0x20, 0),
            (0x20, 0xb004),
            (0x20, 3),
        ] {
            let error = patched(offset, value).unwrap_err();
            assert!(
                matches!(error, DiscoveryError::BadSinkMemory { .. }),
                "{error:?}"
            );
            assert_eq!(error.offset(), offset);
        }
        let mut page = encoded(&two_harts());
        page[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(DiscoveryTable::parse(&page).unwrap_err().offset(), 0x20);
    }

    #[test]
    fn entry_errors_name_their_offset() {
        assert_eq!(
            patched(0x40, 2),
            Err(DiscoveryError::UnknownComponentType {
                offset: 0x40,
                value: 2
            })
        );
        assert_eq!(
            patched(0x44, FUNNEL),
            Err(DiscoveryError::ImplementationMismatch {
                offset: 0x44,
                component_type: 1,
                implementation: FUNNEL
            })
        );
        for registers in [0x1800, 0, 0x5000, 0x8000] {
            assert_eq!(
                patched(0x58, registers),
                Err(DiscoveryError::BadRegisters {
                    offset: 0x58,
                    registers
                })
            );
        }
        assert_eq!(
            patched(0x58, 0x1000),
            Err(DiscoveryError::DuplicateRegisters {
                offset: 0x58,
                registers: 0x1000
            })
        );
        assert_eq!(
            patched(0x4c, NO_HART),
            Err(DiscoveryError::MissingHart { offset: 0x4c })
        );
        assert_eq!(
            patched(0x5c, 0),
            Err(DiscoveryError::UnexpectedHart {
                offset: 0x5c,
                hart: 0
            })
        );
        assert_eq!(
            patched(0x6c, 7),
            Err(DiscoveryError::UnexpectedHart {
                offset: 0x6c,
                hart: 7
            })
        );
    }

    #[test]
    fn write_refuses_what_parse_refuses() {
        let mut table = two_harts();
        table.sink_offset = 0x4000;
        let mut page = [0u8; TABLE_SIZE];
        // The sink register page is now the sink memory's first page.
        assert_eq!(
            table.write(&mut page),
            Err(DiscoveryError::BadRegisters {
                offset: 0x78,
                registers: 0x4000
            })
        );
        let mut full = DiscoveryTable::new(0x10_0000, 0x8_0000, 0x1000);
        for hart in 0..MAX_COMPONENTS as u32 {
            let encoder = ComponentEntry {
                component_type: ComponentType::Encoder,
                implementation: ENCODER,
                registers: 0x1000 * (hart + 1),
                hart: Some(hart),
            };
            full.push(encoder).unwrap();
        }
        let extra = ComponentEntry {
            component_type: ComponentType::RamSink,
            implementation: SINK,
            registers: 0x7_0000,
            hart: None,
        };
        assert_eq!(
            full.push(extra).unwrap_err().offset(),
            offset::COMPONENT_COUNT
        );
        let mut page = [0u8; TABLE_SIZE];
        let written = full.write(&mut page).unwrap();
        assert_eq!(DiscoveryTable::parse(&page[..written]), Ok(full));
    }

    #[test]
    fn mutated_tables_never_panic_and_what_parses_round_trips() {
        let original = encoded(&two_harts());
        // xorshift64: no dev-dependency for a fixed, reproducible sequence.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parsed = 0;
        for _ in 0..20_000 {
            let mut page = original;
            for _ in 0..(next() % 4 + 1) {
                let at = (next() % 0x90) as usize;
                page[at] = next() as u8;
            }
            let length = if next() % 8 == 0 {
                (next() % 0x90) as usize
            } else {
                TABLE_SIZE
            };
            if let Ok(table) = DiscoveryTable::parse(&page[..length]) {
                parsed += 1;
                let mut again = [0u8; TABLE_SIZE];
                let written = table.write(&mut again).unwrap();
                assert_eq!(DiscoveryTable::parse(&again[..written]), Ok(table));
            }
        }
        // Some mutations hit bytes nobody reads (padding, past the entries).
        assert!(parsed > 100, "{parsed}");
    }

    #[test]
    fn errors_display_their_offset() {
        extern crate std;
        use std::string::ToString;
        let message = DiscoveryError::BadRegisters {
            offset: 0x58,
            registers: 0x1800,
        }
        .to_string();
        assert!(
            message.contains("0x58") && message.contains("0x1800"),
            "{message}"
        );
    }
}
