//! The RISC-V tandem-verification trace protocol (2018-11-20 draft): opcode and payload records; decode, encode and text dump.
