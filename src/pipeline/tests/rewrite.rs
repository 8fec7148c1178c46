//! Re-writes: a claim whose data object is missing is written again, exactly its range, under
//! exactly the key it names.

use std::time::Duration;

use bytes::Bytes;

use super::harness::*;
use crate::archive::claim::Claim;
use crate::archive::object_key::{FileKind, ObjectKey, Prefix};
use crate::archive::partition::OffsetRange;
use crate::archive::record::Record;
use crate::encode::decode;
use crate::encode::spool::SpoolData;
use crate::source::{Control, Fetched, ResumeAt, SourceCommand};
use crate::store::{ObjectStore, PutOutcome};

fn key_of(p: i32, s: i64, e: i64, kind: FileKind) -> ObjectKey {
    ObjectKey::new(Prefix::default(), tp(p), OffsetRange::new(s, e).unwrap(), kind)
}

/// A claim as a writer of this version makes it: with its data object's key.
fn named_claim(start: i64, first: i64, end: i64, kind: FileKind) -> Claim {
    Claim {
        writer: "other:2".into(),
        object: Some(key_of(0, first, end, kind).relative()),
        ..Claim::for_test(start, first, end)
    }
}

#[tokio::test]
async fn a_claim_without_its_data_object_is_rewritten_exactly() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    // A writer claimed 0..=6 and died before its upload.
    h.plant_claim(0, 0, 0, 6).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    h.send(0, 0..12, 10).await;
    // The first file holds exactly the claimed range, whatever the roll policy says.
    assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 6), key(0, 7, 9)]);
    assert_eq!(h.metrics.claims_rewritten.get(), 1);
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 6), key(0, 7, 9), key(0, 10, 11)]);
    assert_eq!(claim_ranges(&h.claims(0).await), vec![(0, 0, 6), (7, 7, 9), (10, 10, 11)]);
    // The dead writer's upload landing late changes nothing.
    let late = SpoolData::memory(Bytes::from_static(b"late"));
    assert_eq!(h.store.inner.put_if_absent(&key(0, 0, 6), &late, 4).await.unwrap(), PutOutcome::AlreadyExists);
    h.task.abort();
}

#[tokio::test]
async fn a_partial_rewrite_is_dropped_on_revoke() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 6).await;
    h.assign(0, Some(0)).await;
    h.send(0, 0..4, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    // Uploading 0..=3 would make the claim look fulfilled and hide 4..=6 from the next owner.
    assert!(h.keys().await.is_empty());
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    h.task.abort();
}

#[tokio::test]
async fn a_rewrite_writes_the_claimed_key_whatever_this_writer_is_set_to() {
    // The harness writes JSON lines; the dead writer that claimed 0..=6 wrote Parquet.
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant(0, named_claim(0, 0, 6, FileKind::Parquet)).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    h.send(0, 0..12, 10).await;
    let parquet = key_of(0, 0, 6, FileKind::Parquet).to_string();
    assert_eq!(h.wait_keys(2).await, vec![parquet.clone(), key(0, 7, 9)]);
    let body = h.store.get(&parquet).await.unwrap();
    assert!(body.starts_with(b"PAR1") && body.ends_with(b"PAR1"), "a Parquet file under the Parquet key");
    // The dead writer's upload landing late meets its own key: a 412, not a second object.
    let late = SpoolData::memory(Bytes::from_static(b"late"));
    assert_eq!(h.store.inner.put_if_absent(&parquet, &late, 4).await.unwrap(), PutOutcome::AlreadyExists);
    h.task.abort();
}

#[tokio::test]
async fn the_same_range_claimed_under_another_key_is_another_writers() {
    let h = harness(policy(5), 1 << 30, Duration::from_secs(10));
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    // Another instance, set to Parquet, built the identical range 0..=4 and claimed it first; its
    // upload has not landed yet.
    h.plant(0, named_claim(0, 0, 4, FileKind::Parquet)).await;
    h.send(0, 0..5, 10).await;
    // Ours (JSON lines) lost the claim: it is not uploaded, and the claimed object is written as claimed.
    assert_eq!(h.next_seek(0).await, ResumeAt::Offset(0));
    assert_eq!(h.metrics.claims_lost.get(), 1);
    h.send(0, 0..10, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key_of(0, 0, 4, FileKind::Parquet).to_string(), key(0, 5, 9)]);
    h.task.abort();
}

#[tokio::test]
async fn the_budget_holds_while_a_claimed_range_is_rewritten() {
    // 64 KiB of memory; a dead writer claimed 0..=99 (100 records of 1 kB) of partition 0 and died.
    let h = harness(policy(1_000_000), 64 << 10, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 99).await;
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    // The re-write cannot roll early and fills the budget: partition 1's records are not buffered
    // (parked: dropped, and read again later) instead of growing the buffer past it.
    h.send(0, 0..80, 1000).await;
    h.send(1, 0..20, 1000).await;
    h.drained().await;
    assert_eq!(h.metrics.partitions_parked.get(), 1);
    assert!(h.keys().await.is_empty());
    // The re-write completes and uploads; the budget has room again and partition 1 is moved back.
    h.send(0, 80..100, 1000).await;
    assert_eq!(h.next_seek(1).await, ResumeAt::Offset(0));
    h.send(1, 0..20, 1000).await;
    h.drained().await;
    h.revoke(1, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 99), key(1, 0, 19)]);
    h.task.abort();
}

#[tokio::test]
async fn a_rewrite_whose_records_are_gone_completes_once_kafka_says_so() {
    // A claim of 0..=9 whose tail 5..=9 Kafka compacted away since; nothing newer arrives.
    let roll = crate::encode::roll::RollPolicy {
        max_records: 1000,
        max_bytes: 1 << 30,
        max_age: Duration::from_millis(300),
        schedule: None,
    };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 9).await;
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    // After a roll age without records, the consumer is asked about the rest of the range.
    let (epoch, range) = loop {
        if let SourceCommand::CheckRange { tp: checked, epoch, range } = h.next_command().await {
            assert_eq!(checked, tp(0));
            break (epoch, range);
        }
    };
    assert_eq!(range, OffsetRange::new(5, 9).unwrap());
    assert!(h.keys().await.is_empty(), "nothing uploaded before Kafka answers");
    // Kafka holds none of it: the re-write uploads what it has as the claim's object (under its key, so
    // a late upload of it by its first writer meets a 412), and the chain goes on after the claim.
    h.control.send(Control::RangeEmpty { tp: tp(0), epoch, range, log_start: 0 }).unwrap();
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 9)]);
    let late = SpoolData::memory(Bytes::from_static(b"late"));
    assert_eq!(h.store.inner.put_if_absent(&key(0, 0, 9), &late, 4).await.unwrap(), PutOutcome::AlreadyExists);
    let held: Vec<i64> = decode(FileKind::Jsonl, h.store.inner.get(&key(0, 0, 9)).await.unwrap())
        .unwrap()
        .records
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(held, vec![0, 1, 2, 3, 4]);
    h.send(0, 12..14, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 9), key(0, 12, 13)]);
    let chain: Vec<(i64, i64, i64)> = h.claims(0).await.iter().map(|c| (c.chain_start, c.first, c.end)).collect();
    assert_eq!(chain, vec![(0, 0, 9), (10, 12, 13)]);
    h.task.abort();
}

/// A re-write is exactly its claimed range in one object, even when a value schema inferred per file
/// would roll at a new field: the record with it is kept raw instead (outside a re-write, it rolls).
#[tokio::test]
async fn a_rewrite_stays_one_object_when_an_inferred_schema_meets_new_fields() {
    let h = harness_inferred(policy(100_000));
    let claimed = key_of(0, 0, 4999, FileKind::Parquet);
    h.plant(0, Claim { writer: "other:2".into(), object: Some(claimed.relative()), ..Claim::for_test(0, 0, 4999) })
        .await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    let epoch = h.epochs.lock().unwrap()[&0];
    // A first batch of `{"a": n}` fixes the file's schema; from offset 4500 on, records add "b".
    for offset in 0..5200 {
        let json = if offset < 4500 { format!(r#"{{"a":{offset}}}"#) } else { format!(r#"{{"a":{offset},"b":true}}"#) };
        let record = Record { value: Some(json.into_bytes()), ..rec(offset, 0) };
        h.records.send(vec![Fetched { tp: tp(0), epoch, record, retention_gap: None }]).await.unwrap();
    }
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![claimed.to_string(), key_of(0, 5000, 5199, FileKind::Parquet).to_string()]);
    let data = h.store.inner.get(&claimed.to_string()).await.unwrap();
    assert_eq!(decode(FileKind::Parquet, data).unwrap().misfits, 500, "kept raw, not rolled");
    assert_eq!(h.metrics.objects_by_roll_reason.with_label_values(&["schema"]).get(), 0);
    h.task.abort();
}

#[tokio::test]
async fn a_partition_moved_back_after_parking_still_recovers_when_it_loses_a_claim() {
    // A re-write of 0..=99 (1 kB records) fills the 64 KiB budget, so partition 1 parks.
    let h = harness(policy(10), 64 << 10, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 99).await;
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    h.send(0, 0..80, 1000).await;
    h.send(1, 0..5, 1000).await;
    h.drained().await;
    assert_eq!(h.metrics.partitions_parked.get(), 1);
    h.send(0, 80..100, 1000).await;
    // Moved back under a new epoch once the re-write is uploaded.
    assert_eq!(h.next_seek(1).await, ResumeAt::Offset(0));
    // Meanwhile another writer (a second group on the prefix) archived 0..=4 of partition 1.
    h.plant_claim(1, 0, 0, 4).await;
    let theirs = SpoolData::memory(Bytes::from_static(b"theirs"));
    h.store.inner.put_if_absent(&key(1, 0, 4), &theirs, 6).await.unwrap();
    // Our file 0..=9 loses the claim: the partition is recovered again and the consumer moved after 4.
    h.send(1, 0..10, 1000).await;
    assert_eq!(h.next_seek(1).await, ResumeAt::Offset(5));
    assert_eq!(h.metrics.claims_lost.get(), 1);
    h.send(1, 5..10, 1000).await;
    h.drained().await;
    h.revoke(1, false).await;
    assert_eq!(claim_ranges(&h.claims(1).await), vec![(0, 0, 4), (5, 5, 9)]);
    h.task.abort();
}

/// Waits for the consumer to be asked whether the rest of a re-written range still holds records.
async fn range_checked(h: &Harness) -> (u64, OffsetRange) {
    loop {
        if let SourceCommand::CheckRange { epoch, range, .. } = h.next_command().await {
            return (epoch, range);
        }
    }
}

fn quick_checks() -> crate::encode::roll::RollPolicy {
    crate::encode::roll::RollPolicy {
        max_records: 1000,
        max_bytes: 1 << 30,
        max_age: Duration::from_millis(300),
        schedule: None,
    }
}

#[tokio::test]
async fn retention_inside_a_claimed_range_being_re_written_is_reported_by_verify() {
    let h = harness(policy(100), 1 << 30, Duration::from_secs(10));
    // 0..=4 archived; a writer claimed 5..=14 and died before its upload.
    h.plant_claim(0, 0, 0, 4).await;
    h.plant_object(0, 0, 4).await;
    h.plant_claim(0, 5, 5, 14).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(5));
    h.send(0, 5..10, 10).await;
    // Retention deletes 10..=12 while the range is read again: the next record comes with the gap.
    let epoch = h.epochs.lock().unwrap()[&0];
    let gap = Some(OffsetRange::new(10, 12).unwrap());
    h.records.send(vec![Fetched { tp: tp(0), epoch, record: rec(13, 10), retention_gap: gap }]).await.unwrap();
    h.send(0, 14..15, 10).await;
    // One object for the claim, named by what it holds: the gap shows between objects.
    assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 4), key(0, 13, 14)]);
    assert_eq!(h.metrics.retention_gaps.get(), 1);
    assert_eq!(h.problems(0).await, vec![crate::commands::verify::audit::Problem::RetentionGap { from: 5, to: 12 }]);
    h.task.abort();
}

#[tokio::test]
async fn a_claimed_range_compaction_emptied_is_accounted_for_by_the_next_claim() {
    let h = harness(quick_checks(), 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 9).await;
    h.assign(0, Some(0)).await;
    // Nothing of 0..=9 is left: Kafka says so, and the chain goes on after it.
    let (epoch, range) = range_checked(&h).await;
    h.control.send(Control::RangeEmpty { tp: tp(0), epoch, range, log_start: 0 }).unwrap();
    h.send(0, 12..15, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 12, 14)]);
    let claims = h.claims(0).await;
    assert_eq!(claim_ranges(&claims), vec![(0, 0, 9), (10, 12, 14)]);
    assert_eq!(claims[1].no_records_from, Some(0));
    assert_eq!(h.problems(0).await, vec![], "a healthy archive: 0..=9 had no records");
    h.task.abort();
}

#[tokio::test]
async fn retention_taking_the_rest_of_a_claimed_range_being_re_written_is_a_retention_gap() {
    let h = harness(quick_checks(), 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 4).await;
    h.plant_object(0, 0, 4).await;
    h.plant_claim(0, 5, 5, 14).await;
    h.assign(0, Some(0)).await;
    h.send(0, 5..8, 10).await;
    // Then retention deletes everything up to 19 before the rest comes.
    let (epoch, range) = range_checked(&h).await;
    assert_eq!(range, OffsetRange::new(8, 14).unwrap());
    h.control.send(Control::RangeEmpty { tp: tp(0), epoch, range, log_start: 20 }).unwrap();
    let gap = Some(OffsetRange::new(8, 19).unwrap());
    h.records.send(vec![Fetched { tp: tp(0), epoch, record: rec(20, 10), retention_gap: gap }]).await.unwrap();
    h.send(0, 21..23, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    // What it read before is kept (nothing of the range follows it), named by what it holds.
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 7), key(0, 20, 22)]);
    assert_eq!(h.problems(0).await, vec![crate::commands::verify::audit::Problem::RetentionGap { from: 8, to: 19 }]);
    h.task.abort();
}
