//! A QEMU TCG plugin that emulates N-Trace hardware for riscv64 guests.
