//! Where a chunk of a parallel decode can start without a synchronisation message.
//!
//! A message that ends its walk at a reported address (an indirect branch, a trap, any
//! synchronisation) leaves its hart at a pc the messages alone give: the U-ADDR
//! reference address, which messages change only by XOR (U-ADDR, spec 8.1) or replace
//! (F-ADDR). Relative timestamps only add to the time (spec 8.7). Neither depends on
//! the walk. So each chunk's net effect on that message-level state can be found by
//! reading its messages alone, on any core ([`scan`]); applied in order on the joining
//! thread to the state before the chunk, the effects give the state right after such
//! a message (a *seam*) without decoding anything before it, and a chunk's decoder
//! starts there as if a synchronisation message had been sent. A trace with a single
//! synchronisation (what the reference encoder and most captures hold) is then cut as
//! finely as one with periodic synchronisation.
//!
//! Nothing here is trusted: the join compares the true state with the chunk's at the
//! seam, as at a synchronisation message, and decodes serially where they differ (a
//! walk error the messages could not show, a RepeatBranch that needs the message before
//! the seam). Only a trace with one hart (no SRC field) is cut at seams: the other
//! harts' pcs are not known at one hart's seam.

use ntrace_message::{Body, Message, MessageDecoder, MessageOptions, ShortMessage};

use crate::event::sync_address;

/// A value of the message-level state after a run of messages, relative to the state
/// before them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    /// The value before, changed by `delta` (XORed into an address, added to a time).
    Relative(u64),
    /// Set by a message of the run.
    Absolute(u64),
    /// The run made it unknowable (a timestamp past 64 bits: the decoder fails there).
    Unknown,
}

/// The message-level state of a hart after a run of messages, given whether it was
/// synchronised before the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Outcome {
    synced: bool,
    address: Value,
    time: Value,
}

impl Outcome {
    fn unchanged(synced: bool) -> Self {
        Self {
            synced,
            address: Value::Relative(0),
            time: Value::Relative(0),
        }
    }

    /// Follows one message, as `HartEvents::apply` changes these three fields.
    fn follow(&mut self, message: &Message) {
        match message.body {
            Body::Error { .. } => {
                self.synced = false;
                return;
            }
            Body::Other { .. } => return,
            _ => {}
        }
        let full_address = sync_address(&message.body);
        if !self.synced {
            // `synchronize`: only a synchronisation message starts decoding.
            if let Some(address) = full_address {
                self.synced = true;
                self.address = Value::Absolute(address);
                if let Some(time) = message.timestamp {
                    self.time = Value::Absolute(time);
                }
            }
            return;
        }
        if let Some(stamp) = message.timestamp {
            self.time = if message.is_sync() {
                Value::Absolute(stamp)
            } else {
                match self.time {
                    Value::Relative(delta) => delta
                        .checked_add(stamp)
                        .map_or(Value::Unknown, Value::Relative),
                    Value::Absolute(time) => time
                        .checked_add(stamp)
                        .map_or(Value::Unknown, Value::Absolute),
                    Value::Unknown => Value::Unknown,
                }
            };
        }
        match message.body {
            Body::IndirectBranch { uaddr, .. } | Body::IndirectBranchHist { uaddr, .. } => {
                self.address = match self.address {
                    Value::Relative(delta) => Value::Relative(delta ^ uaddr),
                    Value::Absolute(address) => Value::Absolute(address ^ uaddr),
                    Value::Unknown => Value::Unknown,
                };
            }
            // Trace stops after the message's walk: the hart waits for a synchronisation.
            Body::ProgTraceCorrelation { .. } => self.synced = false,
            _ => {
                if let Some(address) = full_address {
                    self.address = Value::Absolute(address);
                }
            }
        }
    }
}

/// Whether the walk a message arms ends at the address the messages give (so the pc
/// after it is that address).
fn ends_at_message_address(body: &Body) -> bool {
    matches!(
        body,
        Body::IndirectBranch { .. }
            | Body::IndirectBranchHist { .. }
            | Body::ProgTraceSync { .. }
            | Body::DirectBranchSync { .. }
            | Body::IndirectBranchSync { .. }
            | Body::IndirectBranchHistSync { .. }
    )
}

/// What a run of messages does to a hart's message-level state, for either state
/// before it (synchronised or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Effect {
    from_synced: Outcome,
    from_unsynced: Outcome,
}

impl Default for Effect {
    fn default() -> Self {
        Self {
            from_synced: Outcome::unchanged(true),
            from_unsynced: Outcome::unchanged(false),
        }
    }
}

impl Effect {
    fn follow(&mut self, message: &Message) {
        self.from_synced.follow(message);
        self.from_unsynced.follow(message);
    }

    /// Follows a plain branch message ([`PlainMessage`]) of U-ADDR `uaddr` (0 for a
    /// DirectBranch): what [`Self::follow`] does with it.
    fn follow_plain(&mut self, uaddr: u64) {
        for outcome in [&mut self.from_synced, &mut self.from_unsynced] {
            if outcome.synced {
                outcome.address = match outcome.address {
                    Value::Relative(delta) => Value::Relative(delta ^ uaddr),
                    Value::Absolute(address) => Value::Absolute(address ^ uaddr),
                    Value::Unknown => Value::Unknown,
                };
            }
        }
    }

    /// The state after the run, from the state before it (`None`: unknowable).
    pub(crate) fn apply(&self, before: Option<HartState>) -> Option<HartState> {
        let before = before?;
        let outcome = if before.synced {
            self.from_synced
        } else {
            self.from_unsynced
        };
        let address = match outcome.address {
            Value::Relative(delta) => before.address ^ delta,
            Value::Absolute(address) => address,
            Value::Unknown => return None,
        };
        let time = match outcome.time {
            Value::Relative(delta) => before.time.checked_add(delta)?,
            Value::Absolute(time) => time,
            Value::Unknown => return None,
        };
        Some(HartState {
            synced: outcome.synced,
            address,
            time,
        })
    }
}

/// A hart's state that messages alone determine: synchronised or not, the U-ADDR
/// reference address, the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HartState {
    pub(crate) synced: bool,
    pub(crate) address: u64,
    pub(crate) time: u64,
}

impl HartState {
    /// Before the first message: never synchronised, at time zero.
    pub(crate) const START: Self = Self {
        synced: false,
        address: 0,
        time: 0,
    };
}

/// The first seam of a chunk: the message after one whose walk ends at its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seam {
    /// Offset of the first message after the seam.
    pub(crate) offset: u64,
    /// The hart whose message it follows.
    pub(crate) src: u16,
    /// What the chunk's messages before the seam do.
    pub(crate) before: Effect,
}

/// A branch message that is not a synchronisation and has no timestamp, by what the scan
/// needs of it: a trace of one hart is mostly these, and the same few again and again
/// (a loop's messages), so the scan keeps them by their bytes instead of parsing each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PlainMessage {
    bytes: u64,
    /// U-ADDR (0 for a DirectBranch).
    uaddr: u64,
    /// The walk ends at the message's address (an indirect branch): a seam follows.
    ends_at_address: bool,
}

impl PlainMessage {
    /// `message` as a plain message, if it is one.
    fn of(message: &Message, bytes: u64) -> Option<Self> {
        if message.timestamp.is_some() {
            return None;
        }
        let (uaddr, ends_at_address) = match message.body {
            Body::DirectBranch { .. } => (0, false),
            Body::IndirectBranch { uaddr, .. } | Body::IndirectBranchHist { uaddr, .. } => {
                (uaddr, true)
            }
            _ => return None,
        };
        Some(Self {
            bytes,
            uaddr,
            ends_at_address,
        })
    }
}

const PLAIN_TABLE_BITS: u32 = 10;

/// Plain messages seen by one scan, by their bytes (direct-mapped).
struct PlainMessages {
    table: Vec<Option<PlainMessage>>,
}

impl PlainMessages {
    fn new() -> Self {
        Self {
            table: vec![None; 1 << PLAIN_TABLE_BITS],
        }
    }

    fn slot(bytes: u64) -> usize {
        (bytes.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - PLAIN_TABLE_BITS)) as usize
    }

    #[inline]
    fn get(&self, short: ShortMessage) -> Option<PlainMessage> {
        let bytes = short.bytes();
        self.table[Self::slot(bytes)].filter(|plain| plain.bytes == bytes)
    }

    fn keep(&mut self, plain: PlainMessage) {
        self.table[Self::slot(plain.bytes)] = Some(plain);
    }
}

/// What [`scan`] found in the messages starting in one chunk's byte range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChunkScan {
    /// The first synchronisation message.
    pub(crate) first_sync: Option<u64>,
    /// The first seam, when the trace has one hart.
    pub(crate) seam: Option<Seam>,
    /// What all the chunk's messages do (meaningless once `several_harts`).
    pub(crate) effect: Effect,
    /// Messages of more than one hart: no seams anywhere.
    pub(crate) several_harts: bool,
}

/// Reads the messages that start in `begin..end` of `trace` (from the first message
/// boundary at or after `begin`; from the start when `begin` is 0).
pub(crate) fn scan(trace: &[u8], options: MessageOptions, begin: u64, end: u64) -> ChunkScan {
    let mut found = ChunkScan::default();
    let mut messages = match begin.checked_sub(1) {
        None => MessageDecoder::new(trace, options),
        Some(from) => {
            let Some(bytes) = usize::try_from(from)
                .ok()
                .and_then(|from| trace.get(from..))
            else {
                return found;
            };
            let mut messages = MessageDecoder::new(bytes, options).with_base_offset(from);
            if messages.sync_forward().is_none() {
                return found;
            }
            messages
        }
    };
    let mut src = None;
    // The hart whose message the next message would follow at a seam.
    let mut seam_after: Option<u16> = None;
    // Plain messages by their bytes: with one hart and no timestamps, a message's bytes
    // say all the scan needs (with an SRC field, the hart counts too).
    let mut plain = (options.src_bits == 0 && !options.timestamps).then(PlainMessages::new);
    loop {
        if let Some(plain) = &plain {
            if let Some(short) = messages.peek_short() {
                let offset = messages.position();
                if let Some(known) = plain.get(short).filter(|_| offset >= begin && offset < end) {
                    messages.skip_short(short);
                    src.get_or_insert(0);
                    if let Some(hart) = seam_after.take() {
                        if found.seam.is_none() {
                            found.seam = Some(Seam {
                                offset,
                                src: hart,
                                before: found.effect,
                            });
                        }
                    }
                    found.effect.follow_plain(known.uaddr);
                    if known.ends_at_address {
                        seam_after = Some(0);
                    }
                    continue;
                }
            }
        }
        match messages.next_message() {
            Ok(Some(message)) if message.offset >= end => break,
            Ok(Some(message)) if message.offset < begin => {}
            Ok(Some(message)) => {
                if *src.get_or_insert(message.src) != message.src {
                    found.several_harts = true;
                }
                if found.first_sync.is_none() && message.is_sync() {
                    found.first_sync = Some(message.offset);
                }
                if let Some(hart) = seam_after.take() {
                    // A RepeatBranch right after the seam would repeat the message before
                    // it, which the chunk's decoder does not have.
                    if found.seam.is_none() && !matches!(message.body, Body::RepeatBranch { .. }) {
                        found.seam = Some(Seam {
                            offset: message.offset,
                            src: hart,
                            before: found.effect,
                        });
                    }
                }
                found.effect.follow(&message);
                if ends_at_message_address(&message.body) {
                    seam_after = Some(message.src);
                }
                if let Some(plain) = &mut plain {
                    if let Some(known) = ShortMessage::of(&message, trace)
                        .and_then(|short| PlainMessage::of(&message, short.bytes()))
                    {
                        plain.keep(known);
                    }
                }
            }
            Ok(None) => break,
            // An unreadable message of the next chunk's share is that chunk's.
            Err(error) if error.offset() >= end => break,
            // The decoder loses every hart at an unreadable message.
            Err(_) => {
                found.effect.from_synced.synced = false;
                found.effect.from_unsynced.synced = false;
                seam_after = None;
            }
        }
    }
    if found.several_harts || options.src_bits > 0 {
        found.seam = None;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use ntrace_message::{BranchType, SyncReason};

    fn message(offset: u64, body: Body, timestamp: Option<u64>) -> Message {
        Message {
            offset,
            length: 1,
            src: 0,
            timestamp,
            body,
        }
    }

    fn indirect(offset: u64, uaddr: u64, timestamp: Option<u64>) -> Message {
        message(
            offset,
            Body::IndirectBranch {
                btype: BranchType::Indirect,
                icnt: 4,
                uaddr,
            },
            timestamp,
        )
    }

    fn sync(offset: u64, faddr: u64, timestamp: Option<u64>) -> Message {
        message(
            offset,
            Body::ProgTraceSync {
                sync: SyncReason::PERIODIC,
                icnt: 0,
                faddr,
            },
            timestamp,
        )
    }

    fn effect_of(messages: &[Message]) -> Effect {
        let mut effect = Effect::default();
        for message in messages {
            effect.follow(message);
        }
        effect
    }

    #[test]
    fn effects_applied_in_turn_equal_the_effect_of_the_whole_run() {
        let run = [
            sync(0, 0x1000, Some(100)),
            indirect(1, 0x30, Some(5)),
            indirect(2, 0x4, None),
            message(3, Body::Error { etype: 0, ecode: 0 }, None),
            indirect(4, 0x8, Some(7)),
            sync(5, 0x2000, None),
            indirect(6, 0x10, Some(3)),
        ];
        for state in [
            HartState::START,
            HartState {
                synced: true,
                address: 0x8000_0000,
                time: 50,
            },
        ] {
            let whole = effect_of(&run).apply(Some(state));
            for split in 0..=run.len() {
                let (first, second) = run.split_at(split);
                let stepwise = effect_of(second).apply(effect_of(first).apply(Some(state)));
                assert_eq!(stepwise, whole, "split at {split} from {state:?}");
            }
        }
        // From the start: the sync sets 0x1000 at 100, two U-ADDRs and a timestamp move
        // it, the Error loses the hart (the next U-ADDR and timestamp are ignored), the
        // sync restarts it at 0x2000 keeping the time, and the last one moves it again.
        assert_eq!(
            effect_of(&run).apply(Some(HartState::START)),
            Some(HartState {
                synced: true,
                address: 0x2010,
                time: 108,
            })
        );
    }

    #[test]
    fn a_time_past_64_bits_is_unknown() {
        let state = HartState {
            synced: true,
            address: 0,
            time: u64::MAX - 1,
        };
        assert_eq!(
            effect_of(&[indirect(0, 1, Some(5))]).apply(Some(state)),
            None
        );
    }
}
