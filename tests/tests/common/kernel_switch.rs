//! A stand-in for an operating system's context switch, for traces of programs taking
//! turns on one hart: an interrupt enters it, it writes the next task's context to
//! `scontext` and returns with `sret`. Shared by the tests of contexts
//! (`ntrace_contexts.rs`, `ntrace_task_contexts.rs`).

use code_image::CodeImage;

/// Where the stand-in is.
pub const KERNEL: u64 = 0xffff_ffff_8000_0000;

/// The stand-in, as little-endian half-words:
///
/// ```text
/// KERNEL+0   c.nop
/// KERNEL+2   beq zero, zero, KERNEL+6   (taken: a DirectBranch message in BTM, after
///                                        which the walk stands linked to the next block)
/// KERNEL+6   csrw scontext, a0           (csrrw x0, 0x5a8, a0)
/// KERNEL+10  c.nop
/// KERNEL+12  sret
/// ```
pub const SWITCH_CODE: [u16; 8] = [
    0x0001, 0x0263, 0x0000, 0x1073, 0x5a85, 0x0001, 0x0073, 0x1020,
];

/// The address of each instruction of the switch, and the `csrw`'s.
pub const SWITCH_PCS: [u64; 5] = [KERNEL, KERNEL + 2, KERNEL + 6, KERNEL + 10, KERNEL + 12];
pub const SCONTEXT_WRITE: u64 = KERNEL + 6;

/// Adds the stand-in to `image`, as a file of its own.
pub fn add_switch_code(image: &mut CodeImage) {
    let file = image.add_file("kernel");
    let bytes = SWITCH_CODE
        .iter()
        .flat_map(|half| half.to_le_bytes())
        .collect();
    image
        .add_segment(KERNEL, bytes, true, file)
        .expect("kernel segment");
}
