//! Exact profiles from N-Trace, against the ground truth: real programs of
//! tests/programs run under `qemu-riscv64` (one instruction per translation block: the
//! exact retired-PC stream), encoded by rvperf's encoder model under BTM and HTM, with
//! and without implicit returns and repeated history, decoded, and fed to the
//! profiles' sinks. Every instruction's count, every taken transfer (and so every call
//! edge) must equal what the program retired, exactly; the flame graph's stacks must
//! weigh exactly the instructions retired, each function's own weight must be the
//! instructions retired in it, and a trace from the entry point has no unknown caller.

mod common;

use std::collections::HashMap;

use common::{encode, load, program, retired_pcs, Code};
use ntrace_flow::{
    BranchMode, DecoderOptions, EncoderOptions, FlowDecoder, FlowError, InstructionDecoder,
    InstructionStep,
};
use ntrace_message::{AddressWidth, MessageOptions};
use perf_session::{PlacedElf, SymbolOptions, TraceCode, TraceFoldOptions};
use profiles::{Branch, StackWeight, TraceCounts, UNKNOWN_CALLER};
use riscv_insn::ControlFlow;
use trace_elements::{ElementSource, TraceElement};

const PROGRAMS: [&str; 7] = [
    "loops",
    "recursion",
    "switch",
    "fnptr",
    "longjmp",
    "farcalls",
    "mixed",
];

/// The encoder configurations every program is traced with: BTM and HTM, return
/// stack 0 (no implicit returns) and 32, repeated history off and on.
fn configurations() -> Vec<(String, EncoderOptions, DecoderOptions)> {
    let mut configurations = Vec::new();
    for mode in [BranchMode::Btm, BranchMode::Htm] {
        for depth in [0, 32] {
            for repeated_history in [false, true] {
                let mut options = EncoderOptions::default();
                options.mode = mode;
                options.return_stack_depth = depth;
                options.repeated_history = repeated_history;
                options.message =
                    MessageOptions::default().with_address_width(AddressWidth::Bits64);
                let decoder = DecoderOptions::default()
                    .with_message(options.message)
                    .with_return_stack_depth(depth);
                configurations.push((
                    format!("{mode:?}, return stack {depth}, repeated history {repeated_history}"),
                    options,
                    decoder,
                ));
            }
        }
    }
    configurations
}

/// A decoded trace's elements, replayed (the profile sinks pull from it).
struct Replay {
    elements: std::vec::IntoIter<TraceElement>,
}

impl ElementSource for Replay {
    type Error = FlowError;
    fn next_element(&mut self) -> Result<Option<TraceElement>, FlowError> {
        Ok(self.elements.next())
    }
}

fn decode(trace: &[u8], code: &Code, options: DecoderOptions) -> Vec<TraceElement> {
    let mut decoder = FlowDecoder::new(trace, &code.image, code.files.clone(), options);
    let mut elements = Vec::new();
    while let Some(element) = decoder.next_element().expect("decode") {
        elements.push(element);
    }
    elements
}

/// The instruction at `address`: its length and control flow.
fn instruction(code: &Code, address: u64) -> riscv_insn::Instruction {
    let raw = code.image.read_le::<4>(address).map_or_else(
        || {
            // The last two bytes of a segment: a compressed instruction.
            let half = code.image.read_le::<2>(address).expect("code at address");
            u32::from(u16::from_le_bytes(half))
        },
        u32::from_le_bytes,
    );
    let file = code
        .image
        .segment_index(address)
        .and_then(|index| code.image.segment(index))
        .expect("segment")
        .file;
    riscv_insn::decode(raw, code.files[file].options).expect("instruction")
}

fn is_call(flow: ControlFlow) -> bool {
    match flow {
        ControlFlow::Jump { rd, .. } | ControlFlow::JumpRegister { rd, .. } => rd == 1 || rd == 5,
        ControlFlow::TableJump { index } => index >= 32,
        _ => false,
    }
}

/// What the program did: executions per instruction and taken transfers.
struct Truth {
    counts: HashMap<u64, u64>,
    transfers: HashMap<Branch, u64>,
}

fn truth(code: &Code, pcs: &[u64]) -> Truth {
    let mut counts: HashMap<u64, u64> = HashMap::new();
    let mut transfers: HashMap<Branch, u64> = HashMap::new();
    let mut lengths: HashMap<u64, (u64, bool)> = HashMap::new();
    for (index, &pc) in pcs.iter().enumerate() {
        *counts.entry(pc).or_default() += 1;
        let Some(&next) = pcs.get(index + 1) else {
            continue;
        };
        let &mut (length, always_taken) = lengths.entry(pc).or_insert_with(|| {
            let instruction = instruction(code, pc);
            // A jump is taken even to the next instruction (`j .+4` does occur).
            let always_taken = matches!(
                instruction.control_flow,
                ControlFlow::Jump { .. }
                    | ControlFlow::JumpRegister { .. }
                    | ControlFlow::TableJump { .. }
                    | ControlFlow::PopReturn
            );
            (u64::from(instruction.length), always_taken)
        });
        if always_taken || next != pc + length {
            *transfers.entry(Branch { from: pc, to: next }).or_default() += 1;
        }
    }
    Truth { counts, transfers }
}

#[test]
fn trace_counts_and_call_edges_equal_the_retired_instructions_exactly() {
    let mut calls_checked = 0u64;
    for name in PROGRAMS {
        let pcs = retired_pcs(name);
        let code = load(name);
        let truth = truth(&code, &pcs);
        for (label, encoder, decoder) in configurations() {
            let context = format!("{name} ({label})");
            let (trace, _) = encode(&code, &pcs, encoder);
            let mut counts = TraceCounts::default();
            for element in decode(&trace, &code, decoder) {
                counts.push(&element);
            }
            assert_eq!(
                counts.statistics.instructions,
                pcs.len() as u64,
                "{context}"
            );
            assert_eq!(
                counts.statistics.decode_gaps + counts.statistics.encoder_gaps,
                0,
                "{context}"
            );
            let per_instruction = counts
                .counts
                .instruction_counts(|address| Some(u64::from(instruction(&code, address).length)));
            assert_eq!(per_instruction.broken_ranges, 0, "{context}");
            let mut differing: Vec<_> = truth
                .counts
                .iter()
                .filter(|&(address, &count)| per_instruction.counts.get(address) != Some(&count))
                .map(|(&address, &count)| {
                    (
                        address,
                        count,
                        per_instruction.counts.get(&address).copied(),
                    )
                })
                .collect();
            differing.sort_unstable();
            assert!(
                differing.is_empty() && per_instruction.counts.len() == truth.counts.len(),
                "{context}: {} of {} instructions differ (address, truth, trace): {:x?}",
                differing.len(),
                truth.counts.len(),
                &differing[..differing.len().min(8)]
            );
            // Every taken transfer with its count; calls among them are the call edges.
            let traced: HashMap<Branch, u64> = counts
                .counts
                .branches
                .iter()
                .map(|(&branch, &count)| (branch, count))
                .collect();
            for (branch, &count) in &truth.transfers {
                assert_eq!(
                    traced.get(branch),
                    Some(&count),
                    "{context}: transfer {branch:x?}"
                );
                if is_call(instruction(&code, branch.from).control_flow) {
                    calls_checked += 1;
                }
            }
            let extra: Vec<_> = traced
                .iter()
                .filter(|(branch, _)| !truth.transfers.contains_key(branch))
                .collect();
            assert!(
                extra.is_empty(),
                "{context}: transfers the program did not take: {extra:x?}"
            );
        }
    }
    assert!(
        calls_checked > 1000,
        "only {calls_checked} call edges checked"
    );
}

#[test]
fn trace_flame_graph_weighs_every_instruction_under_its_function() {
    for name in PROGRAMS {
        let pcs = retired_pcs(name);
        let code = load(name);
        let trace_code = TraceCode::load(&[PlacedElf {
            path: program(name),
            load_address: None,
        }])
        .expect("load the program");
        // The instructions each function retired, by its name.
        let mut per_function: HashMap<String, u64> = HashMap::new();
        for &pc in &pcs {
            // The symbolizer names code outside every function by its file.
            let function = trace_code
                .functions()
                .lookup(pc)
                .map_or_else(|| format!("[{name}]"), |(symbol, _)| symbol.name.clone());
            *per_function.entry(function).or_default() += 1;
        }
        // main runs once, called by __libc_start_call_main: the instructions from its
        // entry to the return into its caller are the stacks through main.
        let function_of = |pc: u64| {
            trace_code
                .functions()
                .lookup(pc)
                .map(|(symbol, _)| symbol.name.as_str())
        };
        let main_entry = pcs
            .iter()
            .position(|&pc| function_of(pc) == Some("main"))
            .expect("main ran");
        let main_return = main_entry
            + pcs[main_entry..]
                .iter()
                .position(|&pc| function_of(pc) == Some("__libc_start_call_main"))
                .expect("main returned");
        let under_main = (main_return - main_entry) as u64;
        for (label, encoder, decoder) in configurations() {
            let context = format!("{name} ({label})");
            let (trace, _) = encode(&code, &pcs, encoder);
            let mut source = Replay {
                elements: decode(&trace, &code, decoder).into_iter(),
            };
            let fold = perf_session::fold_trace(
                &mut source,
                &trace_code,
                SymbolOptions::default(),
                TraceFoldOptions::new(StackWeight::Instructions),
            )
            .expect("fold");
            assert_eq!(fold.folded.total_weight(), pcs.len() as u64, "{context}");
            assert_eq!(fold.statistics.instructions, pcs.len() as u64, "{context}");
            let mut leaves: HashMap<String, u64> = HashMap::new();
            let mut through_main = 0u64;
            for (stack, weight) in fold.folded.sorted() {
                if stack.split(';').any(|frame| frame == "main") {
                    through_main += weight;
                }
                assert!(!stack.contains(UNKNOWN_CALLER), "{context}: {stack}");
                assert!(stack.starts_with("_start"), "{context}: {stack}");
                let leaf = stack.rsplit(';').next().unwrap();
                *leaves.entry(leaf.to_owned()).or_default() += weight;
            }
            assert_eq!(
                leaves, per_function,
                "{context}: each function's own instructions"
            );
            assert_eq!(
                through_main, under_main,
                "{context}: instructions under main"
            );
        }
    }
}

#[test]
fn the_instruction_decoder_gives_every_retired_instruction_decoded() {
    for name in ["recursion", "switch", "longjmp"] {
        let pcs = retired_pcs(name);
        let code = load(name);
        for (label, encoder, decoder) in configurations() {
            let context = format!("{name} ({label})");
            let (trace, _) = encode(&code, &pcs, encoder);
            let mut instructions =
                InstructionDecoder::new(&trace, &code.image, code.files.clone(), decoder);
            let mut index = 0usize;
            while let Some(step) = instructions.next_step().expect("decode") {
                let InstructionStep::Instruction(traced) = step else {
                    continue;
                };
                assert_eq!(Some(&traced.address), pcs.get(index), "{context}: #{index}");
                assert_eq!(
                    traced.instruction,
                    instruction(&code, traced.address),
                    "{context}"
                );
                index += 1;
            }
            assert_eq!(index, pcs.len(), "{context}");
        }
    }
}
