//! pprof's reader (gzip, then profile.proto): arbitrary bytes give a profile or an
//! error, never a panic; a profile read is written and read back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(profile) = pprof::read(data) {
        let mut bytes = Vec::new();
        pprof::write_gzip(&profile, &mut bytes).expect("a Vec takes every byte");
        assert_eq!(pprof::read(&bytes).expect("what was written reads"), profile);
    }
});
