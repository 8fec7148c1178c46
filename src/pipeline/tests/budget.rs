//! The memory budget: open files shrunk first, then the largest rolled early.

use std::time::Duration;

use parquet::file::metadata::ParquetMetaDataReader;

use super::harness::*;
use crate::archive::object_key::FileKind;
use crate::archive::record::Record;
use crate::encode::{decode, Compression, FileSpec, Format};
use crate::pipeline::profile::{TopicProfile, TopicProfiles};
use crate::source::Fetched;
use crate::store::ObjectStore;

/// Parquet, zstd, rolled at `records`, within a budget of `max_buffer_bytes`.
fn parquet_harness(records: u64, max_buffer_bytes: u64) -> Harness {
    let zstd =
        TopicProfile { spec: FileSpec::new(Format::Parquet, Compression::Zstd).unwrap(), ..plain(policy(records)) };
    harness_budget(TopicProfiles::uniform(zstd), max_buffer_bytes)
}

impl Harness {
    async fn send_records(&self, p: i32, records: &[Record]) {
        let epoch = self.epochs.lock().unwrap().get(&p).copied().unwrap_or(0);
        for record in records {
            let fetched = Fetched { tp: tp(p), epoch, record: record.clone(), retention_gap: None };
            self.records.send(vec![fetched]).await.unwrap();
        }
    }

    /// The records of the object `key`, and how many row groups it has.
    async fn parquet_object(&self, key: &str) -> (Vec<Record>, usize) {
        let bytes = self.store.inner.get(key).await.unwrap();
        let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes).unwrap();
        (decode(FileKind::Parquet, bytes).unwrap().records, footer.num_row_groups())
    }
}

/// Uncompressed JSON lines go to the spool line by line: nothing to shrink, the largest file rolls.
#[tokio::test]
async fn the_memory_budget_rolls_the_largest_open_file_early() {
    let h = harness(policy(1_000_000), 64 << 10, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    h.send(1, 0..10, 1000).await;
    h.send(0, 0..60, 1000).await;
    let keys = h.wait_keys(1).await;
    assert_eq!(keys.len(), 1);
    assert!(keys[0].starts_with("topic=t/partition=0/"), "{keys:?}");
    h.task.abort();
}

/// Over twice the budget of compressible records (counted at twice their bytes in Arrow's builders) fit in
/// one file of several row groups: the open files' buffers are written compressed into their spools
/// before any file is rolled early.
#[tokio::test]
async fn a_full_budget_shrinks_open_files_before_it_rolls_them() {
    let h = parquet_harness(600, 256 << 10);
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    let sent: Vec<Record> = (0..600).map(|o| rec(o, 1000)).collect();
    h.send_records(1, &[rec(0, 1000)]).await;
    h.send_records(0, &sent).await;
    let keys = h.wait_keys(1).await;
    assert_eq!(
        keys,
        vec![key(0, 0, 599).replace(".jsonl", ".parquet")],
        "one file, rolled by its record count, none by the budget"
    );
    let (read, row_groups) = h.parquet_object(&keys[0]).await;
    assert!(row_groups > 1, "shrunk into row groups: {row_groups}");
    assert!(h.metrics.shrinks.get() > 1);
    assert_eq!(read, sent, "every record comes back the same");
    h.task.abort();
}

/// Random values take as much room compressed as not: shrinking is not enough, and the largest
/// file still rolls early.
#[tokio::test]
async fn records_that_do_not_compress_still_roll_the_largest_file_early() {
    let h = parquet_harness(1_000_000, 64 << 10);
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    let mut rng = fastrand::Rng::with_seed(7);
    let mut random = |o| Record { value: Some((0..1000).map(|_| rng.u8(..)).collect()), ..rec(o, 0) };
    let sent: Vec<Record> = (0..100).map(&mut random).collect();
    h.send_records(1, &[random(0)]).await;
    h.send_records(0, &sent).await;
    let keys = h.wait_keys(1).await;
    assert!(keys[0].starts_with("topic=t/partition=0/t+0+00000000000000000000+"), "{keys:?}");
    assert!(h.metrics.shrinks.get() > 0, "shrinking was tried first");
    let (read, _) = h.parquet_object(&keys[0]).await;
    assert_eq!(read, sent[..read.len()], "the records of the file rolled early come back the same");
    h.task.abort();
}

/// Each row group's metadata stays in memory until its file is sealed, and counts: a file shrunk again
/// and again fills the budget with it, and then rolls.
#[tokio::test]
async fn the_metadata_of_a_files_row_groups_counts_until_it_rolls() {
    let h = parquet_harness(1_000_000, 64 << 10);
    h.assign(0, Some(0)).await;
    let sent: Vec<Record> = (0..400).map(|o| rec(o, 1000)).collect();
    h.send_records(0, &sent).await;
    let keys = h.wait_keys(1).await;
    let (read, row_groups) = h.parquet_object(&keys[0]).await;
    assert!(row_groups > 1 && row_groups < 16, "shrunk, then rolled for its metadata: {row_groups} row groups");
    assert_eq!(read, sent[..read.len()], "every record of the file comes back the same");
    h.task.abort();
}

/// A typed file before its first batch cannot shrink, and holds its decoded values besides its bytes
/// (sparse JSON: `{}` in a schema of 300 optional numbers takes thousands of times its bytes in columns).
/// The largest rolls early by what the budget counts for it, rather than the budget staying full, with
/// records held back, until the file's roll age.
#[tokio::test]
async fn a_typed_file_that_cannot_shrink_rolls_by_what_it_holds() {
    let fields: Vec<String> = (0..300).map(|i| format!(r#"{{"name":"f{i}","type":["null","long"]}}"#)).collect();
    let schema = format!(r#"{{"type":"record","name":"Sparse","fields":[{}]}}"#, fields.join(","));
    let declared = Some(crate::values::ValueSchema::from_avro(&schema).unwrap());
    let h = harness_budget(TopicProfiles::uniform(typed(policy(1_000_000), declared)), 64 << 10);
    h.assign(0, Some(0)).await;
    let sent: Vec<Record> = (0..100).map(|o| Record { value: Some(b"{}".to_vec()), ..rec(o, 0) }).collect();
    h.send_records(0, &sent).await;
    let keys = h.wait_keys(1).await;
    assert!(keys[0].starts_with("topic=t/partition=0/t+0+00000000000000000000+"), "{keys:?}");
    assert_eq!(h.metrics.shrinks.get(), 0, "nothing to shrink before the first batch");
    h.task.abort();
}
