//! Arbitrary bytes as one ring-buffer record: a format word pair, a record
//! type and a body. parse_record must return Ok or Err, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_abi::{format_brstack_entry, parse_record, Record, SampleFormat};

fuzz_target!(|data: &[u8]| {
    if data.len() < 24 {
        return;
    }
    let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap_or([0; 8]));
    let (sample_type, flags) = (word(0), word(8));
    let format = SampleFormat {
        sample_type,
        read_format: flags & 0x1f,
        branch_sample_type: flags >> 5,
        sample_id_all: flags & (1 << 63) != 0,
        sample_regs_user: flags.rotate_left(7),
        sample_regs_intr: flags.rotate_left(23),
    };
    let record_type = u32::from(data[16] % 24);
    let misc = u16::from_le_bytes([data[17], data[18]]);
    if let Ok(Record::Sample(sample)) = parse_record(record_type, misc, &data[24..], &format) {
        if let Some(branches) = sample.branch_stack {
            for entry in branches.iter() {
                let _ = format_brstack_entry(&entry);
            }
        }
    }
});
