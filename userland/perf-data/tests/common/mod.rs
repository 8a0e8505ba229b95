//! Shared helpers for the perf interop tests: locating Linux perf, building a tiny ELF with
//! a known `hot_function`, and writing perf.data files with this crate.
#![allow(
    dead_code,
    reason = "each test binary uses some of the helpers (perf_interop all: no expect)"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSegment, ObjectSymbol, SegmentFlags};
pub use perf_abi::sys::bindings as abi;
use perf_abi::sys::bindings::perf_event_attr;
use perf_abi::{
    BranchEntry, BranchStack, CommRecord, Mmap2FileId, Mmap2Record, Sample, SampleId,
    ThrottleRecord,
};
use perf_data::*;

/// A sample's branch stack, owned, for the writer (which takes perf_abi's borrowed one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Branches {
    pub hw_idx: Option<u64>,
    /// `struct perf_branch_entry` after another.
    pub bytes: Vec<u8>,
}

impl Branches {
    pub fn new(hw_idx: Option<u64>, entries: &[BranchEntry]) -> Self {
        Self {
            hw_idx,
            bytes: entries.iter().flat_map(BranchEntry::to_bytes).collect(),
        }
    }

    pub fn stack(&self) -> BranchStack<'_> {
        BranchStack::from_bytes(self.hw_idx, &self.bytes).unwrap()
    }
}

/// PERF_RECORD_MISC_USER as `perf_event_header.misc`.
pub const MISC_USER: u16 = abi::PERF_RECORD_MISC_USER as u16;

/// Panics (never skips) when perf is missing: these tests exist to prove interop with it.
pub fn perf() -> &'static str {
    let ok = Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "Linux `perf` is required by the perf-data interop tests but was not found; \
         install it with `apt-get install linux-perf`"
    );
    "perf"
}

/// Runs perf with `args`; panics with its stderr if it fails. Returns (stdout, stderr).
pub fn run_perf(args: &[&str]) -> (String, String) {
    let out = Command::new(perf())
        .args(args)
        .output()
        .expect("spawning perf");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// A compiled test program and the facts about it the tests need.
#[derive(Debug)]
pub struct HotProgram {
    pub path: PathBuf,
    /// `[start, end)` link addresses of `hot_function`.
    pub hot: (u64, u64),
    /// The executable PT_LOAD segment: vaddr, file offset, size.
    pub text: (u64, u64, u64),
    pub build_id: Vec<u8>,
}

const HOT_C: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void hot_function(unsigned long n) {
    for (unsigned long i = 0; i < n; i++) sink += i * i;
}
int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    for (unsigned long r = 0; r < n; r++) hot_function(1000000);
    return 0;
}
"#;

/// Builds the program in `dir` (non-PIE, so samples carry its link addresses).
pub fn build_hot_program(dir: &Path) -> HotProgram {
    let src = dir.join("hot.c");
    let path = dir.join("hot");
    std::fs::write(&src, HOT_C).unwrap();
    let st = Command::new("cc")
        .args(["-O1", "-g", "-fno-pie", "-no-pie", "-Wl,--build-id", "-o"])
        .arg(&path)
        .arg(&src)
        .status()
        .expect("running cc (a C compiler is required)");
    assert!(st.success(), "cc failed");
    let bytes = std::fs::read(&path).unwrap();
    let elf = object::File::parse(&*bytes).unwrap();
    let sym = elf
        .symbols()
        .find(|s| s.name() == Ok("hot_function"))
        .expect("hot_function symbol");
    let hot = (sym.address(), sym.address() + sym.size());
    assert!(sym.size() > 0);
    let text = elf
        .segments()
        .find(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & 1 != 0))
        .map(|s| (s.address(), s.file_range().0, s.size()))
        .expect("executable segment");
    let build_id = elf.build_id().unwrap().expect("build id").to_vec();
    HotProgram {
        path,
        hot,
        text,
        build_id,
    }
}

/// The cpu-clock attr of test (a): IP|TID|TIME|CPU|PERIOD with sample_id_all, as perf
/// record opens it at 4000 Hz.
pub fn cpu_clock_attr(extra_sample_type: u64, branch_sample_type: u64) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: abi::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: abi::PERF_COUNT_SW_CPU_CLOCK.into(),
        sample_type: u64::from(
            abi::PERF_SAMPLE_IP
                | abi::PERF_SAMPLE_TID
                | abi::PERF_SAMPLE_TIME
                | abi::PERF_SAMPLE_CPU
                | abi::PERF_SAMPLE_PERIOD,
        ) | extra_sample_type,
        branch_sample_type,
        ..Default::default()
    };
    attr.sample_freq = 4000;
    attr.set_freq(1);
    attr.set_disabled(1);
    attr.set_mmap(1);
    attr.set_comm(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr.set_mmap2(1);
    attr.set_comm_exec(1);
    attr
}

pub const PID: u32 = 4242;

/// Writes a file with one event, COMM + MMAP2 of `prog`, and one sample per entry of
/// `samples` (ip, optional branch stack). Returns the file bytes.
pub fn write_file(
    prog: &HotProgram,
    attr: perf_event_attr,
    samples: &[(u64, Option<Branches>)],
) -> Vec<u8> {
    write_file_with_throttles(prog, attr, samples, &[])
}

/// [`write_file`], with a PERF_RECORD_THROTTLE (of the event's id 7, at the sample's
/// time) right after each sample whose index `throttled` lists.
pub fn write_file_with_throttles(
    prog: &HotProgram,
    attr: perf_event_attr,
    samples: &[(u64, Option<Branches>)],
    throttled: &[usize],
) -> Vec<u8> {
    let mut w = PerfDataWriter::new(
        std::io::Cursor::new(Vec::new()),
        vec![EventDesc {
            attr,
            name: "cpu-clock".into(),
            ids: vec![7],
        }],
    )
    .unwrap();
    let t0 = 1_000_000_000u64;
    let sid = |time| SampleId {
        pid: Some(PID),
        tid: Some(PID),
        time: Some(time),
        cpu: Some(0),
        ..Default::default()
    };
    w.write_comm(
        0,
        &CommRecord {
            pid: PID,
            tid: PID,
            comm: b"hot",
            exec: true,
            sample_id: sid(t0),
        },
    )
    .unwrap();
    let (vaddr, off, size) = prog.text;
    let filename = prog.path.display().to_string();
    w.write_mmap2(
        0,
        MISC_USER,
        &Mmap2Record {
            pid: PID,
            tid: PID,
            addr: vaddr,
            len: size,
            pgoff: off,
            file_id: Mmap2FileId::BuildId(&prog.build_id),
            prot: 5,
            flags: 2,
            filename: filename.as_bytes(),
            sample_id: sid(t0 + 1),
        },
    )
    .unwrap();
    for (i, (ip, branches)) in samples.iter().enumerate() {
        let time = t0 + 10 + i as u64 * 1000;
        w.write_sample(
            0,
            &Sample {
                ip: Some(*ip),
                pid: Some(PID),
                tid: Some(PID),
                time: Some(time),
                id: Some(7),
                cpu: Some(0),
                period: Some(250_000),
                branch_stack: branches.as_ref().map(Branches::stack),
                misc: MISC_USER,
                ..Default::default()
            },
        )
        .unwrap();
        if throttled.contains(&i) {
            let throttle = ThrottleRecord {
                time,
                id: 7,
                stream_id: 7,
                sample_id: SampleId {
                    id: Some(7),
                    stream_id: Some(7),
                    ..sid(time)
                },
            };
            w.write_throttle(0, &throttle).unwrap();
        }
    }
    w.write_finished_round().unwrap();
    let mut meta = Metadata::from_host("6.1.0", vec!["rvperf".into(), "test".into()]);
    meta.build_ids.push(BuildIdEntry {
        pid: -1,
        misc: MISC_USER,
        build_id: prog.build_id.clone(),
        filename: prog.path.display().to_string(),
    });
    w.finish(&meta).unwrap().into_inner()
}

/// perf's stderr minus the host warning about restricted kernel address maps, which perf
/// prints for any file (including its own recordings) when kptr_restrict hides kallsyms;
/// it says nothing about the file being read.
pub fn file_warnings(stderr: &str) -> String {
    const HOST_NOTICE: [&str; 6] = [
        "Warning:",
        "Kernel address maps (/proc/{kallsyms,modules}) were restricted.",
        "Check /proc/sys/kernel/kptr_restrict before running 'perf record'.",
        "As no suitable kallsyms nor vmlinux was found, kernel samples",
        "can't be resolved.",
        "Samples in kernel modules can't be resolved as well.",
    ];
    stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !HOST_NOTICE.contains(l))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Records `prog` with `perf record -e cpu-clock -F 999` into `dir/recorded.data`.
pub fn perf_record(dir: &Path, prog: &HotProgram) -> PathBuf {
    let out = dir.join("recorded.data");
    let (_, _) = run_perf(&[
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-F",
        "999",
        "-o",
        out.to_str().unwrap(),
        "--",
        prog.path.to_str().unwrap(),
        "300",
    ]);
    out
}
