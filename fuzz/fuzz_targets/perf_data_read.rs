//! Arbitrary bytes as a perf.data file: parsing, record iteration and sample decoding must
//! fail with an error or succeed, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_data::{PerfDataReader, PERF_RECORD_SAMPLE};

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = PerfDataReader::from_bytes(data, "fuzz") else {
        return;
    };
    let mut records = reader.records();
    while let Ok(Some(rec)) = records.next_record() {
        if rec.record_type == PERF_RECORD_SAMPLE {
            let _ = reader.parse_sample(&rec);
        }
    }
});
