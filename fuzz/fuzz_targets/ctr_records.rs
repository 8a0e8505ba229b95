//! Arbitrary bytes as rvperf_ctr AUX data: the record parser must return records or a
//! typed error, never panic, and never report consuming more than it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_abi::ctr::CtrRecords;

fuzz_target!(|data: &[u8]| {
    let mut records = CtrRecords::new(data);
    while let Ok(Some(record)) = records.next_record() {
        for branch in record.branches() {
            let _ = branch.flags();
        }
    }
    assert!(records.offset() <= data.len());
});
