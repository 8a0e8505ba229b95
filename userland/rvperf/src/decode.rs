//! `rvperf decode`: N-Trace stream + ELF files -> PCs, blocks, instructions, messages or a summary.

use std::io::Write;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use code_image::CodeImage;
use ntrace_flow::{
    Decoded, DecoderOptions, FlowDecoder, FlowStatistics, ParallelDecoder, ParallelError,
    ParallelOptions, Recovery,
};
use ntrace_message::{dump_message, MessageDecoder, MessageOptions};
use perf_session::TraceCode;
use symbolize::FunctionTotal;
use trace_elements::{ElementKind, ElementSource, GapReason, RangeEnd, TraceElement};

use crate::output::LineWriter;
use crate::trace_file::TraceFile;
use crate::trace_input::{
    for_each_instruction_in_image, CodeCache, JobsArgs, TraceArgs, TraceFormat, TraceInput,
    GAPS_SHOWN,
};
use crate::trace_recording::SplitRule;

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

#[derive(Debug, Clone, Args)]
#[command(mut_arg("trace", |trace| trace.required_unless_present("recording")))]
pub struct DecodeArgs {
    #[command(flatten)]
    input: TraceArgs,
    /// A perf.data of `rvperf trace record`: the trace, the encoders' configuration and
    /// the files that ran, instead of --trace and the encoder options (--elf adds files).
    #[arg(
        short = 'i',
        long = "input",
        value_name = "PERF_DATA",
        conflicts_with = "trace"
    )]
    recording: Option<std::path::PathBuf>,
    /// With -i: the directory the recorded file names are under (the target's root).
    #[arg(long, value_name = "DIR", requires = "recording")]
    symfs: Option<std::path::PathBuf>,
    #[command(flatten)]
    threads: crate::trace_recording::ThreadFilter,
    /// The trace's protocol: ntrace, debug4 (the debug specification's trace module),
    /// tandem (tandem verification), or auto (default: told from how the stream starts).
    /// The same as --trace-format.
    #[arg(
        long = "format",
        id = "decode_format",
        value_enum,
        value_name = "FORMAT"
    )]
    protocol: Option<crate::trace_input::FormatChoice>,
    /// What to print.
    #[arg(long, value_enum, default_value_t = Output::Summary)]
    output: Output,
    /// Threads decoding the trace.
    #[command(flatten)]
    jobs: JobsArgs,
    /// With --output summary and more than one job: also say how the parallel decode
    /// shared the work (chunks, how many started between synchronisation messages, what
    /// the joining thread decoded itself).
    #[arg(long)]
    parallel_work: bool,
}

pub fn run(arguments: &DecodeArgs) -> Result<()> {
    let mut input = arguments.input.clone();
    if let Some(protocol) = arguments.protocol {
        input.protocol = protocol;
    }
    let arguments = &DecodeArgs {
        input,
        ..arguments.clone()
    };
    let Some(path) = &arguments.recording else {
        if !arguments.threads.is_empty() {
            bail!("--pid, --tid and --comm choose threads of a recording (-i)");
        }
        let trace_path = arguments
            .input
            .trace
            .as_ref()
            .context("--trace is required")?;
        let trace = TraceInput::Messages(TraceFile::open(trace_path)?);
        return decode_one(
            arguments,
            &arguments.input,
            &trace,
            &trace_path.display().to_string(),
            None,
            &mut CodeCache::default(),
        );
    };
    if !matches!(
        arguments.input.protocol,
        crate::trace_input::FormatChoice::Auto | crate::trace_input::FormatChoice::Ntrace
    ) {
        bail!("a recording (-i) holds N-Trace: --format is for --trace files");
    }
    // Messages are printed as each thread's stream holds them: a split into streams.
    let rule = match arguments.output {
        Output::Messages => SplitRule::Synchronisations,
        _ => SplitRule::TaskContextsFirst,
    };
    let loaded = crate::trace_recording::load_split(
        path,
        arguments.symfs.as_deref(),
        &arguments.input,
        &arguments.threads,
        rule,
    )?;
    let mut codes = loaded.codes;
    for loaded_trace in &loaded.traces {
        // A trace split by thread: each under a line naming it.
        let header = loaded_trace.thread.as_ref().map(|thread| {
            format!(
                "# thread {} (pid {}, tid {}, after {} execs)",
                loaded_trace.label(),
                thread.run.pid,
                thread.tid,
                thread.run.execs
            )
        });
        decode_one(
            arguments,
            &loaded_trace.arguments,
            &loaded_trace.trace,
            &loaded.name,
            header.as_deref(),
            &mut codes,
        )?;
    }
    Ok(())
}

/// Decodes one trace (one process's of a recording), after `header` when given.
fn decode_one(
    arguments: &DecodeArgs,
    input: &TraceArgs,
    trace: &TraceInput,
    trace_name: &str,
    header: Option<&str>,
    codes: &mut CodeCache,
) -> Result<()> {
    let trace_name = trace_name.to_owned();
    let code = if input.elf.is_empty() {
        if arguments.output != Output::Messages {
            bail!("--elf is required to follow the program flow (only --output messages works without it)");
        }
        None
    } else {
        Some(codes.code_for(input)?)
    };
    let message_options = input.message_options(code.as_deref().and_then(TraceCode::xlen));
    let stdout = std::io::stdout().lock();
    let mut out = LineWriter::new(stdout);
    if let Some(header) = header {
        out.text(header);
        out.text("\n");
    }
    if let TraceInput::Messages(file) = trace {
        let format = input.format_of(file.bytes());
        input.check_format_options(format)?;
        if format != TraceFormat::NTrace {
            decode_other(
                format,
                arguments.output,
                input,
                file,
                code.as_deref(),
                &mut out,
                &trace_name,
            )?;
            out.finish()?;
            return Ok(());
        }
    }
    match (arguments.output, code, trace) {
        (Output::Messages, _, TraceInput::Messages(trace)) => {
            dump_messages(trace, message_options, &mut out, &trace_name)?
        }
        // `run` splits a recording into message streams for this output.
        (Output::Messages, _, TraceInput::Decoded(_)) => {
            bail!("{trace_name}: the trace was decoded already: its messages are not kept")
        }
        (mode, Some(code), TraceInput::Decoded(thread)) => {
            decode_replayed(
                thread,
                &code,
                mode,
                input.src_bits > 0,
                &mut out,
                &trace_name,
            )?;
        }
        (mode, Some(code), TraceInput::Messages(trace)) => {
            // A summary needs counts and the block profile, not each range: the decoder's
            // fast path skips building range elements.
            let options = input
                .decoder_options(&code)
                .with_instruction_ranges(mode != Output::Summary);
            let jobs = arguments.jobs.jobs();
            // Outputs that print every instruction or block keep this thread busy printing
            // what the others decode: one thread fewer decodes.
            let decoding = match mode {
                Output::Summary => jobs,
                _ => jobs.saturating_sub(1).max(1),
            };
            let multi_hart = input.src_bits > 0;
            let formatting = if mode == Output::Pcs && !multi_hart && jobs > 1 {
                Formatting::OwnThread
            } else {
                Formatting::DecodingThread
            };
            let parallel = arguments.jobs.parallel_options(decoding);
            let parallel = match formatting {
                Formatting::DecodingThread => (jobs > 1).then_some(parallel),
                // The serial decoder on the second thread: a parallel decoder with one
                // worker would add a third busy thread (its join) and copy every element.
                Formatting::OwnThread => (decoding > 1).then_some(parallel),
            };
            decode_flow(
                trace,
                &code,
                options,
                parallel,
                mode,
                multi_hart,
                arguments.parallel_work,
                formatting,
                &mut out,
                &trace_name,
            )?;
        }
        // `run` refused every other mode without --elf above.
        (_, None, _) => bail!("--elf is required"),
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
        ElementKind::RegisterWrite { register, value } => {
            format!(
                "write {} = {value:#x}",
                tandem_message::RegisterName(register)
            )
        }
        ElementKind::MemoryAccess {
            operation,
            address,
            address_kind,
            size,
            data,
        } => {
            let mut text = format!("memory {operation:?}");
            if let Some(address) = address {
                let kind = match address_kind {
                    trace_elements::AddressKind::Effective => "",
                    trace_elements::AddressKind::Physical => " physical",
                };
                text.push_str(&format!("{kind} address {address:#x}"));
            }
            if let Some(size) = size {
                text.push_str(&format!(" size {size}"));
            }
            if let Some(data) = data {
                text.push_str(&format!(" data {data:#x}"));
            }
            text
        }
        ElementKind::Unhandled { code } => format!("unhandled message code {code}"),
    };
    Some(format!("# {} {text} @{:#x}", element.hart, element.offset))
}

/// Where the `pcs` output's lines are formatted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Formatting {
    /// By the thread that decodes (the serial decoder) or joins (the parallel one).
    DecodingThread,
    /// On this thread, while the decode (serial or parallel) runs on another and hands
    /// over the instruction ranges in batches: listing a range's instructions and
    /// formatting them cost about as much as decoding.
    OwnThread,
}

/// What a whole decode found, from the serial or the parallel decoder.
struct DecodeTotals {
    statistics: FlowStatistics,
    /// Message walks replayed rather than walked, and messages replayed whole (a measure
    /// of the decode, not the trace; serial decodes only count the latter).
    walks_replayed: u64,
    messages_replayed: Option<u64>,
    idle_bytes: u64,
    skipped_bytes: u64,
    /// (block start, instructions executed from it).
    block_profile: Vec<(u64, u64)>,
    /// How a parallel decode shared the work.
    parallel: Option<ParallelWork>,
}

#[derive(Clone, Copy, Debug)]
struct ParallelWork {
    chunks: u64,
    seam_starts: u64,
    chunks_given_up: u64,
    serial_messages: u64,
}

#[expect(
    clippy::too_many_arguments,
    reason = "the decode's inputs and its output settings, each used once"
)]
fn decode_flow(
    trace: &TraceFile,
    code: &TraceCode,
    options: DecoderOptions,
    parallel: Option<ParallelOptions>,
    mode: Output,
    multi_hart: bool,
    show_parallel_work: bool,
    formatting: Formatting,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let started = Instant::now();
    // The decoder resynchronises after an error and reports it as a gap: the printer
    // prints it where it happened and warns about it.
    let options = options.with_recovery(Recovery::Resync);
    let printer = Printer::new(code, mode, multi_hart, trace_name);
    let (printer, totals) = match formatting {
        Formatting::DecodingThread => {
            let mut printer = printer;
            let totals = decode_elements(trace, code, options, parallel, &mut printer, out)?;
            printer.finish(out)?;
            (printer, totals)
        }
        Formatting::OwnThread => {
            decode_beside_formatting(trace, code, options, parallel, printer, out)?
        }
    };
    let elapsed = started.elapsed();
    let statistics = totals.statistics;
    if statistics.sync_messages == 0 {
        match &printer.first_error {
            Some(error) => bail!(
                "{trace_name}: no synchronisation message in {} bytes: nothing can be decoded (first error: {error})",
                trace.bytes().len()
            ),
            None => bail!(
                "{trace_name}: no synchronisation message in {} bytes: nothing can be decoded",
                trace.bytes().len()
            ),
        }
    }
    if statistics.instructions == 0 {
        if let Some(error) = &printer.first_error {
            bail!("{trace_name}: {error}");
        }
    }
    printer.warn_gaps();
    if statistics.gaps > 0 && mode != Output::Summary {
        eprintln!(
            "rvperf: warning: {trace_name}: the encoder reported {} losses of trace (overflow): execution there is missing",
            statistics.gaps
        );
    }
    if statistics.unresolved_units_at_end > 0 {
        eprintln!(
            "rvperf: warning: {trace_name}: the trace ends with {} I-CNT units (16-bit instruction units) not followed by a message that places them; those instructions are not shown",
            statistics.unresolved_units_at_end
        );
    }
    if mode == Output::Summary {
        write_summary(
            &totals,
            show_parallel_work,
            code,
            trace,
            trace_name,
            elapsed,
            out,
        );
    }
    Ok(())
}

/// Runs the decode (serial or parallel) through `printer`.
fn decode_elements(
    trace: &TraceFile,
    code: &TraceCode,
    options: DecoderOptions,
    parallel: Option<ParallelOptions>,
    printer: &mut Printer<'_>,
    out: &mut LineWriter<impl Write>,
) -> Result<DecodeTotals> {
    let totals = if let Some(parallel) = parallel {
        let decoder = ParallelDecoder::new(
            trace.bytes(),
            code.image(),
            code.decode_infos().to_vec(),
            options,
            parallel,
        );
        let progress = decoder.progress();
        let summary = trace.releasing_pages_during(&progress, || {
            decoder.run(|decoded| printer.parallel(decoded, out))
        });
        let summary = match summary {
            Ok(summary) => summary,
            Err(ParallelError::Consumer(error)) => return Err(error),
            Err(ParallelError::ThreadPool(error)) => {
                bail!("cannot start the decoding threads: {error}")
            }
            Err(error) => bail!("parallel decode failed: {error:?}"),
        };
        DecodeTotals {
            statistics: summary.statistics,
            walks_replayed: summary.walks_replayed,
            messages_replayed: None,
            idle_bytes: summary.idle_bytes,
            skipped_bytes: summary.skipped_bytes,
            block_profile: summary
                .block_profile
                .iter()
                .map(|block| (block.start, block.instructions))
                .collect(),
            parallel: Some(ParallelWork {
                chunks: summary.chunks,
                seam_starts: summary.seam_starts,
                chunks_given_up: summary.chunks_given_up,
                serial_messages: summary.serial_messages,
            }),
        }
    } else {
        let mut decoder = FlowDecoder::new(
            trace.bytes(),
            code.image(),
            code.decode_infos().to_vec(),
            options,
        );
        let progress = decoder.progress();
        trace.releasing_pages_during(&progress, || printer.serial(&mut decoder, out))?;
        DecodeTotals {
            statistics: decoder.statistics(),
            walks_replayed: decoder.walks_replayed(),
            messages_replayed: Some(decoder.messages_replayed()),
            idle_bytes: decoder.idle_bytes(),
            skipped_bytes: decoder.skipped_bytes(),
            block_profile: decoder
                .block_profile()
                .map(|block| (block.start, block.instructions))
                .collect(),
            parallel: None,
        }
    };
    Ok(totals)
}

/// [`decode_elements`] on a second thread that hands the `pcs` output's instruction
/// ranges over in batches, listed, formatted and written here
/// ([`Formatting::OwnThread`]).
fn decode_beside_formatting<'c>(
    trace: &TraceFile,
    code: &'c TraceCode,
    options: DecoderOptions,
    parallel: Option<ParallelOptions>,
    mut printer: Printer<'c>,
    out: &mut LineWriter<impl Write>,
) -> Result<(Printer<'c>, DecodeTotals)> {
    let (full_sender, full) = mpsc::sync_channel(RANGE_BATCHES_IN_FLIGHT);
    let (empty_sender, empty) = mpsc::channel();
    std::thread::scope(|scope| {
        // The printer moves to the decoding thread and back: if that thread panics, the
        // batch sender dropped with it ends the formatting loop.
        let decoding = scope.spawn(move || {
            printer.batches = Some(RangeBatches {
                full: full_sender,
                empty,
            });
            // Nothing is written to it: every line of `pcs` output goes through the batches.
            let mut unused = LineWriter::new(std::io::sink());
            let totals = decode_elements(trace, code, options, parallel, &mut printer, &mut unused)
                .and_then(|totals| printer.finish(&mut unused).map(|()| totals));
            // Closes the channel: the formatting loop ends.
            printer.batches = None;
            totals.map(|totals| (printer, totals))
        });
        let formatted = format_ranges(code.image(), &full, &empty_sender, out);
        // After an error here the decoding thread's next batch finds no receiver and it
        // stops.
        drop(full);
        let decoded = decoding
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        formatted?;
        decoded
    })
}

/// Prints the PCs of the instruction ranges received, until the decoding thread closes
/// the channel, and sends each batch back for reuse.
fn format_ranges(
    image: &CodeImage,
    full: &mpsc::Receiver<Vec<RangeToPrint>>,
    empty: &mpsc::Sender<Vec<RangeToPrint>>,
    out: &mut LineWriter<impl Write>,
) -> Result<()> {
    let mut pcs = Vec::with_capacity(PCS_BATCH + 64);
    for batch in full {
        for range in &batch {
            if !push_instruction_addresses(image, *range, &mut pcs) {
                bail!(
                    "the instruction range at {:#x} runs out of the code image",
                    range.start
                );
            }
            if pcs.len() >= PCS_BATCH {
                out.hex_lines(&pcs)?;
                pcs.clear();
            }
        }
        // The decoding thread may have finished: the batch is not needed.
        let _ = empty.send(batch);
    }
    out.hex_lines(&pcs)?;
    Ok(())
}

/// Appends the addresses of `range`'s instructions to `pcs`, from the code image
/// ([`for_each_instruction_in_image`]). The decoder's blocks hold the same lengths, but
/// they stay on the decoding thread. False when the range runs out of the image, which
/// the decoder that walked it rules out.
#[inline]
fn push_instruction_addresses(image: &CodeImage, range: RangeToPrint, pcs: &mut Vec<u64>) -> bool {
    for_each_instruction_in_image(image, range.start, range.instructions, |address| {
        pcs.push(address)
    })
}

/// PCs gathered before they are formatted (`pcs` output): a range holds a few
/// instructions, and a loop over thousands runs without a mispredicted exit per range.
const PCS_BATCH: usize = 1 << 14;

/// Instruction ranges per batch handed to the formatting thread: a few hundred batches
/// per second, not millions of ranges one by one.
const RANGE_BATCH: usize = 1 << 12;

/// Full batches waiting for the formatting thread: enough to smooth out the decode's
/// pace, few enough to stay in the cache.
const RANGE_BATCHES_IN_FLIGHT: usize = 4;

/// An instruction range of `pcs` output, handed to the formatting thread.
#[derive(Clone, Copy, Debug)]
struct RangeToPrint {
    start: u64,
    instructions: u32,
}

/// The decoding thread's ends of the channels to the formatting thread.
struct RangeBatches {
    full: mpsc::SyncSender<Vec<RangeToPrint>>,
    /// Batches the formatting thread is done with, for reuse.
    empty: mpsc::Receiver<Vec<RangeToPrint>>,
}

/// Prints elements as `mode` wants, from either decoder, and collects the gaps that
/// decode errors left for the warnings.
struct Printer<'c> {
    code: &'c TraceCode,
    mode: Output,
    multi_hart: bool,
    trace_name: &'c str,
    /// `pcs` output: the PCs of the ranges not yet formatted. `insns` and `pcs` with
    /// harts: the PCs of the range being printed.
    pcs: Vec<u64>,
    /// With [`Formatting::OwnThread`]: the ranges of `pcs` output gathered, and where
    /// each full batch goes.
    ranges: Vec<RangeToPrint>,
    batches: Option<RangeBatches>,
    line: String,
    /// The error behind the first gap, for the one-line error when nothing decoded.
    first_error: Option<String>,
    /// Warning lines of the first gaps, and how many gaps there were.
    gap_warnings: Vec<String>,
    gaps: u64,
}

impl<'c> Printer<'c> {
    fn new(code: &'c TraceCode, mode: Output, multi_hart: bool, trace_name: &'c str) -> Self {
        Self {
            code,
            mode,
            multi_hart,
            trace_name,
            pcs: Vec::with_capacity(PCS_BATCH + 64),
            ranges: Vec::new(),
            batches: None,
            line: String::new(),
            first_error: None,
            gap_warnings: Vec::new(),
            gaps: 0,
        }
    }

    fn serial(
        &mut self,
        decoder: &mut FlowDecoder<'_>,
        out: &mut LineWriter<impl Write>,
    ) -> Result<()> {
        loop {
            // Matching on a reference keeps the element where the decoder wrote it: copying
            // it out costs a store-forwarding stall per element on x86.
            let result = decoder.next_element();
            let element = match &result {
                Ok(Some(element)) => element,
                Ok(None) => return Ok(()),
                Err(error) => bail!("{}: {error}", self.trace_name),
            };
            let instructions = |start, count, pcs: &mut Vec<u64>| {
                decoder.for_each_instruction(start, count, |pc| pcs.push(pc));
            };
            self.element(
                element,
                instructions,
                decoder
                    .last_recovered_error()
                    .map(|error| error as &dyn std::fmt::Display),
                out,
            )?;
        }
    }

    fn parallel(&mut self, decoded: Decoded<'_>, out: &mut LineWriter<impl Write>) -> Result<()> {
        match decoded {
            Decoded::Element(decoded) => {
                let instructions = |start, count, pcs: &mut Vec<u64>| {
                    decoded.for_each_instruction(start, count, |pc| pcs.push(pc));
                };
                self.element(
                    &decoded.element,
                    instructions,
                    decoded
                        .recovered_error()
                        .map(|error| error as &dyn std::fmt::Display),
                    out,
                )
            }
            Decoded::Error(error) => bail!("{}: {error}", self.trace_name),
        }
    }

    #[inline]
    fn element(
        &mut self,
        element: &TraceElement,
        instructions: impl FnOnce(u64, u32, &mut Vec<u64>),
        recovered_error: Option<&dyn std::fmt::Display>,
        out: &mut LineWriter<impl Write>,
    ) -> Result<()> {
        let code = self.code;
        match element.kind {
            ElementKind::InstructionRange {
                start,
                last,
                instructions: count,
                end,
                ..
            } => match self.mode {
                Output::Summary | Output::Messages => {}
                Output::Pcs if self.multi_hart => {
                    let pcs = &mut self.pcs;
                    pcs.clear();
                    instructions(start, count, pcs);
                    let hart = format!("{} ", element.hart);
                    for &pc in pcs.iter() {
                        out.text(&hart);
                        out.hex_line(pc)?;
                    }
                }
                Output::Pcs if self.batches.is_some() => {
                    self.ranges.push(RangeToPrint {
                        start,
                        instructions: count,
                    });
                    if self.ranges.len() >= RANGE_BATCH {
                        self.send_ranges()?;
                    }
                }
                Output::Pcs => {
                    // The PCs of many ranges are formatted in one loop (see `PCS_BATCH`);
                    // nothing else is printed in between, `finish` prints the rest.
                    instructions(start, count, &mut self.pcs);
                    if self.pcs.len() >= PCS_BATCH {
                        out.hex_lines(&self.pcs)?;
                        self.pcs.clear();
                    }
                }
                Output::Blocks => {
                    let line = &mut self.line;
                    line.clear();
                    if self.multi_hart {
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
                    out.text(line);
                    out.maybe_flush()?;
                }
                Output::Insns => {
                    let pcs = &mut self.pcs;
                    pcs.clear();
                    instructions(start, count, pcs);
                    for &pc in pcs.iter() {
                        let line = &mut self.line;
                        line.clear();
                        if self.multi_hart {
                            line.push_str(&format!("{} ", element.hart));
                        }
                        instruction_line(code, pc, line);
                        out.text(line);
                        out.maybe_flush()?;
                    }
                }
            },
            _ => {
                if let ElementKind::Gap {
                    reason: GapReason::DecodeError { .. },
                } = element.kind
                {
                    self.gap(element, recovered_error);
                }
                if matches!(self.mode, Output::Blocks | Output::Insns) {
                    if let Some(text) = event_text(element) {
                        out.text(&text);
                        out.text("\n");
                    }
                }
            }
        }
        Ok(())
    }

    /// [`Printer::element`] for an element whose instructions are listed from the code
    /// image (a decode that walked the range in this code, so it is there; were it not,
    /// the listing would stop where the image does).
    fn element_from_image(
        &mut self,
        element: &TraceElement,
        recovered_error: Option<&dyn std::fmt::Display>,
        out: &mut LineWriter<impl Write>,
    ) -> Result<()> {
        let code = self.code;
        let instructions = |start, count, pcs: &mut Vec<u64>| {
            let _listed = push_instruction_addresses(
                code.image(),
                RangeToPrint {
                    start,
                    instructions: count,
                },
                pcs,
            );
        };
        self.element(element, instructions, recovered_error, out)
    }

    /// Prints what is still held back (or hands it to the formatting thread); after
    /// the last element.
    fn finish(&mut self, out: &mut LineWriter<impl Write>) -> Result<()> {
        if self.mode == Output::Pcs && !self.multi_hart {
            out.hex_lines(&self.pcs)?;
            self.pcs.clear();
        }
        if !self.ranges.is_empty() {
            self.send_ranges()?;
        }
        Ok(())
    }

    /// Hands the ranges gathered to the formatting thread.
    fn send_ranges(&mut self) -> Result<()> {
        let Some(batches) = &self.batches else {
            return Ok(());
        };
        let mut next = batches
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(RANGE_BATCH));
        next.clear();
        let full = std::mem::replace(&mut self.ranges, next);
        // Fails only when the formatting thread stopped at an error, which it reports.
        batches
            .full
            .send(full)
            .map_err(|_| anyhow!("the output was closed"))
    }

    /// Notes a gap a decode error left (one per hart that lost its flow).
    #[cold]
    fn gap(&mut self, element: &TraceElement, error: Option<&dyn std::fmt::Display>) {
        let cause = match error {
            Some(error) => error.to_string(),
            None => format!("at byte offset {:#x}: undecodable trace", element.offset),
        };
        if self.first_error.is_none() {
            self.first_error = Some(cause.clone());
        }
        self.gaps += 1;
        if (self.gap_warnings.len() as u64) < GAPS_SHOWN {
            let hart = if self.multi_hart {
                format!(" (hart {})", element.hart)
            } else {
                String::new()
            };
            // The cause usually names the gap's offset itself: say it once.
            let at_gap = format!("at byte offset {:#x}: ", element.offset);
            let reason = cause.strip_prefix(&at_gap).unwrap_or(&cause);
            self.gap_warnings.push(format!(
                "rvperf: warning: {}: gap at byte offset {:#x}{hart}: {reason}; decoding resumes at the next synchronisation",
                self.trace_name, element.offset
            ));
        }
    }

    fn warn_gaps(&self) {
        for warning in &self.gap_warnings {
            eprintln!("{warning}");
        }
        let more = self.gaps.saturating_sub(self.gap_warnings.len() as u64);
        if more > 0 {
            eprintln!(
                "rvperf: warning: {}: {more} more gaps not shown ({} in all; the summary counts what they lost)",
                self.trace_name, self.gaps
            );
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
    totals: &DecodeTotals,
    show_parallel_work: bool,
    code: &TraceCode,
    trace: &TraceFile,
    trace_name: &str,
    elapsed: Duration,
    out: &mut LineWriter<impl Write>,
) {
    let statistics = totals.statistics;
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
    // Every trace ends with a stop (debug mode entered, or trace disabled): said only
    // when trace stopped and started in between.
    if statistics.restarts > 0 || statistics.trace_stops > 1 {
        out.text(&format!(
            "trace stops/starts:  {} stopped, {} restarted\n",
            statistics.trace_stops, statistics.restarts
        ));
    }
    if statistics.recovered_errors > 0 || statistics.skipped_units > 0 {
        out.text(&format!(
            "decode errors:       {} (each a gap; decoding resumed at the next synchronisation)\n",
            statistics.recovered_errors
        ));
        out.text(&format!(
            "lost to errors:      {} trace bytes skipped, {} messages skipped, {} I-CNT units (16-bit instruction units) not decoded\n",
            totals.skipped_bytes, statistics.messages_before_sync, statistics.skipped_units
        ));
    }
    if statistics.vendor_or_reserved_messages > 0 {
        out.text(&format!(
            "vendor/reserved:     {} messages\n",
            statistics.vendor_or_reserved_messages
        ));
    }
    out.text(&format!("instructions:        {instructions}\n"));
    out.text(&format!("idle bytes:          {}\n", totals.idle_bytes));
    out.text(&format!(
        "code blocks decoded: {}\n",
        statistics.blocks_decoded
    ));
    out.text(&format!(
        "decode time:         {:.3} s ({:.1} M instructions/s, {:.1} MB/s of trace; {} walks replayed{})\n",
        seconds,
        instructions as f64 / seconds / 1e6,
        bytes / seconds / 1e6,
        totals.walks_replayed,
        totals
            .messages_replayed
            .map_or_else(String::new, |messages| format!(", {messages} of them whole messages"))
    ));
    if let Some(work) = totals.parallel.filter(|_| show_parallel_work) {
        out.text(&format!(
            "parallel decode:     {} chunks ({} started at a seam, {} given up), {} messages decoded serially at the joins ({:.1}%)\n",
            work.chunks,
            work.seam_starts,
            work.chunks_given_up,
            work.serial_messages,
            100.0 * work.serial_messages as f64 / statistics.messages.max(1) as f64
        ));
    }
    write_hottest_functions(&totals.block_profile, code, instructions, out);
}

/// Prints a thread's elements decoded already (a recording split at its context
/// switches) as `mode` wants: the instructions of each range are listed from the code
/// image, which holds the code of the context the range was decoded in.
fn decode_replayed(
    thread: &perf_session::ThreadElements,
    code: &TraceCode,
    mode: Output,
    multi_hart: bool,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let mut printer = Printer::new(code, mode, multi_hart, trace_name);
    let mut errors = thread.errors.iter().peekable();
    // (range start, instructions from it), for the summary's hottest functions.
    let mut block_profile: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    for (index, element) in thread.elements.iter().enumerate() {
        let mut cause = None;
        while let Some((at, error)) = errors.next_if(|(at, _)| *at <= index) {
            if *at == index {
                cause = Some(error);
            }
        }
        if let ElementKind::InstructionRange {
            start,
            instructions,
            ..
        } = element.kind
        {
            let total = block_profile.entry(start).or_default();
            *total = total.saturating_add(u64::from(instructions));
        }
        printer.element_from_image(
            element,
            cause.map(|error| error as &dyn std::fmt::Display),
            out,
        )?;
    }
    printer.finish(out)?;
    printer.warn_gaps();
    if mode == Output::Summary {
        out.text(&format!("trace:               {trace_name}\n"));
        out.text(&format!(
            "elements:            {} (decoded with every thread's code, split at the context switches)\n",
            thread.elements.len()
        ));
        if printer.gaps > 0 {
            out.text(&format!(
                "decode errors:       {} (each a gap; decoding resumed at the next synchronisation)\n",
                printer.gaps
            ));
        }
        out.text(&format!("instructions:        {}\n", thread.instructions));
        let mut profile: Vec<(u64, u64)> = block_profile.into_iter().collect();
        profile.sort_unstable();
        write_hottest_functions(&profile, code, thread.instructions, out);
    }
    Ok(())
}

/// Decodes a trace of another protocol than N-Trace (serially: their decoders have no
/// parallel form) and prints it as `mode` wants.
fn decode_other(
    format: TraceFormat,
    mode: Output,
    input: &TraceArgs,
    trace: &TraceFile,
    code: Option<&TraceCode>,
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let bytes = trace.bytes();
    let tandem_parameters = input.tandem_parameters(code.and_then(TraceCode::xlen));
    if mode == Output::Messages {
        return dump_other_messages(format, input, tandem_parameters, bytes, out, trace_name);
    }
    let code = code.context("--elf is required")?;
    let started = Instant::now();
    // Listings of blocks and instructions show the state a tandem trace carries.
    let state = match mode {
        Output::Blocks | Output::Insns => tandem_flow::StateElements::Report,
        _ => tandem_flow::StateElements::Omit,
    };
    let multi_hart = format == TraceFormat::Debug4 && debug4_has_harts(bytes, input);
    let mut printer = Printer::new(code, mode, multi_hart, trace_name);
    let mut block_profile: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    let mut totals = OtherTotals::default();
    let mut visit = |element: &TraceElement, cause: Option<&dyn std::fmt::Display>| {
        totals.elements += 1;
        match element.kind {
            ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } => {
                totals.instructions += u64::from(instructions);
                let total = block_profile.entry(start).or_default();
                *total = total.saturating_add(u64::from(instructions));
            }
            ElementKind::TraceOn { .. } => totals.synchronised = true,
            ElementKind::Gap { .. } => totals.gaps += 1,
            ElementKind::RegisterWrite { .. } | ElementKind::MemoryAccess { .. } => {
                totals.state_elements += 1;
            }
            _ => {}
        }
        printer.element_from_image(element, cause, out)
    };
    match format {
        TraceFormat::Debug4 => {
            let mut decoder =
                debug4_flow::Debug4Decoder::new(bytes, code.image(), input.debug4_options());
            while let Some(element) = decoder.next_element()? {
                let cause = decoder.gap_cause().copied();
                visit(
                    &element,
                    cause.as_ref().map(|error| error as &dyn std::fmt::Display),
                )?;
            }
            totals.skipped_bytes = decoder.skipped_bytes();
        }
        TraceFormat::Tandem => {
            let steps = tandem_flow::StepDecoder::new(bytes, tandem_parameters);
            let mut elements = tandem_flow::TandemElements::new(
                steps,
                tandem_flow::ElementOptions::default().with_state(state),
            );
            while let Some(element) = elements.next_element()? {
                let cause = elements.gap_cause().copied();
                visit(
                    &element,
                    cause.as_ref().map(|error| error as &dyn std::fmt::Display),
                )?;
            }
        }
        TraceFormat::NTrace => bail!("N-Trace is decoded by decode_flow"),
    }
    printer.finish(out)?;
    printer.warn_gaps();
    if !totals.synchronised {
        match &printer.first_error {
            Some(error) => bail!("{trace_name}: nothing decodable: {error}"),
            None => bail!(
                "{trace_name}: nothing decodable in {} bytes of {} trace",
                bytes.len(),
                format.name()
            ),
        }
    }
    if mode == Output::Summary {
        let seconds = started.elapsed().as_secs_f64().max(1e-9);
        out.text(&format!("trace:               {trace_name}\n"));
        out.text(&format!("format:              {}\n", format.name()));
        out.text(&format!("trace bytes:         {}\n", bytes.len()));
        out.text(&format!("elements:            {}\n", totals.elements));
        if totals.skipped_bytes > 0 {
            out.text(&format!(
                "skipped before sync: {} bytes (a wrapped buffer's oldest data)\n",
                totals.skipped_bytes
            ));
        }
        if totals.gaps > 0 {
            out.text(&format!("gaps (lost trace):   {}\n", totals.gaps));
        }
        out.text(&format!("instructions:        {}\n", totals.instructions));
        if totals.state_elements > 0 {
            out.text(&format!(
                "data elements:       {} (memory accesses and register writes)\n",
                totals.state_elements
            ));
        }
        out.text(&format!(
            "decode time:         {seconds:.3} s ({:.1} M instructions/s, {:.1} MB/s of trace)\n",
            totals.instructions as f64 / seconds / 1e6,
            bytes.len() as f64 / seconds / 1e6,
        ));
        let mut profile: Vec<(u64, u64)> = block_profile.into_iter().collect();
        profile.sort_unstable();
        write_hottest_functions(&profile, code, totals.instructions, out);
    }
    Ok(())
}

/// What a decode of another protocol counted.
#[derive(Default)]
struct OtherTotals {
    elements: u64,
    instructions: u64,
    gaps: u64,
    state_elements: u64,
    skipped_bytes: u64,
    synchronised: bool,
}

/// Whether a debug trace module stream names harts (Change Hart): its PCs are then
/// printed with the hart, as N-Trace's are with SRC.
fn debug4_has_harts(bytes: &[u8], input: &TraceArgs) -> bool {
    let options = input.debug4_options().stream;
    let mut decoder = debug4_message::SequenceDecoder::new(bytes, options);
    loop {
        match decoder.next_sequence() {
            Ok(Some(located)) => {
                if matches!(
                    located.sequence,
                    debug4_message::Sequence::ChangeHart { .. }
                ) {
                    return true;
                }
            }
            Ok(None) => return false,
            // The flow decode reports errors where they are.
            Err(_) => {}
        }
    }
}

/// The sequences (debug trace module) or records (tandem) of a trace, one per line; the
/// first error ends the listing with a one-line error naming its byte offset.
fn dump_other_messages(
    format: TraceFormat,
    input: &TraceArgs,
    tandem_parameters: tandem_message::Parameters,
    bytes: &[u8],
    out: &mut LineWriter<impl Write>,
    trace_name: &str,
) -> Result<()> {
    let mut line = String::new();
    match format {
        TraceFormat::Debug4 => {
            let mut decoder =
                debug4_message::SequenceDecoder::new(bytes, input.debug4_options().stream);
            loop {
                match decoder.next_sequence() {
                    Ok(Some(located)) => {
                        line.clear();
                        debug4_message::dump_sequence(&located, &mut line)
                            .map_err(|_| anyhow!("formatting failed"))?;
                        out.text(&line);
                        out.text("\n");
                        out.maybe_flush()?;
                    }
                    Ok(None) => break,
                    // The decoder resumes at the next synchronisation point: say where
                    // and go on, as the flow decode does.
                    Err(error) => {
                        out.text(&format!("# error: {error}\n"));
                        eprintln!("rvperf: warning: {trace_name}: {error}");
                    }
                }
            }
        }
        TraceFormat::Tandem => {
            let mut decoder = tandem_message::RecordDecoder::new(bytes, tandem_parameters);
            loop {
                match decoder.next_record() {
                    Ok(Some(located)) => {
                        line.clear();
                        tandem_message::dump_record(&located, tandem_parameters, &mut line)
                            .map_err(|_| anyhow!("formatting failed"))?;
                        out.text(&line);
                        out.text("\n");
                        out.maybe_flush()?;
                    }
                    Ok(None) => break,
                    // The protocol has no point to resume at.
                    Err(error) => bail!("{trace_name}: {error}"),
                }
            }
        }
        TraceFormat::NTrace => bail!("N-Trace messages are dumped by dump_messages"),
    }
    Ok(())
}

fn write_hottest_functions(
    block_profile: &[(u64, u64)],
    code: &TraceCode,
    instructions: u64,
    out: &mut LineWriter<impl Write>,
) {
    let ranked = code
        .functions()
        .totals_by_function(block_profile.iter().copied());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Two adjacent segments of halfwords, as `as` would lay out the code.
    fn image(first: &[u16], second: &[u16]) -> CodeImage {
        let mut image = CodeImage::new();
        let file = image.add_file("test");
        let bytes = |halves: &[u16]| halves.iter().flat_map(|half| half.to_le_bytes()).collect();
        image.add_segment(0x1000, bytes(first), true, file).unwrap();
        let second_start = 0x1000 + 2 * first.len() as u64;
        image
            .add_segment(second_start, bytes(second), true, file)
            .unwrap();
        image
    }

    fn addresses(image: &CodeImage, start: u64, instructions: u32) -> Option<Vec<u64>> {
        let mut pcs = vec![0xdead];
        push_instruction_addresses(
            image,
            RangeToPrint {
                start,
                instructions,
            },
            &mut pcs,
        )
        .then(|| pcs.split_off(1))
    }

    #[test]
    fn lists_a_range_by_the_lengths_of_its_instructions() {
        // c.nop; addi a0,a0,1; a 48-bit encoding (low bits 011111); c.nop | c.nop
        let image = image(&[0x0001, 0x0513, 0x0015, 0x001f, 0, 0, 0x0001], &[0x0001]);
        assert_eq!(
            addresses(&image, 0x1000, 4),
            Some(vec![0x1000, 0x1002, 0x1006, 0x100c])
        );
        // On into the next segment.
        assert_eq!(
            addresses(&image, 0x1002, 4),
            Some(vec![0x1002, 0x1006, 0x100c, 0x100e])
        );
        assert_eq!(addresses(&image, 0x1000, 0), Some(vec![]));
        // Past the end, and outside the image.
        assert_eq!(addresses(&image, 0x1002, 5), None);
        assert_eq!(addresses(&image, 0x2000, 1), None);
        // A reserved length (low bits 1111111).
        let reserved = self::image(&[0x007f, 0, 0, 0, 0, 0], &[0x0001]);
        assert_eq!(addresses(&reserved, 0x1000, 1), None);
    }
}
