//! Real perf events on the host kernel. Only software events are used, since
//! CI VMs usually have no hardware counters. No outcome depends on how fast the
//! machine is: a test works until the events have produced what it needs, bounded
//! only against a hang.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use perf_abi::sys::bindings as b;
use perf_abi::{build_attr, parse_event, AttrOptions, Record, SampleFormat, Sampling};
use perf_ring::{poll_readable, AuxMode, Event, EventError, RawData, RingBuffer, RingError};

/// Rounds of spinning after which a test gives up: each round is 100,000 multiply-adds
/// (tens of microseconds of this thread's CPU time, which cpu-clock samples), so the
/// bound is a count of work the test controls, reached only if the events never
/// produce what is waited for.
const MAX_ROUNDS: u64 = 2_000_000;

/// Burns this thread's CPU (which cpu-clock samples) until `done` holds.
fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
    let mut accumulator = 0u64;
    let mut rounds = 0u64;
    while !done() {
        for i in 0..100_000u64 {
            accumulator = std::hint::black_box(accumulator.wrapping_mul(31).wrapping_add(i));
        }
        rounds += 1;
        assert!(
            rounds < MAX_ROUNDS,
            "never happened in {rounds} rounds of work: {what}"
        );
    }
}

fn cpu_clock_attr(sampling: Sampling, sample_type: u32) -> b::perf_event_attr {
    let spec = parse_event("cpu-clock", Path::new("/sys")).expect("cpu-clock is built in");
    let mut options = AttrOptions::default();
    options.sampling = sampling;
    options.sample_type = u64::from(sample_type);
    options.disabled = true;
    build_attr(&spec, &options)
}

fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::gettid() }) as u32
}

#[test]
fn cpu_clock_samples_parse_with_ip_and_tid() {
    let attr = cpu_clock_attr(
        Sampling::Frequency(1000),
        b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_ID,
    );
    let format = SampleFormat::from_attr(&attr);
    let event = Event::open("cpu-clock", &attr, 0, -1, None, 0).expect("open cpu-clock");
    let id = event.id().expect("PERF_EVENT_IOC_ID");
    let mut ring = RingBuffer::new(&event, 8).expect("mmap 8 pages");
    // header, ip, pid+tid, time, id: 40 bytes a sample, the only records of this event.
    let wanted = 10;
    event.enable().unwrap();
    spin_until("ten cpu-clock samples", || ring.data_head() >= wanted * 40);
    event.disable().unwrap();

    let status = poll_readable(&[event.as_fd()], Some(Duration::from_secs(1))).unwrap();
    assert!(status[0].readable, "{status:?}");

    let tid = current_tid();
    let mut scratch = Vec::new();
    let (mut samples, mut ours) = (0, 0);
    let mut batch = ring.read();
    while let Some(raw) = batch.next_record().unwrap() {
        let record = raw.parse(&format, &mut scratch).expect("record parses");
        if let Record::Sample(sample) = record {
            samples += 1;
            assert!(sample.ip.is_some_and(|ip| ip != 0));
            assert_eq!(sample.id, Some(id));
            if sample.tid == Some(tid) {
                ours += 1;
            }
        }
    }
    drop(batch);
    assert!(samples >= wanted, "only {samples} samples");
    assert_eq!(ours, samples, "a per-thread event samples only this thread");
    assert_eq!(
        ring.data_tail(),
        ring.data_head(),
        "the batch consumed everything"
    );
}

#[test]
fn one_page_ring_wraps_and_every_record_parses() {
    // 8 + 40 bytes per sample does not divide the page, so records straddle the end;
    // at a 10 us period one page holds under a millisecond of samples.
    let attr = cpu_clock_attr(
        Sampling::Period(10_000),
        b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_PERIOD,
    );
    let format = SampleFormat::from_attr(&attr);
    let event = Event::open("cpu-clock", &attr, 0, -1, None, 0).expect("open cpu-clock");
    let mut ring = RingBuffer::new(&event, 1).expect("mmap 1 page");
    let data_size = ring.data_size() as u64;
    let mut scratch = Vec::new();
    let (mut consumed, mut records, mut splits, mut samples, mut lost) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut drain = |ring: &mut RingBuffer| {
        let mut batch = ring.read();
        while let Some(raw) = batch.next_record().unwrap() {
            consumed += raw.size() as u64;
            records += 1;
            if matches!(raw.body, RawData::Split(..)) {
                splits += 1;
            }
            match raw.parse(&format, &mut scratch) {
                Ok(Record::Sample(sample)) => {
                    samples += 1;
                    assert!(sample.ip.is_some() && sample.cpu.is_some());
                }
                Ok(Record::Lost(record)) => lost += record.lost,
                Ok(_) => {}
                Err(error) => panic!("record at {} failed: {error}", raw.position),
            }
        }
        // Enough: several rings' worth has gone through, and records have wrapped.
        consumed > 4 * data_size && splits > 0
    };
    event.enable().unwrap();
    spin_until("four rings' worth of records, some wrapped", || {
        drain(&mut ring)
    });
    event.disable().unwrap();
    drain(&mut ring);

    assert_eq!(
        consumed,
        ring.data_head(),
        "record sizes add up to data_head"
    );
    assert_eq!(ring.data_tail(), ring.data_head());
    assert!(
        consumed > 4 * data_size,
        "only {consumed} bytes through a {data_size}-byte ring"
    );
    assert!(splits > 0, "no record wrapped in {records} records");
    assert!(samples > 0);
    eprintln!("wrap test: {records} records, {splits} split, {samples} samples, {lost} lost");
}

#[test]
fn redirected_event_shares_the_leader_ring() {
    let sample_type = b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_IDENTIFIER;
    let attr = cpu_clock_attr(Sampling::Frequency(1000), sample_type);
    let format = SampleFormat::from_attr(&attr);
    let leader = Event::open("cpu-clock", &attr, 0, -1, None, 0).unwrap();
    let mut task_attr = attr;
    task_attr.config = u64::from(b::PERF_COUNT_SW_TASK_CLOCK);
    let follower = Event::open("task-clock", &task_attr, 0, -1, None, 0).unwrap();
    let mut ring = RingBuffer::new(&leader, 8).unwrap();
    follower
        .set_output(&leader)
        .expect("PERF_EVENT_IOC_SET_OUTPUT");
    let ids = [leader.id().unwrap(), follower.id().unwrap()];
    leader.enable().unwrap();
    follower.enable().unwrap();
    let mut seen = [0u32; 2];
    let mut scratch = Vec::new();
    spin_until("samples of both events in the leader's ring", || {
        let mut batch = ring.read();
        while let Some(raw) = batch.next_record().unwrap() {
            if let Record::Sample(sample) = raw.parse(&format, &mut scratch).unwrap() {
                let index = ids.iter().position(|&id| Some(id) == sample.identifier);
                seen[index.expect("sample from one of the two events")] += 1;
            }
        }
        seen[0] > 0 && seen[1] > 0
    });
    leader.disable().unwrap();
    follower.disable().unwrap();
    assert!(seen[0] > 0 && seen[1] > 0, "{seen:?}");
}

#[test]
fn aux_area_on_a_pmu_without_aux_is_a_clear_error() {
    // This host has no AUX-capable PMU (intel_pt, cs_etm, ...), so only the
    // refusal path is tested here: cpu-clock must refuse an AUX mapping.
    let attr = cpu_clock_attr(Sampling::Frequency(100), b::PERF_SAMPLE_IP);
    let event = Event::open("cpu-clock", &attr, 0, -1, None, 0).unwrap();
    let mut ring = RingBuffer::new(&event, 1).unwrap();
    for mode in [AuxMode::Consume, AuxMode::Snapshot] {
        let error = ring
            .map_aux(4, mode)
            .expect_err("cpu-clock has no AUX area");
        assert!(
            matches!(error, RingError::AuxUnsupported { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("cpu-clock"), "{error}");
    }
    assert!(ring.read_aux().is_none());
    assert!(matches!(
        ring.map_aux(3, AuxMode::Consume),
        Err(RingError::InvalidPageCount { pages: 3, .. })
    ));
}

#[test]
fn open_errors_name_the_event() {
    let mut attr = cpu_clock_attr(Sampling::Frequency(100), b::PERF_SAMPLE_IP);
    // No PMU is registered with this type number.
    attr.type_ = 0x7fff_fff0;
    let error = Event::open("bogus-pmu-event", &attr, 0, -1, None, 0).unwrap_err();
    assert!(matches!(error, EventError::Unsupported { .. }), "{error:?}");
    assert!(error.to_string().contains("bogus-pmu-event"), "{error}");
    let attr = cpu_clock_attr(Sampling::Frequency(100), b::PERF_SAMPLE_IP);
    let event = Event::open("cpu-clock", &attr, 0, -1, None, 0).unwrap();
    assert!(matches!(
        RingBuffer::new(&event, 3),
        Err(RingError::InvalidPageCount { pages: 3, .. })
    ));
}
