//! The emulated trace block (`docs/trace-device.md`): the register semantics of N-Trace
//! encoders, a funnel and a RAM sink over the shared memory the guest maps, independent
//! of QEMU so that it is tested on the host.
