// SPDX-License-Identifier: GPL-2.0

// The modules both crate roots (rvtrace.rs, rvtrace_test.rs) share, by `include!`:
// the register map of userland/trace-control/src (whose files use the paths
// `crate::Field`, `crate::component` and `crate::ram_sink`), the ABI generated from
// kmod-shim/include/uapi/rvtrace.h by the kernel's bindgen at build time (Kbuild), so
// the header is the one definition, and the configuration plan.

#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/component.rs"]
mod component;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/discovery.rs"]
mod discovery;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/encoder.rs"]
mod encoder;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/field.rs"]
mod field;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/funnel.rs"]
mod funnel;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/ram_sink.rs"]
mod ram_sink;
#[allow(dead_code, unreachable_pub, missing_docs)]
#[path = "../../userland/trace-control/src/timestamp.rs"]
mod timestamp;
use field::Field;

#[allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    unreachable_pub,
    missing_docs
)]
#[path = "rvtrace_uapi.rs"]
mod uapi;

#[allow(dead_code)]
mod plan;
