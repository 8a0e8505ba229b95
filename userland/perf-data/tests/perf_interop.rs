//! Interop with Linux perf: files written here are read by `perf script`/`perf report`, and
//! files recorded by `perf record` are read here.

mod common;

use common::*;
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
        if rec.record_type == PERF_RECORD_SAMPLE {
            let s = r.parse_sample(&rec).unwrap();
            assert_eq!(s.ip, Some(samples[n].0));
            assert_eq!(s.tid, Some(PID as i32));
            n += 1;
        }
    }
    assert_eq!(n, N);
}

fn branch_samples(prog: &HotProgram, hw_index: bool) -> Vec<(u64, Option<BranchStack>)> {
    let (lo, _) = prog.hot;
    let e = |i: u64, mispred, predicted, in_tx, abort, cycles, type_| {
        BranchEntry::new(
            lo + i,
            lo + 0x10 + i,
            BranchFlags {
                mispred,
                predicted,
                in_tx,
                abort,
                cycles,
                branch_type: type_,
                new_type: if type_ == 15 { 2 } else { 0 },
                ..BranchFlags::default()
            },
        )
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
            (lo + k, Some(BranchStack { hw_idx, entries }))
        })
        .collect()
}

fn check_brstack(hw_index: bool) {
    let dir = tempfile::tempdir().unwrap();
    let prog = build_hot_program(dir.path());
    let bst = PERF_SAMPLE_BRANCH_ANY
        | PERF_SAMPLE_BRANCH_USER
        | if hw_index {
            PERF_SAMPLE_BRANCH_HW_INDEX
        } else {
            0
        };
    let samples = branch_samples(&prog, hw_index);
    let bytes = write_file(
        &prog,
        cpu_clock_attr(PERF_SAMPLE_BRANCH_STACK, bst),
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
            let bs = bs.as_ref().unwrap();
            format!(" {:>16x}{}\n", ip, format_brstack(&bs.entries))
        })
        .collect();
    assert_eq!(out, expected);

    let r = PerfDataReader::from_bytes(&bytes, "brstack").unwrap();
    let got: Vec<_> = r
        .records()
        .map(|rec| rec.unwrap())
        .filter(|rec| rec.record_type == PERF_RECORD_SAMPLE)
        .map(|rec| r.parse_sample(&rec).unwrap().branch_stack)
        .collect();
    let want: Vec<_> = samples.into_iter().map(|(_, bs)| bs).collect();
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
    let theirs: Vec<(i32, u64)> = out
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
        if rec.record_type == PERF_RECORD_SAMPLE {
            let s = r.parse_sample(&rec).unwrap();
            ours.push((s.time.unwrap(), s.tid.unwrap(), s.ip.unwrap()));
        }
    }
    // perf script delivers samples sorted by time (ordered_events); the file holds them in
    // per-CPU buffer order. A stable sort by time reproduces perf's order.
    ours.sort_by_key(|&(t, _, _)| t);
    let ours: Vec<(i32, u64)> = ours.into_iter().map(|(_, tid, ip)| (tid, ip)).collect();
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours, theirs);
    let (lo, hi) = prog.hot;
    assert!(ours.iter().any(|&(_, ip)| (lo..hi).contains(&ip)));
}
