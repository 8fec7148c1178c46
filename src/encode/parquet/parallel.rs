//! A Parquet writer that encodes a batch's columns on several threads ([`ColumnsWriter`]): what
//! `ArrowWriter` does, row groups cut by the same limits and the same bytes written, but each leaf
//! column of a batch (and of a row group when it is closed) encoded and compressed on whichever of
//! up to [`ENCODE_THREADS`] threads is free, the machine's cores but one. A record's values typed into
//! tens of columns make tens of column chunks, which take most of a typed file's encoding; the
//! pipeline's one thread did them all, one after another.

use std::io::Write;
use std::num::NonZeroUsize;
use std::sync::{LazyLock, Mutex};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::{compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory};
use parquet::arrow::ArrowWriter;
use parquet::errors::Result;
use parquet::file::metadata::{KeyValue, RowGroupMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

/// At most this many threads encode one batch's columns (the calling one among them): more spend on
/// starting threads what the columns of one 4 MiB batch would save.
pub const ENCODE_THREADS: usize = 4;

/// The cores left to the consumer's threads: at full rate, librdkafka's and the source's take about
/// as much CPU as the pipeline's. On a 2-core machine (with the broker and the store beside it) a
/// second thread gained no records/s and cost 11 % more CPU per GB; where cores are to spare it
/// encodes a typed batch 1.3-1.4 x as fast.
const CORES_FOR_CONSUMING: usize = 1;

/// The machine's cores, found once (they are read from the process's cgroup files, which every new
/// file would read again).
static CORES: LazyLock<usize> = LazyLock::new(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get));

/// The machine's cores (see [`CORES`]).
pub(super) fn cores() -> usize {
    *CORES
}

/// How many threads a batch's columns are encoded on.
static THREADS: LazyLock<usize> =
    LazyLock::new(|| cores().saturating_sub(CORES_FOR_CONSUMING).clamp(1, ENCODE_THREADS));

/// The row group being written: a writer per leaf column, and the rows they took.
struct RowGroup {
    writers: Vec<ArrowColumnWriter>,
    rows: usize,
}

impl RowGroup {
    fn estimated_bytes(&self) -> usize {
        self.writers.iter().map(ArrowColumnWriter::get_estimated_total_bytes).sum()
    }
}

/// Writes record batches to a Parquet file as `ArrowWriter` does, each batch's columns encoded on up to
/// `threads` threads.
pub struct ColumnsWriter<W: Write + Send> {
    writer: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    in_progress: Option<RowGroup>,
    max_rows: Option<usize>,
    max_bytes: Option<usize>,
    threads: usize,
}

impl<W: Write + Send> ColumnsWriter<W> {
    /// A writer of batches of `schema` to `out`, by `props`, on as many threads as the machine has
    /// cores but one ([`CORES_FOR_CONSUMING`]), up to [`ENCODE_THREADS`].
    pub fn try_new(out: W, schema: SchemaRef, props: WriterProperties) -> Result<Self> {
        Self::with_threads(out, schema, props, *THREADS)
    }

    /// A writer on `threads` threads (1: the caller's alone).
    pub fn with_threads(out: W, schema: SchemaRef, props: WriterProperties, threads: usize) -> Result<Self> {
        let (max_rows, max_bytes) = (props.max_row_group_row_count(), props.max_row_group_bytes());
        debug_assert!(props.content_defined_chunking().is_none(), "content-defined chunking is not set here");
        // `ArrowWriter` makes the file's schema and its Arrow schema's metadata; it then hands over.
        let (writer, factory) = ArrowWriter::try_new(out, schema.clone(), Some(props))?.into_serialized_writer()?;
        Ok(Self { writer, factory, schema, in_progress: None, max_rows, max_bytes, threads: threads.max(1) })
    }

    /// Writes `batch`, cutting a row group wherever `ArrowWriter` would: at the most rows, or the most
    /// bytes a row group may take (estimated by the rows so far, the batch split to fit).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut remaining = batch.clone();
        while remaining.num_rows() > 0 {
            let in_progress = match &mut self.in_progress {
                Some(in_progress) => in_progress,
                none => none.insert(RowGroup {
                    writers: self.factory.create_column_writers(self.writer.flushed_row_groups().len())?,
                    rows: 0,
                }),
            };
            let buffered = in_progress.rows;
            let mut split_at =
                self.max_rows.filter(|max| buffered + remaining.num_rows() > *max).map(|max| max - buffered);
            if let Some(max_bytes) = self.max_bytes.filter(|_| buffered > 0) {
                let bytes = in_progress.estimated_bytes();
                if bytes >= max_bytes {
                    self.flush()?;
                    continue;
                }
                let fit = (max_bytes - bytes).checked_div(bytes / buffered);
                if let Some(fit) = fit.filter(|fit| split_at.unwrap_or(remaining.num_rows()) > *fit) {
                    if fit == 0 {
                        self.flush()?;
                        continue;
                    }
                    split_at = Some(fit);
                }
            }
            let (now, rest) = match split_at {
                Some(at) => (remaining.slice(0, at), remaining.slice(at, remaining.num_rows() - at)),
                None => (remaining.clone(), remaining.slice(remaining.num_rows(), 0)),
            };
            let in_progress = self.in_progress.as_mut().expect("a row group in progress");
            write_columns(&self.schema, &now, in_progress, self.threads)?;
            let full = self.max_rows.is_some_and(|max| in_progress.rows >= max)
                || self.max_bytes.is_some_and(|max| in_progress.estimated_bytes() >= max);
            if full {
                self.flush()?;
            }
            remaining = rest;
        }
        Ok(())
    }

    /// Closes the row group in progress, if any: its column chunks finished (on the threads) and
    /// written in order.
    pub fn flush(&mut self) -> Result<()> {
        let Some(in_progress) = self.in_progress.take() else { return Ok(()) };
        let chunks = in_parallel(in_progress.writers, self.threads, ArrowColumnWriter::close);
        let mut row_group = self.writer.next_row_group()?;
        for chunk in chunks {
            chunk?.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        Ok(())
    }

    pub fn flushed_row_groups(&self) -> &[RowGroupMetaData] {
        self.writer.flushed_row_groups()
    }

    /// The memory the row group in progress takes (as `ArrowWriter::memory_size`).
    pub fn memory_size(&self) -> usize {
        self.in_progress.as_ref().map_or(0, |g| g.writers.iter().map(ArrowColumnWriter::memory_size).sum())
    }

    /// The bytes the row group in progress is estimated to take encoded (as `ArrowWriter::in_progress_size`).
    pub fn in_progress_size(&self) -> usize {
        self.in_progress.as_ref().map_or(0, RowGroup::estimated_bytes)
    }

    pub fn in_progress_rows(&self) -> usize {
        self.in_progress.as_ref().map_or(0, |g| g.rows)
    }

    pub fn append_key_value_metadata(&mut self, kv: KeyValue) {
        self.writer.append_key_value_metadata(kv)
    }

    pub fn inner(&self) -> &W {
        self.writer.inner()
    }

    /// Closes the file (the row group in progress, then the footer) and gives back what it was
    /// written to.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        self.writer.into_inner()
    }
}

/// Appends `batch`'s columns to the row group's writers: each leaf column on the threads.
fn write_columns(schema: &SchemaRef, batch: &RecordBatch, group: &mut RowGroup, threads: usize) -> Result<()> {
    let mut leaves = Vec::with_capacity(group.writers.len());
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        leaves.extend(compute_leaves(field, column)?);
    }
    let work: Vec<_> = group.writers.iter_mut().zip(&leaves).collect();
    in_parallel(work, threads, |(writer, leaf)| writer.write(leaf)).into_iter().collect::<Result<()>>()?;
    group.rows += batch.num_rows();
    Ok(())
}

/// `f` of each item, in the items' order, done on up to `threads` threads (the caller's among them),
/// each taking the next item left when it is free.
fn in_parallel<T: Send, R: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let count = items.len();
    let queue = Mutex::new(items.into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            // The lock is held only to take the next item.
            let next = queue.lock().expect("the work queue").next();
            let Some((i, item)) = next else { break };
            done.push((i, f(item)));
        }
        done
    };
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(count).collect();
    std::thread::scope(|s| {
        let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut all = work();
        for helper in helpers {
            all.extend(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        for (i, r) in all {
            results[i] = Some(r);
        }
    });
    results.into_iter().map(|r| r.expect("every item done")).collect()
}

#[cfg(test)]
mod tests;
