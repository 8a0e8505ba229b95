//! A builder's profile of some of its samples, encoded straight from the builder's
//! tables ([`ProfileBuilder::encode_profile_of`]).
//!
//! `rvperf daemon` writes a profile of each interval's samples, and every few
//! intervals one of the run's. Built as a [`Profile`] first, each would copy every
//! string, sample, location and function it uses into owned messages, only for
//! prost to encode them and drop them again: under a machine whose processes come
//! and go, those allocations and frees alone were a tenth of the daemon's
//! instructions.
//! Here the builder's entries are numbered in one pass over the samples, and the
//! message is written in a second, each sample, location and function through one
//! reused message, each string from the builder's own table.

use std::io::Write;

use prost::encoding::{encode_key, encode_varint, message, WireType};
use prost::Message as _;

use crate::{proto, renumbered_mapping, MappingId, PprofError, Profile, ProfileBuilder};
use crate::{ProfileHeader, ProfileMetadata, Samples};

/// A profile's bytes: a `profile.proto` `Profile` message, uncompressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedProfile {
    bytes: Vec<u8>,
    samples: usize,
}

impl EncodedProfile {
    /// The message's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many samples the profile holds.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The profile's messages, decoded.
    pub fn decode(&self) -> Result<Profile, PprofError> {
        crate::read(&self.bytes)
    }

    /// Writes the profile gzip-compressed, as pprof files are.
    pub fn write_gzip(&self, out: &mut dyn Write) -> Result<(), PprofError> {
        crate::gzip(&self.bytes, out)
    }
}

/// What a profile of some samples takes of its builder: the mappings, locations,
/// functions and strings the samples use, each numbered from 1 (strings from 0) in
/// the order the samples first use it.
struct Selection {
    /// By builder index: the entry's number in the profile, 0 when it is not used.
    mapping_numbers: Vec<u64>,
    location_numbers: Vec<u64>,
    function_numbers: Vec<u64>,
    /// By builder index: the string's index in the profile's table, -1 when unused.
    string_numbers: Vec<i64>,
    /// Builder indices in the profile's order.
    mappings: Vec<usize>,
    locations: Vec<usize>,
    functions: Vec<usize>,
    strings: Vec<usize>,
    /// The metadata's strings the samples do not use, after `strings` in the table.
    metadata_strings: Vec<String>,
}

/// Numbers builder entry `index` next in `order` unless `numbers` has it: whether it
/// is new (and its own strings, functions or mapping are to be numbered after it).
fn number_if_new(numbers: &mut [u64], order: &mut Vec<usize>, index: usize) -> bool {
    if numbers[index] != 0 {
        return false;
    }
    order.push(index);
    numbers[index] = order.len() as u64;
    true
}

impl Selection {
    fn new(builder: &ProfileBuilder) -> Self {
        Selection {
            mapping_numbers: vec![0; builder.mappings.len()],
            location_numbers: vec![0; builder.locations.len()],
            function_numbers: vec![0; builder.functions.len()],
            string_numbers: vec![-1; builder.strings.table.len()],
            mappings: Vec::new(),
            locations: Vec::new(),
            functions: Vec::new(),
            strings: Vec::new(),
            metadata_strings: Vec::new(),
        }
    }

    /// The profile's index of the builder's string `index`, numbering it if it is new
    /// (an index the builder did not hand out reads as `""`).
    fn use_string(&mut self, index: i64) -> i64 {
        let Some(slot) = usize::try_from(index)
            .ok()
            .and_then(|index| self.string_numbers.get_mut(index))
        else {
            return 0;
        };
        if *slot < 0 {
            *slot = self.strings.len() as i64;
            self.strings.push(index as usize);
        }
        *slot
    }

    /// The profile's index of a builder string already numbered.
    fn string(&self, index: i64) -> i64 {
        usize::try_from(index)
            .ok()
            .and_then(|index| self.string_numbers.get(index))
            .map_or(0, |&number| number.max(0))
    }

    fn use_mapping(&mut self, builder: &ProfileBuilder, index: usize) {
        if number_if_new(&mut self.mapping_numbers, &mut self.mappings, index) {
            let mapping = &builder.mappings[index];
            self.use_string(mapping.filename);
            self.use_string(mapping.build_id);
        }
    }

    /// Numbers the location of builder id `id`, its mapping and its lines' functions.
    fn use_location(&mut self, builder: &ProfileBuilder, id: u64) -> Result<(), PprofError> {
        let index = (id as usize)
            .checked_sub(1)
            .filter(|&index| index < builder.locations.len())
            .ok_or(PprofError::UnknownId {
                what: "location",
                id,
            })?;
        if self.location_numbers[index] != 0 {
            return Ok(());
        }
        let location = &builder.locations[index];
        if let Some(mapping) = (location.mapping_id as usize).checked_sub(1) {
            self.use_mapping(builder, mapping);
        }
        for line in &location.line {
            let function_index = (line.function_id as usize).saturating_sub(1);
            if number_if_new(
                &mut self.function_numbers,
                &mut self.functions,
                function_index,
            ) {
                let function = &builder.functions[function_index];
                self.use_string(function.name);
                self.use_string(function.system_name);
                self.use_string(function.filename);
            }
        }
        number_if_new(&mut self.location_numbers, &mut self.locations, index);
        Ok(())
    }

    /// The index of a metadata string: the samples' own where they use it, else one
    /// added after them.
    fn metadata_string(&mut self, builder: &ProfileBuilder, text: &str) -> i64 {
        // Metadata strings are few: a linear search keeps them out of any index.
        if let Some(position) = self
            .strings
            .iter()
            .position(|&index| builder.strings.table[index] == text)
        {
            return position as i64;
        }
        let position = match self.metadata_strings.iter().position(|known| known == text) {
            Some(position) => position,
            None => {
                self.metadata_strings.push(text.to_owned());
                self.metadata_strings.len() - 1
            }
        };
        (self.strings.len() + position) as i64
    }
}

impl ProfileBuilder {
    /// The profile of `samples` (of this builder), encoded: the message
    /// [`profile_of`](Self::profile_of) decodes, without its owned copy of every
    /// string, sample, location and function.
    pub fn encode_profile_of(
        &self,
        samples: &Samples,
        metadata: &ProfileMetadata,
        main_mapping: Option<MappingId>,
    ) -> Result<EncodedProfile, PprofError> {
        if samples.builder != self.identity {
            return Err(PprofError::ForeignSamples);
        }
        let (selection, header) = self.select(samples, metadata, main_mapping)?;
        let mut bytes = Vec::new();
        self.encode_selection(samples, &selection, &mut bytes);
        // The fields after the table: a profile of nothing else, whose empty
        // repeated fields prost writes as nothing.
        bytes.extend_from_slice(&header.profile(metadata).encode_to_vec());
        Ok(EncodedProfile {
            bytes,
            samples: samples.samples.len(),
        })
    }

    /// Numbers what `samples` use, in the order the profile lists it: the sample
    /// types' strings, `main_mapping`, then each sample's locations (each with its
    /// mapping and its lines' functions) and labels, then the metadata's strings
    /// (the profile's header, its strings numbered).
    fn select(
        &self,
        samples: &Samples,
        metadata: &ProfileMetadata,
        main_mapping: Option<MappingId>,
    ) -> Result<(Selection, ProfileHeader), PprofError> {
        let mut selection = Selection::new(self);
        // Index 0 is "" in both tables.
        selection.use_string(0);
        for value_type in &self.sample_types {
            selection.use_string(value_type.r#type);
            selection.use_string(value_type.unit);
        }
        // pprof presents the first mapping as the profile's program.
        if let Some(index) = main_mapping
            .and_then(|main| (main.0 as usize).checked_sub(1))
            .filter(|&index| index < self.mappings.len())
        {
            selection.use_mapping(self, index);
        }
        for sample in &samples.samples {
            for &id in &sample.location_id {
                selection.use_location(self, id)?;
            }
            for label in &sample.label {
                selection.use_string(label.key);
                selection.use_string(label.str);
                selection.use_string(label.num_unit);
            }
        }
        let header = ProfileHeader::new(metadata, |text| selection.metadata_string(self, text));
        Ok((selection, header))
    }

    /// Writes the profile's message up to its string table: its fields in
    /// field-number order, as prost writes a [`Profile`], so the bytes are those of
    /// the decoded profile encoded.
    fn encode_selection(&self, samples: &Samples, selection: &Selection, out: &mut Vec<u8>) {
        for value_type in &self.sample_types {
            let renumbered = proto::ValueType {
                r#type: selection.string(value_type.r#type),
                unit: selection.string(value_type.unit),
            };
            message::encode(1, &renumbered, out);
        }
        // One message reused for every sample and location: no allocation each.
        let mut sample = proto::Sample::default();
        for source in &samples.samples {
            sample.location_id.clear();
            sample
                .location_id
                .extend(source.location_id.iter().map(|&id| {
                    (id as usize)
                        .checked_sub(1)
                        .and_then(|index| selection.location_numbers.get(index))
                        .copied()
                        .unwrap_or(0)
                }));
            sample.value.clear();
            sample.value.extend_from_slice(&source.value);
            sample.label.clear();
            sample
                .label
                .extend(source.label.iter().map(|label| proto::Label {
                    key: selection.string(label.key),
                    str: selection.string(label.str),
                    num: label.num,
                    num_unit: selection.string(label.num_unit),
                }));
            message::encode(2, &sample, out);
        }
        for (number, &index) in selection.mappings.iter().enumerate() {
            let mapping =
                renumbered_mapping(&self.mappings[index], number as u64 + 1, &mut |text| {
                    selection.string(text)
                });
            message::encode(3, &mapping, out);
        }
        let mut location = proto::Location::default();
        for (number, &index) in selection.locations.iter().enumerate() {
            let source = &self.locations[index];
            location.id = number as u64 + 1;
            location.mapping_id = (source.mapping_id as usize)
                .checked_sub(1)
                .map_or(0, |mapping| selection.mapping_numbers[mapping]);
            location.address = source.address;
            location.is_folded = source.is_folded;
            location.line.clear();
            location
                .line
                .extend(source.line.iter().map(|line| proto::Line {
                    function_id: selection.function_numbers
                        [(line.function_id as usize).saturating_sub(1)],
                    ..line.clone()
                }));
            message::encode(4, &location, out);
        }
        for (number, &index) in selection.functions.iter().enumerate() {
            let source = &self.functions[index];
            let function = proto::Function {
                id: number as u64 + 1,
                name: selection.string(source.name),
                system_name: selection.string(source.system_name),
                filename: selection.string(source.filename),
                start_line: source.start_line,
            };
            message::encode(5, &function, out);
        }
        let table = selection
            .strings
            .iter()
            .map(|&index| self.strings.table[index].as_str())
            .chain(selection.metadata_strings.iter().map(String::as_str));
        for text in table {
            encode_key(6, WireType::LengthDelimited, out);
            encode_varint(text.len() as u64, out);
            out.extend_from_slice(text.as_bytes());
        }
    }
}
