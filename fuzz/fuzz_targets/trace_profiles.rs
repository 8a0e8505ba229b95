//! Arbitrary bytes as an N-Trace stream of a real program (the bundled tiny fixture),
//! decoded with resynchronisation and fed to the profiles a trace makes: exact counts
//! and the call-stack reconstruction of flame graphs, weighed by instructions and by
//! time. Whatever the elements (returns that match nothing, traps, gaps, timestamps
//! going backwards), nothing panics and the weights add up: every instruction of a
//! range is weighed once, and time weights never exceed the time the trace spans.
#![no_main]

use code_image::{load_elf, CodeImage};
use libfuzzer_sys::fuzz_target;
use ntrace_flow::{DecoderOptions, FlowDecoder, Recovery};
use ntrace_message::MessageOptions;
use profiles::{CallStackOptions, CallStacks, StackCollapser, StackSymbols, StackWeight, TraceCounts};

static PROGRAM: &[u8] = include_bytes!("../../tests/fixtures/ntrace/tiny-htm/program");

/// Names every address by its 256-byte block: enough to collapse stacks.
struct Blocks;

impl StackSymbols for Blocks {
    type Location = u64;
    fn locate(&mut self, _pid: u32, address: u64) -> Option<u64> {
        Some(address >> 8)
    }
    fn located_frames(&mut self, location: &u64, frame: &mut dyn FnMut(&str)) {
        frame(&format!("{location:x}"));
    }
    fn unlocated_frames(&mut self, _: u64, _: u64, _: &mut dyn FnMut(&str)) {}
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, trace)) = data.split_first() else { return };
    let mut image = CodeImage::new();
    load_elf(&mut image, "tiny", PROGRAM, None).expect("fixture loads");
    let message = MessageOptions::default()
        .with_src_bits(flags & 3)
        .with_timestamps(flags & 4 != 0);
    let options = DecoderOptions::default()
        .with_message(message)
        .with_return_stack_depth(usize::from(flags >> 4) * 2)
        .with_recovery(Recovery::Resync);
    let mut decoder = FlowDecoder::new(trace, &image, image.file_decode_infos(), options);
    let mut counts = TraceCounts::default();
    let mut by_instructions = CallStacks::new(CallStackOptions::new(StackWeight::Instructions, vec![0x10000]));
    let mut by_time = CallStacks::new(CallStackOptions::new(StackWeight::Time, Vec::new()));
    let mut function_of = |address: u64| Some(address & !0xff);
    // Each call returns an element or the end; bound the calls, not the time.
    for _ in 0..(trace.len() * 64 + 64) {
        let Some(element) = decoder.next_element().expect("Resync returns no error") else {
            break;
        };
        counts.push(&element);
        by_instructions.push(&element, &mut function_of);
        by_time.push(&element, &mut function_of);
    }
    let mut collapser = StackCollapser::new();
    let statistics = by_instructions.collapse_into(&mut collapser, &mut Blocks, 0);
    let folded = collapser.finish(&mut Blocks);
    assert_eq!(statistics.instructions, counts.statistics.instructions);
    assert_eq!(folded.total_weight(), statistics.instructions);
    let mut collapser = StackCollapser::new();
    let timed = by_time.collapse_into(&mut collapser, &mut Blocks, 0);
    assert_eq!(collapser.finish(&mut Blocks).total_weight(), timed.weight);
});
