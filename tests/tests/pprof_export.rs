//! `rvperf export --pprof` read by Go's own pprof (`go tool pprof`, Debian's golang
//! from bookworm-backports): every kind of recording (sampled with callchains at a
//! fixed period and at a frequency, system-wide with two events, CTR call stacks, x86_64
//! callchains, an N-Trace) gives a profile pprof reads, whose mappings and build ids
//! are the recorded files' (the build ids checked against `readelf -n` of the files),
//! whose hottest function and its share are those of the guest's Linux `perf report`
//! of the same recording, and whose totals are the recording's. `--push` sends the same
//! bytes to a Pyroscope-style collector (a test server on 127.0.0.1).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

use common::{pprof_tool, repository, rvperf_binary};

fn rvperf(arguments: &[&str], directory: &Path) -> Output {
    Command::new(rvperf_binary())
        .args(arguments)
        .current_dir(directory)
        .output()
        .expect("run rvperf")
}

fn export(directory: &Path, arguments: &[&str], output: &Path) -> pprof::Profile {
    let mut all = vec!["export", "--pprof", "-o", output.to_str().unwrap()];
    all.extend_from_slice(arguments);
    let result = rvperf(&all, directory);
    assert!(
        result.status.success(),
        "rvperf {all:?}: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    pprof::read(&std::fs::read(output).expect("the profile")).expect("a profile rvperf reads")
}

/// The mappings `go tool pprof -raw` lists: (file name, build id).
fn raw_mappings(raw: &str) -> Vec<(String, String)> {
    raw.lines()
        .skip_while(|line| *line != "Mappings")
        .skip(1)
        .filter_map(|line| {
            // `1: 0x10000/0x79000/0x0 /opt/perf-guest/threads BUILDID [FN]`
            let mut fields = line.split_whitespace();
            fields.next()?.strip_suffix(':')?;
            fields.next()?;
            let name = fields.next()?.to_owned();
            let build_id = fields.next().filter(|field| !field.starts_with('['));
            Some((name, build_id.unwrap_or("").to_owned()))
        })
        .collect()
}

/// The GNU build id `readelf -n` prints for an ELF file.
fn readelf_build_id(elf: &Path) -> String {
    let output = Command::new("readelf")
        .arg("-n")
        .arg(elf)
        .output()
        .expect("run readelf");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .unwrap_or_else(|| panic!("{} has no build id", elf.display()))
}

/// The first row of `go tool pprof -top`: (flat percent, function).
fn top_row(top: &str) -> (f64, String) {
    let row = top
        .lines()
        .skip_while(|line| !line.trim_start().starts_with("flat"))
        .nth(1)
        .expect("a row under the header");
    let fields: Vec<&str> = row.split_whitespace().collect();
    let percent = fields[1].trim_end_matches('%').parse().expect("flat%");
    (percent, fields[5..].join(" "))
}

/// The hottest symbol of a `perf report --stdio --sort comm,dso,sym`'s first event and
/// its share: the rows' percentages summed by symbol over commands and files.
fn perf_report_top(report: &str) -> (f64, String) {
    let mut shares: std::collections::BTreeMap<String, f64> = Default::default();
    let mut rows_seen = false;
    for line in report.lines() {
        let row = line.trim_start().starts_with(|c: char| c.is_ascii_digit());
        if !row && rows_seen && line.starts_with("# Samples") {
            break; // the next event's section
        }
        if row {
            rows_seen = true;
            let fields: Vec<&str> = line.split_whitespace().collect();
            let percent: f64 = fields[0].trim_end_matches('%').parse().expect("percent");
            *shares
                .entry(fields.last().expect("symbol").to_string())
                .or_default() += percent;
        }
    }
    let (symbol, percent) = shares
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a perf report row");
    (percent, symbol)
}

fn string(profile: &pprof::Profile, index: i64) -> &str {
    &profile.string_table[usize::try_from(index).expect("index")]
}

fn sample_type_names(profile: &pprof::Profile) -> Vec<String> {
    profile
        .sample_type
        .iter()
        .map(|kind| {
            format!(
                "{}/{}",
                string(profile, kind.r#type),
                string(profile, kind.unit)
            )
        })
        .collect()
}

fn total(profile: &pprof::Profile, column: usize) -> i64 {
    profile
        .sample
        .iter()
        .map(|sample| sample.value[column])
        .sum()
}

/// The guest-recorded perf.data fixtures of Linux perf (tests/fixtures/perf-guest): the
/// hot function and its share as the guest's perf report gave them, the samples its
/// header counted, the mappings with build ids checked by readelf.
#[test]
fn guest_recordings_read_in_pprof_as_in_perf_report() {
    let fixtures = repository().join("tests/fixtures/perf-guest");
    let workload = fixtures.join("symfs/opt/perf-guest/threads");
    let workload_build_id = readelf_build_id(&workload);
    let out = tempfile::tempdir().unwrap();
    for (name, kallsyms, types) in [
        (
            "fixed-period",
            "single.kallsyms",
            vec!["samples/count", "cycles/count"],
        ),
        (
            "threads-freq",
            "single.kallsyms",
            vec!["samples/count", "cpu/nanoseconds", "cycles/count"],
        ),
        (
            "system-wide",
            "smp.kallsyms",
            vec!["samples/count", "cycles/count", "cpu-clock/count"],
        ),
    ] {
        let path = out.path().join(format!("{name}.pb.gz"));
        let data = fixtures.join(format!("{name}.data"));
        let profile = export(
            &fixtures,
            &[
                "-i",
                data.to_str().unwrap(),
                "--symfs",
                "symfs",
                "--kallsyms",
                kallsyms,
            ],
            &path,
        );
        assert_eq!(sample_type_names(&profile), types, "{name}");
        // Every sample of the recording, once.
        let report = std::fs::read_to_string(fixtures.join(format!("{name}.perf-report"))).unwrap();
        let recorded: i64 = report
            .lines()
            .filter_map(|line| line.strip_prefix("# Samples: "))
            .map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap()
                    .parse::<i64>()
                    .unwrap()
            })
            .sum();
        assert_eq!(total(&profile, 0), recorded, "{name}: samples");

        let raw = pprof_tool(&["-raw"], &path);
        let mappings = raw_mappings(&raw);
        assert_eq!(
            mappings.first(),
            Some(&(
                "/opt/perf-guest/threads".to_owned(),
                workload_build_id.clone()
            )),
            "{name}: the workload is the profile's program, with its build id: {mappings:?}"
        );
        assert!(
            mappings
                .iter()
                .any(|(file, build_id)| file == "[kernel.kallsyms]" && build_id.len() == 40),
            "{name}: the kernel's mapping with the recording's kernel build id: {mappings:?}"
        );

        // perf report's shares are of the first event's periods (cycles), summed over
        // commands by `-top`.
        let top = pprof_tool(&["-top", "-sample_index=cycles"], &path);
        let (percent, function) = top_row(&top);
        let (perf_percent, perf_function) = perf_report_top(&report);
        assert_eq!(
            function, perf_function,
            "{name}: the hottest function\n{top}"
        );
        assert!(
            (percent - perf_percent).abs() <= 3.0,
            "{name}: {function} {percent}% in pprof, {perf_percent}% in perf report"
        );
    }
}

/// The flame graph fixtures: riscv64 callchains, CTR call stacks (rvperf_ctr's
/// `-j call_stack`, no callchains) and x86_64 callchains: pprof reads each, and each
/// stack's frames are the folded stacks' (the flame graph's golden), leaf first.
#[test]
fn ctr_and_callchain_recordings_carry_the_flame_graphs_stacks() {
    let out = tempfile::tempdir().unwrap();
    for name in [
        "riscv64-callchain",
        "riscv64-ctr-call-stack",
        "x86_64-callchain",
    ] {
        let fixture = repository().join("tests/fixtures/flamegraph").join(name);
        let path = out.path().join(format!("{name}.pb.gz"));
        let profile = export(
            &fixture,
            &["-i", "perf.data", "--symfs", "symfs", "--labels", "process"],
            &path,
        );
        let raw = pprof_tool(&["-raw"], &path);
        assert!(raw.contains("Mappings"), "{name}: {raw}");
        // The folded golden: `comm;root;...;leaf weight`.
        let folded = std::fs::read_to_string(fixture.join("expected.folded")).unwrap();
        let mut expected: Vec<(Vec<String>, i64)> = folded
            .lines()
            .map(|line| {
                let (stack, weight) = line.rsplit_once(' ').unwrap();
                let mut frames: Vec<String> = stack.split(';').skip(1).map(str::to_owned).collect();
                frames.reverse();
                (frames, weight.parse().unwrap())
            })
            .collect();
        expected.sort();
        // pprof's stacks: one name per line of each location (outermost only here),
        // summed over labels.
        let function_name = |id: u64| {
            let function = profile
                .function
                .iter()
                .find(|function| function.id == id)
                .unwrap();
            string(&profile, function.name).to_owned()
        };
        let mut stacks: std::collections::BTreeMap<Vec<String>, i64> = Default::default();
        let weight_column = profile.sample_type.len() - 1;
        for sample in &profile.sample {
            let frames: Vec<String> = sample
                .location_id
                .iter()
                .map(|&id| {
                    let location = profile
                        .location
                        .iter()
                        .find(|location| location.id == id)
                        .unwrap();
                    match location.line.last() {
                        Some(line) => function_name(line.function_id),
                        None => "[unknown]".to_owned(),
                    }
                })
                .collect();
            *stacks.entry(frames).or_default() += sample.value[weight_column];
        }
        let mut actual: Vec<(Vec<String>, i64)> = stacks.into_iter().collect();
        actual.sort();
        // Frames without a function are named by their file in the folded stacks.
        let normalize = |stacks: Vec<(Vec<String>, i64)>| -> Vec<(Vec<String>, i64)> {
            let mut merged: std::collections::BTreeMap<Vec<String>, i64> = Default::default();
            for (frames, weight) in stacks {
                let frames = frames
                    .into_iter()
                    .map(|frame| {
                        if frame.starts_with('[') {
                            "[unknown]".to_owned()
                        } else {
                            frame
                        }
                    })
                    .collect();
                *merged.entry(frames).or_default() += weight;
            }
            merged.into_iter().collect()
        };
        assert_eq!(normalize(actual), normalize(expected), "{name}");
    }
}

/// A trace's call stacks (N-Trace of the interp program): function-only locations
/// weighing instructions, as `rvperf flamegraph` folds them.
#[test]
fn a_trace_exports_its_instructions_by_call_stack() {
    let fixture = repository().join("tests/fixtures/ntrace/interp");
    let flags = std::fs::read_to_string(fixture.join("decode-flags")).unwrap();
    let mut arguments = vec!["--trace", "trace.nt", "--elf", "program"];
    arguments.extend(flags.split_whitespace());
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("trace.pb.gz");
    let profile = export(&fixture, &arguments, &path);
    assert_eq!(sample_type_names(&profile), ["instructions/count"]);
    let mut folded_arguments = vec!["flamegraph", "--folded", "-o", "-"];
    folded_arguments.extend_from_slice(&arguments);
    let folded = rvperf(&folded_arguments, &fixture);
    assert!(folded.status.success());
    let instructions: i64 = String::from_utf8_lossy(&folded.stdout)
        .lines()
        .map(|line| line.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(total(&profile, 0), instructions);
    let top = pprof_tool(&["-top"], &path);
    assert_eq!(top_row(&top).1, "run", "{top}");
}

/// A recording without samples is refused in one line, and no file is left.
#[test]
fn a_recording_without_samples_leaves_no_profile() {
    let fixtures = repository().join("tests/fixtures/perf-guest");
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("none.pb.gz");
    let result = rvperf(
        &[
            "export",
            "--pprof",
            "-i",
            "no-samples.data",
            "-o",
            path.to_str().unwrap(),
        ],
        &fixtures,
    );
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("has no samples"), "{stderr}");
    assert!(!path.exists());
}

/// What the test collector received.
struct Request {
    request_line: String,
    content_type: String,
    body: Vec<u8>,
}

/// Accepts one request on `listener`, answers with `status`, returns what came.
fn serve_once(listener: TcpListener, status: &'static str) -> std::thread::JoinHandle<Request> {
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("a connection");
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        reader.read_line(&mut request_line).unwrap();
        let mut content_type = String::new();
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-type" => content_type = value.trim().to_owned(),
                "content-length" => length = value.trim().parse().unwrap(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        )
        .unwrap();
        Request {
            request_line: request_line.trim_end().to_owned(),
            content_type,
            body,
        }
    })
}

/// `--push`: the profile goes to `/ingest` as Pyroscope's clients send it, byte for
/// byte the file written beside; a collector's refusal is an error.
#[test]
fn push_sends_the_profile_to_a_pyroscope_collector() {
    let fixtures = repository().join("tests/fixtures/perf-guest");
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("pushed.pb.gz");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = serve_once(listener, "200 OK");
    let url = format!("http://{address}");
    let result = rvperf(
        &[
            "export",
            "--pprof",
            "-i",
            "threads-freq.data",
            "--symfs",
            "symfs",
            "--kallsyms",
            "single.kallsyms",
            "-o",
            path.to_str().unwrap(),
            "--push",
            &url,
            "--application",
            "threads.cpu{host=guest}",
        ],
        &fixtures,
    );
    assert!(
        result.status.success(),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    let request = server.join().unwrap();
    let (method, rest) = request.request_line.split_once(' ').unwrap();
    assert_eq!(method, "POST");
    let target = rest.strip_suffix(" HTTP/1.1").unwrap();
    let (route, query) = target.split_once('?').unwrap();
    assert_eq!(route, "/ingest");
    let parameters: std::collections::HashMap<&str, &str> = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .collect();
    assert_eq!(parameters["name"], "threads.cpu%7Bhost%3Dguest%7D");
    assert_eq!(parameters["format"], "pprof");
    assert_eq!(parameters["sampleRate"], "4000");
    let from: u64 = parameters["from"].parse().unwrap();
    let until: u64 = parameters["until"].parse().unwrap();
    assert!(from < until);
    let boundary = request
        .content_type
        .strip_prefix("multipart/form-data; boundary=")
        .expect("multipart");
    // The one part, named `profile`, is the file's bytes.
    let file = std::fs::read(&path).unwrap();
    let body = &request.body;
    let header_end = body
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap()
        + 4;
    let headers = String::from_utf8_lossy(&body[..header_end]);
    assert!(headers.starts_with(&format!("--{boundary}\r\n")));
    assert!(headers.contains("name=\"profile\""), "{headers}");
    let trailer = format!("\r\n--{boundary}--\r\n");
    assert!(body.ends_with(trailer.as_bytes()));
    assert_eq!(
        &body[header_end..body.len() - trailer.len()],
        file.as_slice()
    );

    // A collector that refuses: the status in one line, a failure.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let server = serve_once(listener, "400 Bad Request");
    let result = rvperf(
        &[
            "export",
            "--pprof",
            "-i",
            "threads-freq.data",
            "--symfs",
            "symfs",
            "--push",
            &format!("http://{address}"),
        ],
        &fixtures,
    );
    server.join().unwrap();
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("answered 400"), "{stderr}");
    assert_eq!(
        stderr.lines().filter(|line| line.contains("error")).count(),
        1,
        "{stderr}"
    );
}
