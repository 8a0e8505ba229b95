//! What a recording lost, as its file holds it: PERF_RECORD_LOST (the kernel's count of
//! records it could not write into a full ring, written once there is room again) and
//! PERF_RECORD_LOST_SAMPLES (per event; perf 6.0 and later write them at the end of a
//! recording from each event's PERF_FORMAT_LOST count).

use perf_abi::sys::bindings as abi;
use perf_data::RawRecord;

/// The losses of the records read so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lost {
    /// Records in the file.
    pub events: u64,
    /// PERF_RECORD_LOST records ("chunks", as perf report calls them).
    pub chunks: u64,
    /// The records they say were lost.
    pub lost: u64,
    /// The samples PERF_RECORD_LOST_SAMPLES say were lost.
    pub lost_samples: u64,
    /// PERF_RECORD_SAMPLE records.
    pub samples: u64,
}

impl Lost {
    /// Counts one record (sums saturate: the counts are read from the file).
    pub fn count(&mut self, record: &RawRecord<'_>) {
        let word = |at: usize| {
            record
                .body
                .get(at..at + 8)
                .and_then(|bytes| bytes.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        self.events = self.events.saturating_add(1);
        match record.record_type {
            abi::PERF_RECORD_SAMPLE => self.samples = self.samples.saturating_add(1),
            // struct { u64 id; u64 lost; sample_id }
            abi::PERF_RECORD_LOST => {
                self.chunks = self.chunks.saturating_add(1);
                self.lost = self.lost.saturating_add(word(8));
            }
            // struct { u64 lost; sample_id }
            abi::PERF_RECORD_LOST_SAMPLES => {
                self.lost_samples = self.lost_samples.saturating_add(word(0));
            }
            _ => {}
        }
    }

    /// The "Total Lost Samples" of perf report's header: the LOST_SAMPLES totals where
    /// the file has them (perf's recordings), else what its LOST records count
    /// (rvperf's recordings, and older perf's, which write no LOST_SAMPLES).
    pub fn total_lost_samples(&self) -> u64 {
        if self.lost_samples > 0 {
            self.lost_samples
        } else {
            self.lost
        }
    }

    /// The samples perf report says it processed: those in the file and those lost.
    pub fn processed_samples(&self) -> u64 {
        self.samples.saturating_add(self.lost_samples)
    }
}
