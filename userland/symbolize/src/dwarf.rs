//! DWARF: inline stacks from addr2line, plus what addr2line does not give —
//! the declaration line of each frame's function and discriminators — read
//! with gimli.

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use gimli::{
    AttributeValue, Reader as _, RunTimeEndian, SectionId, UnitOffset, UnitRef, UnitSectionOffset,
};
use object::{CompressionFormat, Object, ObjectSection};

use crate::Frame;

/// Section data shared with the file's bytes (no copy) unless it had to be
/// decompressed.
pub(crate) type Reader = gimli::EndianArcSlice<RunTimeEndian>;

/// Why the DWARF of a file could not be loaded; kept so every lookup can
/// report it without loading again.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LoadError {
    Section {
        section: &'static str,
        source: object::Error,
    },
    /// The section header points past the end of the file.
    Truncated {
        section: &'static str,
    },
    Dwarf(gimli::Error),
}

/// Where a file's DWARF sections are, read (and decompressed) only when the
/// first lookup needs them.
pub(crate) struct DwarfSource {
    bytes: Arc<[u8]>,
    endian: RunTimeEndian,
    sections: Vec<(SectionId, SectionLocation)>,
}

/// Not the bytes: a whole file in a debug print helps nobody.
impl std::fmt::Debug for DwarfSource {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DwarfSource")
            .field("file_size", &self.bytes.len())
            .field("sections", &self.sections)
            .finish()
    }
}

#[derive(Debug, Clone, Copy)]
struct SectionLocation {
    format: CompressionFormat,
    offset: u64,
    size: u64,
    uncompressed_size: u64,
}

impl DwarfSource {
    /// The DWARF of `file`, or `None` when it has no `.debug_info` with content.
    pub fn from_object(file: &object::File<'_>, bytes: &Arc<[u8]>) -> Option<DwarfSource> {
        let endian = if file.is_little_endian() {
            RunTimeEndian::Little
        } else {
            RunTimeEndian::Big
        };
        let mut sections = Vec::new();
        for id in LOOKUP_SECTIONS {
            // `section_by_name` also finds the `.zdebug_*` form.
            let Some(section) = file.section_by_name(id.name()) else {
                continue;
            };
            let Ok(range) = section.compressed_file_range() else {
                continue;
            };
            // A debug file's NOBITS placeholders have no bytes in the file.
            if range.compressed_size == 0 {
                continue;
            }
            sections.push((
                id,
                SectionLocation {
                    format: range.format,
                    offset: range.offset,
                    size: range.compressed_size,
                    uncompressed_size: range.uncompressed_size,
                },
            ));
        }
        let has_info = sections.iter().any(|(id, _)| *id == SectionId::DebugInfo);
        has_info.then(|| DwarfSource {
            bytes: Arc::clone(bytes),
            endian,
            sections,
        })
    }

    fn section(&self, id: SectionId) -> Result<Reader, LoadError> {
        let Some((_, location)) = self.sections.iter().find(|(found, _)| *found == id) else {
            return Ok(Reader::new(Arc::from(&[][..]), self.endian));
        };
        let truncated = LoadError::Truncated { section: id.name() };
        let range = usize::try_from(location.offset)
            .ok()
            .zip(usize::try_from(location.offset.saturating_add(location.size)).ok())
            .map(|(start, end)| Range { start, end })
            .filter(|range| range.end <= self.bytes.len())
            .ok_or(truncated)?;
        let whole = Reader::new(Arc::clone(&self.bytes), self.endian);
        if location.format == CompressionFormat::None {
            return Ok(whole.range(range));
        }
        let compressed = object::CompressedData {
            format: location.format,
            data: &self.bytes[range],
            uncompressed_size: location.uncompressed_size,
        };
        let data = compressed
            .decompress()
            .map_err(|source| LoadError::Section {
                section: id.name(),
                source,
            })?;
        Ok(Reader::new(Arc::from(&*data), self.endian))
    }

    fn load(&self) -> Result<gimli::Dwarf<Reader>, LoadError> {
        gimli::Dwarf::load(|id| self.section(id))
    }
}

/// The sections function, inline and line lookups read; location lists,
/// macros and type units are left alone (and never decompressed).
const LOOKUP_SECTIONS: [SectionId; 10] = [
    SectionId::DebugAbbrev,
    SectionId::DebugAddr,
    SectionId::DebugAranges,
    SectionId::DebugInfo,
    SectionId::DebugLine,
    SectionId::DebugLineStr,
    SectionId::DebugStr,
    SectionId::DebugStrOffsets,
    SectionId::DebugRanges,
    SectionId::DebugRngLists,
];

/// The attributes that hold a function's linkage name, preferred to its
/// `DW_AT_name` as addr2line and LLVM prefer them.
const LINKAGE_NAMES: [gimli::DwAt; 2] = [gimli::DW_AT_linkage_name, gimli::DW_AT_MIPS_linkage_name];

/// Which file a DIE reference points into: the file itself or its
/// supplementary (dwz) file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DebugFile {
    Primary,
    Supplementary,
}

/// Enough `DW_AT_abstract_origin` / `DW_AT_specification` hops for any real
/// compiler output (inlined → abstract instance → declaration), and a bound
/// against reference cycles in corrupt input.
const REFERENCE_DEPTH: usize = 8;

/// The loaded DWARF of one file.
pub(crate) struct DebugInfo {
    dwarf: Arc<gimli::Dwarf<Reader>>,
    context: addr2line::Context<Reader>,
    /// Every unit, sorted by offset, for references that leave their unit
    /// (`DW_FORM_ref_addr`, as LTO produces); parsed on the first such reference.
    units: OnceCell<Result<Vec<gimli::Unit<Reader>>, gimli::Error>>,
    supplementary_units: OnceCell<Result<Vec<gimli::Unit<Reader>>, gimli::Error>>,
    /// Line-table rows with a nonzero discriminator, per unit, built on the
    /// unit's first lookup.
    discriminators: RefCell<HashMap<UnitSectionOffset, Vec<DiscriminatorRange>>>,
    /// Every subprogram's address ranges, built on the first
    /// [`function_ranges`](Self::function_ranges).
    functions: OnceCell<Result<FunctionIndex, gimli::Error>>,
}

/// The address ranges of the subprograms of every unit, grouped by name.
#[derive(Debug, Default)]
struct FunctionIndex {
    /// `(start, end, index into by_name)` of every range, sorted by start.
    ranges: Vec<(u64, u64, usize)>,
    /// The ranges of every subprogram of one name, in unit order.
    by_name: Vec<Vec<Range<u64>>>,
}

impl std::fmt::Debug for DebugInfo {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DebugInfo")
            .field("has_supplementary", &self.dwarf.sup().is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy)]
struct DiscriminatorRange {
    start: u64,
    end: u64,
    discriminator: u32,
}

impl DebugInfo {
    pub fn load(
        source: &DwarfSource,
        supplementary: Option<&DwarfSource>,
    ) -> Result<DebugInfo, LoadError> {
        let mut dwarf = source.load()?;
        if let Some(supplementary) = supplementary {
            dwarf.set_sup(supplementary.load()?);
        }
        let dwarf = Arc::new(dwarf);
        let context =
            addr2line::Context::from_arc_dwarf(Arc::clone(&dwarf)).map_err(LoadError::Dwarf)?;
        Ok(DebugInfo {
            dwarf,
            context,
            units: OnceCell::new(),
            supplementary_units: OnceCell::new(),
            discriminators: RefCell::new(HashMap::new()),
            functions: OnceCell::new(),
        })
    }

    /// The address ranges of the function whose code is at `address`: of the
    /// subprogram with the last range starting at or before it (and covering it),
    /// together with those of every other subprogram of its name — llvm-profgen's
    /// notion of a function, one profile per name. Empty when no subprogram covers
    /// the address.
    pub fn function_ranges(&self, address: u64) -> Result<Vec<Range<u64>>, gimli::Error> {
        let index = self
            .functions
            .get_or_init(|| self.function_index())
            .as_ref()
            .map_err(|error| *error)?;
        let following = index
            .ranges
            .partition_point(|&(start, _, _)| start <= address);
        Ok(index.ranges[..following]
            .last()
            .filter(|&&(_, end, _)| address < end)
            .map(|&(_, _, name)| index.by_name[name].clone())
            .unwrap_or_default())
    }

    fn function_index(&self) -> Result<FunctionIndex, gimli::Error> {
        let units = self
            .units
            .get_or_init(|| parse_units(&self.dwarf))
            .as_ref()
            .map_err(|error| *error)?;
        let mut index = FunctionIndex::default();
        let mut names: HashMap<String, usize> = HashMap::new();
        for unit in units {
            let unit = UnitRef::new(&self.dwarf, unit);
            let mut entries = unit.entries();
            while let Some((_, entry)) = entries.next_dfs()? {
                if entry.tag() != gimli::DW_TAG_subprogram {
                    continue;
                }
                let mut ranges = Vec::new();
                let mut found = unit.die_ranges(entry)?;
                while let Some(range) = found.next()? {
                    if range.begin < range.end {
                        ranges.push(range.begin..range.end);
                    }
                }
                if ranges.is_empty() {
                    continue;
                }
                let offset = entry.offset();
                let name = match self.subprogram_name(unit, offset, &LINKAGE_NAMES)? {
                    Some(name) => name,
                    None => match self.subprogram_name(unit, offset, &[gimli::DW_AT_name])? {
                        Some(name) => name,
                        None => continue,
                    },
                };
                let next = index.by_name.len();
                let slot = *names.entry(name).or_insert(next);
                if slot == next {
                    index.by_name.push(Vec::new());
                }
                for range in ranges {
                    index.ranges.push((range.start, range.end, slot));
                    index.by_name[slot].push(range);
                }
            }
        }
        index.ranges.sort_unstable();
        Ok(index)
    }

    /// The first of `attributes` the subprogram at `offset` has, or the DIE it is
    /// an instance or definition of has (a concrete out-of-line instance names its
    /// function through its abstract origin).
    fn subprogram_name(
        &self,
        unit: UnitRef<'_, Reader>,
        offset: UnitOffset,
        attributes: &[gimli::DwAt],
    ) -> Result<Option<String>, gimli::Error> {
        let (mut file, mut unit, mut offset) = (DebugFile::Primary, unit, offset);
        for _ in 0..=REFERENCE_DEPTH {
            let entry = unit.entry(offset)?;
            for &attribute in attributes {
                if let Some(value) = entry.attr_value(attribute)? {
                    let name = unit.attr_string(value)?;
                    return Ok(Some(name.to_string_lossy()?.into_owned()));
                }
            }
            let mut target = None;
            for name in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
                target = match entry.attr_value(name)? {
                    Some(AttributeValue::UnitRef(target)) => Some((file, unit, target)),
                    Some(AttributeValue::DebugInfoRef(target)) => self.unit_of(file, target)?,
                    Some(AttributeValue::DebugInfoRefSup(target)) => {
                        self.unit_of(DebugFile::Supplementary, target)?
                    }
                    _ => None,
                };
                if target.is_some() {
                    break;
                }
            }
            let Some(next) = target else {
                return Ok(None);
            };
            (file, unit, offset) = next;
        }
        Ok(None)
    }

    /// The inline stack at `address`, innermost first; empty when no unit
    /// covers it.
    pub fn frames(&self, address: u64) -> Result<Vec<Frame>, gimli::Error> {
        // Split DWARF (.dwo) is not looked for: lookups go on with what the
        // file itself holds.
        let mut iterator = self.context.find_frames(address).skip_all_loads()?;
        let unit = self.context.find_dwarf_and_unit(address).skip_all_loads();
        let mut frames: Vec<Frame> = Vec::new();
        let mut inner_die: Option<UnitOffset> = None;
        while let Some(found) = iterator.next()? {
            let linkage_name = match &found.function {
                Some(name) => Some(name.raw_name()?.into_owned()),
                None => None,
            };
            let function = linkage_name
                .as_deref()
                .map(|name| crate::demangle(name).into_owned());
            let (file, line, column) = match found.location {
                Some(location) => (
                    location.file.map(str::to_owned),
                    location.line,
                    location.column,
                ),
                None => (None, None, None),
            };
            let function_start_line = match (unit, found.dw_die_offset) {
                (Some(unit), Some(offset)) => {
                    self.declaration_line(DebugFile::Primary, unit, offset, REFERENCE_DEPTH)?
                }
                _ => None,
            };
            let discriminator = match (unit, frames.is_empty(), inner_die) {
                (Some(unit), true, _) => self.row_discriminator(unit, address)?,
                (Some(unit), false, Some(inlined)) => call_site_discriminator(unit, inlined)?,
                _ => 0,
            };
            inner_die = found.dw_die_offset;
            frames.push(Frame {
                function,
                linkage_name,
                file,
                line,
                column,
                discriminator,
                function_start_line,
            });
        }
        Ok(frames)
    }

    /// `DW_AT_decl_line` of the DIE at `offset`, or of the DIE it is an
    /// instance or definition of.
    fn declaration_line<'a>(
        &'a self,
        file: DebugFile,
        unit: UnitRef<'a, Reader>,
        offset: UnitOffset,
        depth: usize,
    ) -> Result<Option<u32>, gimli::Error> {
        let entry = unit.entry(offset)?;
        if let Some(line) = entry.attr_value(gimli::DW_AT_decl_line)? {
            return Ok(line.udata_value().and_then(|line| u32::try_from(line).ok()));
        }
        if depth == 0 {
            return Ok(None);
        }
        // The abstract origin first: for an out-of-class C++ definition it is
        // the definition (with the line the body starts at), while the
        // specification is the declaration inside the class.
        for name in [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification] {
            let Some(value) = entry.attr_value(name)? else {
                continue;
            };
            let target = match value {
                AttributeValue::UnitRef(target) => Some((file, unit, target)),
                AttributeValue::DebugInfoRef(target) => self.unit_of(file, target)?,
                AttributeValue::DebugInfoRefSup(target) => {
                    self.unit_of(DebugFile::Supplementary, target)?
                }
                _ => None,
            };
            if let Some((file, unit, target)) = target {
                return self.declaration_line(file, unit, target, depth - 1);
            }
        }
        Ok(None)
    }

    /// The unit of `file` holding the DIE at section offset `offset`.
    fn unit_of(
        &self,
        file: DebugFile,
        offset: gimli::DebugInfoOffset,
    ) -> Result<Option<(DebugFile, UnitRef<'_, Reader>, UnitOffset)>, gimli::Error> {
        let (dwarf, cell) = match file {
            DebugFile::Primary => (&*self.dwarf, &self.units),
            DebugFile::Supplementary => match self.dwarf.sup() {
                Some(supplementary) => (supplementary, &self.supplementary_units),
                None => return Ok(None),
            },
        };
        let units = cell
            .get_or_init(|| parse_units(dwarf))
            .as_ref()
            .map_err(|error| *error)?;
        let following = units.partition_point(|unit| {
            unit.header
                .offset()
                .as_debug_info_offset()
                .is_some_and(|start| start <= offset)
        });
        let Some(unit) = following.checked_sub(1).map(|index| &units[index]) else {
            return Ok(None);
        };
        Ok(offset
            .to_unit_offset(&unit.header)
            .map(|unit_offset| (file, UnitRef::new(dwarf, unit), unit_offset)))
    }

    /// The discriminator of the line-table row covering `address`.
    fn row_discriminator(
        &self,
        unit: UnitRef<'_, Reader>,
        address: u64,
    ) -> Result<u32, gimli::Error> {
        let mut tables = self.discriminators.borrow_mut();
        let key = unit.header.offset();
        let table = match tables.entry(key) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(discriminator_ranges(unit)?)
            }
        };
        let following = table.partition_point(|range| range.start <= address);
        Ok(table[..following]
            .last()
            .filter(|range| address < range.end)
            .map_or(0, |range| range.discriminator))
    }
}

fn parse_units(dwarf: &gimli::Dwarf<Reader>) -> Result<Vec<gimli::Unit<Reader>>, gimli::Error> {
    let mut units = Vec::new();
    let mut headers = dwarf.units();
    while let Some(header) = headers.next()? {
        units.push(dwarf.unit(header)?);
    }
    Ok(units)
}

/// `DW_AT_GNU_discriminator` of an inlined subroutine: which of several
/// calls on the caller's line it was inlined from.
fn call_site_discriminator(
    unit: UnitRef<'_, Reader>,
    inlined: UnitOffset,
) -> Result<u32, gimli::Error> {
    let entry = unit.entry(inlined)?;
    Ok(entry
        .attr_value(gimli::DW_AT_GNU_discriminator)?
        .and_then(|value| value.udata_value())
        .and_then(|value| u32::try_from(value).ok())
        .unwrap_or(0))
}

/// The address ranges of the unit's line-table rows that carry a nonzero
/// discriminator, sorted. Each row covers up to the next row's address, so
/// of several rows at one address the last counts, as in addr2line's lines.
fn discriminator_ranges(
    unit: UnitRef<'_, Reader>,
) -> Result<Vec<DiscriminatorRange>, gimli::Error> {
    let mut ranges = Vec::new();
    let Some(program) = unit.line_program.clone() else {
        return Ok(ranges);
    };
    let mut rows = program.rows();
    let mut previous: Option<(u64, u64)> = None;
    while let Some((_, row)) = rows.next_row()? {
        if let Some((start, discriminator)) = previous {
            let end = row.address();
            if discriminator != 0 && start < end {
                ranges.push(DiscriminatorRange {
                    start,
                    end,
                    discriminator: u32::try_from(discriminator).unwrap_or(u32::MAX),
                });
            }
        }
        previous = (!row.end_sequence()).then(|| (row.address(), row.discriminator()));
    }
    ranges.sort_by_key(|range| range.start);
    Ok(ranges)
}
