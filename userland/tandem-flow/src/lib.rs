//! Instruction steps, shadow state and divergence search over tandem-verification traces; trace elements; an encoder from architectural state.
