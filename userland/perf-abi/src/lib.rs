//! The Linux perf ABI: perf's event syntax (events, groups and modifiers)
//! resolved through sysfs, the listing of sysfs' events and PMUs
//! ([`list_pmus`]), `-j` branch filters, `perf_event_attr` construction and a
//! zero-copy parser for the records the kernel writes into the ring buffer (and
//! perf writes into perf.data). The only I/O is reading sysfs, under a root the
//! caller gives.
//!
//! Struct layouts, constants and the attr type come from `perf-event-open-sys`
//! (re-exported as [`sys`]) so that this crate never re-declares kernel ABI.
//! Records are parsed in native byte order: the ring buffer is always native,
//! and a byte-swapped perf.data must be swapped by its reader first.

mod attr;
mod branch;
pub mod ctr;
mod event;
mod event_list;
pub mod ntrace;
mod pmu_list;
mod record;
mod time_conversion;

pub use perf_event_open_sys as sys;
pub use time_conversion::TimeConversion;

pub use attr::{
    attr_bytes, attr_from_bytes, build_attr, AttrBytesError, AttrOptions, Sampling, Wakeup,
    ATTR_SIZE, ATTR_SIZE_VER0,
};
pub use branch::{parse_branch_filters, BranchFilterError, DASH_B_BRANCH_FILTER};
pub use event::{parse_event, EventError, EventSpec};
pub use event_list::{
    expand_groups, parse_modifiers, split_modifiers, EventListEntry, EventListError, EventModifier,
    ModifiedEvent,
};
pub use pmu_list::{
    list_pmus, CtrDetails, GenericEvent, GenericEventKind, Pmu, PmuListing, SbiCounter, SysfsValue,
};
pub use record::{
    format_brstack_entry, parse_read_values, parse_record, AuxRecord, BranchEntry, BranchFlags,
    BranchStack, CommRecord, LostRecord, Mmap2FileId, Mmap2Record, MmapRecord, ReadGroupEntry,
    ReadValues, Record, RecordError, Regs, Sample, SampleFormat, SampleId, SwitchRecord,
    TaskRecord, ThrottleRecord, U64Slice, RECORD_HEADER_SIZE,
};
