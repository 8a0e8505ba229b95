//! Arbitrary bytes as a perf.data file: parsing, record iteration and record decoding
//! (perf_abi's parser, through the reader) must fail with an error or succeed, never
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_data::PerfDataReader;

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = PerfDataReader::from_bytes(data, "fuzz") else {
        return;
    };
    let mut records = reader.records();
    while let Ok(Some(record)) = records.next_record() {
        let _ = reader.record_time(&record);
        if let Ok(perf_abi::Record::Sample(sample)) = reader.parse_record(&record) {
            if let Some(attr) = record.attr_index.and_then(|index| reader.attrs().get(index)) {
                let _ = sample.period_or_attr(&attr.attr);
            }
            for entry in sample.branch_stack.iter().flat_map(|stack| stack.iter()) {
                let _ = perf_abi::format_brstack_entry(&entry);
            }
        }
    }
});
