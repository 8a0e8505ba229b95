//! rvperf's end-to-end tests live in `tests/tests`; this library holds what they and the
//! checkers of the VM tier (`bin/`) share: exact execution counts of riscv64 programs
//! under QEMU ([`execution_counts`]) and the block-count overlap that measures a sampled
//! profile against them ([`block_overlap`]).

pub mod block_overlap;
pub mod execution_counts;
