//! Read-only trace files, mapped rather than read so that decoding a large trace does
//! not need memory proportional to its size.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{bail, Context, Result};
use memmap2::{Mmap, UncheckedAdvice};

/// How much decoded input to keep mapped before giving the pages back to the kernel.
const RELEASE_STEP: usize = 4 << 20;

pub struct TraceFile {
    map: Mmap,
    released: AtomicUsize,
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
        if page_aligned >= self.released.load(Ordering::Relaxed) + RELEASE_STEP {
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
}
