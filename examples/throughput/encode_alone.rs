//! The floor `run` is measured against: a plain rdkafka consumer that hands each record to the archiver's
//! encoder (Parquet, zstd, as `run` writes by default), file after file per partition at the bench's roll
//! size, in one thread, and drops each file once it is encoded. What `run` spends beyond it is neither
//! consuming nor encoding: hand-offs, spools, uploads, bookkeeping. Not a strict floor: it polls each
//! message with a timeout (`run` polls in batches), rolls only by size (`run` by age too), keeps every
//! file in memory and counts no budget.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::encode::spool::{Spool, SpoolOptions, SpoolUsage};
use kafka_s3_archiver::encode::{Compression, FileEncoder, FileMeta, FileSpec, Format, LearnedColumns};
use kafka_s3_archiver::source::convert::to_record;
use kafka_s3_archiver::values::ValueFormat;
use rdkafka::Message;

use crate::{first_time, subscribed_consumer, Bench, Row, Started, PUT_OBJECT_BYTES};

pub const CONSUME_AND_ENCODE: &str = "plain rdkafka consumer + the archiver's encoder (Parquet, zstd), one thread";

/// An open file: its encoder, its first offset and the records in it.
struct OpenFile {
    encoder: FileEncoder,
    first: i64,
    records: u64,
}

/// One partition's open file, and what its last files taught about their columns.
struct Partition {
    open: Option<OpenFile>,
    learned: LearnedColumns,
}

/// Consumes the bench topic from its start, encoding every record, timed as the plain consumer is.
pub fn consume_and_encode(bench: &Bench) -> Row {
    let dir = tempfile::tempdir().expect("spool dir");
    // Files stay in memory, as `run` keeps them while they fit.
    let spool =
        SpoolOptions { memory_threshold: 1 << 34, dir: dir.path().into(), usage: Arc::new(SpoolUsage::default()) };
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).expect("spec");
    let started = Started::now();
    let consumer = subscribed_consumer(bench, "encode");
    let mut partitions: BTreeMap<i32, Partition> = BTreeMap::new();
    let (mut seen, mut files, mut bytes) = (0usize, 0usize, 0u64);
    let mut first_at = None;
    let mut next = BTreeMap::new();
    let finish = |p: i32, file: OpenFile, last: i64, learned: &mut LearnedColumns| {
        let meta = FileMeta {
            tp: TopicPartition::new(&bench.topic, p).expect("topic"),
            range: OffsetRange::new(file.first, last).expect("range"),
            records: file.records,
        };
        let finished = file.encoder.finish(&meta).expect("finish");
        if let Some(footer) = &finished.footer {
            learned.learn(footer);
        }
        finished.spool.len()
    };
    while seen < bench.records {
        assert!(started.at.elapsed() < Duration::from_secs(600), "consume + encode stalled at {seen}");
        let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) else { continue };
        first_at.get_or_insert_with(Instant::now);
        if !first_time(&mut next, m.partition(), m.offset()) {
            continue;
        }
        let record = to_record(&m);
        let partition = partitions
            .entry(m.partition())
            .or_insert_with(|| Partition { open: None, learned: LearnedColumns::default() });
        let file = partition.open.get_or_insert_with(|| {
            let mut encoder = FileEncoder::new(spec, &ValueFormat::Raw, Spool::new(spool.clone())).expect("encoder");
            encoder.follow(&partition.learned);
            OpenFile { encoder, first: record.offset, records: 0 }
        });
        assert!(file.encoder.append(&record, false).expect("append"));
        file.records += 1;
        seen += 1;
        let full = file.encoder.encoded_size() >= PUT_OBJECT_BYTES as u64;
        if full || bench.last.get(&m.partition()) == Some(&record.offset) {
            let open = partition.open.take().expect("open");
            bytes += finish(m.partition(), open, record.offset, &mut partition.learned);
            files += 1;
        }
    }
    let steady = first_at.expect("records").elapsed().as_secs_f64();
    let row = Row { steady_seconds: Some(steady), ..Row::since(&started, CONSUME_AND_ENCODE.into(), bench.values) };
    println!(
        "{CONSUME_AND_ENCODE} ({}): {:.0} records/s ({:.1}s from its creation, {steady:.1}s from its first record), \
         {files} files, {:.1} MB",
        bench.values.name(),
        row.records_per_s(bench),
        row.seconds,
        bytes as f64 / 1e6,
    );
    row
}
