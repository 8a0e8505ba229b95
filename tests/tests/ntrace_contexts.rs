//! Context IDs in the trace: an operating system that writes each process's ID to
//! `scontext` as it switches to it makes the encoder report it (an Ownership message,
//! trTeContext), in the middle of the stream, where the next messages' addresses are
//! still compressed against the previous process's. `FlowDecoder::with_contexts` walks
//! each hart in the code of the context it last reported.
//!
//! Two real programs built at the same addresses (static, non-PIE) take turns on a
//! hart. Between turns a stand-in for the kernel's context switch runs (an interrupt
//! enters it; it writes the next program's context to `scontext` and returns with
//! `sret`): hand-made code at a kernel address, in every context's code. The trace is
//! the encoder model's, fed as the hart's ingress port feeds it; the exact retired-PC
//! sequence must decode back. Decoded against one program's code, it cannot.

mod common;

use code_image::CodeImage;
use common::kernel_switch::{add_switch_code, KERNEL, SCONTEXT_WRITE, SWITCH_PCS};
use common::{assert_same_pcs, instruction_at, load, retired_pcs, Code, Random};
use ntrace_flow::{
    BranchMode, Context, ContextCode, DecoderOptions, EncoderOptions, FlowDecoder, FlowError,
    ProgramCode, TraceEncoder, Trap,
};
use ntrace_message::{AddressWidth, MessageOptions};
use trace_elements::{Context as ElementContext, ElementKind};

/// The programs, at the same addresses, and their contexts (what the kernel writes).
const PROGRAMS: [(&str, u64); 2] = [("loops", 0x101), ("recursion", 0x202)];

/// The kernel's code alone.
fn kernel_code() -> Code {
    let mut image = CodeImage::new();
    add_switch_code(&mut image);
    let files = image.file_decode_infos();
    Code { image, files }
}

/// A program's code with the kernel's.
fn program_code(name: &str) -> Code {
    let mut code = load(name);
    add_switch_code(&mut code.image);
    code.files = code.image.file_decode_infos();
    code
}

/// How an encoder reports branches: its mode, and its HIST register's width.
#[derive(Clone, Copy, Debug)]
struct Branches {
    mode: BranchMode,
    hist_bits: u8,
}

/// HTM, BTM (a DirectBranch message at each taken branch, the one in the switch too),
/// and HTM with a HIST of one branch (a ResourceFull message at each branch): the
/// messages around the Ownership message differ with each.
const BRANCHES: [Branches; 3] = [
    Branches {
        mode: BranchMode::Htm,
        hist_bits: 32,
    },
    Branches {
        mode: BranchMode::Btm,
        hist_bits: 32,
    },
    Branches {
        mode: BranchMode::Htm,
        hist_bits: 2,
    },
];

fn encoder_options(branches: Branches, src: u16, src_bits: u8) -> EncoderOptions {
    let mut options = EncoderOptions::default();
    options.mode = branches.mode;
    options.hist_bits = branches.hist_bits;
    options.src = src;
    // The first program's context, reported after the first synchronisation.
    options.context = Some(PROGRAMS[0].1);
    options.message = MessageOptions::default()
        .with_src_bits(src_bits)
        .with_address_width(AddressWidth::Bits64);
    options
}

fn decoder_options(src_bits: u8) -> DecoderOptions {
    DecoderOptions::default().with_message(
        MessageOptions::default()
            .with_src_bits(src_bits)
            .with_address_width(AddressWidth::Bits64),
    )
}

/// One hart running the programs in turns, starting with `first`.
struct Hart {
    encoder: TraceEncoder<'static>,
    /// Each program's next instruction, by index into its retired PCs.
    next: [usize; 2],
    running: usize,
    /// Every instruction it retired, in order.
    retired: Vec<u64>,
    switches: usize,
}

impl Hart {
    fn new(branches: Branches, src: u16, src_bits: u8, first: usize) -> Self {
        let mut encoder = TraceEncoder::for_ingress_port(encoder_options(branches, src, src_bits))
            .expect("encoder options");
        encoder.set_context(Context {
            privilege: 0,
            virtualized: false,
            context: PROGRAMS[first].1,
        });
        encoder.start();
        Self {
            encoder,
            next: [0, 0],
            running: first,
            retired: Vec::new(),
            switches: 0,
        }
    }

    fn done(&self, pcs: &[Vec<u64>; 2]) -> bool {
        self.next[0] == pcs[0].len() && self.next[1] == pcs[1].len()
    }

    fn retire(&mut self, code: &Code, pc: u64) {
        self.encoder
            .retire_instruction(pc, instruction_at(code, pc))
            .unwrap_or_else(|error| panic!("retiring {pc:#x}: {error}"));
        self.retired.push(pc);
    }

    fn set_context(&mut self, privilege: u8, program: usize) {
        self.encoder.set_context(Context {
            privilege,
            virtualized: false,
            context: PROGRAMS[program].1,
        });
    }

    /// The running program's next turn, then the switch to the other one (while it has
    /// instructions left).
    fn turn(&mut self, codes: &[Code; 2], pcs: &[Vec<u64>; 2], random: &mut Random) {
        let program = self.running;
        let start = self.next[program];
        let length = 200 + random.below(3000) as usize;
        let end = (start + length).min(pcs[program].len());
        for &pc in &pcs[program][start..end] {
            self.retire(&codes[program], pc);
        }
        self.next[program] = end;
        let other = 1 - program;
        let next = if self.next[other] < pcs[other].len() {
            other
        } else if end < pcs[program].len() {
            program
        } else {
            return;
        };
        // A timer interrupt before the running program's next instruction: the kernel
        // switches to the other program (writes its context) and returns into it.
        let resume = pcs[program].get(end).copied().unwrap_or(pcs[program][0]);
        self.encoder.trap(Trap::Interrupt { resume }).expect("trap");
        self.set_context(1, program);
        for pc in SWITCH_PCS {
            self.retire(&codes[program], pc);
            if pc == SCONTEXT_WRITE {
                self.set_context(1, next);
            }
        }
        self.set_context(0, next);
        self.running = next;
        if next != program {
            self.switches += 1;
        }
    }
}

/// The two programs' retired PCs: the same program twice would show nothing.
fn program_pcs() -> [Vec<u64>; 2] {
    [retired_pcs(PROGRAMS[0].0), retired_pcs(PROGRAMS[1].0)]
}

fn program_codes() -> [Code; 2] {
    [program_code(PROGRAMS[0].0), program_code(PROGRAMS[1].0)]
}

fn context_code<'a>(kernel: &'a Code, codes: &'a [Code; 2]) -> ContextCode<'a> {
    let program = |code: &'a Code| ProgramCode {
        image: &code.image,
        files: code.files.clone(),
    };
    ContextCode {
        shared: program(kernel),
        contexts: vec![
            (PROGRAMS[0].1, program(&codes[0])),
            (PROGRAMS[1].1, program(&codes[1])),
        ],
    }
}

/// What each hart (by SRC) ran, as decoded.
struct Decoded {
    /// Its retired PCs in order.
    pcs: Vec<Vec<u64>>,
    /// The contexts its Ownership messages reported.
    contexts: Vec<Vec<u64>>,
}

/// Every hart's retired PCs and contexts, or the first error.
fn decode(decoder: &mut FlowDecoder<'_>) -> Result<Decoded, FlowError> {
    let mut pcs: Vec<Vec<u64>> = vec![Vec::new(); 2];
    let mut contexts: Vec<Vec<u64>> = vec![Vec::new(); 2];
    while let Some(element) = decoder.next_element()? {
        let hart = usize::from(element.hart);
        match element.kind {
            ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } => {
                assert!(decoder.for_each_instruction(start, instructions, |pc| pcs[hart].push(pc)));
            }
            ElementKind::ContextChange {
                context: Some(ElementContext::Process(context)),
                ..
            } => contexts[hart].push(context),
            _ => {}
        }
    }
    Ok(Decoded { pcs, contexts })
}

/// Context changes reported after the first: each switch's.
fn switches_reported(contexts: &[u64]) -> usize {
    contexts
        .windows(2)
        .filter(|pair| pair[0] != pair[1])
        .count()
}

#[test]
fn a_hart_switching_programs_is_decoded_in_the_code_of_each_context() {
    for branches in BRANCHES {
        switching_programs_in(branches);
    }
}

fn switching_programs_in(branches: Branches) {
    let pcs = program_pcs();
    let codes = program_codes();
    let kernel = kernel_code();
    let mut random = Random(0x5eed_c0de);
    let mut hart = Hart::new(branches, 0, 0, 0);
    while !hart.done(&pcs) {
        hart.turn(&codes, &pcs, &mut random);
    }
    let (trace, _) = hart.encoder.finish().expect("finish");
    assert!(hart.switches > 100, "{} switches", hart.switches);

    let mut decoder =
        FlowDecoder::with_contexts(&trace, context_code(&kernel, &codes), decoder_options(0));
    assert!(decoder.has_contexts());
    let decoded = decode(&mut decoder).expect("decode with contexts");
    assert_same_pcs(
        &format!("one hart, two programs, {branches:?}"),
        &hart.retired,
        &decoded.pcs[0],
    );
    assert_eq!(switches_reported(&decoded.contexts[0]), hart.switches);
    println!(
        "{branches:?}: {} instructions, {} switches, {} trace bytes",
        hart.retired.len(),
        hart.switches,
        trace.len()
    );

    // One program's code for the whole trace: the other's turns are walked in the wrong
    // code, which the trace contradicts.
    let mut one_code = FlowDecoder::new(
        &trace,
        &codes[0].image,
        codes[0].files.clone(),
        decoder_options(0),
    );
    match decode(&mut one_code) {
        Err(_) => {}
        Ok(decoded) => assert_ne!(
            decoded.pcs[0], hart.retired,
            "one program's code decoded the other's turns"
        ),
    }
}

#[test]
fn harts_of_one_stream_each_run_the_code_of_their_own_context() {
    let pcs = program_pcs();
    let codes = program_codes();
    let kernel = kernel_code();
    let mut random = Random(0xdec0_de42);
    // Two harts, each starting with a different program, their messages interleaved in
    // one stream (SRC field of 1 bit) as a funnel interleaves them.
    let mut harts = [
        Hart::new(BRANCHES[1], 0, 1, 0),
        Hart::new(BRANCHES[2], 1, 1, 1),
    ];
    let mut trace = Vec::new();
    while !harts.iter().all(|hart| hart.done(&pcs)) {
        let which = random.below(2) as usize;
        let hart = &mut harts[which];
        if hart.done(&pcs) {
            continue;
        }
        hart.turn(&codes, &pcs, &mut random);
        trace.extend(hart.encoder.take_output());
    }
    for hart in harts.iter_mut() {
        let encoder = std::mem::replace(
            &mut hart.encoder,
            TraceEncoder::for_ingress_port(EncoderOptions::default()).expect("encoder"),
        );
        let (rest, _) = encoder.finish().expect("finish");
        trace.extend(rest);
    }

    let mut decoder =
        FlowDecoder::with_contexts(&trace, context_code(&kernel, &codes), decoder_options(1));
    let decoded = decode(&mut decoder).expect("decode with contexts");
    for (index, hart) in harts.iter().enumerate() {
        assert_same_pcs(&format!("hart {index}"), &hart.retired, &decoded.pcs[index]);
        assert_eq!(switches_reported(&decoded.contexts[index]), hart.switches);
    }
    // At the same time the harts run different programs at the same addresses.
    assert_eq!(decoded.contexts[0].first(), Some(&PROGRAMS[0].1));
    assert_eq!(decoded.contexts[1].first(), Some(&PROGRAMS[1].1));
}

#[test]
fn a_context_without_code_of_its_own_runs_the_shared_code() {
    let pcs = program_pcs();
    let codes = program_codes();
    let kernel = kernel_code();
    let mut random = Random(0xfeed);
    let mut hart = Hart::new(BRANCHES[0], 0, 0, 0);
    for _ in 0..40 {
        hart.turn(&codes, &pcs, &mut random);
    }
    let (trace, _) = hart.encoder.finish().expect("finish");
    // The second program's context has no code: its turns are in the kernel's alone,
    // which has none of its instructions. Everything up to the first switch into it
    // decodes (the kernel's code after the scontext write too); then the decoder says
    // there is no code, rather than walk the first program's.
    let mut only_first = context_code(&kernel, &codes);
    only_first.contexts.truncate(1);
    let mut decoder = FlowDecoder::with_contexts(&trace, only_first, decoder_options(0));
    let mut decoded = Vec::new();
    let error = loop {
        match decoder.next_element() {
            Ok(Some(element)) => {
                if let ElementKind::InstructionRange {
                    start,
                    instructions,
                    ..
                } = element.kind
                {
                    assert!(
                        decoder.for_each_instruction(start, instructions, |pc| decoded.push(pc))
                    );
                }
            }
            Ok(None) => panic!("the second program's turns decoded without its code"),
            Err(error) => break error,
        }
    };
    let first_switch = hart
        .retired
        .iter()
        .position(|&pc| pc == KERNEL)
        .expect("a switch");
    assert_same_pcs(
        "up to the second program",
        &hart.retired[..first_switch + SWITCH_PCS.len()],
        &decoded,
    );
    let second_start = hart.retired[first_switch + SWITCH_PCS.len()];
    assert!(
        error.to_string().contains(&format!("{second_start:#x}")),
        "the error names the second program's first address {second_start:#x}: {error}"
    );
}
