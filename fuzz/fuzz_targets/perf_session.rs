//! Arbitrary perf.data bytes through a session: perf's ordered events (record times,
//! rounds), the side band applied to the address spaces and threads, AUX data decoded
//! into samples, each sample's addresses looked up (mapped files, symbols) and the
//! flame graph's fold, then a second session folding the same file. Malformed records
//! must end in an error, never a panic or an overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use perf_data::PerfDataReader;
use perf_session::{fold, thread_id, FoldOptions, Processes, Session, SymbolOptions};

/// No files are read: a symfs that does not exist, no kernel symbols.
fn processes() -> Processes {
    Processes::new(SymbolOptions {
        symfs: Some("/nonexistent-rvperf-fuzz".into()),
        ..SymbolOptions::default()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(reader) = PerfDataReader::from_bytes(data, "fuzz") else {
        return;
    };
    let mut session = Session::with_processes(&reader, processes());
    while let Ok(Some(sampled)) = session.next_sample() {
        let sample = &sampled.sample;
        let pid = sample.pid.unwrap_or(u32::MAX);
        let processes = session.processes();
        let _ = processes.comm(thread_id(sample.pid), thread_id(sample.tid));
        for address in sample
            .ip
            .into_iter()
            .chain(sample.branch_stack.iter().flat_map(|stack| stack.iter()).map(|entry| entry.to))
        {
            let _ = processes.mapped_file(pid, address);
            let _ = processes.place(pid, address);
        }
    }
    let _ = session.lost().total_lost_samples();
    let _ = session.undecoded_aux();
    let _ = session.processes().problems();
    let mut session = Session::with_processes(&reader, processes());
    if let Ok(folded) = fold(&mut session, FoldOptions::default()) {
        let _ = folded.to_text();
    }
});
