//! Step and element throughput over a synthetic trace: a loop of ten instructions (ALU
//! writes, a load and a store with their memory records, a compressed instruction, a
//! conditional branch taken seven times in eight, a call and return) retired 200,000
//! times by `TandemEncoder` from a state-initialization group. Measured: the records alone
//! (`RecordDecoder`, for comparison), steps (`next_step`, and `next_step_into` reusing one
//! step), and elements without and with register and memory elements. Throughput is in
//! retired instructions.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use tandem_flow::{
    ArchitecturalState, ElementOptions, EncoderOptions, MemoryRecord, Retirement, StateElements,
    StepDecoder, TandemElements, TandemEncoder,
};
use tandem_message::{
    AccessSize, InstructionBits, MemoryOperation, MemoryResult, Parameters, RecordDecoder, Register,
};
use trace_elements::ElementSource;

const INSTRUCTIONS: u64 = 200_000;
const BASE: u64 = 0x8000_0000;

/// `bne rs1, rs2, offset`.
fn bne(rs1: u32, rs2: u32, offset: i32) -> u32 {
    let imm = offset as u32;
    ((imm >> 12) & 1) << 31
        | ((imm >> 5) & 0x3f) << 25
        | rs2 << 20
        | rs1 << 15
        | 1 << 12
        | ((imm >> 1) & 0xf) << 8
        | ((imm >> 11) & 1) << 7
        | 0x63
}

/// `jal rd, offset`.
fn jal(rd: u32, offset: i32) -> u32 {
    let imm = offset as u32;
    ((imm >> 20) & 1) << 31
        | ((imm >> 1) & 0x3ff) << 21
        | ((imm >> 11) & 1) << 20
        | ((imm >> 12) & 0xff) << 12
        | rd << 7
        | 0x6f
}

/// What one instruction of the loop is.
#[derive(Clone, Copy)]
enum Shape {
    /// Writes the register.
    Writes(u8),
    Load,
    Store,
    Branch,
    Call,
    Return,
    Jump,
}

/// The loop: address, encoding, what it does.
fn program() -> Vec<(u64, InstructionBits, Shape)> {
    vec![
        // add x3,x5,x6
        (0x00, InstructionBits::bits32(0x0062_81b3), Shape::Writes(3)),
        // addi x9,x9,1
        (0x04, InstructionBits::bits32(0x0014_8493), Shape::Writes(9)),
        // ld x5,0(x2)
        (0x08, InstructionBits::bits32(0x0001_3283), Shape::Load),
        // sd x5,8(x2)
        (0x0c, InstructionBits::bits32(0x0051_3423), Shape::Store),
        // c.addi a0,1
        (0x10, InstructionBits::bits16(0x0505), Shape::Writes(10)),
        // mul x8,x3,x9
        (0x12, InstructionBits::bits32(0x0291_8433), Shape::Writes(8)),
        // bne x9,x3,0x00
        (
            0x16,
            InstructionBits::bits32(bne(9, 3, -0x16)),
            Shape::Branch,
        ),
        // jal ra,0x24
        (0x1a, InstructionBits::bits32(jal(1, 0x0a)), Shape::Call),
        // j 0x00
        (0x1e, InstructionBits::bits32(jal(0, -0x1e)), Shape::Jump),
        // 0x22: c.nop (never reached)
        // ret
        (0x24, InstructionBits::bits32(0x0000_8067), Shape::Return),
    ]
}

/// A tiny deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn synthetic_trace() -> Vec<u8> {
    let program = program();
    let at = |offset: u64| {
        program
            .iter()
            .position(|&(address, ..)| address == offset)
            .expect("an instruction of the loop")
    };
    let mut encoder = TandemEncoder::new(Parameters::default(), EncoderOptions::default());
    let mut integer = [0u64; 32];
    integer[2] = 0x8010_0000;
    encoder
        .start(&ArchitecturalState {
            pc: BASE,
            integer,
            float: None,
            csrs: vec![(0x300, 0x1800)],
            privilege: 3,
        })
        .expect("start");
    let mut rng = Rng(0x5eed);
    let mut index = 0;
    let mut iteration = 0u64;
    for _ in 0..INSTRUCTIONS {
        let (offset, bits, shape) = program[index];
        let pc = BASE + offset;
        let fall_through = offset + u64::from(bits.length.bytes());
        let value = rng.next();
        let mut writes = Vec::new();
        let mut memory = None;
        let next = match shape {
            Shape::Writes(register) => {
                writes.push((Register::Integer(register), value));
                fall_through
            }
            Shape::Load => {
                writes.push((Register::Integer(5), value));
                memory = Some(MemoryRecord {
                    operation: MemoryOperation::Load,
                    effective_address: 0x8010_0000,
                    size: AccessSize::Bits64,
                    store_data: None,
                    load_data: Some(value),
                    result: MemoryResult::Success,
                });
                fall_through
            }
            Shape::Store => {
                memory = Some(MemoryRecord {
                    operation: MemoryOperation::Store,
                    effective_address: 0x8010_0008,
                    size: AccessSize::Bits64,
                    store_data: Some(value),
                    load_data: None,
                    result: MemoryResult::Success,
                });
                fall_through
            }
            Shape::Branch => {
                iteration += 1;
                if iteration % 8 == 0 {
                    fall_through
                } else {
                    0x00
                }
            }
            Shape::Call => {
                writes.push((Register::Integer(1), BASE + fall_through));
                0x24
            }
            Shape::Return => 0x1e,
            Shape::Jump => 0x00,
        };
        encoder
            .retire(&Retirement {
                pc,
                bits,
                next_pc: BASE + next,
                writes: &writes,
                memory,
                privilege: None,
            })
            .expect("retire");
        index = at(next);
    }
    encoder.take_output()
}

fn decode(criterion: &mut Criterion) {
    let bytes = synthetic_trace();
    let parameters = Parameters::default();
    let mut group = criterion.benchmark_group("tandem_flow");
    group.throughput(Throughput::Elements(INSTRUCTIONS));
    group.sample_size(20);
    // The records alone: what the steps add is the difference.
    group.bench_function("records", |bencher| {
        bencher.iter(|| {
            let mut records = RecordDecoder::new(black_box(&bytes), parameters);
            let mut count = 0u64;
            while let Ok(Some(record)) = records.next_record() {
                count += u64::from(record.length);
            }
            count
        });
    });
    group.bench_function("steps", |bencher| {
        bencher.iter(|| {
            let mut steps = StepDecoder::new(black_box(&bytes), parameters);
            let mut changes = 0usize;
            while let Ok(Some(step)) = steps.next_step() {
                changes += step.changes.len();
            }
            changes
        });
    });
    group.bench_function("steps reusing one", |bencher| {
        bencher.iter(|| {
            let mut steps = StepDecoder::new(black_box(&bytes), parameters);
            let mut step = steps
                .next_step()
                .expect("decodes")
                .expect("the trace has steps");
            let mut changes = step.changes.len();
            while let Ok(true) = steps.next_step_into(&mut step) {
                changes += step.changes.len();
            }
            changes
        });
    });
    for state in [StateElements::Omit, StateElements::Report] {
        group.bench_function(format!("elements {state:?}"), |bencher| {
            bencher.iter(|| {
                let mut elements = TandemElements::new(
                    StepDecoder::new(black_box(&bytes), parameters),
                    ElementOptions::default().with_state(state),
                );
                let mut count = 0u64;
                while let Ok(Some(element)) = elements.next_element() {
                    black_box(element);
                    count += 1;
                }
                count
            });
        });
    }
    group.finish();
    eprintln!(
        "tandem_flow: {INSTRUCTIONS} instructions, {} trace bytes",
        bytes.len()
    );
}

criterion_group!(benches, decode);
criterion_main!(benches);
