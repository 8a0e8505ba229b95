//! Steps, elements, the encoder and the comparison, over appendix C and synthetic traces.

use tandem_flow::{
    compare, ArchitecturalState, CompareOptions, Difference, ElementOptions, EncoderOptions,
    FlowError, Interrupt, PcUpdates, Retirement, StateChange, StateElements, StepDecoder,
    StepErrorKind, StepKind, TandemElements, TandemEncoder, Trace, Tracing,
};
use tandem_message::{
    AccessSize, InstructionBits, MemoryOperation, MemoryResult, Parameters, Register,
};
use trace_elements::{AddressKind, ElementKind, ElementSource, RangeEnd, TraceOnReason, TrapKind};

/// A group setting the pc to 0x8_1230 (additional state 0x10).
const PC_GROUP: [u8; 12] = [0x01, 0x07, 0x10, 0x30, 0x12, 0x08, 0, 0, 0, 0, 0, 0x02];

#[rustfmt::skip]
const C1_ADD: [u8; 19] = [
    0x01, 0x03, 0x11, 0xb3, 0x81, 0x62, 0x00,
    0x04, 0x03, 0x10, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02,
];

#[rustfmt::skip]
const C2_JR: [u8; 17] = [
    0x01, 0x07, 0x10, 0x00, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00,
    0x11, 0x67, 0x00, 0x01, 0x10, 0x02,
];

#[rustfmt::skip]
const C7_ILLEGAL: [u8; 64] = [
    0x01,
    0x07, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x11, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x41, 0x03, 0x34, 0x12, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x42, 0x03, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x00, 0x03, 0xb0, 0x18, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
    0x04, 0x43, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x07, 0x01, 0x03,
    0x02,
];

#[rustfmt::skip]
const C8_INTERRUPT: [u8; 59] = [
    0x01,
    0x07, 0x10, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x41, 0x03, 0x56, 0x12, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x04, 0x42, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,
    0x04, 0x00, 0x03, 0xb0, 0x18, 0x00, 0x00, 0x0a, 0x00, 0x00, 0x00,
    0x04, 0x43, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x07, 0x01, 0x03,
    0x02,
];

fn concat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn elements(bytes: &[u8], options: ElementOptions) -> Vec<ElementKind> {
    let mut source = TandemElements::new(StepDecoder::new(bytes, Parameters::default()), options);
    let mut out = Vec::new();
    while let Some(element) = source.next_element().expect("trace decodes") {
        out.push(element.kind);
    }
    out
}

#[test]
fn appendix_c1_is_an_instruction_at_the_previous_pc() {
    let bytes = concat(&[&PC_GROUP, &C1_ADD]);
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    let first = steps.next_step().unwrap().unwrap();
    assert_eq!(first.kind, StepKind::PcSet { next_pc: 0x8_1230 });
    let add = steps.next_step().unwrap().unwrap();
    assert_eq!((add.index, add.offset, add.end_offset), (1, 12, 12 + 19));
    assert_eq!(
        add.kind,
        StepKind::Instruction {
            pc: 0x8_1230,
            bits: InstructionBits::bits32(0x0062_81b3),
            next_pc: 0x8_1234
        }
    );
    assert_eq!(
        add.changes,
        [StateChange::Register {
            register: Register::Integer(3),
            value: 0x1234
        }]
    );
    assert_eq!(steps.shadow().pc(), Some(0x8_1234));
}

#[test]
fn instruction_at_unknown_pc_is_an_error() {
    let mut steps = StepDecoder::new(&C1_ADD, Parameters::default());
    assert_eq!(
        steps.next_step(),
        Err(FlowError::Step {
            offset: 0,
            kind: StepErrorKind::InstructionAtUnknownPc
        })
    );
    assert_eq!(steps.next_step(), Ok(None));
}

#[test]
fn incremental_update_needs_a_value() {
    // fcsr |= 1 with no fcsr value yet.
    let bytes = concat(&[&PC_GROUP, &[0x01, 0x06, 0x03, 0x00, 0x01, 0x02]]);
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    steps.next_step().unwrap();
    assert_eq!(
        steps.next_step(),
        Err(FlowError::Step {
            offset: 13,
            kind: StepErrorKind::IncrementalWithoutValue {
                register: Register::Csr(3)
            }
        })
    );
}

#[test]
fn incremental_updates_apply_to_the_shadow() {
    #[rustfmt::skip]
    let bytes = [
        0x01, 0x04, 0x0a, 0x10, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x02, // a0 = 0xff
        0x05, 0x0a, 0x10, 0x02,       // a0 += 2, outside a group
        0x01, 0x06, 0x0a, 0x10, 0x40, // a0 |= 0x40; end implied by the next begin
        0x01, 0x05, 0x0a, 0x10, 0xfe, 0x02, // a0 -= 2
    ];
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    let mut values = Vec::new();
    while let Some(step) = steps.next_step().unwrap() {
        assert_eq!(step.kind, StepKind::Other);
        values.push(steps.shadow().register(Register::Integer(10)));
    }
    assert_eq!(values, [Some(0xff), Some(0x101), Some(0x141), Some(0x13f)]);
}

#[test]
fn appendix_c2_jump_and_elements() {
    let bytes = concat(&[&PC_GROUP, &C2_JR, &C1_ADD]);
    let kinds = elements(&bytes, ElementOptions::default());
    assert_eq!(
        kinds,
        [
            ElementKind::TraceOn {
                address: 0x8_1230,
                reason: TraceOnReason::Start
            },
            ElementKind::InstructionRange {
                start: 0x8_1230,
                last: 0x8_1230,
                instructions: 1,
                end: RangeEnd::IndirectJump,
                next: Some(0x0c00_0100)
            },
            ElementKind::InstructionRange {
                start: 0x0c00_0100,
                last: 0x0c00_0100,
                instructions: 1,
                end: RangeEnd::Sequential,
                next: Some(0x0c00_0104)
            },
        ]
    );
}

#[test]
fn appendix_c7_is_an_exception() {
    let bytes = concat(&[&PC_GROUP, &C7_ILLEGAL]);
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    steps.next_step().unwrap();
    let illegal = steps.next_step().unwrap().unwrap();
    assert_eq!(
        illegal.kind,
        StepKind::Instruction {
            pc: 0x8_1230,
            bits: InstructionBits::bits32(0),
            next_pc: 0x1_0000
        }
    );
    assert_eq!(illegal.trap_cause(), Some(2));
    assert_eq!(steps.shadow().privilege(), Some(3));
    assert_eq!(
        elements(&bytes, ElementOptions::default()),
        [
            ElementKind::TraceOn {
                address: 0x8_1230,
                reason: TraceOnReason::Start
            },
            ElementKind::Trap {
                from: Some(0x8_1230),
                handler: 0x1_0000,
                kind: TrapKind::Exception
            },
            ElementKind::ContextChange {
                privilege: 3,
                virtualized: false,
                context: None
            },
        ]
    );
}

#[test]
fn appendix_c8_is_an_interrupt() {
    let bytes = concat(&[&PC_GROUP, &C1_ADD, &C8_INTERRUPT]);
    let mut steps = StepDecoder::new(&bytes, Parameters::default());
    steps.next_step().unwrap();
    steps.next_step().unwrap();
    let interrupt = steps.next_step().unwrap().unwrap();
    assert_eq!(
        interrupt.kind,
        StepKind::Interrupt {
            pc_before: 0x8_1234,
            next_pc: 0x1_0000
        }
    );
    let kinds = elements(&bytes, ElementOptions::default());
    assert_eq!(
        kinds[1..3],
        [
            ElementKind::InstructionRange {
                start: 0x8_1230,
                last: 0x8_1230,
                instructions: 1,
                end: RangeEnd::Sequential,
                next: Some(0x8_1234)
            },
            ElementKind::Trap {
                from: Some(0x8_1234),
                handler: 0x1_0000,
                kind: TrapKind::Interrupt
            },
        ]
    );
}

#[test]
fn a_pc_value_without_trap_csrs_is_a_pc_set() {
    let mut steps = StepDecoder::new(&PC_GROUP, Parameters::default());
    assert_eq!(
        steps.next_step().unwrap().unwrap().kind,
        StepKind::PcSet { next_pc: 0x8_1230 }
    );
}

fn start_state() -> ArchitecturalState {
    let mut integer = [0u64; 32];
    integer[2] = 0x8000_f000; // sp
    integer[10] = 0x8000_2000; // a0
    integer[11] = 0x1122_3344_5566_7788; // a1
    ArchitecturalState {
        pc: 0x8000_0000,
        integer,
        float: Some([0; 32]),
        csrs: vec![(0x300, 0x1800), (0xc01, 0)],
        privilege: 3,
    }
}

/// `count` x `addi a0, a0, 1` after a state initialization: step i (from 1) leaves a0 at
/// 0x8000_2000 + i; step `flip` (if any) leaves bit 4 of a0 flipped; step `skip` is left out.
fn counting_trace(count: u64, flip: Option<u64>, skip: Option<u64>) -> Vec<u8> {
    let mut encoder = TandemEncoder::new(Parameters::default(), EncoderOptions::default());
    let mut state = start_state();
    encoder.start(&state).unwrap();
    for step in 1..=count {
        let before = state.clone();
        state.pc += 4;
        state.integer[10] += 1;
        state.csrs[1].1 = step * 100; // time: non-deterministic
        let mut after = state.clone();
        if flip == Some(step) {
            after.integer[10] ^= 0x10;
        }
        if skip != Some(step) {
            encoder
                .retire_states(&before, InstructionBits::bits32(0x0015_0513), &after)
                .unwrap();
        }
    }
    encoder.take_output()
}

fn run_compare(a: &[u8], b: &[u8], options: &CompareOptions) -> tandem_flow::Comparison {
    compare(
        StepDecoder::new(a, Parameters::default()),
        StepDecoder::new(b, Parameters::default()),
        options,
    )
    .unwrap()
}

#[test]
fn steps_into_a_reused_step_are_the_steps() {
    let mut trace = counting_trace(20, None, None);
    // A cut group at the end: the error comes the same way.
    trace.push(tandem_message::opcode::BEGIN_GROUP);
    let mut fresh = StepDecoder::new(&trace, Parameters::default());
    let mut reusing = StepDecoder::new(&trace, Parameters::default());
    let mut step = fresh.next_step().unwrap().unwrap();
    assert!(reusing.next_step_into(&mut step.clone()).unwrap());
    loop {
        let expected = fresh.next_step();
        let got = reusing.next_step_into(&mut step);
        match expected {
            Ok(Some(expected)) => {
                assert_eq!(got, Ok(true));
                assert_eq!(step, expected);
            }
            Ok(None) => unreachable!("the trace ends in an error"),
            Err(error) => {
                assert_eq!(got, Err(error));
                break;
            }
        }
    }
    assert_eq!(reusing.next_step_into(&mut step), Ok(false));
    assert_eq!(reusing.shadow(), fresh.shadow());
    let registers: Vec<(Register, u64)> = reusing.shadow().registers().collect();
    assert!(registers.windows(2).all(|pair| pair[0].0 < pair[1].0));
    assert_eq!(registers.first(), Some(&(Register::Csr(0x300), 0x1800)));
    assert_eq!(registers.last(), Some(&(Register::Float(31), 0)));
    assert!(registers.contains(&(Register::Integer(10), 0x8000_2000 + 20)));
}

#[test]
fn identical_traces_do_not_diverge() {
    let trace = counting_trace(20, None, None);
    let comparison = run_compare(&trace, &trace, &CompareOptions::default());
    assert_eq!(comparison.steps_compared, 21);
    assert_eq!(comparison.divergence, None);
}

#[test]
fn a_flipped_register_bit_diverges_at_its_step() {
    let a = counting_trace(20, None, None);
    let b = counting_trace(20, Some(7), None);
    let comparison = run_compare(&a, &b, &CompareOptions::default());
    let divergence = comparison.divergence.unwrap();
    assert_eq!(divergence.step, 7);
    assert_eq!(comparison.steps_compared, 7);
    assert_eq!(
        divergence.difference,
        Difference::Register {
            register: Register::Integer(10),
            a: Some(0x8000_2007),
            b: Some(0x8000_2017)
        }
    );
    assert_eq!(divergence.position_a.pc, Some(0x8000_0018));
    assert_eq!(divergence.position_a, divergence.position_b);
}

#[test]
fn a_removed_step_diverges_at_its_index() {
    // With `increment pc`, a trace with a group missing still places the next
    // instruction where the missing one was: its register writes differ.
    let a = counting_trace(20, None, None);
    let b = counting_trace(20, None, Some(5));
    let divergence = run_compare(&a, &b, &CompareOptions::default())
        .divergence
        .unwrap();
    assert_eq!(divergence.step, 5);
    assert_eq!(divergence.position_a.pc, Some(0x8000_0010));
    assert!(
        matches!(
            divergence.difference,
            Difference::Register {
                register: Register::Integer(10),
                ..
            }
        ),
        "{divergence:?}"
    );
    // With pc values, the pc after the step differs first.
    let a = counting_trace_with(20, None, PcUpdates::AlwaysValue);
    let b = counting_trace_with(20, Some(5), PcUpdates::AlwaysValue);
    let divergence = run_compare(&a, &b, &CompareOptions::default())
        .divergence
        .unwrap();
    assert_eq!(divergence.step, 5);
    assert_eq!(
        divergence.difference,
        Difference::NextPc {
            a: Some(0x8000_0014),
            b: Some(0x8000_0018)
        }
    );
}

/// [`counting_trace`] without flips, with a choice of pc updates.
fn counting_trace_with(count: u64, skip: Option<u64>, pc_updates: PcUpdates) -> Vec<u8> {
    let options = EncoderOptions::default().with_pc_updates(pc_updates);
    let mut encoder = TandemEncoder::new(Parameters::default(), options);
    let mut state = start_state();
    encoder.start(&state).unwrap();
    for step in 1..=count {
        let before = state.clone();
        state.pc += 4;
        state.integer[10] += 1;
        if skip != Some(step) {
            encoder
                .retire_states(&before, InstructionBits::bits32(0x0015_0513), &state)
                .unwrap();
        }
    }
    encoder.take_output()
}

#[test]
fn a_shorter_trace_ends() {
    let a = counting_trace(20, None, None);
    let b = counting_trace(10, None, None);
    let divergence = run_compare(&a, &b, &CompareOptions::default())
        .divergence
        .unwrap();
    assert_eq!(divergence.step, 11);
    assert_eq!(
        divergence.difference,
        Difference::TraceEnds { which: Trace::B }
    );
    assert_eq!(divergence.position_b.offset, b.len() as u64);
}

#[test]
fn ignored_registers_are_not_reported() {
    // Two traces differing only in `time` (and in the flipped a0 bit, which is ignored).
    let a = counting_trace(20, None, None);
    let b = counting_trace(20, Some(3), None);
    let options = CompareOptions::default().with_ignored_register(Register::Integer(10));
    assert_eq!(run_compare(&a, &b, &options).divergence, None);
    // `time` differs between the traces only if they advance it differently; make them.
    let mut encoder = TandemEncoder::new(Parameters::default(), EncoderOptions::default());
    let mut state = start_state();
    encoder.start(&state).unwrap();
    let before = state.clone();
    state.pc += 4;
    state.integer[10] += 1;
    state.csrs[1].1 = 12_345;
    encoder
        .retire_states(&before, InstructionBits::bits32(0x0015_0513), &state)
        .unwrap();
    let c = encoder.take_output();
    let d = counting_trace(1, None, None);
    assert_eq!(
        run_compare(&c, &d, &CompareOptions::default()).divergence,
        None
    );
    let strict = CompareOptions::default().without_ignored_registers();
    assert!(matches!(
        run_compare(&c, &d, &strict).divergence.unwrap().difference,
        Difference::Register {
            register: Register::Csr(0xc01),
            ..
        }
    ));
}

#[test]
fn an_error_in_trace_b_is_reported_as_such() {
    let a = counting_trace(5, None, None);
    let mut b = counting_trace(5, None, None);
    b.push(0xee);
    let error = compare(
        StepDecoder::new(&a, Parameters::default()),
        StepDecoder::new(&b, Parameters::default()),
        &CompareOptions::default(),
    )
    .unwrap_err();
    assert_eq!(error.trace, Trace::B);
    assert_eq!(error.offset(), a.len() as u64);
}

#[test]
fn encoder_round_trip() {
    let parameters = Parameters::default();
    let mut encoder = TandemEncoder::new(parameters, EncoderOptions::default());
    let state = start_state();
    encoder.start(&state).unwrap();
    // beq a0,a0,+16 (taken), then jal ra,+8, then a store, then an interrupt.
    encoder
        .retire(&Retirement {
            pc: 0x8000_0000,
            bits: InstructionBits::bits32(0x00a5_0863),
            next_pc: 0x8000_0010,
            writes: &[],
            memory: None,
            privilege: None,
        })
        .unwrap();
    encoder
        .retire(&Retirement {
            pc: 0x8000_0010,
            bits: InstructionBits::bits32(0x0080_00ef),
            next_pc: 0x8000_0018,
            writes: &[(Register::Integer(1), 0x8000_0014)],
            memory: None,
            privilege: None,
        })
        .unwrap();
    // c.sdsp ra,40(sp)
    encoder
        .retire(&Retirement {
            pc: 0x8000_0018,
            bits: InstructionBits::bits16(0xf406),
            next_pc: 0x8000_001a,
            writes: &[],
            memory: Some(tandem_flow::MemoryRecord {
                operation: MemoryOperation::Store,
                effective_address: 0x8000_f028,
                size: AccessSize::Bits64,
                store_data: Some(0x8000_0014),
                load_data: None,
                result: MemoryResult::Success,
            }),
            privilege: None,
        })
        .unwrap();
    encoder
        .interrupt(&Interrupt {
            next_pc: 0x8000_0100,
            writes: &[
                (Register::Csr(0x341), 0x8000_001a),
                (Register::Csr(0x342), 0x8000_0000_0000_0007),
            ],
            privilege: Some(3),
        })
        .unwrap();
    let bytes = encoder.take_output();
    let mut steps = StepDecoder::new(&bytes, parameters);
    let init = steps.next_step().unwrap().unwrap();
    assert_eq!(
        init.kind,
        StepKind::StateInitialization {
            next_pc: Some(0x8000_0000)
        }
    );
    assert_eq!(
        steps.shadow().register(Register::Integer(2)),
        Some(0x8000_f000)
    );
    assert_eq!(steps.shadow().register(Register::Float(31)), Some(0));
    assert_eq!(steps.shadow().register(Register::Csr(0x300)), Some(0x1800));
    let kinds: Vec<StepKind> = std::iter::from_fn(|| steps.next_step().unwrap())
        .map(|step| step.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            StepKind::Instruction {
                pc: 0x8000_0000,
                bits: InstructionBits::bits32(0x00a5_0863),
                next_pc: 0x8000_0010
            },
            StepKind::Instruction {
                pc: 0x8000_0010,
                bits: InstructionBits::bits32(0x0080_00ef),
                next_pc: 0x8000_0018
            },
            StepKind::Instruction {
                pc: 0x8000_0018,
                bits: InstructionBits::bits16(0xf406),
                next_pc: 0x8000_001a
            },
            StepKind::Interrupt {
                pc_before: 0x8000_001a,
                next_pc: 0x8000_0100
            },
        ]
    );
    let kinds = elements(
        &bytes,
        ElementOptions::default().with_state(StateElements::Report),
    );
    let expected_prefix = [ElementKind::TraceOn {
        address: 0x8000_0000,
        reason: TraceOnReason::Start,
    }];
    assert_eq!(kinds[..1], expected_prefix);
    assert!(kinds.contains(&ElementKind::InstructionRange {
        start: 0x8000_0000,
        last: 0x8000_0000,
        instructions: 1,
        end: RangeEnd::BranchTaken,
        next: Some(0x8000_0010)
    }));
    assert!(kinds.contains(&ElementKind::InstructionRange {
        start: 0x8000_0010,
        last: 0x8000_0010,
        instructions: 1,
        end: RangeEnd::Call,
        next: Some(0x8000_0018)
    }));
    assert!(kinds.contains(&ElementKind::MemoryAccess {
        operation: MemoryOperation::Store,
        address: Some(0x8000_f028),
        address_kind: AddressKind::Effective,
        size: Some(8),
        data: Some(0x8000_0014)
    }));
    assert!(kinds.contains(&ElementKind::Trap {
        from: Some(0x8000_001a),
        handler: 0x8000_0100,
        kind: TrapKind::Interrupt
    }));
}

#[test]
fn retire_states_reports_unchanged_destinations_and_memory() {
    let parameters = Parameters::default();
    let mut encoder = TandemEncoder::new(parameters, EncoderOptions::default());
    let mut before = start_state();
    before.integer[5] = 0x8000_3000; // t0
    before.integer[4] = 0x55aa_55aa; // tp already holds what the load returns
    encoder.start(&before).unwrap();
    let after = ArchitecturalState {
        pc: before.pc + 4,
        ..before.clone()
    };
    // lw tp, 8(t0): tp unchanged, still written.
    encoder
        .retire_states(&before, InstructionBits::bits32(0x0082_a203), &after)
        .unwrap();
    let bytes = encoder.take_output();
    let mut steps = StepDecoder::new(&bytes, parameters);
    steps.next_step().unwrap();
    let load = steps.next_step().unwrap().unwrap();
    assert_eq!(
        load.changes,
        [
            StateChange::Register {
                register: Register::Integer(4),
                value: 0x55aa_55aa
            },
            StateChange::EffectiveAddress(0x8000_3008),
            StateChange::Memory(tandem_flow::MemoryAccess {
                address: 0x8000_3008,
                operation: MemoryOperation::Load,
                size: AccessSize::Bits32,
                request_data: None,
                response: Some(tandem_flow::MemoryResponse {
                    size: AccessSize::Bits32,
                    result: MemoryResult::Success,
                    data: Some(0x55aa_55aa)
                })
            }),
        ]
    );
}

#[test]
fn partial_trace_options() {
    let parameters = Parameters::default();
    let options = EncoderOptions::default()
        .with_csrs(Tracing::Omitted)
        .with_float_registers(Tracing::Omitted)
        .with_memory(Tracing::Omitted)
        .with_pc_updates(PcUpdates::AlwaysValue);
    let mut encoder = TandemEncoder::new(parameters, options);
    let state = start_state();
    encoder.start(&state).unwrap();
    let mut after = state.clone();
    after.pc += 4;
    after.integer[11] = 7;
    // sd a1, 0(a0) = 00b53023 with a CSR change that is not traced.
    after.csrs[0].1 = 0;
    encoder
        .retire_states(&state, InstructionBits::bits32(0x00b5_3023), &after)
        .unwrap();
    let bytes = encoder.take_output();
    let mut steps = StepDecoder::new(&bytes, parameters);
    steps.next_step().unwrap();
    assert_eq!(steps.shadow().register(Register::Csr(0x300)), None);
    assert_eq!(steps.shadow().register(Register::Float(0)), None);
    let store = steps.next_step().unwrap().unwrap();
    assert_eq!(
        store.changes,
        [StateChange::Register {
            register: Register::Integer(11),
            value: 7
        }]
    );
    // The pc was written as a value, which this decoder reads as the same step.
    assert_eq!(
        store.kind,
        StepKind::Instruction {
            pc: 0x8000_0000,
            bits: InstructionBits::bits32(0x00b5_3023),
            next_pc: 0x8000_0004
        }
    );
}

#[test]
fn arbitrary_bytes_never_panic() {
    use proptest::prelude::*;
    proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..300))| {
        let mut steps = StepDecoder::new(&bytes, Parameters::default());
        while let Ok(Some(_)) = steps.next_step() {}
        let mut source = TandemElements::new(
            StepDecoder::new(&bytes, Parameters::default()),
            ElementOptions::default().with_state(StateElements::Report),
        );
        while let Ok(Some(_)) = source.next_element() {}
        let comparison = compare(
            StepDecoder::new(&bytes, Parameters::default()),
            StepDecoder::new(&bytes, Parameters::default()),
            &CompareOptions::default(),
        );
        if let Ok(comparison) = comparison {
            prop_assert_eq!(comparison.divergence, None);
        }
    });
}
