//! Batches written behind the pipeline: a file's full batch goes to one of a few encoding threads
//! ([`Behind::write`]) while the pipeline goes on taking and decoding the next records; the file waits
//! for it only when it needs its writer again (its next batch, a shrink, a re-write, its seal). A file
//! has one batch behind at most, so its batches are written in order. Encoding a batch's columns took
//! most of a typed file's time on the pipeline's one thread, decoding the values the rest.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, LazyLock, Mutex};

use arrow_array::RecordBatch;
use parquet::errors::ParquetError;

use super::parallel::{cores, ColumnsWriter};
use crate::encode::spool::Spool;

/// The cores left to the pipeline's own thread (which takes and decodes the records) and the
/// consumer's: the encoding threads are the machine's cores but these, and at least one.
const CORES_FOR_TAKING: usize = 2;
/// At most this many encoding threads, whatever the cores.
const MOST_THREADS: usize = 8;

type Job = Box<dyn FnOnce() + Send>;

/// The encoding threads, started on first use; they take the next job when free.
static THREADS: LazyLock<Sender<Job>> = LazyLock::new(|| {
    let (jobs, queue) = channel::<Job>();
    let queue = Arc::new(Mutex::new(queue));
    for i in 0..cores().saturating_sub(CORES_FOR_TAKING).clamp(1, MOST_THREADS) {
        let queue = queue.clone();
        let work = move || loop {
            // The lock is held only to take the next job.
            let next = queue.lock().expect("the encoding queue").recv();
            match next {
                Ok(job) => job(),
                Err(_) => break,
            }
        };
        std::thread::Builder::new().name(format!("ksa-encode-{i}")).spawn(work).expect("an encoding thread starts");
    }
    jobs
});

/// What a batch written behind counts for until it is done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counted {
    /// Its records' bytes.
    pub raw: u64,
    /// What it is estimated to add to the file: its records' bytes at the file's ratio so far.
    pub bytes: u64,
    /// The memory its columns hold (as the builders counted them).
    pub memory: u64,
}

type Done = std::thread::Result<(Box<ColumnsWriter<Spool>>, Result<(), ParquetError>)>;

/// A batch being written by an encoding thread, and the writer it is written with.
pub(super) struct Behind {
    done: Receiver<Done>,
    /// Set when the file is dropped (its partition revoked, say) before its batch is written: an
    /// encoding thread that has not started the batch then drops it rather than write it.
    dropped: Arc<AtomicBool>,
    /// What the thread answered, when it was found done before the file waited for it.
    answer: Option<Done>,
    pub counted: Counted,
}

impl Behind {
    /// Writes `batch` with `writer` on an encoding thread.
    pub fn write(mut writer: Box<ColumnsWriter<Spool>>, batch: RecordBatch, counted: Counted) -> Self {
        let (tell, done) = sync_channel(1);
        let dropped = Arc::new(AtomicBool::new(false));
        let dropped_file = dropped.clone();
        let job = move || {
            if dropped_file.load(Ordering::Relaxed) {
                return;
            }
            // A panic is raised again where the writer is waited for, not in the encoding thread.
            let result = catch_unwind(AssertUnwindSafe(|| {
                let written = writer.write(&batch);
                (writer, written)
            }));
            // The file may have been dropped meanwhile (its partition revoked): nobody waits then.
            let _ = tell.send(result);
        };
        THREADS.send(Box::new(job)).expect("the encoding threads run for as long as the process");
        Self { done, dropped, answer: None, counted }
    }

    /// Whether the batch is written by now (then `wait` returns at once).
    pub fn written(&mut self) -> bool {
        if self.answer.is_none() {
            self.answer = self.done.try_recv().ok();
        }
        self.answer.is_some()
    }

    /// Waits for the batch to be written; the writer back, or the error that failed it (the file is
    /// then lost: the error stops the pipeline).
    pub fn wait(mut self) -> Result<Box<ColumnsWriter<Spool>>, ParquetError> {
        let answer = self.answer.take().map_or_else(|| self.done.recv(), Ok);
        match answer.expect("an encoding thread answers every job") {
            Ok((writer, Ok(()))) => Ok(writer),
            Ok((_, Err(e))) => Err(e),
            Err(panic) => resume_unwind(panic),
        }
    }
}

impl Drop for Behind {
    fn drop(&mut self) {
        // Once waited for, the job is done and this changes nothing.
        self.dropped.store(true, Ordering::Relaxed);
    }
}
