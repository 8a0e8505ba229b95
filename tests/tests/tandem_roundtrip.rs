//! Real programs through the tandem-verification protocol: each test program runs under
//! `qemu-riscv64` logging every register before each instruction; the states are encoded
//! as a tandem trace (`trace_gen::tandem`, over `tandem_flow::TandemEncoder`) and decoded
//! again (`tandem_flow::StepDecoder`). Every instruction step must sit at exactly QEMU's
//! pc, and after it the shadow state must hold exactly the registers QEMU shows before
//! the next instruction: x1..x31, f0..f31 and fcsr. The trace elements
//! (`TandemElements`, what flame graphs and AutoFDO read) must list the same pcs. A
//! partial trace (integer registers only, no memory) must still give every pc, the
//! integer registers, and no floating-point state.

mod common;

use std::hash::{Hash, Hasher};
use std::path::Path;

use common::{assert_same_pcs, for_each_cpu_state, load_file, program};
use tandem_flow::{
    ElementOptions, EncoderOptions, StateElements, StepDecoder, StepKind, TandemElements, Tracing,
};
use tandem_message::{Parameters, Register};
use trace_elements::{ElementKind, ElementSource};
use trace_gen::cpu_log::CpuState;
use trace_gen::tandem::TandemFromQemu;

/// Which registers a state check covers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checked {
    Everything,
    IntegerOnly,
}

/// A fingerprint of the registers of a QEMU state or of a shadow state.
fn fingerprint(integer: &[u64; 32], float: Option<&[u64; 32]>, fcsr: Option<u64>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    integer[1..].hash(&mut hasher);
    float.hash(&mut hasher);
    fcsr.hash(&mut hasher);
    hasher.finish()
}

fn qemu_fingerprint(state: &CpuState, checked: Checked) -> u64 {
    match checked {
        Checked::Everything => fingerprint(&state.integer, state.float.as_ref(), state.fcsr),
        Checked::IntegerOnly => fingerprint(&state.integer, None, None),
    }
}

/// What one run gave: the trace, every pc, and the fingerprint of the state after each
/// instruction (QEMU's state before the next; none after the last).
struct Traced {
    trace: Vec<u8>,
    pcs: Vec<u64>,
    after: Vec<u64>,
}

fn trace(program: &Path, args: &[&str], options: EncoderOptions, checked: Checked) -> Traced {
    let code = load_file(program);
    let mut encoder = TandemFromQemu::new(&code.image, Parameters::default(), options);
    let mut trace = Vec::new();
    let mut pcs = Vec::new();
    let mut after = Vec::new();
    let count = for_each_cpu_state(program, args, |state| {
        if !pcs.is_empty() {
            after.push(qemu_fingerprint(state, checked));
        }
        pcs.push(state.pc);
        encoder
            .push(state)
            .unwrap_or_else(|error| panic!("encoding: {error}"));
        if pcs.len() % 65536 == 0 {
            trace.extend(encoder.take_output());
        }
    });
    let (rest, instructions) = encoder.finish().expect("finish");
    trace.extend(rest);
    assert_eq!(instructions, count);
    Traced { trace, pcs, after }
}

/// The state the QEMU run had before instruction `index`, for a readable failure.
fn qemu_state_at(program: &Path, args: &[&str], index: usize) -> CpuState {
    let mut seen = 0usize;
    let mut found = None;
    for_each_cpu_state(program, args, |state| {
        if seen == index {
            found = Some(state.clone());
        }
        seen += 1;
    });
    found.expect("the run has that many instructions")
}

fn shadow_fingerprint(steps: &StepDecoder<'_>, checked: Checked) -> u64 {
    let shadow = steps.shadow();
    let mut integer = [0u64; 32];
    for (index, slot) in integer.iter_mut().enumerate().skip(1) {
        *slot = shadow
            .register(Register::Integer(index as u8))
            .unwrap_or(u64::MAX);
    }
    match checked {
        Checked::IntegerOnly => fingerprint(&integer, None, None),
        Checked::Everything => {
            let mut float = [0u64; 32];
            for (index, slot) in float.iter_mut().enumerate() {
                *slot = shadow
                    .register(Register::Float(index as u8))
                    .unwrap_or(u64::MAX);
            }
            fingerprint(
                &integer,
                Some(&float),
                shadow.register(Register::Csr(0x003)),
            )
        }
    }
}

/// Decodes `traced` step by step and checks every pc and every state after.
fn check_steps(name: &str, program: &Path, args: &[&str], traced: &Traced, checked: Checked) {
    let mut steps = StepDecoder::new(&traced.trace, Parameters::default());
    let mut pcs = Vec::with_capacity(traced.pcs.len());
    while let Some(step) = steps.next_step().expect("decode steps") {
        let StepKind::Instruction { pc, .. } = step.kind else {
            assert_eq!(
                step.index, 0,
                "{name}: only the first step is no instruction"
            );
            continue;
        };
        let index = pcs.len();
        pcs.push(pc);
        if let Some(&expected) = traced.after.get(index) {
            if shadow_fingerprint(&steps, checked) != expected {
                let qemu = qemu_state_at(program, args, index + 1);
                let differing: Vec<String> = (1..32u8)
                    .filter_map(|register| {
                        let ours = steps.shadow().register(Register::Integer(register));
                        let theirs = qemu.integer[usize::from(register)];
                        (ours != Some(theirs))
                            .then(|| format!("x{register}: decoded {ours:x?}, QEMU {theirs:#x}"))
                    })
                    .collect();
                panic!(
                    "{name}: after instruction #{index} at {pc:#x} (step at byte offset {:#x}) the decoded state is not QEMU's: {differing:?} (float registers or fcsr when empty)",
                    step.offset
                );
            }
        }
    }
    assert_same_pcs(name, &traced.pcs, &pcs);
    if checked == Checked::IntegerOnly {
        assert_eq!(steps.shadow().register(Register::Float(0)), None);
        assert_eq!(steps.shadow().register(Register::Csr(0x003)), None);
    }
}

/// The pcs of the trace's instruction ranges, listed from the program's code.
fn element_pcs(traced: &Traced, program: &Path, state: StateElements) -> Vec<u64> {
    let code = load_file(program);
    let steps = StepDecoder::new(&traced.trace, Parameters::default());
    let mut elements = TandemElements::new(steps, ElementOptions::default().with_state(state));
    let mut pcs = Vec::new();
    let mut register_writes = 0u64;
    while let Some(element) = elements.next_element().expect("decode elements") {
        match element.kind {
            ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } => {
                let mut address = start;
                for _ in 0..instructions {
                    pcs.push(address);
                    let instruction = common::instruction_at(&code, address);
                    address += u64::from(instruction.length);
                }
            }
            ElementKind::RegisterWrite { .. } => register_writes += 1,
            _ => {}
        }
    }
    match state {
        StateElements::Omit => assert_eq!(register_writes, 0),
        StateElements::Report => assert!(register_writes > pcs.len() as u64 / 2),
    }
    pcs
}

#[test]
fn every_program_decodes_to_qemus_pcs_and_registers() {
    for name in ["recursion", "longjmp", "interp"] {
        let path = program(name);
        let args: &[&str] = if name == "interp" { &["1"] } else { &[] };
        let traced = trace(&path, args, EncoderOptions::default(), Checked::Everything);
        assert!(
            traced.pcs.len() > 100_000,
            "{name}: {} instructions",
            traced.pcs.len()
        );
        check_steps(name, &path, args, &traced, Checked::Everything);
        let ranges = element_pcs(&traced, &path, StateElements::Omit);
        assert_same_pcs(&format!("{name} elements"), &traced.pcs, &ranges);
        let per_write = element_pcs(&traced, &path, StateElements::Report);
        assert_same_pcs(
            &format!("{name} elements with state"),
            &traced.pcs,
            &per_write,
        );
        eprintln!(
            "{name}: {} instructions, {} trace bytes ({:.1} bytes/instruction)",
            traced.pcs.len(),
            traced.trace.len(),
            traced.trace.len() as f64 / traced.pcs.len() as f64
        );
    }
}

#[test]
fn a_partial_trace_keeps_every_pc_and_the_integer_registers() {
    let path = program("mixed");
    let options = EncoderOptions::default()
        .with_float_registers(Tracing::Omitted)
        .with_csrs(Tracing::Omitted)
        .with_memory(Tracing::Omitted);
    let traced = trace(&path, &[], options, Checked::IntegerOnly);
    check_steps("mixed, partial", &path, &[], &traced, Checked::IntegerOnly);
}
