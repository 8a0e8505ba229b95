//! perf's ordered-events queue (`tools/perf/util/ordered-events.c`): records wait,
//! sorted by time, until a round marker says no older record can still come.
//!
//! A perf.data file is not in time order: each CPU's buffer is written in turn, so a
//! child's FORK can come after its exec and mmaps, and a sample before the mmap it
//! falls in. At each FINISHED_ROUND record, every queued record not newer than the
//! newest time seen before the previous round marker is delivered, oldest first and in
//! file order among equal times, so memory holds about two rounds of records, not the
//! file. A record without a time (no sample_id_all, or time 0 as on the records perf
//! synthesizes from /proc at the start) is not queued but delivered at once, as perf
//! delivers it.

/// The queue; `T` is what waits (small: records are parsed when delivered).
#[derive(Debug)]
pub struct OrderedEvents<T> {
    pending: Vec<Timed<T>>,
    /// Queued so far, to keep file order among records of one time.
    sequence: u64,
    /// The newest time queued.
    newest: u64,
    /// What the next FINISHED_ROUND delivers up to: the newest time seen before
    /// the previous one.
    next_flush: u64,
}

impl<T> Default for OrderedEvents<T> {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            sequence: 0,
            newest: 0,
            next_flush: 0,
        }
    }
}

impl<T> OrderedEvents<T> {
    /// Queues `event`, or hands it back to be delivered at once when it has no
    /// time (`None`, 0 or all ones: `ordered_events__queue` refuses those).
    pub fn queue(&mut self, time: Option<u64>, event: T) -> Option<T> {
        let time = match time {
            Some(time) if time != 0 && time != u64::MAX => time,
            _ => return Some(event),
        };
        self.newest = self.newest.max(time);
        // One per record of a file: cannot reach 2^64.
        self.sequence = self.sequence.saturating_add(1);
        self.pending.push(Timed {
            time,
            sequence: self.sequence,
            event,
        });
        None
    }

    /// A FINISHED_ROUND record: the records up to the limit the previous round
    /// set, oldest first.
    pub fn finish_round(&mut self) -> impl Iterator<Item = T> + '_ {
        let limit = self.next_flush;
        self.next_flush = self.newest;
        self.flush(limit)
    }

    /// The end of the file: everything left, oldest first.
    pub fn finish(&mut self) -> impl Iterator<Item = T> + '_ {
        self.flush(u64::MAX)
    }

    fn flush(&mut self, limit: u64) -> impl Iterator<Item = T> + '_ {
        // Sorting what is mostly sorted already is close to linear.
        self.pending
            .sort_by_key(|timed| (timed.time, timed.sequence));
        let ready = self.pending.partition_point(|timed| timed.time <= limit);
        self.pending.drain(..ready).map(|timed| timed.event)
    }
}

/// A record waiting for its turn in time order; `sequence` keeps file order among
/// records of one time.
#[derive(Debug)]
struct Timed<T> {
    time: u64,
    sequence: u64,
    event: T,
}

#[cfg(test)]
mod tests {
    use super::OrderedEvents;

    #[test]
    fn records_come_out_a_round_late_in_time_order_and_timeless_ones_at_once() {
        let mut queue = OrderedEvents::default();
        assert!(queue.queue(Some(10), 1).is_none());
        assert!(queue.queue(Some(5), 2).is_none());
        // No time, time 0 (perf's synthesized records) and all ones: not queued.
        for time in [None, Some(0), Some(u64::MAX)] {
            assert_eq!(queue.queue(time, 3), Some(3));
        }
        // The first round delivers nothing: it only sets the limit of the next.
        assert_eq!(
            queue.finish_round().collect::<Vec<u32>>(),
            Vec::<u32>::new()
        );
        assert!(queue.queue(Some(7), 4).is_none());
        assert!(queue.queue(Some(12), 5).is_none());
        // Equal times keep their file order.
        assert!(queue.queue(Some(7), 6).is_none());
        assert_eq!(queue.finish_round().collect::<Vec<_>>(), [2, 4, 6, 1]);
        assert_eq!(queue.finish().collect::<Vec<_>>(), [5]);
    }
}
