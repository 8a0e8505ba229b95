//! What every command that decodes a trace reads: the ELF files that ran (`--elf
//! FILE[@LOAD_ADDR]`), the trace (`--trace`) and the encoder's settings, as one
//! flattened argument group ([`TraceArgs`]); the code loaded from the ELFs
//! (`perf_session::TraceCode`); and a decoder for profiles that reads around bad input,
//! keeps resident memory bounded and tells what it lost ([`GapReportingSource`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use code_image::{CodeImage, Xlen};
use ntrace_flow::{
    DecoderOptions, FlowDecoder, FlowError, FlowStatistics, ParallelDecoder, ParallelError,
    ParallelOptions, PulledElements, Recovery, ReturnStackModel,
};
use ntrace_message::{AddressWidth, MessageOptions};
use perf_session::{PlacedElf, ThreadElements, TraceCode};

use crate::trace_file::TraceFile;
use trace_elements::{ElementKind, ElementSource, GapReason, TraceElement};

/// The trace and the code it ran: `#[command(flatten)]` into a command's arguments.
#[derive(Debug, Clone, Args)]
pub struct TraceArgs {
    /// An ELF file the traced code came from; `FILE@LOAD_ADDR` places its lowest loadable
    /// segment at LOAD_ADDR (for shared objects and PIE). Repeat for several files.
    #[arg(long = "elf", value_name = "FILE[@LOAD_ADDR]")]
    pub elf: Vec<String>,
    /// The trace: N-Trace bytes (raw MSEO/MDO, as captured from the trace buffer), the
    /// debug specification's trace module data, or a tandem-verification trace.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// The trace's protocol; `auto` tells them apart by how each stream starts (a debug
    /// trace module stream with Trace Enabled, a tandem trace with a group), else N-Trace.
    /// (`rvperf decode --format` too.)
    #[arg(long = "trace-format", value_enum, default_value = "auto")]
    pub protocol: FormatChoice,
    /// Debug trace module: the size of the trace buffer the data was captured from
    /// (its eight synchronisation points are SIZE/8 bytes apart; default: the file's).
    #[arg(long, value_name = "BYTES")]
    pub buffer_size: Option<u64>,
    /// Debug trace module: the buffer wrapped, and its oldest data is at this byte
    /// offset (the write pointer); decoding starts at the first synchronisation point
    /// after it.
    #[arg(long, value_name = "OFFSET")]
    pub wrap_offset: Option<u64>,
    /// Debug trace module: how the trace source reported control transfers (`emitbranch`:
    /// branch outcomes and indirect targets; `emitpc`: a pair of PCs per taken transfer).
    #[arg(long, value_enum, default_value = "taken-not-taken")]
    pub branch_reporting: BranchReportingChoice,
    /// Width of the SRC field (trTeSrcBits); 0 when the encoder sends none.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=12))]
    pub src_bits: u8,
    /// Messages carry TSTAMP fields (trTsEnable); timestamps are shown in blocks/insns output.
    #[arg(long)]
    pub timestamps: bool,
    /// Addresses use the MSB extension of spec 8.2 (trTeInstExtendAddrMSB).
    #[arg(long)]
    pub addr_ext: bool,
    /// The encoder reports every direct jump and call as a taken branch, a HIST bit or a
    /// DirectBranch message each (trTeInstEnAllJumps).
    #[arg(long)]
    pub all_jumps: bool,
    /// Depth of the implicit-return stack; at least the encoder's (0 disables implicit returns).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STACK, value_parser = clap::value_parser!(u16).range(0..=1024))]
    pub max_stack: u16,
    /// How the encoder's implicit-return stack behaves when full: it forgets its oldest
    /// entry (rvperf's encoder model, the default), or it is the N-Trace reference
    /// code's ring (`NexRv -enco -cs N`: pushes wrap around N + 1 slots, pops around N).
    #[arg(long, value_enum, default_value = "drop-oldest")]
    pub stack_model: StackModel,
}

/// `--max-stack`'s default: the depth of the encoders rvperf models.
const DEFAULT_MAX_STACK: u16 = 32;

/// The command line's defaults: no files, and the encoder options a trace without any
/// says (a recording's own replace them).
impl Default for TraceArgs {
    fn default() -> Self {
        Self {
            elf: Vec::new(),
            trace: None,
            protocol: FormatChoice::Auto,
            buffer_size: None,
            wrap_offset: None,
            branch_reporting: BranchReportingChoice::TakenNotTaken,
            src_bits: 0,
            timestamps: false,
            addr_ext: false,
            all_jumps: false,
            max_stack: DEFAULT_MAX_STACK,
            stack_model: StackModel::DropOldest,
        }
    }
}

/// The code of each distinct set of files, loaded once: a recording's threads of one
/// program (and forks that have not exec'd yet) run the same files, and a large ELF
/// takes longer to load than its thread's trace to decode.
#[derive(Default)]
pub struct CodeCache {
    loaded: Vec<(Vec<String>, std::rc::Rc<TraceCode>)>,
}

impl CodeCache {
    /// The code of `input`'s `--elf` files (see [`TraceArgs::load_code`]).
    pub fn code_for(&mut self, input: &TraceArgs) -> Result<std::rc::Rc<TraceCode>> {
        if let Some((_, code)) = self.loaded.iter().find(|(elf, _)| *elf == input.elf) {
            return Ok(std::rc::Rc::clone(code));
        }
        let code = std::rc::Rc::new(input.load_code()?);
        self.loaded
            .push((input.elf.clone(), std::rc::Rc::clone(&code)));
        Ok(code)
    }
}

/// A trace as a command reads it.
pub enum TraceInput {
    /// N-Trace message bytes, decoded by the command.
    Messages(TraceFile),
    /// One thread's elements, decoded already: a recording split by the task contexts
    /// it reports (`perf_session::decode_by_context`), whose trace cannot be cut into
    /// streams of their own. Replayed by [`TraceSource::Replayed`].
    Decoded(ThreadElements),
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatChoice {
    Auto,
    Ntrace,
    /// The RISC-V debug specification's trace module (4-bit packets).
    Debug4,
    /// The tandem-verification trace protocol.
    Tandem,
}

/// `--branch-reporting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BranchReportingChoice {
    TakenNotTaken,
    PcPairs,
}

/// A trace's protocol, once known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    NTrace,
    Debug4,
    Tandem,
}

impl TraceFormat {
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::NTrace => "N-Trace",
            TraceFormat::Debug4 => "debug trace module",
            TraceFormat::Tandem => "tandem verification",
        }
    }
}

/// Why a trace of any protocol could not be followed at a place.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TraceError {
    #[error(transparent)]
    NTrace(#[from] FlowError),
    #[error(transparent)]
    Debug4(#[from] debug4_flow::FlowError),
    #[error(transparent)]
    Tandem(#[from] tandem_flow::FlowError),
}

/// `--stack-model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StackModel {
    DropOldest,
    ReferenceCode,
}

/// `FILE` or `FILE@LOAD_ADDR` of `--elf`.
pub fn parse_elf_argument(argument: &str) -> Result<PlacedElf> {
    if let Some((path, address)) = argument.rsplit_once('@') {
        let digits = address
            .strip_prefix("0x")
            .or_else(|| address.strip_prefix("0X"));
        let parsed = match digits {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => address.parse::<u64>(),
        };
        return match parsed {
            Ok(load) => Ok(PlacedElf {
                path: PathBuf::from(path),
                load_address: Some(load),
            }),
            Err(_) => {
                bail!("--elf {argument}: LOAD_ADDR {address:?} is not a number (use 0x... for hex)")
            }
        };
    }
    Ok(PlacedElf {
        path: PathBuf::from(argument),
        load_address: None,
    })
}

impl TraceArgs {
    pub fn placed_elves(&self) -> Result<Vec<PlacedElf>> {
        self.elf
            .iter()
            .map(|argument| parse_elf_argument(argument))
            .collect()
    }

    /// Loads the `--elf` files (at least one), warning about files without names.
    pub fn load_code(&self) -> Result<TraceCode> {
        if self.elf.is_empty() {
            bail!("--elf is required to follow the program flow");
        }
        let code = TraceCode::load(&self.placed_elves()?)?;
        for unnamed in code.unnamed_files() {
            eprintln!(
                "rvperf: warning: {}: functions are not named",
                unnamed.error
            );
        }
        Ok(code)
    }

    /// The protocol of `bytes`: `--format`, or told from how the stream starts.
    pub fn format_of(&self, bytes: &[u8]) -> TraceFormat {
        match self.protocol {
            FormatChoice::Ntrace => TraceFormat::NTrace,
            FormatChoice::Debug4 => TraceFormat::Debug4,
            FormatChoice::Tandem => TraceFormat::Tandem,
            // A wrapped buffer does not start where the stream did: its options say it.
            FormatChoice::Auto if self.has_debug4_options() => TraceFormat::Debug4,
            FormatChoice::Auto if debug4_message::detect(bytes) => TraceFormat::Debug4,
            FormatChoice::Auto if tandem_message::detect(bytes) => TraceFormat::Tandem,
            FormatChoice::Auto => TraceFormat::NTrace,
        }
    }

    /// The debug trace module decoder's options.
    pub fn debug4_options(&self) -> debug4_flow::DecoderOptions {
        let stream = debug4_flow::StreamOptions::default()
            .with_buffer_bytes(self.buffer_size)
            .with_wrap_offset(self.wrap_offset);
        let reporting = match self.branch_reporting {
            BranchReportingChoice::TakenNotTaken => debug4_flow::BranchReporting::TakenNotTaken,
            BranchReportingChoice::PcPairs => debug4_flow::BranchReporting::PcPairs,
        };
        debug4_flow::DecoderOptions::new(stream, reporting)
    }

    /// The tandem trace's parameters: appendix C's RV64GC hart (XLEN, FLEN and MLEN 64),
    /// or XLEN 32 for RV32 code.
    pub fn tandem_parameters(&self, xlen: Option<Xlen>) -> tandem_message::Parameters {
        match xlen {
            Some(Xlen::Rv32) => tandem_message::Parameters::new(
                tandem_message::Xlen::Bits32,
                tandem_message::Flen::Bits64,
                tandem_message::AddressWidth::Bits40,
            ),
            _ => tandem_message::Parameters::default(),
        }
    }

    /// Whether an option only debug trace module traces have was given.
    fn has_debug4_options(&self) -> bool {
        self.buffer_size.is_some()
            || self.wrap_offset.is_some()
            || self.branch_reporting != BranchReportingChoice::TakenNotTaken
    }

    /// Refuses the options of one protocol given for a trace of another.
    pub fn check_format_options(&self, format: TraceFormat) -> Result<()> {
        let debug4_options = self.has_debug4_options();
        let ntrace_options = self.src_bits != 0
            || self.timestamps
            || self.addr_ext
            || self.all_jumps
            || self.max_stack != DEFAULT_MAX_STACK
            || self.stack_model != StackModel::DropOldest;
        if debug4_options && format != TraceFormat::Debug4 {
            bail!("--buffer-size, --wrap-offset and --branch-reporting are options of debug trace module traces; this trace is {}", format.name());
        }
        if ntrace_options && format != TraceFormat::NTrace {
            bail!("--src-bits, --timestamps, --addr-ext, --all-jumps, --max-stack and --stack-model are options of N-Trace traces; this trace is {}", format.name());
        }
        Ok(())
    }

    /// The wire options of the trace, its address width from the code's.
    pub fn message_options(&self, xlen: Option<Xlen>) -> MessageOptions {
        MessageOptions::default()
            .with_src_bits(self.src_bits)
            .with_timestamps(self.timestamps)
            .with_address_msb_extension(self.addr_ext)
            .with_address_width(match xlen {
                Some(Xlen::Rv32) => AddressWidth::Bits32,
                _ => AddressWidth::Bits64,
            })
    }

    /// The flow decoder's options: every range, and errors reported as gaps the decode
    /// resumes after.
    pub fn decoder_options(&self, code: &TraceCode) -> DecoderOptions {
        DecoderOptions::default()
            .with_message(self.message_options(code.xlen()))
            .with_return_stack_depth(usize::from(self.max_stack))
            .with_return_stack_model(match self.stack_model {
                StackModel::DropOldest => ReturnStackModel::DropOldest,
                StackModel::ReferenceCode => ReturnStackModel::ReferenceCode,
            })
            .with_all_jumps(self.all_jumps)
            .with_recovery(Recovery::Resync)
    }
}

/// How many gaps are warned about one by one (the rest are counted), in every command
/// that decodes a trace.
pub const GAPS_SHOWN: u64 = 5;

/// `--jobs` (and the hidden `--chunk-bytes`): how many threads decode a trace.
#[derive(Debug, Clone, Args)]
pub struct JobsArgs {
    /// Threads decoding chunks of the trace (1: the serial decoder; default: the
    /// available cores for `decode`, 1 for the profiles). The output is the same for any
    /// number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Trace bytes per chunk of a parallel decode (tests cut tiny chunks to cross many
    /// seams).
    #[arg(long, value_name = "BYTES", hide = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub chunk_bytes: Option<u64>,
}

impl JobsArgs {
    /// How a profile command decodes: `None` (serial) unless `--jobs` asks for more
    /// than one thread. A profile's own work (call stacks, counts) runs beside the
    /// decode, and on two cores the parallel decode's join and workers leave it no core
    /// (measured: the flame graph of the interp trace 0.226 s on two threads, 0.187 s
    /// on one), so the default is one.
    pub fn for_profiles(&self) -> Option<ParallelOptions> {
        let threads = self.jobs.map_or(1, usize::from);
        (threads > 1).then(|| self.parallel_options(threads))
    }

    /// `--jobs`, or the available cores.
    pub fn jobs(&self) -> usize {
        self.jobs.map_or_else(
            || std::thread::available_parallelism().map_or(1, usize::from),
            usize::from,
        )
    }

    /// A parallel decode on `threads` threads, with `--chunk-bytes`.
    pub fn parallel_options(&self, threads: usize) -> ParallelOptions {
        let parallel = ParallelOptions::default().with_jobs(threads);
        match self.chunk_bytes {
            Some(bytes) => parallel.with_chunk_bytes(usize::try_from(bytes).unwrap_or(usize::MAX)),
            None => parallel,
        }
    }
}

/// The decoders profiles read from: the serial decoder, the elements of a parallel
/// decode pulled in order, a thread's elements decoded already, or the decoder of
/// another protocol.
pub enum TraceSource<'d, 'a> {
    Serial(&'d mut FlowDecoder<'a>),
    Parallel(&'d mut PulledElements),
    Replayed(ReplayedElements<'d>),
    /// The decoder, and the code its ranges are listed from.
    Debug4(&'d mut debug4_flow::Debug4Decoder<'a>, &'a CodeImage),
    Tandem(&'d mut tandem_flow::TandemElements<'a>, &'a CodeImage),
}

/// A thread's decoded elements given again in order, with the error behind each
/// decode-error gap, and its instructions listed from the code image.
pub struct ReplayedElements<'d> {
    thread: &'d ThreadElements,
    image: &'d CodeImage,
    next: usize,
    /// Index into `thread.errors` of the first error not yet passed.
    next_error: usize,
    /// The error behind the gap returned last.
    last_error: Option<&'d FlowError>,
}

impl<'d> ReplayedElements<'d> {
    pub fn new(thread: &'d ThreadElements, image: &'d CodeImage) -> Self {
        Self {
            thread,
            image,
            next: 0,
            next_error: 0,
            last_error: None,
        }
    }

    fn next_element(&mut self) -> Option<TraceElement> {
        let index = self.next;
        let element = *self.thread.elements.get(index)?;
        self.next += 1;
        self.last_error = None;
        while let Some((at, error)) = self.thread.errors.get(self.next_error) {
            if *at > index {
                break;
            }
            if *at == index {
                self.last_error = Some(error);
            }
            self.next_error += 1;
        }
        Some(element)
    }
}

impl TraceSource<'_, '_> {
    #[inline]
    fn next_element(&mut self) -> Result<Option<TraceElement>, TraceError> {
        Ok(match self {
            TraceSource::Serial(decoder) => decoder.next_element()?,
            TraceSource::Parallel(pulled) => pulled.next_element()?,
            TraceSource::Replayed(replayed) => replayed.next_element(),
            TraceSource::Debug4(decoder, _) => decoder.next_element()?,
            TraceSource::Tandem(elements, _) => elements.next_element()?,
        })
    }

    /// The error behind the decode-error gap returned last.
    fn gap_cause(&self) -> Option<TraceError> {
        match self {
            TraceSource::Serial(_) | TraceSource::Parallel(_) | TraceSource::Replayed(_) => {
                self.last_recovered_error().cloned().map(TraceError::NTrace)
            }
            TraceSource::Debug4(decoder, _) => decoder.gap_cause().copied().map(TraceError::Debug4),
            TraceSource::Tandem(elements, _) => {
                elements.gap_cause().copied().map(TraceError::Tandem)
            }
        }
    }

    /// Every element to the end, with the error behind each decode-error gap.
    fn for_each_element<F>(&mut self, mut visit: F) -> Result<(), TraceError>
    where
        F: FnMut(&TraceElement, Option<&TraceError>),
    {
        let mut visit_ntrace = |element: &TraceElement, cause: Option<&FlowError>| {
            // Gaps are rare: the error is copied for them alone.
            let cause = cause.cloned().map(TraceError::NTrace);
            visit(element, cause.as_ref());
        };
        match self {
            TraceSource::Serial(decoder) => Ok(decoder.for_each_element(visit_ntrace)?),
            TraceSource::Parallel(pulled) => Ok(pulled.for_each_element(visit_ntrace)?),
            TraceSource::Replayed(replayed) => {
                while let Some(element) = replayed.next_element() {
                    visit_ntrace(&element, replayed.last_error);
                }
                Ok(())
            }
            TraceSource::Debug4(decoder, _) => Ok(decoder.for_each_element(|element, cause| {
                let cause = cause.copied().map(TraceError::Debug4);
                visit(element, cause.as_ref());
            })?),
            TraceSource::Tandem(elements, _) => {
                Ok(elements.for_each_element(|element, cause| {
                    let cause = cause.copied().map(TraceError::Tandem);
                    visit(element, cause.as_ref());
                })?)
            }
        }
    }
}

impl TraceSource<'_, '_> {
    /// The address of instruction `index` of the range from `start` returned last: the
    /// serial decoder lists it from its blocks, a replay from the code image; a parallel
    /// decode's elements do not keep their blocks (`None`).
    pub fn instruction_address(&self, start: u64, index: u32) -> Option<u64> {
        match self {
            TraceSource::Serial(decoder) => instruction_address(decoder, start, index),
            TraceSource::Parallel(_) => None,
            TraceSource::Replayed(replayed) => {
                nth_instruction_in_image(replayed.image, start, index)
            }
            TraceSource::Debug4(_, image) | TraceSource::Tandem(_, image) => {
                nth_instruction_in_image(image, start, index)
            }
        }
    }

    fn last_recovered_error(&self) -> Option<&FlowError> {
        match self {
            TraceSource::Serial(decoder) => decoder.last_recovered_error(),
            TraceSource::Parallel(pulled) => pulled.last_recovered_error(),
            TraceSource::Replayed(replayed) => replayed.last_error,
            TraceSource::Debug4(..) | TraceSource::Tandem(..) => None,
        }
    }
}

/// The address of instruction `index` of a range from `start`, from the code image;
/// `None` when the range runs out of the image (which a decoder that walked it rules
/// out).
pub fn nth_instruction_in_image(image: &CodeImage, start: u64, index: u32) -> Option<u64> {
    let mut last = None;
    let count = index.checked_add(1)?;
    for_each_instruction_in_image(image, start, count, |address| last = Some(address))
        .then_some(last)
        .flatten()
}

/// Calls `visit` with the address of each of `count` instructions from `start`, read
/// from the code image: the instructions follow each other, each as long as its first
/// halfword says. False when the range runs out of the image.
#[inline]
pub fn for_each_instruction_in_image(
    image: &CodeImage,
    start: u64,
    count: u32,
    mut visit: impl FnMut(u64),
) -> bool {
    let mut address = start;
    let mut left = count;
    while left > 0 {
        // The range may run on into the next segment.
        let Some(segment) = image
            .segment_index(address)
            .and_then(|index| image.segment(index))
        else {
            return false;
        };
        let Ok(mut offset) = usize::try_from(address - segment.start) else {
            return false;
        };
        let bytes = segment.bytes();
        while left > 0 {
            let Some(&[low, high]) = bytes.get(offset..offset + 2) else {
                break;
            };
            let Some(length) =
                riscv_insn::instruction_length(u16::from_le_bytes([low, high])).bytes()
            else {
                return false;
            };
            visit(address);
            address = address.wrapping_add(u64::from(length));
            offset += usize::from(length);
            left -= 1;
        }
    }
    true
}

/// Decodes `path` (mapped as `trace`) into `consume`, through a [`GapReportingSource`]:
/// serially, or with `parallel` on several threads ([`ParallelDecoder::pull`]). Pages
/// of the trace the decode has passed are given back as it goes. Fails, after
/// `consume` and before the caller commits any output, when nothing could be decoded;
/// warns about what was lost.
pub fn decode_trace<R>(
    arguments: &TraceArgs,
    parallel: Option<ParallelOptions>,
    code: &TraceCode,
    trace: &TraceInput,
    path: &Path,
    consume: impl FnOnce(&mut GapReportingSource<TraceSource<'_, '_>>) -> Result<R>,
) -> Result<R> {
    let trace = match trace {
        TraceInput::Messages(trace) => trace,
        TraceInput::Decoded(thread) => {
            let replayed = ReplayedElements::new(thread, code.image());
            let mut source = GapReportingSource::new(TraceSource::Replayed(replayed), path);
            // The thread's elements start wherever it first ran, synchronised: a gap
            // before its first trace-on is no wrapped buffer's start.
            source.report.synchronised = true;
            let result = consume(&mut source)?;
            source.report.finish_replayed();
            return Ok(result);
        }
    };
    let format = arguments.format_of(trace.bytes());
    arguments.check_format_options(format)?;
    match format {
        TraceFormat::NTrace => {}
        // The other protocols decode serially: their decoders have no parallel form.
        TraceFormat::Debug4 => {
            let mut decoder = debug4_flow::Debug4Decoder::new(
                trace.bytes(),
                code.image(),
                arguments.debug4_options(),
            );
            let mut source =
                GapReportingSource::new(TraceSource::Debug4(&mut decoder, code.image()), path);
            let result = consume(&mut source)?;
            source.report.finish_other(format, trace.bytes().len())?;
            return Ok(result);
        }
        TraceFormat::Tandem => {
            let steps = tandem_flow::StepDecoder::new(
                trace.bytes(),
                arguments.tandem_parameters(code.xlen()),
            );
            let mut elements =
                tandem_flow::TandemElements::new(steps, tandem_flow::ElementOptions::default());
            let mut source =
                GapReportingSource::new(TraceSource::Tandem(&mut elements, code.image()), path);
            let result = consume(&mut source)?;
            source.report.finish_other(format, trace.bytes().len())?;
            return Ok(result);
        }
    }
    let options = arguments.decoder_options(code);
    let Some(parallel) = parallel else {
        let mut decoder = FlowDecoder::new(
            trace.bytes(),
            code.image(),
            code.decode_infos().to_vec(),
            options,
        );
        let progress = decoder.progress();
        let (result, report) = trace.releasing_pages_during(&progress, || {
            let mut source = GapReportingSource::new(TraceSource::Serial(&mut decoder), path);
            let result = consume(&mut source);
            (result, source.report)
        });
        let result = result?;
        report.finish(&decoder.statistics(), trace.bytes().len())?;
        return Ok(result);
    };
    let decoder = ParallelDecoder::new(
        trace.bytes(),
        code.image(),
        code.decode_infos().to_vec(),
        options,
        parallel,
    );
    let progress = decoder.progress();
    let pulled = trace.releasing_pages_during(&progress, || {
        decoder.pull(|pulled| {
            let mut source = GapReportingSource::new(TraceSource::Parallel(pulled), path);
            let result = consume(&mut source);
            (result, source.report)
        })
    });
    let ((result, report), summary) = match pulled {
        Ok(pulled) => pulled,
        Err(ParallelError::ThreadPool(error)) => {
            bail!("cannot start the decoding threads: {error}")
        }
        Err(error) => bail!("parallel decode failed: {error:?}"),
    };
    let result = result?;
    let Some(summary) = summary else {
        bail!("{}: the parallel decode stopped early", path.display());
    };
    report.finish(&summary.statistics, trace.bytes().len())?;
    Ok(result)
}

/// A decoder for profile building: reads around corrupt or truncated trace (each
/// gap is warned about, up to a few, with its byte offset) and counts what it lost.
pub struct GapReportingSource<S> {
    source: S,
    report: GapReport,
    /// The error behind the decode-error gap returned last.
    last_cause: Option<TraceError>,
}

/// What a [`GapReportingSource`] saw go missing.
struct GapReport {
    trace_name: String,
    /// Whether a hart was synchronised yet (a gap before is a wrapped buffer's start).
    synchronised: bool,
    decode_gaps: u64,
    gaps_before_sync: u64,
    encoder_gaps: u64,
}

impl<S> GapReportingSource<S> {
    pub fn new(source: S, trace_name: &Path) -> Self {
        Self {
            source,
            last_cause: None,
            report: GapReport {
                trace_name: trace_name.display().to_string(),
                synchronised: false,
                decode_gaps: 0,
                gaps_before_sync: 0,
                encoder_gaps: 0,
            },
        }
    }

    pub fn source(&self) -> &S {
        &self.source
    }
}

impl GapReport {
    /// Warns once more about what was lost, in total; fails when nothing could be
    /// decoded at all.
    fn finish(&self, statistics: &FlowStatistics, trace_bytes: usize) -> Result<()> {
        if statistics.sync_messages == 0 {
            bail!(
                "{}: no synchronisation message in {trace_bytes} bytes: nothing can be decoded",
                self.trace_name
            );
        }
        if self.gaps_before_sync > 0 {
            eprintln!(
                "rvperf: warning: {}: skipped undecodable bytes before the first synchronisation ({} places)",
                self.trace_name, self.gaps_before_sync
            );
        }
        if self.decode_gaps > 0 && statistics.skipped_units > 0 {
            eprintln!(
                "rvperf: warning: {}: the profile misses what the undecoded trace held: {} I-CNT units (16-bit instruction units, about {} to {} instructions)",
                self.trace_name,
                statistics.skipped_units,
                statistics.skipped_units / 2,
                statistics.skipped_units
            );
        }
        self.warn_gaps();
        if statistics.unresolved_units_at_end > 0 {
            eprintln!(
                "rvperf: warning: {}: the trace ends with {} I-CNT units (16-bit instruction units) not followed by a message that places them; those instructions are not counted",
                self.trace_name, statistics.unresolved_units_at_end
            );
        }
        Ok(())
    }
}

impl GapReport {
    /// [`GapReport::finish`] for a trace of another protocol: fails when it never
    /// synchronised (nothing could be decoded).
    fn finish_other(&self, format: TraceFormat, trace_bytes: usize) -> Result<()> {
        if !self.synchronised {
            bail!(
                "{}: nothing decodable in {trace_bytes} bytes of {} trace",
                self.trace_name,
                format.name()
            );
        }
        self.warn_gaps();
        Ok(())
    }

    /// [`GapReport::finish`] for a thread's elements decoded already: what the whole
    /// decode lost (I-CNT units skipped, a trace cut short) was said once, by the
    /// recording's loader.
    fn finish_replayed(&self) {
        self.warn_gaps();
    }

    /// The gaps not shown one by one, and the encoder's losses.
    fn warn_gaps(&self) {
        if self.decode_gaps > GAPS_SHOWN {
            eprintln!(
                "rvperf: warning: {}: {} places in all where the trace could not be followed (the decode resumed at the next synchronisation each time)",
                self.trace_name, self.decode_gaps
            );
        }
        if self.encoder_gaps > 0 {
            eprintln!(
                "rvperf: warning: {}: the encoder reported {} losses of trace (overflow): execution there is missing",
                self.trace_name, self.encoder_gaps
            );
        }
    }
}

impl ElementSource for GapReportingSource<TraceSource<'_, '_>> {
    type Error = TraceError;

    #[inline]
    fn next_element(&mut self) -> Result<Option<TraceElement>, TraceError> {
        let element = self.source.next_element()?;
        if let Some(element) = &element {
            if is_noted(element) {
                self.last_cause = self.source.gap_cause();
                self.report.note(element, self.last_cause.as_ref());
            }
        }
        Ok(element)
    }

    fn gap_cause(&self) -> Option<&TraceError> {
        self.last_cause.as_ref()
    }

    fn for_each_element<F>(&mut self, mut visit: F) -> Result<(), TraceError>
    where
        F: FnMut(&TraceElement, Option<&TraceError>),
    {
        let report = &mut self.report;
        self.source.for_each_element(|element, cause| {
            if is_noted(element) {
                report.note(element, cause);
            }
            visit(element, cause);
        })
    }
}

/// Whether the gap report notes `element`: a synchronisation or a gap.
#[inline]
fn is_noted(element: &TraceElement) -> bool {
    matches!(
        element.kind,
        ElementKind::TraceOn { .. } | ElementKind::Gap { .. }
    )
}

impl GapReport {
    /// Notes a synchronisation or a gap (`cause`: the error behind a decode-error gap),
    /// warning about the first few decode errors.
    #[cold]
    #[inline(never)]
    fn note(&mut self, element: &TraceElement, cause: Option<&TraceError>) {
        let offset = element.offset;
        match element.kind {
            ElementKind::TraceOn { .. } => self.synchronised = true,
            ElementKind::Gap { reason } => match reason {
                // Bytes before the first synchronisation (a wrapped buffer starts inside
                // a message) are said once, at the end.
                GapReason::DecodeError { .. } if !self.synchronised => {
                    self.gaps_before_sync += 1;
                }
                GapReason::DecodeError { .. } => {
                    self.decode_gaps += 1;
                    if self.decode_gaps <= GAPS_SHOWN {
                        let cause = cause.map_or_else(
                            || format!("undecodable trace at byte offset {offset:#x}"),
                            ToString::to_string,
                        );
                        eprintln!(
                            "rvperf: warning: {}: gap: {cause}; decoding resumes at the next synchronisation",
                            self.trace_name
                        );
                    }
                }
                GapReason::EncoderOverflow { .. } => self.encoder_gaps += 1,
            },
            _ => {}
        }
    }
}

/// The address of instruction `index` of the range from `start` the decoder returned
/// last.
pub fn instruction_address(decoder: &FlowDecoder<'_>, start: u64, index: u32) -> Option<u64> {
    let mut address = None;
    let count = index.checked_add(1)?;
    decoder
        .for_each_instruction(start, count, |pc| address = Some(pc))
        .then_some(address)
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `TraceArgs::default()` is what an empty command line parses to.
    #[test]
    fn the_default_arguments_are_the_command_lines() {
        use clap::FromArgMatches;
        let matches = <TraceArgs as clap::Args>::augment_args(clap::Command::new("decode"))
            .try_get_matches_from(["decode"])
            .unwrap();
        let parsed = TraceArgs::from_arg_matches(&matches).unwrap();
        assert_eq!(format!("{parsed:?}"), format!("{:?}", TraceArgs::default()));
    }

    #[test]
    fn elf_arguments_with_and_without_a_load_address() {
        assert_eq!(
            parse_elf_argument("lib.so@0x4000").unwrap(),
            PlacedElf {
                path: PathBuf::from("lib.so"),
                load_address: Some(0x4000)
            }
        );
        assert_eq!(
            parse_elf_argument("a@b@4096").unwrap(),
            PlacedElf {
                path: PathBuf::from("a@b"),
                load_address: Some(4096)
            }
        );
        assert_eq!(parse_elf_argument("prog").unwrap().load_address, None);
        assert!(parse_elf_argument("prog@0xzz").is_err());
    }
}
