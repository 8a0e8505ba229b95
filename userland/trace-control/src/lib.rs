//! The RISC-V Trace Control Interface 1.0: register offsets and fields of trace encoders,
//! funnels and RAM sinks, and the discovery table of the trace block rvperf's test guest
//! emulates (`docs/trace-device.md`).
//!
//! Register offsets are byte offsets from a component's base (each component has a
//! [`COMPONENT_SIZE`] block of 32-bit registers); fields are [`Field`]s, read and written
//! with [`Field::extract`] and [`Field::insert`]. Names are the specification's with the
//! `tr??` prefix dropped and abbreviations spelled out: `trTeInstSyncMax` is
//! [`encoder::control::INSTRUCTION_SYNC_MAX`].
//!
//! The crate is `no_std` and dependency-free so that the emulated device, a Linux driver
//! (Rust for Linux) and userland tools share one definition of the register map.
#![no_std]

mod field;

pub mod component;
pub mod discovery;
pub mod encoder;
pub mod funnel;
pub mod ram_sink;
pub mod timestamp;

pub use component::{ComponentType, Version, COMPONENT_SIZE};
pub use discovery::{ComponentEntry, DiscoveryError, DiscoveryTable, MAGIC};
pub use field::Field;
