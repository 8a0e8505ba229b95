//! Read-only trace files, mapped rather than read so that decoding a large trace does
//! not need memory proportional to its size.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use memmap2::{Mmap, UncheckedAdvice};

/// How much decoded input to keep mapped before giving the pages back to the kernel.
const RELEASE_STEP: usize = 4 << 20;

/// How often the helper of [`TraceFile::releasing_pages_during`] looks at the decoder's
/// position: pages are given back at most this late (a resource bound, not a result).
const RELEASE_POLL: Duration = Duration::from_millis(10);

pub struct TraceFile {
    map: Mmap,
    released: AtomicUsize,
    /// Whether pages may be given back: a file's come back from the file; the pages of
    /// a trace made in memory ([`TraceFile::from_bytes`]) would come back as zeros.
    releasable: bool,
}

impl TraceFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file =
            File::open(path).with_context(|| format!("cannot open trace {}", path.display()))?;
        let length = file
            .metadata()
            .with_context(|| format!("cannot stat trace {}", path.display()))?
            .len();
        if length == 0 {
            bail!("trace {} is empty", path.display());
        }
        // SAFETY: the mapping is read-only and private. If another process truncated the
        // file while we decode, reads past the new end would fault (SIGBUS); rvperf reads
        // trace files that recording has finished writing, as perf does with perf.data.
        let map = unsafe { Mmap::map(&file) }
            .with_context(|| format!("cannot map trace {}", path.display()))?;
        // Purely a hint; a kernel that ignores it is still correct.
        let _ = map.advise(memmap2::Advice::Sequential);
        Ok(Self {
            map,
            released: AtomicUsize::new(0),
            releasable: true,
        })
    }

    /// A trace assembled in memory (from a perf.data's AUXTRACE chunks).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.is_empty() {
            bail!("the recording holds no trace");
        }
        let mut map =
            memmap2::MmapMut::map_anon(bytes.len()).context("cannot allocate the trace")?;
        map.copy_from_slice(bytes);
        let map = map
            .make_read_only()
            .context("cannot make the trace read-only")?;
        Ok(Self {
            map,
            released: AtomicUsize::new(0),
            releasable: false,
        })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Tells the kernel the bytes before `position` will not be read again, so resident
    /// memory stays bounded however long the trace is.
    pub fn release_before(&self, position: u64) {
        let position = usize::try_from(position)
            .unwrap_or(usize::MAX)
            .min(self.map.len());
        let page_aligned = position & !0xfff;
        if self.releasable && page_aligned >= self.released.load(Ordering::Relaxed) + RELEASE_STEP {
            // SAFETY: DONTNEED on a private read-only file mapping only drops cached
            // pages; later reads fault them back in from the file, so no data changes.
            // The decoder never goes back before `position` anyway.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(UncheckedAdvice::DontNeed, 0, page_aligned)
            };
            self.released.store(page_aligned, Ordering::Relaxed);
        }
    }

    /// Runs `work` (a decode) while a helper thread gives back the pages before
    /// `progress` (the decoder's published position), so resident memory stays bounded
    /// however long the trace: a summary decode can run through the whole trace inside
    /// one decoder call.
    pub fn releasing_pages_during<T>(&self, progress: &AtomicU64, work: impl FnOnce() -> T) -> T {
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let releaser = scope.spawn(|| {
                while !done.load(Ordering::Acquire) {
                    // Woken early when the work ends: the scope waits for this thread,
                    // and a sleep would add up to a poll interval to every decode.
                    std::thread::park_timeout(RELEASE_POLL);
                    self.release_before(progress.load(Ordering::Relaxed));
                }
            });
            let result = work();
            done.store(true, Ordering::Release);
            releaser.thread().unpark();
            result
        })
    }
}
