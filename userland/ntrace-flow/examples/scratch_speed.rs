use code_image::{load_elf, CodeImage, SymbolTable};
use ntrace_flow::*;
use riscv_insn::DecodeOptions;
use std::time::Instant;
use trace_elements::ElementKind;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let elf = std::fs::read(&args[1]).unwrap();
    let bytes = std::fs::read(&args[2]).unwrap();
    let mut image = CodeImage::new();
    let mut symbols = SymbolTable::default();
    let info = load_elf(&mut image, &mut symbols, "t", &elf, None).unwrap();
    let files = vec![FileDecodeInfo {
        options: DecodeOptions::default(),
        jvt_base: info.jvt_base,
    }];
    for _ in 0..3 {
        let t = Instant::now();
        let mut md = ntrace_message::MessageDecoder::new(&bytes, Default::default());
        let mut n = 0u64;
        while let Ok(Some(_m)) = md.next_message() {
            n += 1;
        }
        let tm = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut dec = FlowDecoder::new(&bytes, &image, files.clone(), DecoderOptions::default());
        let (mut elements, mut instructions) = (0u64, 0u64);
        while let Some(e) = dec.next_element().unwrap() {
            elements += 1;
            if let ElementKind::InstructionRange {
                instructions: c, ..
            } = e.kind
            {
                instructions += c as u64;
            }
        }
        let tf = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut dec = FlowDecoder::new(&bytes, &image, files.clone(), DecoderOptions::default());
        let mut pcs = 0u64;
        let mut sum = 0u64;
        while let Some(e) = dec.next_element().unwrap() {
            if let ElementKind::InstructionRange {
                start,
                instructions: c,
                ..
            } = e.kind
            {
                dec.for_each_instruction(start, c, |pc| {
                    pcs += 1;
                    sum = sum.wrapping_add(pc);
                });
            }
        }
        let tp = t.elapsed().as_secs_f64();
        println!("messages {n} in {tm:.3}s ({:.1} M msg/s, {:.0} MB/s); flow {elements} elements {instructions} instr in {tf:.3}s = {:.1} M instr/s ({:.1} ns/element); pcs {:.1} M/s {sum}", n as f64/tm/1e6, bytes.len() as f64/tm/1e6, instructions as f64/tf/1e6, tf*1e9/elements as f64, pcs as f64/tp/1e6);
    }
}
