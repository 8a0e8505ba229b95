//! rvperf_ctr records (`perf_abi::ctr`, one per sample, from the PMU's AUX area) as the
//! perf.data records Linux perf reads: a PERF_RECORD_SAMPLE with
//! PERF_SAMPLE_BRANCH_STACK, and after a record at which perf throttled the trigger,
//! the PERF_RECORD_THROTTLE the kernel would have written for it. `rvperf record`
//! writes them while recording, `rvperf inject` from kept AUX data, and readers of
//! kept AUX data decode to them: one conversion, beside the writer that writes it.

use std::io::{Seek, Write};

use perf_abi::ctr::CtrRecord;
use perf_abi::sys::bindings as b;

use crate::brstack::{BranchEntry, BranchStack};
use crate::writer::{PerfDataWriter, SampleData, SampleId, WriteError};

/// A record as the SAMPLE written for it under the CPU event `id` (of the triggering
/// event's attr, the writer's attr 0).
pub fn ctr_sample(record: &CtrRecord<'_>, id: u64) -> SampleData {
    let misc = if record.is_kernel() {
        b::PERF_RECORD_MISC_KERNEL
    } else {
        b::PERF_RECORD_MISC_USER
    };
    SampleData {
        ip: record.header.ip,
        pid: record.header.pid,
        tid: record.header.tid,
        time: record.header.time,
        id,
        cpu: record.header.cpu,
        period: record.header.period,
        branch_stack: Some(ctr_branch_stack(record)),
        // The misc values are small constants (1 and 2) of a u32-typed binding.
        misc: misc as u16,
        ..SampleData::default()
    }
}

/// When perf throttled the trigger at a record: the sample_id of the
/// PERF_RECORD_THROTTLE that follows its sample (for the CPU event `id`, at the
/// sample's time), as the kernel writes one for an event it throttles. Written with
/// [`write_ctr_throttle`].
pub fn ctr_throttle(record: &CtrRecord<'_>, id: u64) -> Option<SampleId> {
    record.is_throttled().then_some(SampleId {
        pid: record.header.pid,
        tid: record.header.tid,
        time: record.header.time,
        id,
        // The event that counted: the event itself, as nothing is inherited.
        stream_id: id,
        cpu: record.header.cpu,
    })
}

/// Writes the PERF_RECORD_THROTTLE of [`ctr_throttle`] under the triggering event's
/// attr (the writer's attr 0).
pub fn write_ctr_throttle<W: Write + Seek>(
    writer: &mut PerfDataWriter<W>,
    throttle: &SampleId,
) -> Result<(), WriteError> {
    writer.write_throttle(0, throttle.time, throttle.id, throttle.stream_id, throttle)
}

/// A record's branches as perf's PERF_SAMPLE_BRANCH_STACK (newest first, no hw_idx).
pub fn ctr_branch_stack(record: &CtrRecord<'_>) -> BranchStack {
    BranchStack {
        hw_idx: None,
        entries: record
            .branches()
            .map(|branch| BranchEntry {
                from: branch.from,
                to: branch.to,
                flags: branch.flags_word,
            })
            .collect(),
    }
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
            throttle,
            SampleId {
                pid: 40,
                tid: 41,
                time: sample.time,
                id: 9,
                stream_id: 9,
                cpu: 3,
            }
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
        let expected_stack = BranchStack {
            hw_idx: None,
            entries: vec![
                BranchEntry {
                    from: 0x10,
                    to: 0x20,
                    flags: 1,
                },
                BranchEntry {
                    from: 0x30,
                    to: 0x40,
                    flags: 2,
                },
            ],
        };
        assert_eq!(
            sample,
            SampleData {
                ip: 0x1000,
                pid: 40,
                tid: 41,
                time: 5_000,
                id: 7,
                cpu: 3,
                period: 100,
                branch_stack: Some(expected_stack),
                misc: b::PERF_RECORD_MISC_KERNEL as u16,
                ..SampleData::default()
            }
        );
    }
}
