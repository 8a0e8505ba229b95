//! A recording whose trace contexts name tasks (`feature::CONTEXT_TASK`), split by
//! thread at its context switches: `perf_session::NtraceRecording::task_contexts`,
//! `perf_session::decode_by_context`, and `rvperf decode -i` end to end.
//!
//! Two real programs built at the same addresses (static, non-PIE: `loops` and
//! `recursion`) take turns on one hart, through a stand-in for the kernel's context
//! switch (an interrupt enters it; it writes the next task's context value,
//! `task_context::value(tid, exec generation)`, to `scontext` and returns with `sret`),
//! traced with the kernel, with timestamps, and with periodic synchronisations tens of
//! switches apart: a split at synchronisations gives each thread other threads' turns,
//! decoded in the wrong program. Tid 101 runs `loops`; tid 202 runs the start of `loops`
//! and then execs `recursion` (a new exec generation, a new context value). Until the
//! first switch the hart's context is `task_context::UNKNOWN`: that turn is no thread's.
//!
//! Each thread's user-mode instructions must be exactly the ones the generator retired
//! in its context, and the instructions of all threads and of no thread must add up to
//! every instruction retired. Without CONTEXT_TASK the recording is split at
//! synchronisations, as before, which here gives the threads instructions that are not
//! theirs.

mod common;

use std::collections::HashMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use code_image::CodeImage;
use common::kernel_switch::{add_switch_code, KERNEL, SCONTEXT_WRITE, SWITCH_CODE, SWITCH_PCS};
use common::side_band::{
    recording_writer, switch_record, ten_megahertz, write_comm, write_mmap, Segment,
};
use common::{instruction_at, load, program, programs, retired_pcs, scratch, Code, Random};
use ntrace_flow::{BranchMode, Context, EncoderOptions, ProgramCode, TraceEncoder, Trap};
use ntrace_message::{AddressWidth, MessageOptions};
use perf_abi::ntrace::{feature, privilege, task_context, NtraceInfo, RVPERF_AUXTRACE_NTRACE};
use perf_data::{AuxtraceChunk, Metadata, PerfDataReader, PerfDataWriter};
use perf_session::{
    decode_by_context, read_ntrace_recording, ContextOwner, ElementsKept, PlacedElf, ProgramRun,
    TaskContextsUnavailable, TraceCode,
};
use trace_elements::ElementKind;

const LOOPS: &str = "loops";
const RECURSION: &str = "recursion";
/// The two tasks (pid = tid).
const FIRST: u32 = 101;
const SECOND: u32 = 202;
/// Instructions of `loops` the second task runs before it execs `recursion`.
const EXEC_AFTER: usize = 6000;
/// The first trace tick; a tick is one instruction, and 100 ns of perf time.
const FIRST_TICK: u64 = 1000;
/// Instruction half-words between periodic synchronisations: tens of turns.
const SYNC_UNITS: u64 = 200_000;

/// The kernel stand-in as an ELF file at its address, as `--elf` gives one: made once
/// per test process (the tests run in parallel, and a file being written is no ELF yet).
fn kernel_elf() -> PathBuf {
    static ELF: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ELF.get_or_init(assemble_kernel_elf).clone()
}

fn assemble_kernel_elf() -> PathBuf {
    let directory = scratch().join(format!("task-contexts-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let source = directory.join("kernel.S");
    let halfwords: Vec<String> = SWITCH_CODE
        .iter()
        .map(|half| format!("{half:#06x}"))
        .collect();
    std::fs::write(
        &source,
        format!(
            "    .text\n    .globl _start\n_start:\n    .2byte {}\n",
            halfwords.join(", ")
        ),
    )
    .unwrap();
    let elf = directory.join("kernel.elf");
    let status = std::process::Command::new("riscv64-linux-gnu-gcc")
        .args(["-nostdlib", "-static", "-no-pie", "-Wl,--build-id=none"])
        .arg(format!("-Wl,-Ttext={KERNEL:#x}"))
        .arg("-o")
        .arg(&elf)
        .arg(&source)
        .status()
        .unwrap_or_else(|error| panic!("riscv64-linux-gnu-gcc: {error}: {}", common::INSTALL_HINT));
    assert!(status.success(), "assembling the kernel stand-in failed");
    elf
}

/// A program's code with the kernel's, for the generator.
fn program_code(name: &str) -> Code {
    let mut code = load(name);
    add_switch_code(&mut code.image);
    code.files = code.image.file_decode_infos();
    code
}

/// Which program a task runs in a generation, and its context value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Owner {
    tid: u32,
    generation: u64,
}

impl Owner {
    fn value(self) -> u64 {
        task_context::value(self.tid, self.generation).unwrap()
    }
}

/// What the generator ran and recorded.
struct Generated {
    trace: Vec<u8>,
    /// Every instruction retired.
    retired: usize,
    /// The user-mode instructions each context value's task retired in it.
    user_pcs: HashMap<u64, Vec<u64>>,
    /// The side-band: (tick, previous tid, next tid) of each switch; the tick of the exec.
    switches: Vec<(u64, u32, u32)>,
    exec_tick: u64,
    /// Kernel instructions of the first switch, run in no task's context.
    unknown_switch: usize,
}

/// One hart running the tasks in turns, as the module says.
fn generate() -> Generated {
    let loops = retired_pcs(LOOPS);
    let recursion = retired_pcs(RECURSION);
    let codes = [program_code(LOOPS), program_code(RECURSION)];
    // Each task's instruction stream, by (program index, pc).
    let streams: [Vec<(usize, u64)>; 2] = [
        loops.iter().map(|&pc| (0, pc)).collect(),
        loops[..EXEC_AFTER]
            .iter()
            .map(|&pc| (0, pc))
            .chain(recursion.iter().map(|&pc| (1, pc)))
            .collect(),
    ];
    let tids = [FIRST, SECOND];
    let mut options = EncoderOptions::default();
    options.mode = BranchMode::Htm;
    options.periodic_sync_units = SYNC_UNITS;
    options.context = Some(task_context::UNKNOWN);
    options.message = MessageOptions::default()
        .with_timestamps(true)
        .with_address_width(AddressWidth::Bits64);
    let mut encoder = TraceEncoder::for_ingress_port(options).expect("encoder options");
    let context = |privilege, value| Context {
        privilege,
        virtualized: false,
        context: value,
    };
    // The hart starts in the kernel, before the driver wrote any task: its switch into
    // the first task is in no task's context.
    encoder.set_context(context(1, task_context::UNKNOWN));
    let mut tick = FIRST_TICK;
    encoder.set_time(tick);
    encoder.start();
    let mut generated = Generated {
        trace: Vec::new(),
        retired: 0,
        user_pcs: HashMap::new(),
        switches: Vec::new(),
        exec_tick: 0,
        unknown_switch: 0,
    };
    let mut next = [0usize; 2];
    let mut generations = [0u64; 2];
    let mut running = 0;
    // The context value the hart's task wrote last.
    let mut current = task_context::UNKNOWN;
    let mut random = Random(0x7a5c_0de5);
    let retire = |encoder: &mut TraceEncoder<'static>, code: &Code, pc: u64, tick: &mut u64| {
        *tick += 1;
        encoder.set_time(*tick);
        encoder
            .retire_instruction(pc, instruction_at(code, pc))
            .unwrap_or_else(|error| panic!("retiring {pc:#x}: {error}"));
    };
    for pc in SWITCH_PCS {
        retire(&mut encoder, &codes[0], pc, &mut tick);
        generated.retired += 1;
        generated.unknown_switch += 1;
        if pc == SCONTEXT_WRITE {
            current = Owner {
                tid: tids[0],
                generation: 0,
            }
            .value();
            encoder.set_context(context(1, current));
        }
    }
    encoder.set_context(context(0, current));
    loop {
        let task = running;
        let stream = &streams[task];
        let start = next[task];
        let mut end = (start + 200 + random.below(3000) as usize).min(stream.len());
        // The exec ends the second task's turn.
        if task == 1 && start < EXEC_AFTER {
            end = end.min(EXEC_AFTER);
        }
        for &(program, pc) in &stream[start..end] {
            retire(&mut encoder, &codes[program], pc, &mut tick);
            generated.retired += 1;
            generated.user_pcs.entry(current).or_default().push(pc);
        }
        next[task] = end;
        let execs = task == 1 && end == EXEC_AFTER && generations[1] == 0;
        let other = 1 - task;
        let following = if execs {
            generations[1] = 1;
            task
        } else if next[other] < streams[other].len() {
            other
        } else if end < stream.len() {
            task
        } else {
            break;
        };
        // The kernel: an interrupt (or the exec's system call) before the task's next
        // instruction; it writes the next task's context and returns into it.
        let (program, resume) = stream.get(end).copied().unwrap_or(stream[0]);
        encoder.trap(Trap::Interrupt { resume }).expect("trap");
        encoder.set_context(context(1, current));
        let following_value = Owner {
            tid: tids[following],
            generation: generations[following],
        }
        .value();
        for pc in SWITCH_PCS {
            retire(&mut encoder, &codes[program], pc, &mut tick);
            generated.retired += 1;
            if pc == SCONTEXT_WRITE {
                if execs {
                    generated.exec_tick = tick;
                } else if following != task {
                    generated.switches.push((tick, tids[task], tids[following]));
                }
                current = following_value;
                encoder.set_context(context(1, current));
            }
        }
        encoder.set_context(context(0, current));
        running = following;
    }
    let (trace, _) = encoder.finish().expect("finish");
    generated.trace = trace;
    generated
}

/// Perf time of a trace tick: 100 ns a tick, as [`info`]'s conversion says.
fn perf_time(tick: u64) -> u64 {
    tick * 100
}

fn info(features: u64) -> NtraceInfo {
    NtraceInfo {
        mode: 6,
        features,
        privileges: privilege::USER | privilege::SUPERVISOR,
        sync_max: None,
        src_bits: 0,
        return_stack_depth: 32,
        harts: 1,
        buffer_bytes: 1 << 24,
        time: Some(ten_megahertz()),
        timestamp_prescale: 0,
        hart_cpus: Vec::new(),
    }
}

const TASK_FEATURES: u64 = feature::IMPLICIT_RETURN
    | feature::REPEATED_HISTORY
    | feature::TIMESTAMPS
    | feature::CONTEXT
    | feature::CONTEXT_TASK;

/// The executable segment of a program: (address, length, file offset).
fn text_segment(path: &Path) -> (u64, u64, u64) {
    use object::{Object, ObjectSegment, SegmentFlags};
    let bytes = std::fs::read(path).unwrap();
    let file = object::File::parse(bytes.as_slice()).unwrap();
    file.segments()
        .find(
            |segment| matches!(segment.flags(), SegmentFlags::Elf { p_flags } if p_flags & 1 != 0),
        )
        .map(|segment| (segment.address(), segment.size(), segment.file_range().0))
        .expect("an executable segment")
}

/// The perf.data `rvperf trace record` would write of `generated` with `features`.
fn recording(generated: &Generated, features: u64) -> Vec<u8> {
    let mut writer = recording_writer();
    let mmap = |writer: &mut PerfDataWriter<Cursor<Vec<u8>>>, pid: u32, time: u64, name: &str| {
        let (address, length, offset) = text_segment(&program(name));
        let segment = Segment {
            address,
            length,
            offset,
        };
        write_mmap(writer, pid, time, segment, &format!("/{name}"));
    };
    let comm = write_comm;
    for pid in [FIRST, SECOND] {
        comm(&mut writer, pid, 0, LOOPS, false);
        mmap(&mut writer, pid, 0, LOOPS);
    }
    writer
        .write_auxtrace_info(RVPERF_AUXTRACE_NTRACE, &info(features).to_words())
        .unwrap();
    let exec_time = perf_time(generated.exec_tick);
    let mut exec_written = false;
    for &(tick, previous, next) in &generated.switches {
        if !exec_written && perf_time(tick) > exec_time {
            comm(&mut writer, SECOND, exec_time, RECURSION, true);
            mmap(&mut writer, SECOND, exec_time, RECURSION);
            exec_written = true;
        }
        writer
            .write_record(&switch_record(perf_time(tick), 0, previous, next))
            .unwrap();
    }
    assert!(exec_written, "the exec came before the last switch");
    let mut data = generated.trace.clone();
    data.resize(data.len().next_multiple_of(8), 0xff);
    writer
        .write_auxtrace(&AuxtraceChunk {
            offset: 0,
            reference: generated.trace.len() as u64,
            idx: 0,
            tid: u32::MAX,
            cpu: u32::MAX,
            data: &data,
        })
        .unwrap();
    writer.finish(&Metadata::default()).unwrap().into_inner()
}

fn wire_options() -> MessageOptions {
    MessageOptions::default()
        .with_timestamps(true)
        .with_address_width(AddressWidth::Bits64)
}

/// The addresses of `count` instructions from `start`, by their lengths in `image`.
fn list(image: &CodeImage, start: u64, count: u32, pcs: &mut Vec<u64>) {
    let mut address = start;
    for _ in 0..count {
        pcs.push(address);
        let mut half = [0u8; 2];
        assert_eq!(image.read(address, &mut half), 2, "no code at {address:#x}");
        let length = riscv_insn::instruction_length(u16::from_le_bytes(half))
            .bytes()
            .expect("a valid length");
        address += u64::from(length);
    }
}

fn user_mode(pcs: &[u64]) -> Vec<u64> {
    pcs.iter().copied().filter(|&pc| pc < KERNEL).collect()
}

/// The owners the test expects, by context value: (run, comm).
fn expected_owners() -> Vec<(u64, ProgramRun, &'static str)> {
    vec![
        (
            Owner {
                tid: FIRST,
                generation: 0,
            }
            .value(),
            ProgramRun {
                pid: FIRST,
                execs: 0,
            },
            LOOPS,
        ),
        (
            Owner {
                tid: SECOND,
                generation: 0,
            }
            .value(),
            ProgramRun {
                pid: SECOND,
                execs: 0,
            },
            LOOPS,
        ),
        (
            Owner {
                tid: SECOND,
                generation: 1,
            }
            .value(),
            ProgramRun {
                pid: SECOND,
                execs: 1,
            },
            RECURSION,
        ),
    ]
}

#[test]
fn each_thread_is_decoded_in_its_own_program_at_its_own_instructions() {
    let generated = generate();
    assert!(
        generated.switches.len() > 20,
        "{} switches",
        generated.switches.len()
    );
    let bytes = recording(&generated, TASK_FEATURES);
    let reader = PerfDataReader::from_bytes(&bytes, "task-contexts.data").unwrap();
    let recording = read_ntrace_recording(&reader).unwrap();

    // The contexts: the unknown one first, then each (tid, generation) with its program.
    let contexts = recording
        .task_contexts(wire_options())
        .expect("task contexts");
    let values: Vec<u64> = contexts
        .contexts
        .iter()
        .map(|context| context.value)
        .collect();
    assert_eq!(values[0], task_context::UNKNOWN);
    assert_eq!(contexts.contexts[0].owner, ContextOwner::NoTask);
    for (value, run, comm) in expected_owners() {
        let context = contexts
            .contexts
            .iter()
            .find(|context| context.value == value)
            .unwrap_or_else(|| panic!("context {value:#x} not reported"));
        match &context.owner {
            ContextOwner::Thread(thread) => {
                assert_eq!(
                    (thread.run, thread.comm.as_str()),
                    (run, comm),
                    "{value:#x}"
                );
                assert_eq!(thread.tid, run.pid);
            }
            other => panic!("context {value:#x}: {other:?}"),
        }
    }

    // Decoded with each thread's code: the kernel stand-in's ELF with its program's.
    let kernel = kernel_elf();
    let placed = |name: Option<&str>| -> Vec<PlacedElf> {
        name.map(|name| PlacedElf {
            path: program(name),
            load_address: None,
        })
        .into_iter()
        .chain([PlacedElf {
            path: kernel.clone(),
            load_address: None,
        }])
        .collect()
    };
    let shared = TraceCode::load(&placed(None)).unwrap();
    let loops = TraceCode::load(&placed(Some(LOOPS))).unwrap();
    let recursion = TraceCode::load(&placed(Some(RECURSION))).unwrap();
    let (threads, thread_of_context) = contexts.threads();
    assert_eq!(threads.len(), 3);
    let code_of = |index: usize| {
        if threads[index].run.execs == 1 {
            &recursion
        } else {
            &loops
        }
    };
    fn program_code(code: &TraceCode) -> ProgramCode<'_> {
        ProgramCode {
            image: code.image(),
            files: code.decode_infos().to_vec(),
        }
    }
    let context_code = ntrace_flow::ContextCode {
        shared: ProgramCode {
            image: shared.image(),
            files: shared.decode_infos().to_vec(),
        },
        contexts: thread_of_context
            .iter()
            .map(|(&value, &index)| (value, program_code(code_of(index))))
            .collect(),
    };
    let options = ntrace_flow::DecoderOptions::default()
        .with_message(wire_options())
        .with_return_stack_depth(32);
    let decoded = decode_by_context(
        &recording.pieces,
        &context_code,
        &threads,
        &thread_of_context,
        |_| ElementsKept::Kept,
        options,
    );
    // A thread left out is counted, its elements not held.
    let counted = decode_by_context(
        &recording.pieces,
        &context_code,
        &threads,
        &thread_of_context,
        |thread| {
            if thread.tid == FIRST {
                ElementsKept::Counted
            } else {
                ElementsKept::Kept
            }
        },
        options,
    );
    for (kept, counted) in decoded.threads.iter().zip(&counted.threads) {
        assert_eq!(kept.instructions, counted.instructions);
        if kept.thread.tid == FIRST {
            assert!(counted.elements.is_empty() && !kept.elements.is_empty());
        } else {
            assert_eq!(kept.elements, counted.elements);
        }
    }
    assert!(counted.elements_held < decoded.elements_held);
    assert_eq!(decoded.statistics.instructions, generated.retired as u64);
    assert_eq!(decoded.statistics.recovered_errors, 0);
    let mut total = decoded.unattributed.no_thread_instructions
        + decoded.unattributed.before_context_instructions;
    // The first switch began in no task's context: what the decode placed there
    // (the synchronisation, the instructions before the first context report) is
    // counted and given to nobody.
    assert!(
        decoded.unattributed.no_thread_elements > 0,
        "{:?}",
        decoded.unattributed
    );
    assert!(
        decoded.unattributed.no_thread_instructions <= generated.unknown_switch as u64,
        "{:?}",
        decoded.unattributed
    );
    for thread in &decoded.threads {
        let value = Owner {
            tid: thread.thread.tid,
            generation: u64::from(thread.thread.run.execs),
        }
        .value();
        let code = code_of(
            threads
                .iter()
                .position(|known| *known == thread.thread)
                .unwrap(),
        );
        let mut pcs = Vec::new();
        for element in &thread.elements {
            if let ElementKind::InstructionRange {
                start,
                instructions,
                ..
            } = element.kind
            {
                list(code.image(), start, instructions, &mut pcs);
            }
        }
        assert!(thread.errors.is_empty(), "{:?}", thread.errors);
        assert_eq!(pcs.len() as u64, thread.instructions);
        total += thread.instructions;
        common::assert_same_pcs(
            &format!("thread {:?}", thread.thread),
            &generated.user_pcs[&value],
            &user_mode(&pcs),
        );
    }
    assert_eq!(
        total, generated.retired as u64,
        "every instruction is counted once"
    );

    // The recording without CONTEXT_TASK: no task contexts, the sync split as before.
    let bytes = self::recording(&generated, TASK_FEATURES & !feature::CONTEXT_TASK);
    let reader = PerfDataReader::from_bytes(&bytes, "no-task-contexts.data").unwrap();
    let untasked = read_ntrace_recording(&reader).unwrap();
    assert_eq!(
        untasked.task_contexts(wire_options()),
        Err(TaskContextsUnavailable::NotRecorded)
    );
    assert!(untasked.attribute(wire_options()).is_ok());
}

/// `rvperf decode -i`: the threads' headers and instructions, and without CONTEXT_TASK
/// the split at synchronisations, which gives the threads what others ran.
#[test]
fn rvperf_decode_prints_each_threads_own_instructions() {
    let generated = generate();
    let kernel = kernel_elf();
    let directory = kernel.parent().unwrap().to_path_buf();
    let decode = |features: u64, name: &str| -> HashMap<String, Vec<u64>> {
        let path = directory.join(name);
        std::fs::write(&path, recording(&generated, features)).unwrap();
        let output = std::process::Command::new(common::rvperf_binary())
            .args(["decode", "--output", "pcs", "--jobs", "1", "-i"])
            .arg(&path)
            .arg("--symfs")
            .arg(programs())
            .arg("--elf")
            .arg(&kernel)
            .output()
            .expect("run rvperf decode");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        let mut threads: HashMap<String, Vec<u64>> = HashMap::new();
        let mut thread = String::new();
        for line in String::from_utf8(output.stdout).unwrap().lines() {
            if let Some(header) = line.strip_prefix("# thread ") {
                thread = header.split(' ').next().unwrap().to_owned();
                continue;
            }
            let pc = u64::from_str_radix(line.trim_start_matches("0x"), 16).unwrap();
            threads.entry(thread.clone()).or_default().push(pc);
        }
        threads
    };
    let by_context = decode(TASK_FEATURES, "task-contexts.data");
    let label = |run: ProgramRun, comm: &str| format!("{comm}-{}/{}", run.pid, run.pid);
    let mut labels: Vec<&String> = by_context.keys().collect();
    labels.sort();
    assert_eq!(labels.len(), 3, "{labels:?}");
    for (value, run, comm) in expected_owners() {
        let pcs = by_context
            .get(&label(run, comm))
            .unwrap_or_else(|| panic!("no thread {} in {labels:?}", label(run, comm)));
        common::assert_same_pcs(
            &label(run, comm),
            &generated.user_pcs[&value],
            &user_mode(pcs),
        );
    }

    // Split at synchronisations tens of switches apart, the same trace gives a thread
    // turns that are not its own.
    let by_synchronisation = decode(
        TASK_FEATURES & !feature::CONTEXT_TASK,
        "synchronisations.data",
    );
    let own = expected_owners().iter().all(|(value, run, comm)| {
        by_synchronisation
            .get(&label(*run, comm))
            .is_some_and(|pcs| user_mode(pcs) == generated.user_pcs[value])
    });
    assert!(
        !own,
        "the split at synchronisations gave every thread its own instructions"
    );
}
