//! Trace stopped and started, and lost, as an encoder under trace control reports it:
//! ProgTraceCorrelation EVCODE=4 (program trace disabled) with the I-CNT and HIST of
//! what retired, later ProgTraceSync SYNC=5 (trace enable) elsewhere; an Error message
//! (ETYPE 0, messages lost) before ProgTraceSync SYNC=7 (restart after a FIFO overrun);
//! Ownership messages after synchronisations and between branch messages. Each decoded
//! serially, with walks replayed and not, and in parallel: the same elements and
//! statistics.

mod support;

use code_image::CodeImage;
use ntrace_flow::{
    DecoderOptions, FlowDecoder, FlowStatistics, ParallelDecoder, ParallelOptions, Recovery,
    WalkReplay,
};
use ntrace_message::{
    Body, BranchType, CorrelationEvent, MessageOptions, Process, ProcessFormat, ResourceFull,
    SyncReason,
};
use trace_elements::{Context, ElementKind, GapReason, RangeEnd, TraceOffReason, TraceOnReason};

use support::{encode_with, files, image_of_halves, range};

/// ```text
/// 0x100 c.nop
/// 0x102 c.bnez a0, 0x100
/// 0x104 c.nop
/// 0x106 c.jr a5
/// 0x200 c.nop (x4)
/// ```
fn image() -> CodeImage {
    image_of_halves(
        "control",
        &[
            (0x100, &[0x0001, 0xfd7d, 0x0001, 0x8782]),
            (0x200, &[0x0001; 4]),
        ],
    )
}

/// Every element and the statistics, the same serially with walks replayed and walked,
/// and in parallel with chunks of every size up to the trace's.
fn decode(bytes: &[u8], options: DecoderOptions) -> (Vec<ElementKind>, FlowStatistics) {
    let image = image();
    let serial = |options: DecoderOptions| {
        let mut decoder = FlowDecoder::new(bytes, &image, files(), options);
        let mut kinds = Vec::new();
        loop {
            match decoder.next_element() {
                Ok(Some(element)) => kinds.push(element.kind),
                Ok(None) => break,
                Err(error) => panic!("{error}"),
            }
        }
        (kinds, decoder.statistics())
    };
    let expected = serial(options.with_walk_replay(WalkReplay::Off));
    assert_eq!(
        serial(options.with_walk_replay(WalkReplay::Replay)),
        expected
    );
    for chunk_bytes in 1..=bytes.len() {
        let parallel = ParallelDecoder::new(
            bytes,
            &image,
            files(),
            options,
            ParallelOptions::default()
                .with_jobs(2)
                .with_chunk_bytes(chunk_bytes),
        );
        let mut kinds = Vec::new();
        let summary = parallel
            .run(|decoded| -> Result<(), ()> {
                match decoded {
                    ntrace_flow::Decoded::Element(decoded) => kinds.push(decoded.element.kind),
                    ntrace_flow::Decoded::Error(error) => panic!("{error}"),
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(kinds, expected.0, "chunks of {chunk_bytes} bytes");
        assert_eq!(
            summary.statistics, expected.1,
            "chunks of {chunk_bytes} bytes"
        );
    }
    expected
}

fn sync(reason: SyncReason, faddr: u64) -> Body {
    Body::ProgTraceSync {
        sync: reason,
        icnt: 0,
        faddr,
    }
}

fn correlation(evcode: CorrelationEvent, icnt: u64, hist: Option<u64>) -> Body {
    Body::ProgTraceCorrelation {
        evcode,
        cdf: u8::from(hist.is_some()),
        icnt,
        hist,
    }
}

fn ownership(format: ProcessFormat, privilege: u8, context: u64) -> Body {
    Body::Ownership {
        process: Process {
            format,
            privilege,
            virtualized: false,
            context,
        },
    }
}

fn process(privilege: u8, context: Option<u64>) -> ElementKind {
    ElementKind::ContextChange {
        privilege,
        virtualized: false,
        context: context.map(Context::Process),
    }
}

/// The loop taken twice, left, and the indirect jump to 0x200: 8 units.
fn loop_then_jump(hist: Option<u64>) -> Body {
    match hist {
        Some(hist) => Body::IndirectBranchHist {
            btype: BranchType::Indirect,
            icnt: 8,
            uaddr: 0x100 ^ 0x200,
            hist,
        },
        None => Body::IndirectBranch {
            btype: BranchType::Indirect,
            icnt: 4,
            uaddr: 0x100 ^ 0x200,
        },
    }
}

fn loop_then_jump_ranges() -> [ElementKind; 3] {
    [
        range(0x100, 0x102, 2, RangeEnd::BranchTaken, 0x100),
        range(0x100, 0x102, 2, RangeEnd::BranchTaken, 0x100),
        range(0x100, 0x106, 4, RangeEnd::IndirectJump, 0x200),
    ]
}

#[test]
fn trace_disabled_then_enabled_elsewhere() {
    for htm in [true, false] {
        let hist = |bits: u64| htm.then_some(bits);
        let mut messages = vec![
            (sync(SyncReason::EXIT_FROM_DEBUG, 0x100), Some(1000)),
            (ownership(ProcessFormat::Scontext, 0, 42), None),
        ];
        if !htm {
            // BTM: a DirectBranch per taken branch.
            messages.push((Body::DirectBranch { icnt: 2 }, None));
            messages.push((Body::DirectBranch { icnt: 2 }, None));
        }
        messages.extend([
            (loop_then_jump(hist(0b1110)), Some(4)),
            // Between branch messages: a privilege change (to S-mode).
            (ownership(ProcessFormat::PrivilegeChange, 1, 0), Some(1)),
            // Trace disabled after two more instructions: the stop places exactly them.
            (
                correlation(CorrelationEvent::TRACE_DISABLED, 2, hist(1)),
                Some(3),
            ),
            // Enabled again at another address, with a new absolute time.
            (sync(SyncReason::TRACE_ENABLE, 0x100), Some(5000)),
            (ownership(ProcessFormat::Scontext, 0, 43), None),
        ]);
        // Debug mode entered after a taken branch: in HTM, its bit with the stop's I-CNT;
        // in BTM, its DirectBranch, then a stop that places nothing more.
        if htm {
            messages.push((
                correlation(CorrelationEvent::ENTRY_INTO_DEBUG, 2, hist(0b11)),
                Some(2),
            ));
        } else {
            messages.push((Body::DirectBranch { icnt: 2 }, None));
            messages.push((
                correlation(CorrelationEvent::ENTRY_INTO_DEBUG, 0, None),
                Some(2),
            ));
        }
        let options = MessageOptions::default().with_timestamps(true);
        let bytes = encode_with(options, &messages);
        let (kinds, statistics) = decode(&bytes, DecoderOptions::default().with_message(options));
        let mut expected = vec![
            ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Start,
            },
            ElementKind::Timestamp { time: 1000 },
            process(0, Some(42)),
        ];
        expected.extend(loop_then_jump_ranges());
        expected.extend([
            ElementKind::Timestamp { time: 1004 },
            process(1, None),
            ElementKind::Timestamp { time: 1005 },
            range(0x200, 0x202, 2, RangeEnd::Sequential, 0x204),
            ElementKind::TraceOff {
                last_address: Some(0x202),
                reason: TraceOffReason::Disabled,
            },
            ElementKind::Timestamp { time: 1008 },
            ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Restart,
            },
            ElementKind::Timestamp { time: 5000 },
            process(0, Some(43)),
            range(0x100, 0x102, 2, RangeEnd::BranchTaken, 0x100),
            ElementKind::TraceOff {
                // Only the instructions of the stop's own I-CNT are its.
                last_address: htm.then_some(0x102),
                reason: TraceOffReason::DebugMode,
            },
            ElementKind::Timestamp { time: 5002 },
        ]);
        assert_eq!(kinds, expected, "HTM {htm}");
        assert_eq!(statistics.instructions, 12, "HTM {htm}");
        assert_eq!(statistics.sync_messages, 2, "HTM {htm}");
        assert_eq!(statistics.trace_stops, 2, "HTM {htm}");
        assert_eq!(statistics.restarts, 1, "HTM {htm}");
        assert_eq!(statistics.gaps, 0, "HTM {htm}");
        assert_eq!(statistics.messages_before_sync, 0, "HTM {htm}");
    }
}

#[test]
fn the_stop_places_exactly_its_i_cnt_and_hist() {
    // The stop's HIST says the branch at 0x102 was taken once, then not: 0x100, 0x102,
    // 0x100, 0x102, 0x104 (5 units). A message of the stopped hart before the restart
    // is skipped and counted.
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(SyncReason::EXIT_FROM_DEBUG, 0x100), None),
            (
                correlation(CorrelationEvent::TRACE_DISABLED, 5, Some(0b110)),
                None,
            ),
            (Body::DirectBranch { icnt: 3 }, None),
            (sync(SyncReason::TRACE_ENABLE, 0x200), None),
            (
                correlation(CorrelationEvent::TRACE_DISABLED, 1, Some(1)),
                None,
            ),
        ],
    );
    let (kinds, statistics) = decode(&bytes, DecoderOptions::default());
    assert_eq!(
        kinds,
        [
            ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Start,
            },
            range(0x100, 0x102, 2, RangeEnd::BranchTaken, 0x100),
            range(0x100, 0x104, 3, RangeEnd::Sequential, 0x106),
            ElementKind::TraceOff {
                last_address: Some(0x104),
                reason: TraceOffReason::Disabled,
            },
            ElementKind::TraceOn {
                address: 0x200,
                reason: TraceOnReason::Restart,
            },
            range(0x200, 0x200, 1, RangeEnd::Sequential, 0x202),
            ElementKind::TraceOff {
                last_address: Some(0x200),
                reason: TraceOffReason::Disabled,
            },
        ]
    );
    assert_eq!(statistics.instructions, 6);
    assert_eq!(statistics.messages_before_sync, 1);
    assert_eq!(statistics.skipped_units, 3);
    assert_eq!((statistics.trace_stops, statistics.restarts), (2, 1));
}

#[test]
fn lost_messages_are_a_gap_and_decoding_resumes_at_the_overrun_restart() {
    // HTM: an I-CNT overflow arms 8 units, walked up to the first branch, whose HIST
    // was in a message the FIFO lost. The Error drops the walk (its units are counted as
    // lost), the restart after the overrun synchronises at 0x200.
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(SyncReason::EXIT_FROM_DEBUG, 0x100), None),
            (ownership(ProcessFormat::Scontext, 0, 42), None),
            (
                Body::ResourceFull(ResourceFull::IcntOverflow { icnt: 8 }),
                None,
            ),
            (
                Body::Error {
                    etype: 0,
                    ecode: 0b100,
                },
                None,
            ),
            (sync(SyncReason::RESTART_FROM_FIFO_OVERRUN, 0x200), None),
            (ownership(ProcessFormat::Scontext, 0, 42), None),
            (
                correlation(CorrelationEvent::ENTRY_INTO_DEBUG, 3, Some(1)),
                None,
            ),
        ],
    );
    let (kinds, statistics) = decode(&bytes, DecoderOptions::default());
    assert_eq!(
        kinds,
        [
            ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Start,
            },
            process(0, Some(42)),
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow {
                    error_type: 0,
                    error_code: 0b100,
                },
            },
            ElementKind::TraceOn {
                address: 0x200,
                reason: TraceOnReason::Restart,
            },
            process(0, Some(42)),
            range(0x200, 0x204, 3, RangeEnd::Sequential, 0x206),
            ElementKind::TraceOff {
                last_address: Some(0x204),
                reason: TraceOffReason::DebugMode,
            },
        ]
    );
    assert_eq!(statistics.gaps, 1);
    assert_eq!(statistics.skipped_units, 8, "the walk the Error dropped");
    assert_eq!(statistics.instructions, 3);
    assert_eq!((statistics.trace_stops, statistics.restarts), (1, 1));
}

#[test]
fn an_overrun_restart_without_its_error_message_is_still_a_gap() {
    // The Error message is required before it but may itself be lost with a corrupt
    // byte: a SYNC=7 still says messages were lost, so its I-CNT is not walked from
    // where the flow stood.
    let bytes = encode_with(
        MessageOptions::default(),
        &[
            (sync(SyncReason::EXIT_FROM_DEBUG, 0x100), None),
            (loop_then_jump(Some(0b1110)), None),
            (
                Body::ProgTraceSync {
                    sync: SyncReason::RESTART_FROM_FIFO_OVERRUN,
                    icnt: 5,
                    faddr: 0x100,
                },
                None,
            ),
            (
                correlation(CorrelationEvent::ENTRY_INTO_DEBUG, 1, Some(1)),
                None,
            ),
        ],
    );
    for recovery in [Recovery::ReturnError, Recovery::Resync] {
        let (kinds, statistics) = decode(&bytes, DecoderOptions::default().with_recovery(recovery));
        let mut expected = vec![ElementKind::TraceOn {
            address: 0x100,
            reason: TraceOnReason::Start,
        }];
        expected.extend(loop_then_jump_ranges());
        expected.extend([
            ElementKind::Gap {
                reason: GapReason::EncoderOverflow {
                    error_type: 0,
                    error_code: 0,
                },
            },
            ElementKind::TraceOn {
                address: 0x100,
                reason: TraceOnReason::Restart,
            },
            range(0x100, 0x100, 1, RangeEnd::Sequential, 0x102),
            ElementKind::TraceOff {
                last_address: Some(0x100),
                reason: TraceOffReason::DebugMode,
            },
        ]);
        assert_eq!(kinds, expected);
        assert_eq!(statistics.gaps, 1);
        assert_eq!(statistics.skipped_units, 5);
        assert_eq!(statistics.instructions, 9);
    }
}
