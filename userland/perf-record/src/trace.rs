//! Recording a command's hardware trace through the `rvtrace` driver: the workload is
//! forked and held, the trace block configured and started, the workload released, and
//! the sink drained through its mapping whenever a quarter of the buffer is new (or
//! every poll interval) until the workload ends; then the trace is stopped and the last
//! bytes drained. What the sink overwrote before it was read is kept as gaps.

use trace_device::{DeviceError, Drain, Gap, TraceDevice, WaitEnd};

use crate::{StopFlag, Workload, WorkloadError, WorkloadExit};

/// How to record.
#[derive(Clone, Debug)]
pub struct TraceRecordOptions {
    /// The encoders' configuration (`struct rvtrace_config`).
    pub config: trace_device::Config,
    /// Drain when this many new bytes are in the sink; `None`: a quarter of the buffer.
    pub wake_bytes: Option<u64>,
    /// Drain at least this often, in milliseconds.
    pub poll_milliseconds: u32,
}

impl Default for TraceRecordOptions {
    fn default() -> Self {
        TraceRecordOptions {
            config: trace_device::Config::new(trace_device::abi::mode::HTM),
            wake_bytes: None,
            poll_milliseconds: 10,
        }
    }
}

/// A finished trace recording.
#[derive(Debug)]
pub struct TraceRecording {
    /// The trace, in the order the sink wrote it, with the gaps cut out.
    pub trace: Vec<u8>,
    /// Where bytes are missing (the sink overtook the reader).
    pub gaps: Vec<Gap>,
    /// The block the trace came from.
    pub info: trace_device::Info,
    /// The configuration it ran with.
    pub config: trace_device::Config,
    /// The driver's last status (after the stop).
    pub status: trace_device::Status,
    /// How the workload ended.
    pub exit: WorkloadExit,
    /// Drains that found new bytes.
    pub drains: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceRecordError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// Records `command`'s run on `device`. The device stays owned by the caller; it is
/// stopped whatever happens (and reset by the driver when it is closed).
pub fn record_trace(
    device: &TraceDevice,
    options: &TraceRecordOptions,
    command: &[String],
    stop: Option<&StopFlag>,
) -> Result<TraceRecording, TraceRecordError> {
    let mut workload = Workload::start(command)?;
    device.configure(&options.config)?;
    let sink = device.map_sink()?;
    device.start()?;
    let result = drain_until_done(device, &sink, options, &mut workload, stop);
    // Stop first, whatever the loop's outcome: the encoders must not keep tracing.
    let stopped = device.stop();
    let (mut trace, mut drain, mut drains) = result?;
    stopped?;
    let status = device.status()?;
    if drain.drain_with(&status, &sink, &mut trace, || device.status())? > 0 {
        drains += 1;
    }
    let exit = workload.terminate()?;
    Ok(TraceRecording {
        gaps: drain.gaps().to_vec(),
        trace,
        info: *device.info(),
        config: options.config,
        status,
        exit,
        drains,
    })
}

fn drain_until_done(
    device: &TraceDevice,
    sink: &trace_device::SinkMemory,
    options: &TraceRecordOptions,
    workload: &mut Workload,
    stop: Option<&StopFlag>,
) -> Result<(Vec<u8>, Drain, u64), TraceRecordError> {
    let mut drain = Drain::new();
    let mut trace = Vec::new();
    let mut drains = 0;
    workload.release()?;
    let buffer_bytes = if options.config.buffer_bytes == 0 {
        device.info().sink_size
    } else {
        options.config.buffer_bytes
    };
    let wake = options.wake_bytes.unwrap_or(buffer_bytes / 4).max(1);
    loop {
        let done =
            workload.try_wait()?.is_some() || stop.is_some_and(|flag| flag.requested().is_some());
        let until = drain
            .drained()
            .saturating_add(drain.lost())
            .saturating_add(wake);
        let (status, end) = device.wait(until, options.poll_milliseconds)?;
        if drain.drain_with(&status, sink, &mut trace, || device.status())? > 0 {
            drains += 1;
        }
        if done
            || end == WaitEnd::Interrupted && stop.is_some_and(|flag| flag.requested().is_some())
        {
            return Ok((trace, drain, drains));
        }
        if status.flags & trace_device::abi::status_flag::RUNNING == 0 {
            // Stopped on wrap: nothing more will come; the workload runs to its end.
            workload.wait_for_exit()?;
            return Ok((trace, drain, drains));
        }
    }
}
