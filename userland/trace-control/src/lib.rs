//! The RISC-V Trace Control Interface 1.0: register offsets and fields of trace encoders,
//! funnels and RAM sinks, and the discovery table of the trace block rvperf's test guest
//! emulates (`docs/trace-device.md`).
#![no_std]
