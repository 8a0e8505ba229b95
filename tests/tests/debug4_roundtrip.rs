//! Real programs through the debug specification's trace module: each test program's
//! exact retired-PC stream from `qemu-riscv64` is encoded by `debug4_flow`'s encoder
//! model (through `trace_gen::debug4`, the QEMU driver) and decoded again by
//! `Debug4Decoder` over the program's code. Every decoded instruction range, listed
//! instruction by instruction from the code, must give back exactly QEMU's PCs:
//! - linear buffers: the whole stream, in both reporting modes;
//! - wrapped rings: exactly the tail from the first synchronisation point after the
//!   write pointer, up to the last instruction; read without the write pointer, never
//!   a PC that is not the truth's;
//! - two harts interleaved in one trace: each hart's own stream;
//! - register states with load/store addresses and data: the PCs and every access.

mod common;

use std::collections::BTreeMap;

use common::{assert_same_pcs, for_each_cpu_state, load_file, program, retired_pcs_of, Code};
use debug4_flow::{
    AccessKind, BranchReporting, BufferMode, DataEmission, Debug4Decoder, DecoderOptions, Emission,
    EncodedTrace, EncoderOptions,
};
use debug4_message::PcGranularity;
use trace_elements::{ElementKind, ElementSource, GapReason, MemoryOperation, TraceOnReason};
use trace_gen::debug4::Debug4FromQemu;

const MODES: [BranchReporting; 2] = [BranchReporting::TakenNotTaken, BranchReporting::PcPairs];

/// The programs of tests/programs/ with their arguments.
const PROGRAMS: [(&str, &[&str]); 10] = [
    ("recursion", &[]),
    ("longjmp", &[]),
    ("switch", &[]),
    ("fnptr", &[]),
    ("syscalls", &[]),
    ("farcalls", &[]),
    ("interp", &["1"]),
    ("qsort", &[]),
    ("loops", &[]),
    ("mixed", &[]),
];

/// A program's code and its exact retired PCs.
struct Run {
    code: Code,
    pcs: Vec<u64>,
}

fn run(name: &str, args: &[&str]) -> Run {
    let path = program(name);
    let pcs = retired_pcs_of(&path, args);
    assert!(pcs.len() > 100_000, "{name}: {} instructions", pcs.len());
    Run {
        code: load_file(&path),
        pcs,
    }
}

/// `retirements` (hart, pc) encoded from PCs alone.
fn encode(
    code: &Code,
    retirements: impl Iterator<Item = (u16, u64)>,
    options: EncoderOptions,
) -> (EncodedTrace, u64) {
    let mut encoder = Debug4FromQemu::new(&code.image, options).expect("encoder options");
    for (hart, pc) in retirements {
        encoder
            .push_pc(hart, pc)
            .unwrap_or_else(|error| panic!("encoding: {error}"));
    }
    encoder.finish().expect("finish")
}

fn decoder_options(trace: &EncodedTrace, options: EncoderOptions) -> DecoderOptions {
    DecoderOptions::new(
        trace.stream_options(options.buffer, PcGranularity::Halfword),
        options.branch_reporting,
    )
}

/// A decoded memory access: operation, address, size, data.
type Access = (MemoryOperation, Option<u64>, Option<u8>, Option<u64>);

/// What one hart's decode gave.
#[derive(Default)]
struct HartDecode {
    /// The PCs, cut where the decoder restarted (a TraceOn) or reported a gap.
    runs: Vec<Vec<u64>>,
    trace_on: Vec<TraceOnReason>,
    gaps: Vec<GapReason>,
    /// (address, data) of each memory access, in order.
    accesses: Vec<(Option<u64>, Option<u64>)>,
    /// Each memory access in full (operation, address, size, data), and `None` for
    /// each system call (the kernel may write memory).
    memory: Vec<Option<Access>>,
}

impl HartDecode {
    fn pcs(&self) -> Vec<u64> {
        self.runs.concat()
    }
}

struct Decoded {
    harts: BTreeMap<u16, HartDecode>,
    skipped_bytes: u64,
}

/// The length of the instruction at `address`.
fn length_at(code: &Code, address: u64) -> u64 {
    u64::from(common::instruction_at(code, address).length)
}

/// Decodes `trace` completely (errors are gaps; decoding goes on), listing every range's
/// PCs from the code.
fn decode(code: &Code, trace: &[u8], options: DecoderOptions) -> Decoded {
    let mut decoder = Debug4Decoder::new(trace, &code.image, options);
    let mut elements = Vec::new();
    while let Some(element) = decoder
        .next_element()
        .expect("the decoder reports errors as gaps")
    {
        elements.push(element);
    }
    let mut harts: BTreeMap<u16, HartDecode> = BTreeMap::new();
    for element in elements {
        let hart = harts.entry(element.hart).or_default();
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions: count,
                ..
            } => {
                if hart.runs.is_empty() {
                    hart.runs.push(Vec::new());
                }
                let run = hart.runs.last_mut().expect("a run");
                let mut address = start;
                for index in 0..count {
                    run.push(address);
                    if index + 1 < count {
                        address += length_at(code, address);
                    }
                }
                assert_eq!(address, last, "the range's last instruction");
            }
            ElementKind::TraceOn { reason, .. } => {
                hart.trace_on.push(reason);
                hart.runs.push(Vec::new());
            }
            ElementKind::Gap { reason } => {
                hart.gaps.push(reason);
                hart.runs.push(Vec::new());
            }
            ElementKind::MemoryAccess {
                operation,
                address,
                size,
                data,
                ..
            } => {
                hart.accesses.push((address, data));
                hart.memory.push(Some((operation, address, size, data)));
            }
            ElementKind::Trap { .. } => hart.memory.push(None),
            _ => {}
        }
    }
    for hart in harts.values_mut() {
        hart.runs.retain(|run| !run.is_empty());
    }
    Decoded {
        harts,
        skipped_bytes: decoder.skipped_bytes(),
    }
}

/// Checks that `decoded` is one run, the tail of `truth` up to its end, at least
/// `minimum` long; returns its length.
fn assert_tail(context: &str, truth: &[u64], decoded: &HartDecode, minimum: usize) -> usize {
    assert!(
        decoded.gaps.is_empty(),
        "{context}: gaps {:?}",
        decoded.gaps
    );
    assert_eq!(
        decoded.runs.len(),
        1,
        "{context}: {} runs",
        decoded.runs.len()
    );
    let pcs = &decoded.runs[0];
    assert!(
        pcs.len() >= minimum,
        "{context}: only {} instructions decoded",
        pcs.len()
    );
    assert!(pcs.len() <= truth.len(), "{context}: more PCs than ran");
    assert_same_pcs(context, &truth[truth.len() - pcs.len()..], pcs);
    pcs.len()
}

/// Whether `run` occurs in `truth` as a contiguous run.
fn is_contiguous_run_of(truth: &[u64], run: &[u64]) -> bool {
    let Some(&first) = run.first() else {
        return true;
    };
    truth
        .iter()
        .enumerate()
        .filter(|&(_, &pc)| pc == first)
        .any(|(index, _)| truth[index..].starts_with(run))
}

#[test]
fn every_program_round_trips_exactly_in_both_modes() {
    for (name, args) in PROGRAMS {
        let Run { code, pcs } = run(name, args);
        for mode in MODES {
            let options = EncoderOptions::default().with_branch_reporting(mode);
            let (trace, instructions) = encode(&code, pcs.iter().map(|&pc| (0, pc)), options);
            assert_eq!(instructions, pcs.len() as u64);
            assert_eq!(trace.wrap_offset, None);
            let decoded = decode(&code, &trace.bytes, decoder_options(&trace, options));
            let context = format!("{name} {mode:?}");
            assert_eq!(decoded.harts.len(), 1, "{context}: harts");
            let hart = &decoded.harts[&0];
            assert!(hart.gaps.is_empty(), "{context}: gaps {:?}", hart.gaps);
            assert_eq!(hart.trace_on, [TraceOnReason::Start], "{context}");
            assert_same_pcs(&context, &pcs, &hart.pcs());
            eprintln!(
                "{context}: {} instructions, {} trace bytes, {:.3} bits/instruction",
                pcs.len(),
                trace.bytes.len(),
                trace.bytes.len() as f64 * 8.0 / pcs.len() as f64,
            );
        }
    }
}

#[test]
fn wrapped_rings_decode_to_the_tail_from_the_first_synchronisation_point() {
    for (name, args) in [("qsort", &[][..]), ("fnptr", &[][..])] {
        let Run { code, pcs } = run(name, args);
        for mode in MODES {
            for (ring, minimum) in [(4096u64, 1000usize), (65536, 20_000)] {
                let options = EncoderOptions::default()
                    .with_branch_reporting(mode)
                    .with_buffer(BufferMode::Ring { bytes: ring });
                let (trace, _) = encode(&code, pcs.iter().map(|&pc| (0, pc)), options);
                let context = format!("{name} {mode:?} {ring}-byte ring");
                let wrap = trace.wrap_offset.expect("the ring wrapped");
                assert_eq!(trace.bytes.len() as u64, ring);
                let decoded = decode(&code, &trace.bytes, decoder_options(&trace, options));
                let hart = &decoded.harts[&0];
                let tail = assert_tail(&context, &pcs, hart, minimum);
                // Starting anywhere but at a synchronisation point, the decoder skips to
                // the next one and says how far; the trace restarts there.
                let spacing = ring / 8;
                assert_eq!(
                    decoded.skipped_bytes,
                    wrap.div_ceil(spacing) * spacing - wrap,
                    "{context}: skipped bytes"
                );
                assert_eq!(hart.trace_on, [TraceOnReason::Start], "{context}");
                // Without the write pointer the newest and the oldest data meet unmarked:
                // whatever the decoder gives must still be true.
                let unwrapped = DecoderOptions::new(
                    trace
                        .stream_options(options.buffer, PcGranularity::Halfword)
                        .with_wrap_offset(None),
                    mode,
                );
                let blind = decode(&code, &trace.bytes, unwrapped);
                let blind_hart = blind.harts.get(&0);
                let blind_runs = blind_hart.map_or(0, |hart| hart.runs.len());
                for run in blind_hart.iter().flat_map(|hart| &hart.runs) {
                    assert!(
                        is_contiguous_run_of(&pcs, run),
                        "{context}, read without the write pointer: a run of {} PCs from {:#x} is not the program's",
                        run.len(),
                        run[0]
                    );
                }
                eprintln!(
                    "{context}: tail of {tail} of {} instructions, {} bytes skipped; without the write pointer {} runs, {} gaps",
                    pcs.len(),
                    decoded.skipped_bytes,
                    blind_runs,
                    blind_hart.map_or(0, |hart| hart.gaps.len()),
                );
            }
        }
    }
}

/// Two streams interleaved in chunks of 1 to `largest` instructions, at random; each
/// chunk's hart drawn in proportion to what is left of its stream, so both end near the
/// end (a wrapped ring then holds both).
fn interleave(first: &[u64], second: &[u64], largest: u64, seed: u64) -> Vec<(u16, u64)> {
    let mut random = common::Random(seed);
    let streams = [first, second];
    let mut next = [0usize, 0];
    let mut out = Vec::with_capacity(first.len() + second.len());
    loop {
        let left = [first.len() - next[0], second.len() - next[1]];
        let total = (left[0] + left[1]) as u64;
        if total == 0 {
            return out;
        }
        let hart = usize::from(random.below(total) >= left[0] as u64);
        let chunk = (random.below(largest) as usize + 1).min(left[hart]);
        for &pc in &streams[hart][next[hart]..next[hart] + chunk] {
            out.push((hart as u16, pc));
        }
        next[hart] += chunk;
    }
}

#[test]
fn two_harts_in_one_trace_decode_to_their_own_streams() {
    let path = program("interp");
    let code = load_file(&path);
    let streams = [retired_pcs_of(&path, &["1"]), retired_pcs_of(&path, &["2"])];
    assert_ne!(streams[0], streams[1]);
    for mode in MODES {
        for (seed, largest) in [(1u64, 3u64), (2, 200), (3, 5000)] {
            let retirements = interleave(&streams[0], &streams[1], largest, seed);
            let context = format!("interp 1 and 2, {mode:?}, chunks up to {}", largest + 1);
            let options = EncoderOptions::default().with_branch_reporting(mode);
            let (trace, _) = encode(&code, retirements.iter().copied(), options);
            let decoded = decode(&code, &trace.bytes, decoder_options(&trace, options));
            assert_eq!(decoded.harts.len(), 2, "{context}: harts");
            for (hart, truth) in streams.iter().enumerate() {
                let hart_decode = &decoded.harts[&(hart as u16)];
                assert!(hart_decode.gaps.is_empty(), "{context}: gaps");
                assert_same_pcs(
                    &format!("{context}, hart {hart}"),
                    truth,
                    &hart_decode.pcs(),
                );
            }
            eprintln!(
                "{context}: {} instructions, {} trace bytes, {:.3} bits/instruction",
                retirements.len(),
                trace.bytes.len(),
                trace.bytes.len() as f64 * 8.0 / retirements.len() as f64,
            );
            // The same, wrapped: each hart's tail.
            let options = options.with_buffer(BufferMode::Ring { bytes: 8192 });
            let (trace, _) = encode(&code, retirements.iter().copied(), options);
            let decoded = decode(&code, &trace.bytes, decoder_options(&trace, options));
            for (hart, truth) in streams.iter().enumerate() {
                let hart_context = format!("{context}, 8 KiB ring, hart {hart}");
                let hart_decode = decoded
                    .harts
                    .get(&(hart as u16))
                    .unwrap_or_else(|| panic!("{hart_context}: nothing decoded"));
                assert_tail(&hart_context, truth, hart_decode, 200);
            }
        }
    }
}

/// Runs `name ARGS` logging registers, encodes with `data`, and checks the PCs and every
/// access the driver computed against the decoded ones.
fn data_round_trip(name: &str, args: &[&str], data: DataEmission) {
    let path = program(name);
    let code = load_file(&path);
    let options = EncoderOptions::default().with_data(data);
    let mut encoder = Debug4FromQemu::new(&code.image, options).expect("encoder options");
    let mut pcs = Vec::new();
    let mut expected = Vec::new();
    let mut loads = 0u64;
    let count = for_each_cpu_state(&path, args, |state| {
        pcs.push(state.pc);
        let retired = encoder
            .push_state(0, state)
            .unwrap_or_else(|error| panic!("encoding: {error}"));
        if let Some(access) = retired.and_then(|retired| retired.data) {
            let (address, value) = match access.kind {
                AccessKind::Load => (data.load_address, data.load_data),
                _ => (data.store_address, data.store_data),
            };
            if access.kind == AccessKind::Load {
                loads += 1;
            }
            if address == Emission::On || value == Emission::On {
                expected.push((
                    access.address.filter(|_| address == Emission::On),
                    access.value.filter(|_| value == Emission::On),
                ));
            }
        }
    });
    let (trace, instructions) = encoder.finish().expect("finish");
    assert_eq!(instructions, count);
    let decoded = decode(&code, &trace.bytes, decoder_options(&trace, options));
    let context = format!("{name} {args:?} with {data:?}");
    let hart = &decoded.harts[&0];
    assert!(hart.gaps.is_empty(), "{context}: gaps {:?}", hart.gaps);
    assert_same_pcs(&context, &pcs, &hart.pcs());
    assert!(loads > 1000, "{context}: only {loads} loads");
    assert_eq!(hart.accesses.len(), expected.len(), "{context}: accesses");
    if let Some(index) = hart
        .accesses
        .iter()
        .zip(&expected)
        .position(|(a, b)| a != b)
    {
        panic!(
            "{context}: access #{index} decoded {:x?}, the driver computed {:x?}",
            hart.accesses[index], expected[index]
        );
    }
    if data == DataEmission::all() {
        let (matched, differing) = loads_matching_stores(&hart.memory);
        assert_eq!(
            differing, 0,
            "{context}: loads that differ from what was stored there"
        );
        assert!(
            matched > 1000,
            "{context}: only {matched} loads of stored bytes"
        );
    }
    eprintln!(
        "{context}: {} instructions, {} accesses, {} trace bytes, {:.3} bits/instruction",
        pcs.len(),
        expected.len(),
        trace.bytes.len(),
        trace.bytes.len() as f64 * 8.0 / pcs.len() as f64,
    );
}

/// A check of the accesses independent of how the driver computes them: replaying the
/// decoded stores byte by byte, every load of bytes stored before must read them back.
/// Returns the loads checked so and those that differ. Atomics and store-conditionals
/// (whose store the trace does not carry in full) make their bytes unknown again.
fn loads_matching_stores(accesses: &[Option<Access>]) -> (u64, u64) {
    let mut memory: std::collections::HashMap<u64, u8> = std::collections::HashMap::new();
    let (mut matched, mut differing) = (0u64, 0u64);
    for &access in accesses {
        let Some((operation, address, size, data)) = access else {
            memory.clear();
            continue;
        };
        let (Some(address), Some(size), Some(data)) = (address, size, data) else {
            continue;
        };
        let bytes = address..address + u64::from(size);
        match operation {
            MemoryOperation::Store => {
                for (index, byte) in bytes.enumerate() {
                    memory.insert(byte, (data >> (8 * index)) as u8);
                }
            }
            MemoryOperation::Load => {
                let known: Option<Vec<u8>> = bytes.map(|byte| memory.get(&byte).copied()).collect();
                if let Some(known) = known {
                    let stored = known
                        .iter()
                        .rev()
                        .fold(0u64, |value, &byte| value << 8 | u64::from(byte));
                    if stored == data {
                        matched += 1;
                    } else {
                        differing += 1;
                    }
                }
            }
            _ => {
                for byte in bytes {
                    memory.remove(&byte);
                }
            }
        }
    }
    (matched, differing)
}

#[test]
fn loads_and_stores_decode_to_the_accesses_the_registers_show() {
    data_round_trip("interp", &["1"], DataEmission::all());
}

#[test]
fn a_partial_trace_of_addresses_only_keeps_every_pc_and_address() {
    data_round_trip(
        "recursion",
        &[],
        DataEmission {
            load_address: Emission::On,
            store_address: Emission::On,
            ..DataEmission::default()
        },
    );
}
