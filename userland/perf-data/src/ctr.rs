//! rvperf_ctr records (`perf_abi::ctr`, one per sample, from the PMU's AUX area) as the
//! perf.data records Linux perf reads: a PERF_RECORD_SAMPLE with
//! PERF_SAMPLE_BRANCH_STACK, and after a record at which perf throttled the trigger,
//! the PERF_RECORD_THROTTLE the kernel would have written for it. `rvperf record`
//! writes them while recording, `rvperf inject` from kept AUX data, and readers of
//! kept AUX data decode to them: one conversion, beside the writer that writes it.

use std::io::{Seek, Write};

use perf_abi::ctr::CtrRecord;
use perf_abi::sys::bindings as b;
use perf_abi::{Sample, SampleId, ThrottleRecord};

use crate::writer::{PerfDataWriter, WriteError};

/// A record as the SAMPLE written for it under the CPU event `id` (of the triggering
/// event's attr, the writer's attr 0), borrowing the record's branches (newest first,
/// no hw_idx: perf's PERF_SAMPLE_BRANCH_STACK order).
pub fn ctr_sample<'a>(record: &CtrRecord<'a>, id: u64) -> Sample<'a> {
    let misc = if record.is_kernel() {
        b::PERF_RECORD_MISC_KERNEL
    } else {
        b::PERF_RECORD_MISC_USER
    };
    Sample {
        ip: Some(record.header.ip),
        pid: Some(record.header.pid),
        tid: Some(record.header.tid),
        time: Some(record.header.time),
        id: Some(id),
        cpu: Some(record.header.cpu),
        period: Some(record.header.period),
        branch_stack: Some(record.branch_stack()),
        // The misc values are small constants (1 and 2) of a u32-typed binding.
        misc: misc as u16,
        ..Sample::default()
    }
}

/// When perf throttled the trigger at a record: the PERF_RECORD_THROTTLE that follows
/// its sample (for the CPU event `id`, at the sample's time), as the kernel writes one
/// for an event it throttles. Written with [`write_ctr_throttle`].
pub fn ctr_throttle(record: &CtrRecord<'_>, id: u64) -> Option<ThrottleRecord> {
    let time = record.header.time;
    // The event that counted: the event itself, as nothing is inherited.
    let stream_id = id;
    record.is_throttled().then_some(ThrottleRecord {
        time,
        id,
        stream_id,
        sample_id: SampleId {
            pid: Some(record.header.pid),
            tid: Some(record.header.tid),
            time: Some(time),
            id: Some(id),
            stream_id: Some(stream_id),
            cpu: Some(record.header.cpu),
        },
    })
}

/// Writes the PERF_RECORD_THROTTLE of [`ctr_throttle`] under the triggering event's
/// attr (the writer's attr 0).
pub fn write_ctr_throttle<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    throttle: &ThrottleRecord,
) -> Result<(), WriteError> {
    writer.write_throttle(0, throttle)
}

#[cfg(test)]
mod tests {
    use perf_abi::ctr::{
        encode_ctr_record, CtrBranch, CtrRecordHeader, CtrRecords, CTR_RECORD_KERNEL,
        CTR_RECORD_THROTTLED,
    };

    use super::*;

    fn header(flags: u8) -> CtrRecordHeader {
        CtrRecordHeader {
            flags,
            cpu: 3,
            pid: 40,
            tid: 41,
            time: 5_000,
            ip: 0x1000,
            period: 100,
            ..CtrRecordHeader::default()
        }
    }

    #[test]
    fn a_throttled_record_gets_a_throttle_record_at_its_sample() {
        let bytes = encode_ctr_record(&header(CTR_RECORD_THROTTLED), &[]);
        let record = CtrRecords::new(&bytes).next_record().unwrap().unwrap();
        let sample = ctr_sample(&record, 9);
        let throttle = ctr_throttle(&record, 9).unwrap();
        assert_eq!(
            throttle.sample_id,
            SampleId {
                pid: Some(40),
                tid: Some(41),
                time: sample.time,
                id: Some(9),
                stream_id: Some(9),
                cpu: Some(3),
            }
        );
        assert_eq!(
            (throttle.time, throttle.id, throttle.stream_id),
            (5_000, 9, 9)
        );
        let plain = encode_ctr_record(&header(0), &[]);
        let record = CtrRecords::new(&plain).next_record().unwrap().unwrap();
        assert_eq!(ctr_throttle(&record, 9), None);
    }

    #[test]
    fn a_record_becomes_a_sample_with_its_branches_newest_first() {
        let branches = [
            CtrBranch {
                from: 0x10,
                to: 0x20,
                flags_word: 1,
            },
            CtrBranch {
                from: 0x30,
                to: 0x40,
                flags_word: 2,
            },
        ];
        let bytes = encode_ctr_record(&header(CTR_RECORD_KERNEL), &branches);
        let record = CtrRecords::new(&bytes).next_record().unwrap().unwrap();
        let sample = ctr_sample(&record, 7);
        // In the module's order, which is perf's: the newest branch first.
        let entries: Vec<(u64, u64, u64)> = sample
            .branch_stack
            .expect("a branch stack")
            .iter()
            .map(|entry| (entry.from, entry.to, entry.flags.to_word()))
            .collect();
        assert_eq!(entries, [(0x10, 0x20, 1), (0x30, 0x40, 2)]);
        assert_eq!(
            (sample.ip, sample.pid, sample.tid, sample.time),
            (Some(0x1000), Some(40), Some(41), Some(5_000))
        );
        assert_eq!(
            (sample.id, sample.cpu, sample.period),
            (Some(7), Some(3), Some(100))
        );
        assert_eq!(sample.misc, b::PERF_RECORD_MISC_KERNEL as u16);
    }
}
