//! The messages of one piece of an N-Trace recording's trace, each with its hart's
//! time then (spec 8.7: a synchronisation message's timestamp is absolute, the others'
//! relative to the hart's previous one), as the flow decoder keeps it. What splits a
//! trace by thread without decoding it reads these.

use std::collections::HashMap;

use ntrace_message::{Message, MessageDecoder, MessageOptions};

/// One message of [`TimedMessages`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimedMessage {
    /// A message, and its hart's time in trace units (`None` before the hart's first
    /// timestamped synchronisation, after an unreadable message, or when the time
    /// overflowed).
    Read { message: Message, time: Option<u64> },
    /// Bytes that are no message: whose they were is unknown, so every hart's time is
    /// forgotten until its next synchronisation.
    Unreadable,
}

/// The messages of `bytes`, in order, with their harts' times.
#[derive(Debug)]
pub struct TimedMessages<'a> {
    decoder: MessageDecoder<'a>,
    times: HashMap<u16, u64>,
}

impl<'a> TimedMessages<'a> {
    /// `options` are the recording's wire options (SRC bits, timestamps).
    pub fn new(bytes: &'a [u8], options: MessageOptions) -> Self {
        Self {
            decoder: MessageDecoder::new(bytes, options),
            times: HashMap::new(),
        }
    }
}

impl Iterator for TimedMessages<'_> {
    type Item = TimedMessage;

    fn next(&mut self) -> Option<TimedMessage> {
        let message = match self.decoder.next_message() {
            Ok(Some(message)) => message,
            Ok(None) => return None,
            Err(_) => {
                self.times.clear();
                return Some(TimedMessage::Unreadable);
            }
        };
        let hart = message.src;
        match (message.timestamp, message.is_sync()) {
            (Some(stamp), true) => {
                self.times.insert(hart, stamp);
            }
            (Some(stamp), false) => {
                if let Some(&time) = self.times.get(&hart) {
                    match time.checked_add(stamp) {
                        Some(time) => self.times.insert(hart, time),
                        None => self.times.remove(&hart),
                    };
                }
            }
            (None, _) => {}
        }
        let time = self.times.get(&hart).copied();
        Some(TimedMessage::Read { message, time })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ntrace_message::{Body, CorrelationEvent, MessageEncoder, SyncReason};

    #[test]
    fn times_are_absolute_at_a_sync_and_add_up_after() {
        let options = MessageOptions::default().with_timestamps(true);
        let encoder = MessageEncoder::new(options);
        let sync = Body::ProgTraceSync {
            sync: SyncReason::PERIODIC,
            icnt: 0,
            faddr: 0x1000,
        };
        let correlation = Body::ProgTraceCorrelation {
            evcode: CorrelationEvent(4),
            cdf: 0,
            icnt: 1,
            hist: None,
        };
        let mut bytes = Vec::new();
        for (body, timestamp) in [
            (&correlation, Some(5)),
            (&sync, Some(100)),
            (&correlation, Some(20)),
            (&correlation, None),
            (&sync, Some(50)),
        ] {
            encoder.encode(0, body, timestamp, &mut bytes).unwrap();
        }
        // A message with a reserved MSEO between them (unreadable): every time is
        // forgotten.
        bytes.extend_from_slice(&[0b0000_0110, 0b0000_0010, 0xff]);
        encoder
            .encode(0, &correlation, Some(1), &mut bytes)
            .unwrap();
        let times: Vec<Option<Option<u64>>> = TimedMessages::new(&bytes, options)
            .map(|timed| match timed {
                TimedMessage::Read { time, .. } => Some(time),
                TimedMessage::Unreadable => None,
            })
            .collect();
        assert_eq!(
            times,
            [
                Some(None),
                Some(Some(100)),
                Some(Some(120)),
                Some(Some(120)),
                Some(Some(50)),
                None,
                Some(None)
            ]
        );
    }
}
