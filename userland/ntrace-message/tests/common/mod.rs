//! Shared helpers for the integration tests.
#![allow(dead_code, reason = "each test binary uses a different part")]

use ntrace_message::{
    AddressWidth, Body, BranchType, CorrelationEvent, Message, MessageDecoder, MessageError,
    MessageOptions, Process, ProcessFormat, ResourceFull, SyncReason,
};
use proptest::prelude::*;

/// Decodes a whole stream, errors included.
pub fn decode_all(stream: &[u8], options: MessageOptions) -> Vec<Result<Message, MessageError>> {
    MessageDecoder::new(stream, options).collect()
}

/// Decodes a stream that must be error-free.
pub fn decode_ok(stream: &[u8], options: MessageOptions) -> Vec<Message> {
    decode_all(stream, options)
        .into_iter()
        .map(|r| r.expect("stream decodes without errors"))
        .collect()
}

pub fn arb_options() -> impl Strategy<Value = MessageOptions> {
    (0u8..=12, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(src_bits, ts, ext, x32)| {
        MessageOptions::default()
            .with_src_bits(src_bits)
            .with_timestamps(ts)
            .with_address_msb_extension(ext)
            .with_address_width(if x32 {
                AddressWidth::Bits32
            } else {
                AddressWidth::Bits64
            })
    })
}

/// Values that exercise every field length: small, around MDO boundaries, and full width.
pub fn arb_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..4,
        0u64..64,
        0u64..(1 << 22),
        (0u32..64).prop_map(|bit| 1u64 << bit),
        (0u32..64).prop_map(|bit| u64::MAX >> bit),
        any::<u64>(),
    ]
}

pub fn arb_address(width: AddressWidth) -> impl Strategy<Value = u64> {
    let mask = match width {
        AddressWidth::Bits32 => u64::from(u32::MAX),
        AddressWidth::Bits64 => u64::MAX,
    };
    prop_oneof![
        arb_value(),
        // Kernel-style addresses with long runs of ones, the case MSB extension is for.
        (0u64..(1 << 32)).prop_map(|low| 0xFFFF_FFFF_0000_0000 | low),
        (0u32..64).prop_map(|bit| !0u64 << bit),
        (0u32..64, any::<u64>())
            .prop_map(|(bit, v)| (v | (1u64 << bit)) & !(1u64 << bit.saturating_sub(1))),
    ]
    .prop_map(move |a| a & mask & !1)
}

pub fn arb_btype() -> impl Strategy<Value = BranchType> {
    (0u8..4).prop_map(BranchType::from_bits)
}

pub fn arb_sync() -> impl Strategy<Value = SyncReason> {
    (0u8..16).prop_map(SyncReason)
}

pub fn arb_body(width: AddressWidth) -> impl Strategy<Value = Body> {
    let addr = move || arb_address(width);
    prop_oneof![
        (
            0u8..4,
            0u8..4,
            any::<bool>(),
            prop_oneof![0u64..64, any::<u64>().prop_map(|c| c >> 5)]
        )
            .prop_map(
                |(format, privilege, virtualized, context)| Body::Ownership {
                    process: Process {
                        format: ProcessFormat::from_bits(format),
                        privilege,
                        virtualized,
                        context
                    }
                }
            ),
        arb_value().prop_map(|icnt| Body::DirectBranch { icnt }),
        (arb_btype(), arb_value(), addr()).prop_map(|(btype, icnt, uaddr)| Body::IndirectBranch {
            btype,
            icnt,
            uaddr
        }),
        (0u8..16, arb_value()).prop_map(|(etype, ecode)| Body::Error { etype, ecode }),
        (arb_sync(), arb_value(), addr()).prop_map(|(sync, icnt, faddr)| Body::ProgTraceSync {
            sync,
            icnt,
            faddr
        }),
        (arb_sync(), arb_value(), addr()).prop_map(|(sync, icnt, faddr)| Body::DirectBranchSync {
            sync,
            icnt,
            faddr
        }),
        (arb_sync(), arb_btype(), arb_value(), addr()).prop_map(|(sync, btype, icnt, faddr)| {
            Body::IndirectBranchSync {
                sync,
                btype,
                icnt,
                faddr,
            }
        }),
        arb_value().prop_map(|icnt| Body::ResourceFull(ResourceFull::IcntOverflow { icnt })),
        arb_value().prop_map(|hist| Body::ResourceFull(ResourceFull::HistOverflow { hist })),
        (arb_value(), arb_value()).prop_map(|(hist, repeat)| Body::ResourceFull(
            ResourceFull::RepeatedHist { hist, repeat }
        )),
        (3u8..16, arb_value(), arb_value(), 1u8..=2).prop_map(|(rcode, a, b, count)| {
            Body::ResourceFull(ResourceFull::Other {
                rcode,
                rdata: [a, if count == 2 { b } else { 0 }],
                count,
            })
        }),
        (arb_btype(), arb_value(), addr(), arb_value()).prop_map(|(btype, icnt, uaddr, hist)| {
            Body::IndirectBranchHist {
                btype,
                icnt,
                uaddr,
                hist,
            }
        }),
        (arb_sync(), arb_btype(), arb_value(), addr(), arb_value()).prop_map(
            |(sync, btype, icnt, faddr, hist)| Body::IndirectBranchHistSync {
                sync,
                btype,
                icnt,
                faddr,
                hist
            }
        ),
        arb_value().prop_map(|bcnt| Body::RepeatBranch { bcnt }),
        (0u8..16, 0u8..4, arb_value(), arb_value(), any::<bool>()).prop_map(
            |(evcode, cdf, icnt, hist, has_hist)| Body::ProgTraceCorrelation {
                evcode: CorrelationEvent(evcode),
                cdf,
                icnt,
                hist: match cdf {
                    0 => None,
                    1 => Some(hist),
                    _ => has_hist.then_some(hist),
                },
            }
        ),
    ]
}

/// Whether the decoder can tell `timestamp` apart from an optional field of `body`; the
/// encoder refuses the ambiguous combinations.
pub fn timestamp_allowed(body: &Body) -> bool {
    !matches!(
        body,
        Body::ResourceFull(ResourceFull::Other { count: 1, .. })
            | Body::ProgTraceCorrelation {
                cdf: 2 | 3,
                hist: None,
                ..
            }
    )
}
