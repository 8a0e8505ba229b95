//! The emulated trace block (`docs/trace-device.md`): the register semantics of N-Trace
//! encoders, a funnel and a RAM sink over the shared memory the guest maps, independent
//! of QEMU so that it is tested on the host.
//!
//! The QEMU plugin owns a [`TraceBlock`] over the mapped file, calls
//! [`TraceBlock::poll`] at the start of every executed block, follows
//! [`TraceBlock::encoder_generation`] to reconfigure its encoders
//! ([`EncoderConfig::encoder_options`]), and hands their messages to
//! [`TraceBlock::emit`].

mod block;
mod encoder;
mod funnel;
mod layout;
mod memory;
mod sink;
mod timestamp;

#[cfg(test)]
mod tests;

pub use block::{DropReason, Emitted, TraceBlock};
pub use encoder::{EncoderConfig, PrivilegeFilter, PrivilegeSet, SyncPeriod, TimestampConfig};
pub use layout::{BlockConfig, Layout, LayoutError, MAX_HARTS, MIN_SINK_SIZE};
pub use memory::{MemoryError, SharedMemory};
