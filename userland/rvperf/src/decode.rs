//! `rvperf decode`: N-Trace stream + ELF files -> PCs, blocks, instructions, messages or a summary.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use ntrace_flow::{DecoderOptions, FlowDecoder, FlowError, Recovery};
use ntrace_message::{dump_message, MessageDecoder, MessageOptions};
use perf_session::TraceCode;
use symbolize::FunctionTotal;
use trace_elements::{ElementKind, GapReason, RangeEnd, TraceElement};

use crate::output::LineWriter;
use crate::trace_file::TraceFile;
use crate::trace_input::TraceArgs;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// One executed instruction address per line, `0x` + hex.
    Pcs,
    /// One line per executed instruction range (basic block), plus trace events.
    Blocks,
    /// Every executed instruction with its function and disassembly.
    Insns,
    /// The N-Trace messages, one per line.
    Messages,
    /// Instruction and message counts, decode speed and the hottest functions.
    Summary,
}

#[derive(Debug, Args)]
#[command(mut_arg("trace", |trace| trace.required(true)))]
pub struct DecodeArgs {
    #[command(flatten)]
    input: TraceArgs,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Output::Summary)]
    output: Output,
}

pub fn run(arguments: &DecodeArgs) -> Result<()> {
    let code = if arguments.input.elf.is_empty() {
        if arguments.output != Output::Messages {
            bail!("--elf is required to follow the program flow (only --output messages works without it)");
        }
        None
    } else {
        Some(arguments.input.load_code()?)
    };
    let trace_path = arguments
        .input
        .trace
        .as_ref()
        .context("--trace is required")?;
    let trace = TraceFile::open(trace_path)?;
    let message_options = arguments
        .input
        .message_options(code.as_ref().and_then(TraceCode::xlen));
    let stdout = std::io::stdout().lock();
    let mut out = LineWriter::new(stdout);
    let trace_name = trace_path.display().to_string();
    match (arguments.output, code) {
        (Output::Messages, _) => dump_messages(&trace, message_options, &mut out, &trace_name)?,
        (mode, Some(code)) => {
            // A summary needs counts and the block profile, not each range: the decoder's
            // fast path skips building range elements.
            let options = arguments
                .input
                .decoder_options(&code)
                .with_instruction_ranges(mode != Output::Summary);
            decode_flow(
                &trace,
                &code,
                options,
                mode,
                arguments.input.src_bits > 0,
                &mut out,
                &trace_name,
            )?;
        }
        // `run` refused every other mode without --elf above.
        (_, None) => bail!("--elf is required"),
    }
    out.finish()?;
    Ok(())
}

fn dump_messages(
    trace: &TraceFile,
    options: MessageOptions,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let bytes = trace.bytes();
    let mut decoder = MessageDecoder::new(bytes, options);
    let mut line = String::new();
    let mut count = 0u64;
    loop {
        match decoder.next_message() {
            Ok(Some(message)) => {
                line.clear();
                dump_message(&message, bytes, &mut line)
                    .map_err(|_| anyhow!("formatting failed"))?;
                out.text(&line);
                out.text("\n");
                out.maybe_flush()?;
                count += 1;
                if count % 65536 == 0 {
                    trace.release_before(decoder.position());
                }
            }
            Ok(None) => break,
            Err(error) => bail!("{trace_name}: {error}"),
        }
    }
    Ok(())
}

fn range_end_name(end: RangeEnd) -> &'static str {
    match end {
        RangeEnd::Sequential => "sequential",
        RangeEnd::BranchTaken => "branch-taken",
        RangeEnd::BranchNotTaken => "branch-not-taken",
        RangeEnd::Jump => "jump",
        RangeEnd::Call => "call",
        RangeEnd::IndirectCall => "indirect-call",
        RangeEnd::Return => "return",
        RangeEnd::CoroutineSwap => "coroutine-swap",
        RangeEnd::IndirectJump => "indirect-jump",
        RangeEnd::TrapReturn => "trap-return",
        RangeEnd::EnvironmentCall => "environment-call",
    }
}

/// Text for elements other than instruction ranges (blocks and insns output).
fn event_text(element: &TraceElement) -> Option<String> {
    let text = match element.kind {
        ElementKind::InstructionRange { .. } => return None,
        ElementKind::TraceOn { address, reason } => format!("trace-on {address:#x} ({reason:?})"),
        ElementKind::Trap {
            from,
            handler,
            kind,
        } => match from {
            Some(from) => format!("trap {kind:?} at {from:#x} -> {handler:#x}"),
            None => format!("trap {kind:?} -> {handler:#x}"),
        },
        ElementKind::ContextChange {
            privilege,
            virtualized,
            context,
        } => {
            let mode = match (virtualized, privilege) {
                (false, 0) => "U",
                (false, 1) => "S",
                (false, 3) => "M",
                (true, 0) => "VU",
                (true, 1) => "VS",
                _ => "reserved",
            };
            match context {
                Some(trace_elements::Context::Process(id)) => {
                    format!("context {mode}-mode scontext={id:#x}")
                }
                Some(trace_elements::Context::VirtualMachine(id)) => {
                    format!("context {mode}-mode hcontext={id:#x}")
                }
                None => format!("context {mode}-mode"),
            }
        }
        ElementKind::Timestamp { time } => format!("timestamp {time}"),
        ElementKind::TraceOff {
            last_address,
            reason,
        } => match last_address {
            Some(address) => format!("trace-off after {address:#x} ({reason:?})"),
            None => format!("trace-off ({reason:?})"),
        },
        ElementKind::Gap { reason } => format!("gap {reason:?}"),
        ElementKind::Unhandled { code } => format!("unhandled message code {code}"),
    };
    Some(format!("# {} {text} @{:#x}", element.hart, element.offset))
}

fn decode_flow(
    trace: &TraceFile,
    code: &TraceCode,
    options: DecoderOptions,
    mode: Output,
    multi_hart: bool,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let started = Instant::now();
    // The decoder resynchronises after an error and reports it as a gap; `print_elements`
    // decides which gaps are fatal.
    let options = options.with_recovery(Recovery::Resync);
    let mut decoder = FlowDecoder::new(
        trace.bytes(),
        code.image(),
        code.decode_infos().to_vec(),
        options,
    );
    // Resident memory stays bounded however long the trace: a helper thread gives the
    // mapped pages the decoder has passed back to the kernel (the summary path can run
    // through the whole trace inside one decoder call).
    let progress = decoder.progress();
    let done = AtomicBool::new(false);
    let printed = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
                trace.release_before(progress.load(Ordering::Relaxed));
            }
        });
        let printed = print_elements(&mut decoder, code, mode, multi_hart, out, trace_name);
        done.store(true, Ordering::Relaxed);
        printed
    });
    printed?;
    let elapsed = started.elapsed();
    let statistics = decoder.statistics();
    if statistics.unresolved_units_at_end > 0 {
        eprintln!(
            "rvperf: warning: {trace_name}: the trace ends with {} I-CNT units (16-bit instruction units) not followed by a message that places them; those instructions are not shown",
            statistics.unresolved_units_at_end
        );
    }
    if statistics.sync_messages == 0 {
        bail!(
            "{trace_name}: no synchronisation message in {} bytes: nothing can be decoded",
            trace.bytes().len()
        );
    }
    if mode == Output::Summary {
        write_summary(&decoder, code, trace, trace_name, elapsed, out);
    }
    Ok(())
}

/// Prints every element of the trace as `mode` wants. A gap the decoder reports for
/// undecodable bytes before the first synchronisation (a wrapped trace buffer starts
/// inside a message) is a warning; any other decode error ends the decode.
fn print_elements(
    decoder: &mut FlowDecoder<'_>,
    code: &TraceCode,
    mode: Output,
    multi_hart: bool,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let mut skipped_garbage = false;
    let mut pcs: Vec<u64> = Vec::with_capacity(64);
    let mut line = String::new();
    loop {
        // Matching on a reference keeps the element where the decoder wrote it: copying it
        // out costs a store-forwarding stall per element on x86.
        let result = decoder.next_element();
        let element = match &result {
            Ok(Some(element)) => element,
            Ok(None) => return Ok(()),
            Err(error) => bail!("{trace_name}: {error}"),
        };
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions: count,
                end,
                ..
            } => match mode {
                Output::Summary | Output::Messages => {}
                Output::Pcs => {
                    pcs.clear();
                    decoder.for_each_instruction(start, count, |pc| pcs.push(pc));
                    for &pc in &pcs {
                        if multi_hart {
                            out.text(&element.hart.to_string());
                            out.text(" ");
                        }
                        out.hex_line(pc)?;
                    }
                }
                Output::Blocks => {
                    line.clear();
                    if multi_hart {
                        line.push_str(&format!("{} ", element.hart));
                    }
                    let function = code
                        .functions()
                        .lookup(start)
                        .map(|(symbol, _)| symbol.name.as_str());
                    line.push_str(&format!(
                        "{start:#x}..{last:#x} {count:>3} {:<16} {}\n",
                        range_end_name(end),
                        function.unwrap_or("?")
                    ));
                    out.text(&line);
                    out.maybe_flush()?;
                }
                Output::Insns => {
                    pcs.clear();
                    decoder.for_each_instruction(start, count, |pc| pcs.push(pc));
                    for &pc in &pcs {
                        line.clear();
                        if multi_hart {
                            line.push_str(&format!("{} ", element.hart));
                        }
                        instruction_line(code, pc, &mut line);
                        out.text(&line);
                        out.maybe_flush()?;
                    }
                }
            },
            ElementKind::Gap {
                reason: GapReason::DecodeError { .. },
            } => {
                let Some(error) = decoder.last_recovered_error() else {
                    bail!(
                        "{trace_name}: undecodable trace at byte offset {:#x}",
                        element.offset
                    );
                };
                if !(matches!(error, FlowError::Message(_))
                    && decoder.statistics().sync_messages == 0)
                {
                    bail!("{trace_name}: {error}");
                }
                if !skipped_garbage {
                    eprintln!("rvperf: warning: {trace_name}: skipping undecodable bytes before the first synchronisation ({error})");
                    skipped_garbage = true;
                }
            }
            _ => {
                if matches!(mode, Output::Blocks | Output::Insns) {
                    if let Some(text) = event_text(element) {
                        out.text(&text);
                        out.text("\n");
                    }
                }
            }
        }
    }
}

/// `pc  function+offset  encoding  disassembly` (insns output), appended to `line`.
fn instruction_line(code: &TraceCode, pc: u64, line: &mut String) {
    let place = match code.functions().lookup(pc) {
        Some((symbol, offset)) => format!("{}+{offset:#x}", symbol.name),
        None => "?".to_owned(),
    };
    let file = code
        .image()
        .segment_index(pc)
        .and_then(|index| code.image().segment(index))
        .map(|segment| segment.file)
        .unwrap_or(0);
    let options = code
        .decode_infos()
        .get(file)
        .map(|info| info.options)
        .unwrap_or_default();
    let mut raw = [0u8; 4];
    code.image().read(pc, &mut raw);
    let text = match riscv_insn::decode(u32::from_le_bytes(raw), options) {
        Ok(instruction) if instruction.length == 2 => {
            format!("{:04x}      {instruction}", instruction.raw & 0xffff)
        }
        Ok(instruction) => format!("{:08x}  {instruction}", instruction.raw),
        Err(_) => "(undecodable)".to_owned(),
    };
    line.push_str(&format!("{pc:#x}  {place:<32} {text}\n"));
}

fn write_summary(
    decoder: &FlowDecoder<'_>,
    code: &TraceCode,
    trace: &TraceFile,
    trace_name: &str,
    elapsed: Duration,
    out: &mut LineWriter<impl Write>,
) {
    let statistics = decoder.statistics();
    let instructions = statistics.instructions;
    let seconds = elapsed.as_secs_f64().max(1e-9);
    let bytes = trace.bytes().len() as f64;
    out.text(&format!("trace:               {trace_name}\n"));
    out.text(&format!("trace bytes:         {}\n", trace.bytes().len()));
    out.text(&format!("messages:            {}\n", statistics.messages));
    out.text(&format!(
        "sync messages:       {}\n",
        statistics.sync_messages
    ));
    if statistics.messages_before_sync > 0 {
        out.text(&format!(
            "skipped before sync: {} messages\n",
            statistics.messages_before_sync
        ));
    }
    if statistics.gaps > 0 {
        out.text(&format!("gaps (lost trace):   {}\n", statistics.gaps));
    }
    if statistics.vendor_or_reserved_messages > 0 {
        out.text(&format!(
            "vendor/reserved:     {} messages\n",
            statistics.vendor_or_reserved_messages
        ));
    }
    out.text(&format!("instructions:        {instructions}\n"));
    out.text(&format!("idle bytes:          {}\n", decoder.idle_bytes()));
    out.text(&format!(
        "code blocks decoded: {}\n",
        statistics.blocks_decoded
    ));
    out.text(&format!(
        "decode time:         {:.3} s ({:.1} M instructions/s, {:.1} MB/s of trace)\n",
        seconds,
        instructions as f64 / seconds / 1e6,
        bytes / seconds / 1e6
    ));
    write_hottest_functions(decoder, code, instructions, out);
}

fn write_hottest_functions(
    decoder: &FlowDecoder<'_>,
    code: &TraceCode,
    instructions: u64,
    out: &mut LineWriter<impl Write>,
) {
    let ranked = code.functions().totals_by_function(
        decoder
            .block_profile()
            .map(|block| (block.start, block.instructions)),
    );
    out.text("hottest functions:\n");
    for FunctionTotal {
        start,
        total: count,
    } in ranked.into_iter().take(10)
    {
        let name = start
            .and_then(|start| code.functions().lookup(start))
            .map_or("[unknown]", |(symbol, _)| symbol.name.as_str());
        let share = 100.0 * count as f64 / instructions.max(1) as f64;
        out.text(&format!("  {share:6.2}%  {count:>12}  {name}\n"));
    }
}
