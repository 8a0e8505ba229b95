//! Interop with Linux perf: files written here are read by `perf script`/`perf report`, and
//! files recorded by `perf record` are read here.

mod common;

use common::*;
use perf_abi::{format_brstack_entry, BranchEntry, BranchFlags};
use perf_data::*;

#[test]
fn written_file_is_read_by_perf_script_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_hot_program(dir.path());
    const N: usize = 37;
    let (lo, hi) = prog.hot;
    let samples: Vec<_> = (0..N as u64).map(|i| (lo + i % (hi - lo), None)).collect();
    let bytes = write_file(&prog, cpu_clock_attr(0, 0), &samples);
    let file = dir.path().join("perf.data");
    std::fs::write(&file, &bytes).unwrap();
    let f = file.to_str().unwrap();

    let (out, err) = run_perf(&["script", "-i", f, "-F", "ip,sym,tid"]);
    eprintln!("perf script stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(file_warnings(&err), "", "perf script complained: {err}");
    let lines: Vec<_> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), N, "{out}");
    for l in &lines {
        assert!(l.contains("hot_function"), "{l}");
        assert!(l.trim_start().starts_with(&PID.to_string()), "{l}");
    }

    let (out, err) = run_perf(&["report", "-i", f, "--stdio"]);
    eprintln!("perf report stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(file_warnings(&err), "", "perf report complained: {err}");
    assert!(
        out.contains(&format!("# Samples: {N}  of event 'cpu-clock'")),
        "{out}"
    );
    let hot_line = out
        .lines()
        .find(|l| l.contains("hot_function"))
        .expect("hot_function in report");
    assert!(hot_line.trim_start().starts_with("100.00%"), "{hot_line}");

    // And our own reader sees what we wrote.
    let r = PerfDataReader::from_bytes(&bytes, "written").unwrap();
    assert_eq!(r.event_names(), vec!["cpu-clock".to_string()]);
    assert_eq!(r.info().build_ids[0].build_id, prog.build_id);
    let mut n = 0;
    let mut recs = r.records();
    while let Some(rec) = recs.next_record().unwrap() {
        if rec.record_type == abi::PERF_RECORD_SAMPLE {
            let s = r.parse_sample(&rec).unwrap();
            assert_eq!(s.ip, Some(samples[n].0));
            assert_eq!(s.tid, Some(PID));
            n += 1;
        }
    }
    assert_eq!(n, N);
}

fn branch_samples(prog: &HotProgram, hw_index: bool) -> Vec<(u64, Option<Branches>)> {
    let (lo, _) = prog.hot;
    let e = |i: u64, mispred, predicted, in_tx, abort, cycles, type_| BranchEntry {
        from: lo + i,
        to: lo + 0x10 + i,
        flags: BranchFlags {
            mispred,
            predicted,
            in_tx,
            abort,
            cycles,
            branch_type: type_,
            new_type: if type_ == 15 { 2 } else { 0 },
            ..BranchFlags::default()
        },
    };
    (0..4u64)
        .map(|k| {
            let entries = vec![
                e(k, true, false, false, false, 0, 1),
                e(k + 1, false, true, true, false, 17, 2),
                e(k + 2, false, false, false, true, 65535, 0),
                e(k + 3, true, true, true, true, 3, 15),
                e(k + 4, false, true, false, false, 1, 9),
                e(k + 5, false, false, false, false, 2, 6),
            ];
            let hw_idx = hw_index.then_some(k);
            (lo + k, Some(Branches::new(hw_idx, &entries)))
        })
        .collect()
}

fn check_brstack(hw_index: bool) {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_hot_program(dir.path());
    let bst = u64::from(
        abi::PERF_SAMPLE_BRANCH_ANY
            | abi::PERF_SAMPLE_BRANCH_USER
            | if hw_index {
                abi::PERF_SAMPLE_BRANCH_HW_INDEX
            } else {
                0
            },
    );
    let samples = branch_samples(&prog, hw_index);
    let bytes = write_file(
        &prog,
        cpu_clock_attr(abi::PERF_SAMPLE_BRANCH_STACK.into(), bst),
        &samples,
    );
    let file = dir.path().join("perf.data");
    std::fs::write(&file, &bytes).unwrap();
    let (out, err) = run_perf(&["script", "-F", "ip,brstack", "-i", file.to_str().unwrap()]);
    eprintln!("perf script brstack:\n{out:?}\n{err}");
    assert_eq!(file_warnings(&err), "", "perf script complained: {err}");
    let expected: String = samples
        .iter()
        .map(|(ip, bs)| {
            let entries: String = bs
                .as_ref()
                .unwrap()
                .stack()
                .iter()
                .map(|entry| format!(" {} ", format_brstack_entry(&entry)))
                .collect();
            format!(" {ip:>16x}{entries}\n")
        })
        .collect();
    assert_eq!(out, expected);

    let r = PerfDataReader::from_bytes(&bytes, "brstack").unwrap();
    let got: Vec<_> = r
        .records()
        .map(|rec| rec.unwrap())
        .filter(|rec| rec.record_type == abi::PERF_RECORD_SAMPLE)
        .map(|rec| r.parse_sample(&rec).unwrap().branch_stack)
        .collect();
    let want: Vec<_> = samples
        .iter()
        .map(|(_, branches)| branches.as_ref().map(Branches::stack))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn brstack_without_hw_index_matches_perf_script() {
    check_brstack(false);
}

#[test]
fn brstack_with_hw_index_matches_perf_script() {
    check_brstack(true);
}

#[test]
fn reads_file_recorded_by_perf_like_perf_script() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_hot_program(dir.path());
    let file = perf_record(dir.path(), &prog);
    let (out, _) = run_perf(&["script", "-i", file.to_str().unwrap(), "-F", "ip,tid"]);
    let theirs: Vec<(u32, u64)> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split_whitespace();
            let tid = f.next().unwrap().parse().unwrap();
            let ip = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
            (tid, ip)
        })
        .collect();
    assert!(theirs.len() > 10, "too few samples recorded: {out}");

    let r = PerfDataReader::open(&file).unwrap();
    assert_eq!(r.event_names(), vec!["cpu-clock".to_string()]);
    assert_eq!(r.info().arch.as_deref(), Some(std::env::consts::ARCH));
    assert!(r.info().features.contains(&HEADER_BUILD_ID));
    assert!(r
        .info()
        .cmdline
        .as_ref()
        .unwrap()
        .iter()
        .any(|a| a == "record"));
    let mut ours = Vec::new();
    for rec in r.records() {
        let rec = rec.unwrap();
        if rec.record_type == abi::PERF_RECORD_SAMPLE {
            let s = r.parse_sample(&rec).unwrap();
            ours.push((s.time.unwrap(), s.tid.unwrap(), s.ip.unwrap()));
        }
    }
    // perf script delivers samples sorted by time (ordered_events); the file holds them in
    // per-CPU buffer order. A stable sort by time reproduces perf's order.
    ours.sort_by_key(|&(t, _, _)| t);
    let ours: Vec<(u32, u64)> = ours.into_iter().map(|(_, tid, ip)| (tid, ip)).collect();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours, theirs);
    let (lo, hi) = prog.hot;
    assert!(ours.iter().any(|&(_, ip)| (lo..hi).contains(&ip)));
}

#[test]
fn throttle_records_are_read_by_perf_and_by_our_reader() {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_hot_program(dir.path());
    let (lo, _) = prog.hot;
    let samples: Vec<_> = (0..6u64).map(|i| (lo + i, None)).collect();
    let throttled = [1, 4];
    // As rvperf record's attrs: samples and side-band records carry the event id.
    let attr = cpu_clock_attr(abi::PERF_SAMPLE_ID.into(), 0);
    let bytes = write_file_with_throttles(&prog, attr, &samples, &throttled);
    let file = dir.path().join("perf.data");
    std::fs::write(&file, &bytes).unwrap();
    let f = file.to_str().unwrap();

    // perf 6.1's script cannot show throttle events; its raw dump and its statistics
    // can. Neither the dump nor script may complain about the records.
    let (out, err) = run_perf(&["report", "-D", "-i", f]);
    assert_eq!(file_warnings(&err), "", "perf report -D complained: {err}");
    let dumped: Vec<_> = out
        .lines()
        .filter(|line| line.contains("PERF_RECORD_THROTTLE"))
        .collect();
    assert_eq!(dumped.len(), throttled.len(), "{out}");
    // perf found the time in the sample_id trailer: "CPU TIME OFFSET [SIZE]: ...".
    let t0 = 1_000_000_000u64;
    let expected: Vec<u64> = throttled
        .iter()
        .map(|&i| t0 + 10 + i as u64 * 1000)
        .collect();
    for (line, time) in dumped.iter().zip(&expected) {
        assert!(line.starts_with(&format!("0 {time} ")), "{line}");
    }
    let (out, err) = run_perf(&["report", "--stats", "-i", f]);
    assert_eq!(
        file_warnings(&err),
        "",
        "perf report --stats complained: {err}"
    );
    let stats = out
        .lines()
        .find(|line| line.trim_start().starts_with("THROTTLE events:"))
        .unwrap_or_else(|| panic!("no THROTTLE line in perf report --stats:\n{out}"));
    assert_eq!(
        stats.split_whitespace().nth(2),
        Some("2"),
        "{stats}\n(the whole output:\n{out})"
    );
    let (out, err) = run_perf(&["script", "-i", f, "-F", "ip"]);
    assert_eq!(file_warnings(&err), "", "perf script complained: {err}");
    assert_eq!(out.lines().filter(|l| !l.trim().is_empty()).count(), 6);

    // Our reader: each THROTTLE follows its sample, with the sample's time and the id
    // in its body and in its sample_id trailer.
    let reader = PerfDataReader::from_bytes(&bytes, "throttled").unwrap();
    let format = perf_abi::SampleFormat {
        sample_type: attr.sample_type,
        sample_id_all: true,
        ..perf_abi::SampleFormat::default()
    };
    let mut last_sample_time = None;
    let mut seen = Vec::new();
    for record in reader.records() {
        let record = record.unwrap();
        match record.record_type {
            abi::PERF_RECORD_SAMPLE => {
                last_sample_time = reader.parse_sample(&record).unwrap().time;
            }
            abi::PERF_RECORD_THROTTLE => {
                let parsed =
                    perf_abi::parse_record(record.record_type, record.misc, record.body, &format)
                        .unwrap();
                let perf_abi::Record::Throttle(throttle) = parsed else {
                    panic!("not a throttle record: {parsed:?}");
                };
                assert_eq!(Some(throttle.time), last_sample_time);
                assert_eq!((throttle.id, throttle.stream_id), (7, 7));
                assert_eq!(throttle.sample_id.id, Some(7));
                assert_eq!(throttle.sample_id.time, Some(throttle.time));
                assert_eq!(throttle.sample_id.tid, Some(PID));
                seen.push(throttle.time);
            }
            _ => {}
        }
    }
    assert_eq!(seen, expected);
}
