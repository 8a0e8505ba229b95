//! The session: a perf.data file's samples in time order, with the side band applied
//! to the processes before each sample, as perf script and perf report see them.

use std::collections::VecDeque;

use perf_abi::ctr::{CtrRecord, CtrRecordError};
use perf_abi::sys::bindings as abi;
use perf_abi::Sample;
use perf_data::{PerfDataReader, RawRecord, ReadError, Records};

use crate::aux::{auxtrace_type, AuxDecoder, UndecodedAux};
use crate::lost::Lost;
use crate::ordered::OrderedEvents;
use crate::processes::{Processes, SymbolOptions};

/// Why a session stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The file: its name and the offset are in the error.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// rvperf_ctr AUX data that does not decode; `offset` is the file offset of the
    /// bad record.
    #[error("rvperf_ctr AUXTRACE data at file offset {offset:#x}")]
    CorruptAux {
        offset: u64,
        #[source]
        source: CtrRecordError,
    },
}

/// A sample as the tools weigh it: the record, its event and the weight perf gives it.
#[derive(Debug, Clone)]
pub struct SessionSample<'r> {
    /// Index into the reader's attrs: the sample's event (for samples decoded from AUX
    /// data, the event that recorded it).
    pub attr_index: Option<usize>,
    /// perf's `sample->period`: [`Sample::period_or_attr`] with the event's attr.
    pub period: u64,
    pub sample: Sample<'r>,
}

/// What waits in the ordered-events queue: small, and parsed when delivered (as in
/// perf).
#[derive(Debug)]
enum TimedEvent<'r> {
    /// A SAMPLE or side-band record of the file.
    Record(RawRecord<'r>),
    /// An rvperf_ctr record of AUX data, delivered as the sample it converts to.
    Ctr(CtrRecord<'r>),
}

/// The AUX data of the file: its AUXTRACE_INFO type, and what was not decoded.
#[derive(Debug, Default)]
struct AuxDecoding {
    /// The AUXTRACE_INFO type, once seen.
    auxtrace_type: Option<u32>,
    undecoded: UndecodedAux,
}

/// A perf.data file read as perf's session reads it: [`next_sample`](Self::next_sample)
/// gives the samples (those of SAMPLE records, and those decoded from AUX data) in time
/// order, with the side band (MMAP, COMM, FORK, EXIT) applied to
/// [`processes`](Self::processes) up to the sample's time. The records are sorted by
/// perf's ordered-events rules ([`OrderedEvents`]). The session never prints: progress
/// ([`offset`](Self::offset)), losses ([`lost`](Self::lost)), AUX data it could not
/// decode ([`undecoded_aux`](Self::undecoded_aux)) and the symbolizer's problems are
/// for the caller to show.
pub struct Session<'r> {
    reader: &'r PerfDataReader<'r>,
    records: Records<'r>,
    queue: OrderedEvents<TimedEvent<'r>>,
    /// Delivered by the queue, waiting for `next_sample`.
    ready: VecDeque<TimedEvent<'r>>,
    processes: Processes,
    aux: AuxDecoding,
    lost: Lost,
    /// The file offset of the last record read.
    offset: u64,
    end_of_file: bool,
    /// Told the file offset of each record read.
    progress: Option<Box<dyn FnMut(u64) + 'r>>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Session")
            .field("offset", &self.offset)
            .field("end_of_file", &self.end_of_file)
            .field("queued", &self.ready.len())
            .field("lost", &self.lost)
            .finish_non_exhaustive()
    }
}

impl<'r> Session<'r> {
    /// A session over `reader` with symbols as perf finds them for a recording
    /// ([`Processes::for_recording`]).
    pub fn new(reader: &'r PerfDataReader<'r>, options: SymbolOptions) -> Self {
        Self::with_processes(reader, Processes::for_recording(reader, options))
    }

    /// A session over `reader` whose processes are `processes` (such as
    /// [`Processes::new`] for a caller that looks up mapped files, not symbols).
    pub fn with_processes(reader: &'r PerfDataReader<'r>, processes: Processes) -> Self {
        Self {
            reader,
            records: reader.records(),
            queue: OrderedEvents::default(),
            ready: VecDeque::new(),
            processes,
            aux: AuxDecoding::default(),
            lost: Lost::default(),
            offset: 0,
            end_of_file: false,
            progress: None,
        }
    }

    /// Calls `progress` with the file offset of each record read, for a caller that
    /// shows how far a long read is.
    pub fn set_progress(&mut self, progress: impl FnMut(u64) + 'r) {
        self.progress = Some(Box::new(progress));
    }

    pub fn reader(&self) -> &'r PerfDataReader<'r> {
        self.reader
    }

    /// The next sample in time order, with the side band before it applied; `None`
    /// at the end of the file.
    pub fn next_sample(&mut self) -> Result<Option<SessionSample<'r>>, SessionError> {
        loop {
            while let Some(event) = self.ready.pop_front() {
                if let Some(sample) = self.deliver(event)? {
                    return Ok(Some(sample));
                }
            }
            if self.end_of_file {
                return Ok(None);
            }
            self.read_record()?;
        }
    }

    /// Reads one record of the file into the queue (or `ready`).
    fn read_record(&mut self) -> Result<(), SessionError> {
        let Some(record) = self.records.next_record()? else {
            self.ready.extend(self.queue.finish());
            self.end_of_file = true;
            return Ok(());
        };
        self.offset = record.offset;
        if let Some(progress) = &mut self.progress {
            progress(record.offset);
        }
        self.lost.count(&record);
        match record.record_type {
            perf_data::PERF_RECORD_AUXTRACE_INFO => {
                self.aux.auxtrace_type = Some(auxtrace_type(&record));
            }
            perf_data::PERF_RECORD_AUXTRACE => {
                let decoder = self.aux.auxtrace_type.and_then(AuxDecoder::for_type);
                let Some(decoder) = decoder else {
                    let undecoded = &mut self.aux.undecoded;
                    undecoded.auxtrace_type = self.aux.auxtrace_type;
                    undecoded.chunks = undecoded.chunks.saturating_add(1);
                    undecoded.bytes = undecoded.bytes.saturating_add(record.aux_data.len() as u64);
                    return Ok(());
                };
                let decoded =
                    decoder
                        .records(&record)
                        .map_err(|error| SessionError::CorruptAux {
                            offset: error.offset,
                            source: error.source,
                        })?;
                for ctr in decoded {
                    let time = Some(ctr.header.time);
                    self.queue_event(time, TimedEvent::Ctr(ctr));
                }
            }
            perf_data::PERF_RECORD_FINISHED_ROUND => {
                self.ready.extend(self.queue.finish_round());
            }
            record_type
                if record_type == abi::PERF_RECORD_SAMPLE
                    || Processes::is_side_band(record_type) =>
            {
                let time = self.reader.record_time(&record);
                self.queue_event(time, TimedEvent::Record(record));
            }
            _ => {}
        }
        Ok(())
    }

    fn queue_event(&mut self, time: Option<u64>, event: TimedEvent<'r>) {
        // Only after a round or at the end is `ready` filled, and it is emptied before
        // the next record is read: an event without a time goes out now.
        if let Some(event) = self.queue.queue(time, event) {
            self.ready.push_back(event);
        }
    }

    /// A sample, or the side band applied (`None`).
    fn deliver(
        &mut self,
        event: TimedEvent<'r>,
    ) -> Result<Option<SessionSample<'r>>, SessionError> {
        match event {
            TimedEvent::Record(record) if record.record_type == abi::PERF_RECORD_SAMPLE => {
                let sample = self.reader.parse_sample(&record)?;
                Ok(Some(self.weighed(record.attr_index, sample)))
            }
            TimedEvent::Record(record) => {
                self.processes
                    .observe(record.record_type, record.misc, record.body);
                Ok(None)
            }
            TimedEvent::Ctr(ctr) => {
                // The SAMPLE `rvperf record` converts the record into, as read back.
                let sample = Sample {
                    id: None,
                    ..perf_data::ctr::ctr_sample(&ctr, 0)
                };
                Ok(Some(self.weighed(Some(0), sample)))
            }
        }
    }

    /// A sample of event `attr_index` with the weight perf gives it.
    fn weighed(&self, attr_index: Option<usize>, sample: Sample<'r>) -> SessionSample<'r> {
        let attr = attr_index.and_then(|index| self.reader.attrs().get(index));
        let period = attr.map_or(sample.period.unwrap_or(0), |attr| {
            sample.period_or_attr(&attr.attr)
        });
        SessionSample {
            attr_index,
            period,
            sample,
        }
    }

    /// The processes as of the last sample delivered.
    pub fn processes(&mut self) -> &mut Processes {
        &mut self.processes
    }

    /// The processes, once the session is over.
    pub fn into_processes(self) -> Processes {
        self.processes
    }

    /// The file offset of the last record read (for progress: the records are read
    /// in file order, at most two rounds ahead of the samples delivered).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The losses of the records read so far (of the whole file at the end).
    pub fn lost(&self) -> Lost {
        self.lost
    }

    /// AUXTRACE chunks of a type not decoded (rvperf decodes rvperf_ctr's only), if any.
    pub fn undecoded_aux(&self) -> Option<UndecodedAux> {
        (self.aux.undecoded.chunks > 0).then_some(self.aux.undecoded)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use perf_abi::sys::bindings::perf_event_attr;
    use perf_abi::{CommRecord, Mmap2FileId, Mmap2Record, SampleId, TaskRecord};
    use perf_data::{EventDesc, Metadata, PerfDataWriter, TaskEvent};

    use super::*;

    const USER: u16 = abi::PERF_RECORD_MISC_USER as u16;

    fn at(time: u64, pid: u32) -> SampleId {
        SampleId {
            pid: Some(pid),
            tid: Some(pid),
            time: Some(time),
            ..SampleId::default()
        }
    }

    fn mmap2(
        writer: &mut PerfDataWriter<Cursor<Vec<u8>>>,
        time: u64,
        pid: u32,
        addr: u64,
        pgoff: u64,
        file: &[u8],
    ) {
        let mmap = Mmap2Record {
            pid,
            tid: pid,
            addr,
            len: 0x1000,
            pgoff,
            file_id: Mmap2FileId::BuildId(&[0xab; 20]),
            prot: 5,
            flags: 2,
            filename: file,
            sample_id: at(time, pid),
        };
        writer.write_mmap2(0, USER, &mmap).unwrap();
    }

    fn sample(writer: &mut PerfDataWriter<Cursor<Vec<u8>>>, time: u64, pid: u32, ip: u64) {
        let sample = Sample {
            misc: USER,
            ip: Some(ip),
            pid: Some(pid),
            tid: Some(pid),
            time: Some(time),
            ..Sample::default()
        };
        writer.write_sample(0, &sample).unwrap();
    }

    /// A recording as per-CPU buffers write it: process 11, forked from 10 and then
    /// executing /bin/child, has a sample before its FORK in the file, and one before
    /// the mmap it falls in.
    fn recording() -> Vec<u8> {
        let mut attr = perf_event_attr {
            size: std::mem::size_of::<perf_event_attr>() as u32,
            sample_type: u64::from(
                abi::PERF_SAMPLE_IP | abi::PERF_SAMPLE_TID | abi::PERF_SAMPLE_TIME,
            ),
            ..Default::default()
        };
        attr.sample_period = 1000;
        attr.set_sample_id_all(1);
        let events = vec![EventDesc {
            attr,
            name: "cycles".to_owned(),
            ids: Vec::new(),
        }];
        let mut writer = PerfDataWriter::new(Cursor::new(Vec::new()), events).unwrap();
        mmap2(&mut writer, 100, 10, 0x1000, 0, b"/bin/parent");
        sample(&mut writer, 400, 11, 0x1010);
        writer.write_finished_round().unwrap();
        sample(&mut writer, 700, 11, 0x5010);
        let fork = TaskRecord {
            pid: 11,
            ppid: 10,
            tid: 11,
            ptid: 10,
            time: 300,
            sample_id: at(300, 11),
        };
        writer.write_task(0, TaskEvent::Fork, &fork).unwrap();
        let comm = CommRecord {
            pid: 11,
            tid: 11,
            comm: b"child",
            exec: true,
            sample_id: at(500, 11),
        };
        writer.write_comm(0, &comm).unwrap();
        mmap2(&mut writer, 600, 11, 0x5000, 0x3000, b"/bin/child");
        sample(&mut writer, 800, 11, 0x1010);
        writer.write_finished_round().unwrap();
        writer
            .finish(&Metadata::from_host("test", Vec::new()))
            .unwrap()
            .into_inner()
    }

    /// What a sample's address is in, as the session sees it when it is delivered.
    #[derive(Debug, PartialEq, Eq)]
    struct Seen {
        time: u64,
        file: Option<(String, u64)>,
        comm: String,
    }

    #[test]
    fn samples_see_the_address_space_of_their_time_with_fork_and_exec() {
        let bytes = recording();
        let reader = PerfDataReader::from_bytes(&bytes, "test").unwrap();
        let mut session =
            Session::with_processes(&reader, Processes::new(SymbolOptions::default()));
        let mut seen = Vec::new();
        while let Some(sampled) = session.next_sample().unwrap() {
            let sample = &sampled.sample;
            assert_eq!(sampled.period, 1000);
            let pid = sample.pid.unwrap();
            let processes = session.processes();
            let file = processes.mapped_file(pid, sample.ip.unwrap()).map(|file| {
                assert_eq!(file.build_id, Some(&[0xab; 20][..]));
                (file.recorded.to_owned(), file.file_offset)
            });
            seen.push(Seen {
                time: sample.time.unwrap(),
                file,
                comm: processes.comm(pid as i32, pid as i32).to_owned(),
            });
        }
        assert_eq!(
            seen,
            [
                // After the FORK in time (before it in the file): the parent's mapping;
                // the parent has no name, so the child is named by its tid.
                Seen {
                    time: 400,
                    file: Some(("/bin/parent".to_owned(), 0x10)),
                    comm: ":11".to_owned(),
                },
                // Before its mmap in the file, after it in time.
                Seen {
                    time: 700,
                    file: Some(("/bin/child".to_owned(), 0x3010)),
                    comm: "child".to_owned(),
                },
                // The exec took the parent's mapping away.
                Seen {
                    time: 800,
                    file: None,
                    comm: "child".to_owned(),
                },
            ]
        );
        let lost = session.lost();
        assert_eq!((lost.samples, lost.chunks), (3, 0));
        assert!(session.undecoded_aux().is_none());
        assert!(session.next_sample().unwrap().is_none());
        let files: Vec<_> = session
            .processes()
            .recorded_files()
            .map(|file| file.recorded.to_owned())
            .collect();
        assert_eq!(files, ["/bin/parent", "/bin/child"]);
    }

    /// Every byte of a recording changed in turn: the session and the fold end in an
    /// error or a result, never a panic (the fuzz target `perf_session` goes further).
    #[test]
    fn corrupt_recordings_end_in_errors_not_panics() {
        let bytes = recording();
        for at in 0..bytes.len() {
            for value in [0x00, 0xff, 0x80] {
                let mut corrupt = bytes.clone();
                corrupt[at] = value;
                let Ok(reader) = PerfDataReader::from_bytes(&corrupt, "corrupt") else {
                    continue;
                };
                let processes = Processes::new(SymbolOptions {
                    symfs: Some("/nonexistent".into()),
                    ..SymbolOptions::default()
                });
                let mut session = Session::with_processes(&reader, processes);
                let _ = crate::fold(&mut session, crate::FoldOptions::default());
            }
        }
    }
}
