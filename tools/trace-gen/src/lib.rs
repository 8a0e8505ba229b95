//! Reference trace generation for rvperf tests.
//!
//! [`qemu`] runs a RISC-V Linux program under `qemu-riscv64` with one
//! instruction per translation block and reads back the sequence of retired
//! instruction addresses from QEMU's exec log, or the registers before each
//! instruction from its CPU log ([`cpu_log`]).

pub mod cpu_log;
pub mod debug4;
pub mod qemu;
pub mod tandem;
