//! Reference trace generation for rvperf tests.
//!
//! [`qemu`] runs a RISC-V Linux program under `qemu-riscv64` with one
//! instruction per translation block and reads back the sequence of retired
//! instruction addresses from QEMU's exec log.

pub mod qemu;
