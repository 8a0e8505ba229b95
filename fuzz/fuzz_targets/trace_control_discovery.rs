//! Arbitrary bytes as the trace block's discovery table: refused with an error whose
//! offset is inside the table's reach, or parsed; a parsed table writes back to bytes
//! that parse to the same table. Never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trace_control::discovery::{DiscoveryTable, TABLE_SIZE};

fuzz_target!(|data: &[u8]| {
    match DiscoveryTable::parse(data) {
        Ok(table) => {
            let mut page = [0u8; TABLE_SIZE];
            let written = table.write(&mut page).expect("a parsed table is writable");
            assert_eq!(DiscoveryTable::parse(&page[..written]), Ok(table));
        }
        Err(error) => assert!(error.offset() < TABLE_SIZE, "{error:?}"),
    }
});
