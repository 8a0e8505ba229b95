//! `rvperf-tracegen`: runs a riscv64 program under `qemu-riscv64` (or reads a saved exec
//! log) and encodes its retired-instruction stream as N-Trace with rvperf's encoder
//! model. A development tool: it makes the bundled fixtures and the benchmark traces.
//!
//! The QEMU log is streamed through a FIFO, so tracing a program of tens of millions of
//! instructions needs neither gigabytes of disk nor of memory.

use std::fs::File;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use code_image::{load_elf, CodeImage};
use debug4_flow::{
    BranchReporting, BufferMode, DataEmission, Emission, EncoderOptions as Debug4Options,
};
use ntrace_flow::{BranchMode, EncoderOptions, TraceEncoder};
use ntrace_message::{AddressWidth, MessageOptions};
use tandem_flow::{EncoderOptions as TandemOptions, PcUpdates, Tracing};
use tandem_message::Parameters;
use trace_gen::cpu_log::CpuLogReader;
use trace_gen::debug4::Debug4FromQemu;
use trace_gen::qemu::{ExecLogReader, LogContent, QemuUser};
use trace_gen::tandem::TandemFromQemu;

/// The trace protocol written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Ntrace,
    /// The RISC-V debug specification's trace module (4-bit packets).
    Debug4,
    /// The tandem-verification trace protocol (every register write, memory accesses).
    Tandem,
}

/// State a partial tandem trace leaves out (`--omit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TandemPart {
    Integer,
    Float,
    Csrs,
    Memory,
}

/// Debug trace module: how control transfers are reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Reporting {
    /// `emitbranch`: branch outcomes and the destinations of indirect transfers.
    TakenNotTaken,
    /// `emitpc`: a pair of PCs (from, to) per taken transfer.
    PcPairs,
}

/// Debug trace module: which data sequences are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Data {
    None,
    /// Load and store addresses.
    Addresses,
    /// Load and store addresses and data.
    All,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Mode {
    Btm,
    Htm,
}

#[derive(Debug, Parser)]
#[command(
    name = "rvperf-tracegen",
    about = "Encode a program's retired instructions as N-Trace"
)]
struct Arguments {
    /// The riscv64 ELF that runs (static), also used to classify instructions.
    #[arg(long)]
    elf: PathBuf,
    /// Read a saved QEMU log instead of running: `-d nochain,exec` (N-Trace, the debug
    /// trace module) or `-d nochain,cpu,fpu` (tandem).
    #[arg(long, value_name = "LOG")]
    qemu_log: Option<PathBuf>,
    /// The protocol: N-Trace (default), the debug trace module or tandem verification.
    #[arg(long, value_enum, default_value_t = Format::Ntrace)]
    format: Format,
    /// Debug trace module: how control transfers are reported.
    #[arg(long, value_enum, default_value_t = Reporting::TakenNotTaken)]
    branch_reporting: Reporting,
    /// Debug trace module: write into a ring buffer of this many bytes (a multiple of
    /// 32, at least 256), which wraps, instead of a file that grows.
    #[arg(long, value_name = "BYTES")]
    buffer_size: Option<u64>,
    /// Debug trace module: the data sequences sent (addresses and data need QEMU's
    /// register log: slower).
    #[arg(long, value_enum, default_value_t = Data::None)]
    data: Data,
    /// Debug trace module: a Timestamp every N retired instructions (0: none).
    #[arg(long, value_name = "N", default_value_t = 0)]
    timestamp_every: u64,
    /// Tandem: leave this state out (a partial trace); repeat or separate with commas.
    #[arg(long, value_enum, value_delimiter = ',')]
    omit: Vec<TandemPart>,
    /// Tandem: write every pc as a value, never as `increment pc`.
    #[arg(long)]
    pc_values: bool,
    /// Write the trace bytes here (written to a temporary file, then renamed).
    #[arg(short, long)]
    output: PathBuf,
    /// Also write every retired PC, one `0x...` per line (the ground truth).
    #[arg(long, value_name = "FILE")]
    pcs_output: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = Mode::Htm)]
    mode: Mode,
    /// Implicit-return stack depth (0 reports every return).
    #[arg(long, default_value_t = 32)]
    return_stack: usize,
    #[arg(long)]
    no_repeated_history: bool,
    #[arg(long)]
    no_repeat_branch: bool,
    #[arg(long)]
    sequential_jumps: bool,
    /// Report every direct jump and call as a taken branch, a HIST bit or a DirectBranch
    /// message each (trTeInstEnAllJumps); decode with `rvperf decode --all-jumps`.
    #[arg(long)]
    all_jumps: bool,
    /// Report `ecall`/`ebreak` as the reference encoder does (an uninferable call, B-TYPE
    /// 0, its return address pushed) instead of as an exception: traces the N-Trace
    /// reference decoder (NexRv) can read.
    #[arg(long)]
    ecall_as_jump: bool,
    #[arg(long, default_value_t = 0)]
    src_bits: u8,
    #[arg(long, default_value_t = 0)]
    src_id: u16,
    #[arg(long)]
    timestamps: bool,
    #[arg(long)]
    addr_ext: bool,
    /// Periodic synchronisation every N messages (0: never).
    #[arg(long, default_value_t = 0)]
    periodic_sync: u32,
    #[arg(long, default_value_t = 22)]
    icnt_bits: u8,
    #[arg(long, default_value_t = 32)]
    hist_bits: u8,
    /// Program arguments (when running the program).
    #[arg(last = true)]
    program_arguments: Vec<String>,
}

fn main() {
    if let Err(error) = run(&Arguments::parse()) {
        eprintln!(
            "rvperf-tracegen: error: {}",
            format!("{error:#}").replace('\n', " ")
        );
        std::process::exit(1);
    }
}

struct Sink {
    encoder_output: BufWriter<File>,
    pcs: Option<BufWriter<File>>,
}

fn encode_stream<R: BufRead>(
    reader: ExecLogReader<R>,
    encoder: &mut TraceEncoder<'_>,
    sink: &mut Sink,
) -> Result<u64> {
    let mut count = 0u64;
    for pc in reader {
        let pc = pc?;
        encoder.retire(pc)?;
        if let Some(pcs) = sink.pcs.as_mut() {
            writeln!(pcs, "{pc:#x}")?;
        }
        count += 1;
        if count % (1 << 16) == 0 {
            sink.encoder_output.write_all(&encoder.take_output())?;
        }
    }
    Ok(count)
}

/// Feeds the encoder from a saved log or from QEMU running the program.
fn produce(arguments: &Arguments, encoder: &mut TraceEncoder<'_>, sink: &mut Sink) -> Result<u64> {
    with_log(arguments, LogContent::Addresses, |log| {
        encode_stream(ExecLogReader::new(log), encoder, sink)
    })
}

fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Runs `consume` over QEMU's log of `content`: a saved one (`--qemu-log`), or the
/// program run now, streamed.
fn with_log<T: Send>(
    arguments: &Arguments,
    content: LogContent,
    consume: impl FnOnce(&mut dyn BufRead) -> Result<T> + Send,
) -> Result<T> {
    if let Some(log) = &arguments.qemu_log {
        let file = File::open(log).with_context(|| format!("cannot open {}", log.display()))?;
        return consume(&mut std::io::BufReader::with_capacity(1 << 20, file));
    }
    let qemu = QemuUser::detect()?;
    let program_arguments: Vec<&str> = arguments
        .program_arguments
        .iter()
        .map(String::as_str)
        .collect();
    let (run, result) = qemu.run_streamed(
        &arguments.elf,
        &program_arguments,
        content,
        &std::env::temp_dir(),
        consume,
    )?;
    if !run.success() {
        bail!("the program exited with status {}", run.status_code);
    }
    result
}

/// Output files written under temporary names and renamed when complete, so that a
/// failed run leaves no partial file.
struct Outputs {
    trace: (PathBuf, PathBuf),
    pcs: Option<(PathBuf, PathBuf)>,
}

impl Outputs {
    fn new(arguments: &Arguments) -> Outputs {
        Outputs {
            trace: (temporary(&arguments.output), arguments.output.clone()),
            pcs: arguments
                .pcs_output
                .as_ref()
                .map(|path| (temporary(path), path.clone())),
        }
    }

    fn create(&self) -> Result<Sink> {
        let create = |path: &Path| {
            File::create(path)
                .map(BufWriter::new)
                .with_context(|| format!("cannot create {}", path.display()))
        };
        Ok(Sink {
            encoder_output: create(&self.trace.0)?,
            pcs: self
                .pcs
                .as_ref()
                .map(|(temporary, _)| create(temporary))
                .transpose()?,
        })
    }

    fn discard(&self) {
        let _ = std::fs::remove_file(&self.trace.0);
        if let Some((temporary, _)) = &self.pcs {
            let _ = std::fs::remove_file(temporary);
        }
    }

    /// Runs `write` with the output files open; keeps them only when it succeeds.
    fn write<T>(arguments: &Arguments, write: impl FnOnce(&mut Sink) -> Result<T>) -> Result<T> {
        let outputs = Outputs::new(arguments);
        let mut sink = outputs.create()?;
        let written = write(&mut sink).and_then(|value| {
            outputs.commit(sink)?;
            Ok(value)
        });
        if written.is_err() {
            outputs.discard();
        }
        written
    }

    fn commit(&self, mut sink: Sink) -> Result<()> {
        sink.encoder_output.flush()?;
        if let Some(pcs) = sink.pcs.as_mut() {
            pcs.flush()?;
        }
        drop(sink);
        std::fs::rename(&self.trace.0, &self.trace.1)?;
        if let Some((temporary, path)) = &self.pcs {
            std::fs::rename(temporary, path)?;
        }
        Ok(())
    }
}

/// A tandem trace of the program's run: QEMU's registers before every instruction.
/// A debug trace module trace of the program's run: from QEMU's retired PCs, or from
/// its registers when data sequences are sent.
fn run_debug4(arguments: &Arguments, image: &CodeImage) -> Result<()> {
    let data = match arguments.data {
        Data::None => DataEmission::default(),
        Data::Addresses => DataEmission {
            load_address: Emission::On,
            store_address: Emission::On,
            ..DataEmission::default()
        },
        Data::All => DataEmission::all(),
    };
    let options = Debug4Options::default()
        .with_branch_reporting(match arguments.branch_reporting {
            Reporting::TakenNotTaken => BranchReporting::TakenNotTaken,
            Reporting::PcPairs => BranchReporting::PcPairs,
        })
        .with_buffer(match arguments.buffer_size {
            Some(bytes) => BufferMode::Ring { bytes },
            None => BufferMode::Linear,
        })
        .with_data(data)
        .with_timestamp_interval(arguments.timestamp_every);
    let registers = arguments.data != Data::None;
    let content = if registers {
        LogContent::Registers
    } else {
        LogContent::Addresses
    };
    let (wrap_offset, bytes, instructions) = Outputs::write(arguments, |sink| {
        with_log(arguments, content, |log| {
            let mut driver = Debug4FromQemu::new(image, options)?;
            if registers {
                for state in CpuLogReader::new(log) {
                    let state = state?;
                    driver.push_state(0, &state)?;
                    if let Some(pcs) = sink.pcs.as_mut() {
                        writeln!(pcs, "{:#x}", state.pc)?;
                    }
                }
            } else {
                for pc in ExecLogReader::new(log) {
                    let pc = pc?;
                    driver.push_pc(0, pc)?;
                    if let Some(pcs) = sink.pcs.as_mut() {
                        writeln!(pcs, "{pc:#x}")?;
                    }
                }
            }
            let (trace, instructions) = driver.finish()?;
            sink.encoder_output.write_all(&trace.bytes)?;
            Ok((trace.wrap_offset, trace.bytes.len(), instructions))
        })
    })?;
    eprintln!(
        "rvperf-tracegen: {instructions} instructions -> {bytes} bytes of debug trace module data ({:.3} bits/instruction)",
        bytes as f64 * 8.0 / instructions.max(1) as f64
    );
    if let (Some(offset), Some(size)) = (wrap_offset, arguments.buffer_size) {
        eprintln!(
            "rvperf-tracegen: the ring wrapped; decode with --buffer-size {size} --wrap-offset {offset}"
        );
    }
    Ok(())
}

fn run_tandem(arguments: &Arguments, image: &CodeImage) -> Result<()> {
    let omitted = |part| {
        if arguments.omit.contains(&part) {
            Tracing::Omitted
        } else {
            Tracing::Traced
        }
    };
    let options = TandemOptions::default()
        .with_integer_registers(omitted(TandemPart::Integer))
        .with_float_registers(omitted(TandemPart::Float))
        .with_csrs(omitted(TandemPart::Csrs))
        .with_memory(omitted(TandemPart::Memory))
        .with_pc_updates(if arguments.pc_values {
            PcUpdates::AlwaysValue
        } else {
            PcUpdates::IncrementWhereSequential
        });
    let instructions = Outputs::write(arguments, |sink| {
        with_log(arguments, LogContent::Registers, |log| {
            let mut driver = TandemFromQemu::new(image, Parameters::default(), options);
            for state in CpuLogReader::new(log) {
                let state = state?;
                driver.push(&state)?;
                if let Some(pcs) = sink.pcs.as_mut() {
                    writeln!(pcs, "{:#x}", state.pc)?;
                }
                if driver.instructions() % (1 << 16) == 0 {
                    sink.encoder_output.write_all(&driver.take_output())?;
                }
            }
            let (rest, instructions) = driver.finish()?;
            sink.encoder_output.write_all(&rest)?;
            Ok(instructions)
        })
    })?;
    let bytes = std::fs::metadata(&arguments.output)?.len();
    eprintln!(
        "rvperf-tracegen: {instructions} instructions -> {bytes} bytes of tandem trace ({:.1} bytes/instruction)",
        bytes as f64 / instructions.max(1) as f64
    );
    Ok(())
}

fn run(arguments: &Arguments) -> Result<()> {
    let elf_bytes = std::fs::read(&arguments.elf)
        .with_context(|| format!("cannot read {}", arguments.elf.display()))?;
    let mut image = CodeImage::new();
    let info = load_elf(
        &mut image,
        &arguments.elf.display().to_string(),
        &elf_bytes,
        None,
    )?;
    match arguments.format {
        Format::Ntrace => {}
        Format::Tandem => return run_tandem(arguments, &image),
        Format::Debug4 => return run_debug4(arguments, &image),
    }
    let files = image.file_decode_infos();
    let width = match info.xlen() {
        Some(code_image::Xlen::Rv32) => AddressWidth::Bits32,
        // load_elf loads RISC-V files only: every one has a register width.
        Some(code_image::Xlen::Rv64) | None => AddressWidth::Bits64,
    };
    let mut options = EncoderOptions::default();
    options.mode = match arguments.mode {
        Mode::Btm => BranchMode::Btm,
        Mode::Htm => BranchMode::Htm,
    };
    options.message = MessageOptions::default()
        .with_src_bits(arguments.src_bits)
        .with_timestamps(arguments.timestamps)
        .with_address_msb_extension(arguments.addr_ext)
        .with_address_width(width);
    options.src = arguments.src_id;
    options.return_stack_depth = arguments.return_stack;
    options.repeated_history = !arguments.no_repeated_history;
    options.repeat_branch = !arguments.no_repeat_branch;
    options.sequential_jumps = arguments.sequential_jumps;
    options.all_jumps = arguments.all_jumps;
    options.environment_call_as_jump = arguments.ecall_as_jump;
    options.periodic_sync = arguments.periodic_sync;
    options.icnt_bits = arguments.icnt_bits;
    options.hist_bits = arguments.hist_bits;
    let mut encoder = TraceEncoder::new(&image, files, options)?;

    let (count, statistics) = Outputs::write(arguments, |sink| {
        let count = produce(arguments, &mut encoder, sink)?;
        let (rest, statistics) = encoder.finish()?;
        sink.encoder_output.write_all(&rest)?;
        Ok((count, statistics))
    })?;
    eprintln!(
        "rvperf-tracegen: {count} instructions -> {} messages, {} bytes ({:.3} bits/instruction), {} implicit returns",
        statistics.messages,
        statistics.bytes,
        statistics.bytes as f64 * 8.0 / count.max(1) as f64,
        statistics.implicit_returns
    );
    Ok(())
}
