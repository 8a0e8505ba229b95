//! The messages of pprof's `profile.proto` (github.com/google/pprof, proto/profile.proto),
//! declared with prost's derive so no `protoc` runs at build time. Field numbers and
//! types are the file's; proto3's repeated scalars are packed, as prost writes them.
//!
//! Every string is an index into [`Profile::string_table`], whose entry 0 is `""`;
//! every id is non-zero (0 means "none").

/// A whole profile.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample measures (`samples`/`count`, `cpu`/`nanoseconds`).
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// A regular expression of frames to drop (a string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// A regular expression of frames to keep (a string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was taken, nanoseconds since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it covers.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What `period` counts.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// The events between two samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form text (string indices), shown by `pprof -comments`.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type pprof shows unless told otherwise (a string index of its type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A kind of value and its unit, as string indices.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct ValueType {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack and its values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// Location ids, the leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A key with a text or numeric value attached to a sample.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Label {
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// The text value (a string index), or 0 for a numeric label.
    #[prost(int64, tag = "2")]
    pub str: i64,
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// The unit of `num` (a string index), or 0.
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// A file mapped into an address space.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// The build id as text (pprof's convention: lower-case hex for ELF ids).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// An address (within a mapping) and the inline stack of functions there.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// 0 when the location is in no known mapping.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// 0 when the location is known by function only.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The innermost (inlined) function first, the function it was inlined into last.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// A function and a source line in it.
#[derive(Clone, PartialEq, Eq, Hash, prost::Message)]
pub struct Line {
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// 0 when unknown.
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// 0 when unknown.
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// A function, by name and the file it is in.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The name people read (demangled).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// The name as in the symbol table (mangled).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// The source file.
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// The line the function starts at, 0 when unknown.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
