//! Arbitrary bytes as an N-Trace recording (`rvperf trace record`'s perf.data):
//! `read_ntrace_recording` (AUXTRACE_INFO words, AUXTRACE chunks and their offsets and
//! lengths, MMAP2, COMM, FORK and context-switch records), the trace's split by process
//! (`attribute`, each process's mappings and command name) and `NtraceInfo::from_words`
//! on the raw words must fail with an error or succeed, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_abi::ntrace::NtraceInfo;
use perf_data::PerfDataReader;

fuzz_target!(|data: &[u8]| {
    let words: Vec<u64> = data
        .chunks_exact(8)
        .map(|word| u64::from_le_bytes(word.try_into().unwrap_or([0; 8])))
        .collect();
    let _ = NtraceInfo::from_words(&words);
    if let Ok(reader) = PerfDataReader::from_bytes(data, "fuzz") {
        if let Ok(recording) = perf_session::read_ntrace_recording(&reader) {
            let _ =
                recording.placed_files(|_, _| -> std::io::Result<(std::path::PathBuf, Vec<u8>)> {
                    Err(std::io::Error::from(std::io::ErrorKind::NotFound))
                });
            let options = ntrace_message::MessageOptions::default()
                .with_src_bits(recording.info.src_bits)
                .with_timestamps(true);
            if let Ok(attribution) = recording.attribute(options) {
                for thread in &attribution.threads {
                    let _ = recording.mappings_of(thread.run);
                    let _ = recording.comm_of(thread.run);
                }
            }
        }
    }
});
