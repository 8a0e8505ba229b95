//! The RISC-V debug specification's trace module: 4-bit packets in 32-bit words, value sequences, synchronisation points; decode, encode and text dump.
