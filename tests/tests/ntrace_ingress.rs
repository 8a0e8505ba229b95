//! The encoder fed as a hart's ingress port feeds it in the emulated trace hardware
//! (`tools/qemu-ntrace`): runs of decoded instructions cut where QEMU cuts translation
//! blocks (after every control transfer, and elsewhere), traps reported with where
//! execution would have resumed, tracing stopped and started, output the sink lost.
//! Real programs' exact retired-PC sequences (`qemu-riscv64`) must decode back exactly:
//! all of it, or exactly the stretches that were traced.

mod common;

use common::{assert_same_pcs, decode_elements, instruction_at, load, retired_pcs, Code, Random};
use ntrace_flow::{
    BranchMode, Context, DecoderOptions, EncoderOptions, InstructionRun, Recovery, TraceEncoder,
    Trap,
};
use ntrace_message::{AddressWidth, MessageOptions};
use riscv_insn::ControlFlow;
use trace_elements::{ElementKind, GapReason};

/// A translation block as QEMU makes one: consecutive PCs, ending after a control
/// transfer (or earlier, as a page end or the block size limit cuts one).
struct Block {
    /// Index of its first instruction in the retired-PC sequence.
    first: usize,
    run: InstructionRun,
}

fn blocks(code: &Code, pcs: &[u64], random: &mut Random) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut first = 0;
    while first < pcs.len() {
        let limit = 1 + random.below(40) as usize;
        let mut instructions = Vec::new();
        let mut index = first;
        while index < pcs.len() {
            let instruction = instruction_at(code, pcs[index]);
            let offset = u32::try_from(pcs[index] - pcs[first]).expect("block offset");
            instructions.push((offset, instruction));
            index += 1;
            let next_is_sequential = pcs
                .get(index)
                .is_some_and(|&next| next == pcs[index - 1] + u64::from(instruction.length));
            if instruction.control_flow != ControlFlow::Sequential
                || instructions.len() >= limit
                || !next_is_sequential
            {
                break;
            }
        }
        blocks.push(Block {
            first,
            run: InstructionRun::new(instructions),
        });
        first = index;
    }
    blocks
}

#[derive(Clone, Copy, Debug)]
struct Plan {
    mode: BranchMode,
    return_stack_depth: usize,
    timestamps: bool,
    context: bool,
    /// Per cent of block boundaries with an interrupt, of blocks with an exception.
    traps: u64,
    /// Per cent of block boundaries where tracing stops (for 1-5 blocks).
    stops: u64,
    /// Per mille of blocks after which the output is lost.
    losses: u64,
    periodic_sync_units: u64,
}

struct Encoded {
    trace: Vec<u8>,
    /// The retired PCs of what was traced, cut where output was lost.
    stretches: Vec<Vec<u64>>,
    traps: usize,
    losses: usize,
}

fn encode(code: &Code, pcs: &[u64], plan: Plan, seed: u64) -> Encoded {
    let mut random = Random(seed);
    let mut options = EncoderOptions::default();
    options.mode = plan.mode;
    options.return_stack_depth = plan.return_stack_depth;
    options.periodic_sync_units = plan.periodic_sync_units;
    options.context = plan.context.then_some(0);
    options.message = MessageOptions::default()
        .with_timestamps(plan.timestamps)
        .with_address_width(AddressWidth::Bits64);
    let mut encoder = TraceEncoder::for_ingress_port(options).expect("encoder options");
    encoder.start();
    let mut trace = Vec::new();
    let mut stretches: Vec<Vec<u64>> = vec![Vec::new()];
    let mut traps = 0;
    let mut losses = 0;
    let mut unsent_loss = false;
    let mut stopped_for = 0;
    let mut time = 1000u64;
    let blocks = blocks(code, pcs, &mut random);
    // A stand-in for a trap handler: real code of the program, so that the decoder can
    // follow it, ending with an indirect jump that goes back to where the trap was taken.
    let handler = blocks
        .iter()
        .find(|block| {
            let (_, last) = block.run.instructions()[block.run.len() - 1];
            block.run.len() > 2
                && matches!(last.control_flow, ControlFlow::JumpRegister { rd: 0, .. })
        })
        .expect("a block ending with an indirect jump");
    let handler_start = pcs[handler.first];
    let handler_pcs = &pcs[handler.first..handler.first + handler.run.len()];
    for (number, block) in blocks.iter().enumerate() {
        let start = pcs[block.first];
        let count = block.run.len();
        time += 1 + random.below(50);
        if plan.timestamps {
            encoder.set_time(time);
        }
        if stopped_for > 0 {
            stopped_for -= 1;
            if stopped_for == 0 {
                encoder.start();
            } else {
                continue;
            }
        } else if number > 0 && random.chance(plan.stops) {
            encoder.stop(Some(start)).expect("stop");
            stopped_for = 1 + random.below(5);
            continue;
        }
        // An interrupt between the previous block and this one: the handler runs, and
        // execution resumes with this block.
        if number > 0 && random.chance(plan.traps) {
            encoder
                .trap(Trap::Interrupt { resume: start })
                .expect("trap");
            encoder
                .retire_block(handler_start, &handler.run, handler.run.len())
                .expect("retire handler");
            stretches
                .last_mut()
                .expect("a stretch")
                .extend_from_slice(handler_pcs);
            traps += 1;
            if plan.context {
                encoder.set_context(Context {
                    privilege: (number % 2) as u8,
                    virtualized: false,
                    context: 0,
                });
            }
        }
        // An exception at one of the block's instructions: those before it retire, the
        // handler starts at the instruction that raised it.
        let split = (count >= 2 && random.chance(plan.traps))
            .then(|| 1 + random.below(count as u64 - 1) as usize);
        match split {
            Some(at) => {
                encoder.retire_block(start, &block.run, at).expect("retire");
                let resume = start + u64::from(block.run.instructions()[at].0);
                encoder
                    .trap(Trap::Exception {
                        resume: Some(resume),
                    })
                    .expect("trap");
                encoder
                    .retire_block(handler_start, &handler.run, handler.run.len())
                    .expect("retire handler");
                traps += 1;
                let rest = InstructionRun::new(
                    block.run.instructions()[at..]
                        .iter()
                        .map(|&(offset, instruction)| {
                            (offset - block.run.instructions()[at].0, instruction)
                        })
                        .collect(),
                );
                encoder
                    .retire_block(resume, &rest, rest.len())
                    .expect("retire");
                let stretch = stretches.last_mut().expect("a stretch");
                stretch.extend_from_slice(&pcs[block.first..block.first + at]);
                stretch.extend_from_slice(handler_pcs);
                stretch.extend_from_slice(&pcs[block.first + at..block.first + count]);
            }
            None => {
                encoder
                    .retire_block(start, &block.run, count)
                    .expect("retire");
                stretches
                    .last_mut()
                    .expect("a stretch")
                    .extend_from_slice(&pcs[block.first..block.first + count]);
            }
        }
        // An ecall ends its block and traps by itself.
        let (_, last) = block.run.instructions()[count - 1];
        if last.control_flow == ControlFlow::EnvironmentTrap {
            encoder
                .trap(Trap::Exception { resume: None })
                .expect("trap");
        }
        if random.below(1000) < plan.losses && number + 1 < blocks.len() {
            // The sink dropped what the encoder sent since the last transfer: everything
            // from there to the next synchronisation is lost. A second loss before
            // anything was sent loses the first one's restart too: one gap for both.
            encoder.messages_lost();
            if unsent_loss {
                stretches.last_mut().expect("a stretch").clear();
            } else {
                stretches.push(Vec::new());
            }
            unsent_loss = true;
        } else if number % 7 == 0 {
            trace.extend_from_slice(encoder.output());
            encoder.clear_output();
            losses += usize::from(std::mem::take(&mut unsent_loss));
        }
    }
    losses += usize::from(unsent_loss);
    let (rest, _) = encoder.finish().expect("finish");
    trace.extend(rest);
    Encoded {
        trace,
        stretches,
        traps,
        losses,
    }
}

fn decoder_options(plan: Plan) -> DecoderOptions {
    DecoderOptions::default()
        .with_message(
            MessageOptions::default()
                .with_timestamps(plan.timestamps)
                .with_address_width(AddressWidth::Bits64),
        )
        .with_return_stack_depth(plan.return_stack_depth)
        .with_recovery(Recovery::Resync)
}

/// Decodes and checks: without losses, exactly what was traced; with them, one gap per
/// loss, each stretch before a loss a prefix of what ran and the last one whole.
fn check(name: &str, plan: Plan, seed: u64) {
    let pcs = retired_pcs(name);
    let code = load(name);
    let encoded = encode(&code, &pcs, plan, seed);
    let context = format!("{name} {plan:?} seed {seed}");
    let elements = decode_elements(&encoded.trace, &code, decoder_options(plan))
        .unwrap_or_else(|error| panic!("{context}: {error}"));
    let mut decoded: Vec<Vec<u64>> = vec![Vec::new()];
    let mut overflows = 0;
    let mut trap_elements = 0;
    for (element, element_pcs) in &elements {
        match element.kind {
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow { .. },
            } => {
                overflows += 1;
                decoded.push(Vec::new());
            }
            ElementKind::Gap { reason } => panic!("{context}: unexpected gap {reason:?}"),
            ElementKind::Trap { .. } => trap_elements += 1,
            _ => {}
        }
        decoded
            .last_mut()
            .expect("a stretch")
            .extend_from_slice(element_pcs);
    }
    assert_eq!(overflows, encoded.losses, "{context}: one gap per loss");
    // Lost output loses traps too.
    assert!(
        encoded.losses > 0 || trap_elements >= encoded.traps,
        "{context}: {trap_elements} trap elements for {} traps",
        encoded.traps
    );
    // A loss loses what was sent after the last transfer to the sink, so each stretch
    // before a loss decodes to a prefix of what ran; the trace restarts with the next
    // block, from which the next stretch decodes whole up to its own loss.
    assert_eq!(
        decoded.len(),
        encoded.stretches.len(),
        "{context}: stretches"
    );
    let last = decoded.len() - 1;
    for (number, (got, expected)) in decoded.iter().zip(&encoded.stretches).enumerate() {
        let context = format!("{context}, stretch {number}");
        if number < last {
            assert!(
                got.len() <= expected.len(),
                "{context}: longer than what ran"
            );
            assert_same_pcs(&context, &expected[..got.len()], got);
        } else {
            assert_same_pcs(&context, expected, got);
        }
    }
}

const PLAIN: Plan = Plan {
    mode: BranchMode::Htm,
    return_stack_depth: 32,
    timestamps: false,
    context: false,
    traps: 0,
    stops: 0,
    losses: 0,
    periodic_sync_units: 0,
};

fn plans() -> Vec<Plan> {
    let mut plans = Vec::new();
    for mode in [BranchMode::Htm, BranchMode::Btm] {
        for return_stack_depth in [0, 32] {
            plans.push(Plan {
                mode,
                return_stack_depth,
                ..PLAIN
            });
            plans.push(Plan {
                mode,
                return_stack_depth,
                traps: 4,
                context: true,
                ..PLAIN
            });
            plans.push(Plan {
                mode,
                return_stack_depth,
                stops: 2,
                timestamps: true,
                periodic_sync_units: 4096,
                ..PLAIN
            });
        }
    }
    plans
}

#[test]
fn blocks_traps_and_stops_decode_to_the_real_execution() {
    for name in ["fnptr", "recursion", "switch", "syscalls", "qsort"] {
        for (index, plan) in plans().into_iter().enumerate() {
            check(name, plan, 0x9e37_79b9_7f4a_7c15 ^ index as u64);
        }
    }
}

#[test]
fn lost_output_is_a_gap_and_the_trace_restarts_at_the_next_block() {
    for name in ["fnptr", "qsort"] {
        for mode in [BranchMode::Htm, BranchMode::Btm] {
            let plan = Plan {
                mode,
                traps: 2,
                losses: 5,
                ..PLAIN
            };
            check(name, plan, 7);
        }
    }
}
