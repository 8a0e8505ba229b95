//! The symbolizer fed with arbitrary MMAP/MMAP2, FORK and exec records and sample
//! addresses, over a real ELF (the flame graph fixture's `calls`, found under its
//! symfs): every address, length and file offset a recording can hold reaches the
//! address-space and offset arithmetic, which must refuse or skip what does not fit,
//! never wrap or panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use symbolize::{Symbolizer, SymbolizerOptions};

/// File names a mapping may name: the real ELF, a missing file, anonymous memory and
/// the kernel's own record.
const FILES: [&str; 5] = [
    "/opt/rvperf/bin/calls",
    "/opt/rvperf/bin/missing",
    "[heap]",
    "//anon",
    "[kernel.kallsyms]_text",
];

/// Takes the next `N` bytes, or `None` at the end of the input.
fn take<const N: usize>(data: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = data.split_first_chunk::<N>()?;
    *data = rest;
    Some(*head)
}

fn u64_from(data: &mut &[u8]) -> Option<u64> {
    take::<8>(data).map(u64::from_le_bytes)
}

fn pid_from(data: &mut &[u8]) -> Option<u32> {
    // A few processes, so that forks and mappings meet.
    take::<1>(data).map(|[pid]| u32::from(pid % 4))
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let Some([flags]) = take::<1>(&mut data) else {
        return;
    };
    let mut symbolizer = Symbolizer::new(SymbolizerOptions {
        symfs: Some(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../tests/fixtures/flamegraph/riscv64-ctr-call-stack/symfs"
            )
            .into(),
        ),
        kallsyms: None,
        vmlinux: None,
        build_id_dirs: Vec::new(),
        debug_dirs: Vec::new(),
        inlines: flags & 1 != 0,
    });
    while let Some([operation]) = take::<1>(&mut data) {
        let applied = match operation % 4 {
            0 => (|| {
                let pid = pid_from(&mut data)?;
                let start = u64_from(&mut data)?;
                let length = u64_from(&mut data)?;
                let file_offset = u64_from(&mut data)?;
                let [file] = take::<1>(&mut data)?;
                let filename = FILES[usize::from(file) % FILES.len()];
                symbolizer.add_mapping(pid, start, length, file_offset, filename, None);
                Some(())
            })(),
            1 => (|| {
                let parent = pid_from(&mut data)?;
                let child = pid_from(&mut data)?;
                symbolizer.fork(parent, child);
                Some(())
            })(),
            2 => pid_from(&mut data).map(|pid| symbolizer.exec(pid)),
            _ => (|| {
                let pid = pid_from(&mut data)?;
                let address = u64_from(&mut data)?;
                let symbolized = symbolizer.symbolize(pid, address);
                let _ = (
                    symbolized.vaddr,
                    symbolized.file_offset,
                    symbolized.frames.len(),
                );
                if let Some(location) = symbolizer.locate(pid, address) {
                    let _ = symbolizer.symbolize_location(location);
                }
                Some(())
            })(),
        };
        if applied.is_none() {
            break;
        }
    }
    for problem in symbolizer.problems() {
        let _ = problem.to_string();
    }
});
