//! What a recording lost, as its file holds it: PERF_RECORD_LOST (the kernel's count of
//! records it could not write into a full ring, written once there is room again) and
//! PERF_RECORD_LOST_SAMPLES (per event; perf 6.0 and later write them at the end of a
//! recording from each event's PERF_FORMAT_LOST count).

use anyhow::Result;
use perf_abi::sys::bindings as b;
use perf_data::PerfDataReader;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Lost {
    /// Records in the file.
    pub(crate) events: u64,
    /// PERF_RECORD_LOST records ("chunks", as perf report calls them).
    pub(crate) chunks: u64,
    /// The records they say were lost.
    pub(crate) lost: u64,
    /// The samples PERF_RECORD_LOST_SAMPLES say were lost.
    pub(crate) lost_samples: u64,
    /// PERF_RECORD_SAMPLE records.
    pub(crate) samples: u64,
}

impl Lost {
    /// Reads the whole file's LOST and LOST_SAMPLES records.
    pub(crate) fn of(reader: &PerfDataReader<'_>) -> Result<Lost> {
        let mut lost = Lost::default();
        let mut records = reader.records();
        let word = |body: &[u8], at: usize| {
            body.get(at..at + 8).map_or(0, |bytes| {
                u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]))
            })
        };
        while let Some(record) = records.next_record()? {
            lost.events += 1;
            match record.record_type {
                b::PERF_RECORD_SAMPLE => lost.samples += 1,
                // struct { u64 id; u64 lost; sample_id }
                b::PERF_RECORD_LOST => {
                    lost.chunks += 1;
                    lost.lost += word(record.body, 8);
                }
                // struct { u64 lost; sample_id }
                b::PERF_RECORD_LOST_SAMPLES => lost.lost_samples += word(record.body, 0),
                _ => {}
            }
        }
        Ok(lost)
    }

    /// The "Total Lost Samples" of perf report's header: the LOST_SAMPLES totals where
    /// the file has them (perf's recordings), else what its LOST records count
    /// (rvperf's recordings, and older perf's, which write no LOST_SAMPLES).
    pub(crate) fn total_lost_samples(&self) -> u64 {
        if self.lost_samples > 0 {
            self.lost_samples
        } else {
            self.lost
        }
    }

    /// perf report's warnings about losses, one line each on stderr.
    pub(crate) fn warn(&self) {
        if self.chunks > 0 {
            eprintln!(
                "rvperf: warning: processed {} events and lost {} chunks! Check IO/CPU overload.",
                self.events, self.chunks
            );
        }
        if self.lost_samples > 0 {
            let processed = self.samples + self.lost_samples;
            eprintln!(
                "rvperf: warning: processed {processed} samples and lost {:.2}%!",
                100.0 * self.lost_samples as f64 / processed as f64
            );
        }
    }
}
