use code_image::{load_elf, CodeImage, SymbolTable};
use ntrace_flow::*;
use riscv_insn::DecodeOptions;
use trace_elements::ElementKind;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let elf = std::fs::read(&args[1]).unwrap();
    let log = std::fs::read_to_string(&args[2]).unwrap();
    let pcs: Vec<u64> = log
        .lines()
        .filter(|l| l.starts_with("Trace"))
        .map(|l| {
            let inner = &l[l.find('[').unwrap() + 1..l.find(']').unwrap()];
            u64::from_str_radix(inner.split('/').nth(1).unwrap(), 16).unwrap()
        })
        .collect();
    let mut image = CodeImage::new();
    let mut symbols = SymbolTable::default();
    let info = load_elf(&mut image, &mut symbols, "t", &elf, None).unwrap();
    let files = vec![FileDecodeInfo {
        options: DecodeOptions::default(),
        jvt_base: info.jvt_base,
    }];
    for (mode, depth, rh) in [(BranchMode::Htm, 32, true), (BranchMode::Btm, 32, true)] {
        let mut o = EncoderOptions::default();
        o.mode = mode;
        o.return_stack_depth = depth;
        o.repeat_branch = rh;
        o.icnt_bits = 22;
        o.periodic_sync = 0;
        let mut enc = TraceEncoder::new(&image, files.clone(), o).unwrap();
        for &pc in &pcs {
            enc.retire(pc).unwrap();
        }
        let (bytes, stats) = enc.finish().unwrap();
        std::fs::write(format!("/tmp/qt/big-{mode:?}-{depth}-{rh}.nt"), &bytes).unwrap();
        let mut dec = FlowDecoder::new(&bytes, &image, files.clone(), DecoderOptions::default());
        let mut out = Vec::new();
        loop {
            match dec.next_element() {
                Ok(Some(e)) => {
                    if let ElementKind::InstructionRange {
                        start,
                        instructions,
                        ..
                    } = e.kind
                    {
                        assert!(dec.for_each_instruction(start, instructions, |pc| out.push(pc)));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    println!("ERR {e}");
                    let mut md = ntrace_message::MessageDecoder::new(&bytes, Default::default());
                    while let Ok(Some(m)) = md.next_message() {
                        if m.offset + 20 > e.offset() && m.offset < e.offset() + 20 {
                            let mut s = String::new();
                            ntrace_message::dump_message(&m, &bytes, &mut s).unwrap();
                            println!("{s}");
                        }
                    }
                    break;
                }
            }
        }
        let first_diff = pcs.iter().zip(&out).position(|(a, b)| a != b);
        println!("{mode:?} depth {depth}: {} pcs, {} decoded, {} bytes, {} msgs, implicit {} first diff {:?}", pcs.len(), out.len(), bytes.len(), stats.messages, stats.implicit_returns, first_diff);
        if let Some(i) = first_diff {
            println!(
                "  at {i}: want {:#x} got {:#x}; prev {:#x}",
                pcs[i],
                out[i],
                pcs[i.saturating_sub(1)]
            );
        }
    }
}
