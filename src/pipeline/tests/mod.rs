//! Pipeline tests with a synthetic source and a local store that can be slowed down or made to fail.

mod buckets;
mod budget;
mod dead_letters;
mod harness;
mod profiles;
mod recovery;
mod rewrite;
mod schemas;

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;

use self::harness::*;
use super::*;
use crate::archive::claim::ClaimKey;
use crate::archive::object_key::Prefix;
use crate::archive::partition::OffsetRange;
use crate::encode::roll::RollPolicy;
use crate::encode::spool::SpoolData;
use crate::source::{Fetched, ResumeAt, SourceCommand};
use crate::store::ObjectStore;

#[tokio::test]
async fn uploads_of_one_partition_complete_in_order() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    *h.store.put_delay.lock().unwrap() = Duration::from_millis(150);
    h.assign(0, Some(0)).await;
    h.send(0, 0..9, 10).await;
    // Each commit is queued once its upload returned, so after three the log is complete.
    let mut commits = Vec::new();
    for _ in 0..3 {
        commits.push(h.next_commit().await.next_offset);
    }
    assert_eq!(commits, vec![3, 6, 9]);
    // Each file: its claim, then its data; the next claim only once the data is durable.
    let log = h.store.log.lock().unwrap().clone();
    let expected: Vec<String> = [(0, 2), (3, 5), (6, 8)]
        .iter()
        .flat_map(|(s, e)| {
            let claim = ClaimKey::new(Prefix::default(), tp(0), *s).to_string();
            let data = key(0, *s, *e);
            [format!("start {claim}"), format!("done {claim}"), format!("start {data}"), format!("done {data}")]
        })
        .collect();
    assert_eq!(log, expected);
    h.task.abort();
}

#[tokio::test]
async fn a_lost_claim_drops_the_files_and_repositions_the_consumer() {
    let h = harness(policy(10), 1 << 30, Duration::from_secs(10));
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    // Meanwhile another instance (this one is the zombie) archived 0..=4 under its claim.
    h.plant_claim(0, 0, 0, 4).await;
    let other = SpoolData::memory(Bytes::from_static(b"theirs"));
    h.store.inner.put_if_absent(&key(0, 0, 4), &other, 6).await.unwrap();
    h.send(0, 0..10, 10).await;
    // Our file 0..=9 loses the claim for 0: dropped, recovered again, consumer moved after 4.
    assert_eq!(h.next_seek(0).await, ResumeAt::Offset(5));
    assert_eq!(h.metrics.claims_lost.get(), 1);
    h.send(0, 5..10, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 9)]);
    assert_eq!(claim_ranges(&h.claims(0).await), vec![(0, 0, 4), (5, 5, 9)]);
    h.task.abort();
}

#[tokio::test]
async fn a_retention_gap_found_mid_stream_ends_the_file_there() {
    let h = harness(policy(100), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    // Retention deleted 5..=19 while fetching was paused: the next record comes with the gap.
    let epoch = h.epochs.lock().unwrap()[&0];
    let gap = Some(OffsetRange::new(5, 19).unwrap());
    h.records.send(vec![Fetched { tp: tp(0), epoch, record: rec(20, 10), retention_gap: gap }]).await.unwrap();
    h.send(0, 21..23, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    // The gap lies between two objects, where verify can see it, and the claim after it says why.
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 20, 22)]);
    let claims = h.claims(0).await;
    assert_eq!(claim_ranges(&claims), vec![(0, 0, 4), (5, 20, 22)]);
    assert_eq!(claims.iter().map(|c| c.retention_gap).collect::<Vec<_>>(), vec![false, true]);
    assert_eq!(h.metrics.retention_gaps.get(), 1);
    h.task.abort();
}

#[tokio::test]
async fn claims_chain_over_holes_and_record_retention_gaps() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    // Offsets 3 and 4 do not exist (compaction, transaction markers).
    h.send(0, 0..3, 10).await;
    h.send(0, 5..8, 10).await;
    h.wait_keys(2).await;
    h.revoke(0, false).await;
    // Retention deleted 8..=19 before it was archived.
    assert_eq!(h.assign(0, Some(20)).await, ResumeAt::Offset(20));
    h.send(0, 20..23, 10).await;
    h.wait_keys(3).await;
    let claims = h.claims(0).await;
    assert_eq!(claim_ranges(&claims), vec![(0, 0, 2), (3, 5, 7), (8, 20, 22)]);
    assert_eq!(claims.iter().map(|c| c.retention_gap).collect::<Vec<_>>(), vec![false, false, true]);
    h.task.abort();
}

#[tokio::test]
async fn a_lost_assignment_stops_claiming() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.link.assignment_lost.store(true, Ordering::SeqCst);
    h.send(0, 0..3, 10).await;
    assert_eq!(h.next_seek(0).await, ResumeAt::Earliest);
    assert!(h.keys().await.is_empty());
    assert!(h.claims(0).await.is_empty());
    h.task.abort();
}

#[tokio::test]
async fn a_revoke_flushes_the_open_file_before_it_answers() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    let SourceCommand::Commit(c) = h.commands.try_recv().expect("the commit is queued before the revoke answers")
    else {
        panic!("expected a commit")
    };
    assert_eq!((c.next_offset, c.chain_start), (5, 0));
    // Records of a partition no longer assigned are ignored.
    h.send(0, 5..8, 10).await;
    h.assign(1, Some(0)).await;
    h.revoke(1, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    h.task.abort();
}

#[tokio::test]
async fn nothing_of_a_revoked_partition_is_uploaded_after_the_answer() {
    let h = harness(policy(1000), 1 << 30, Duration::from_millis(300));
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    *h.store.put_delay.lock().unwrap() = Duration::from_secs(3);
    let started = Instant::now();
    h.revoke(0, false).await;
    assert!(started.elapsed() < Duration::from_secs(2), "the revoke waited for the stuck upload");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(h.keys().await.is_empty(), "an upload landed after the revoke answered");
    assert_eq!(h.metrics.files_dropped.get(), 1);

    // A lost partition's buffer is dropped at once.
    *h.store.put_delay.lock().unwrap() = Duration::ZERO;
    h.assign(0, Some(0)).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, true).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(h.keys().await.is_empty());
    h.task.abort();
}

#[tokio::test]
async fn recovery_resumes_after_the_archive_and_skips_replayed_offsets() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(5));
    h.send(0, 3..8, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4), key(0, 5, 7)]);
    assert_eq!(h.metrics.duplicates_skipped.get(), 2);
    // Retention deleted 8..=19 before it was archived: resume at the log start and count the gap.
    assert_eq!(h.assign(0, Some(20)).await, ResumeAt::Offset(20));
    assert_eq!(h.metrics.retention_gaps.get(), 1);
    h.task.abort();
}

#[tokio::test]
async fn records_of_an_earlier_assignment_are_ignored() {
    let h = harness(policy(1000), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.revoke(0, true).await;
    h.assign(0, Some(0)).await;
    // Still queued from the first assignment, which was lost before they were taken.
    h.send_epoch(0, 1, 50..60, 10).await;
    h.send(0, 0..5, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 4)]);
    h.task.abort();
}

#[tokio::test]
async fn a_record_larger_than_the_roll_size_gets_its_own_file() {
    let roll = RollPolicy { max_records: 1000, max_bytes: 2000, max_age: Duration::from_secs(3600), schedule: None };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    h.send(0, 2..3, 5000).await;
    h.send(0, 3..4, 10).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert_eq!(h.keys().await, vec![key(0, 0, 1), key(0, 2, 2), key(0, 3, 3)]);
    h.task.abort();
}

#[tokio::test]
async fn transient_store_errors_are_retried_until_the_upload_lands() {
    let h = harness(policy(2), 1 << 30, Duration::from_secs(10));
    h.store.transient_failures.store(3, Ordering::SeqCst);
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 1)]);
    assert_eq!(h.metrics.upload_retries.get(), 3);
    h.task.abort();
}

#[tokio::test]
async fn an_idle_partition_rolls_by_age_without_new_records() {
    let roll =
        RollPolicy { max_records: 1000, max_bytes: 1 << 30, max_age: Duration::from_millis(300), schedule: None };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..2, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 1)]);
    h.task.abort();
}

/// Records that come faster than the pipeline takes them (the channel is never empty) do not keep the
/// age timer from rolling the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_rolls_by_age_while_its_records_keep_coming() {
    let roll =
        RollPolicy { max_records: u64::MAX, max_bytes: 1 << 40, max_age: Duration::from_millis(300), schedule: None };
    let h = harness(roll, 1 << 40, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    let rolled_by_age = || h.metrics.objects_by_roll_reason.with_label_values(&["age"]).get();
    let epoch = h.epochs.lock().unwrap()[&0];
    let (started, mut offset) = (std::time::Instant::now(), 0);
    while rolled_by_age() == 0 && started.elapsed() < Duration::from_secs(3) {
        let batch = (offset..offset + 1000)
            .map(|o| Fetched { tp: tp(0), epoch, record: rec(o, 100), retention_gap: None })
            .collect();
        h.records.send(batch).await.unwrap();
        offset += 1000;
    }
    assert!(rolled_by_age() > 0, "no file rolled by age in 3 s of records ({offset} sent)");
    h.task.abort();
}

#[tokio::test]
async fn a_revoked_partition_leaves_no_metric_series_behind() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    h.send(0, 0..3, 10).await;
    h.next_commit().await;
    let series = |h: &Harness| {
        let families = h.metrics.registry.gather();
        let archived = families.iter().find(|f| f.name() == "ksa_archived_offset");
        archived.map_or(0, |f| f.get_metric().len())
    };
    assert_eq!(series(&h), 2);
    h.revoke(0, false).await;
    assert_eq!(series(&h), 1, "only the partition still assigned");
    // A recovery that ends after its partition was revoked leaves none either.
    h.store.lists_fail.store(true, Ordering::SeqCst);
    let answer = h.start_assign(2, Some(0));
    h.revoke(2, false).await;
    h.store.lists_fail.store(false, Ordering::SeqCst);
    drop(answer);
    eventually("the voided recovery ended", || h.metrics.recoveries_in_progress.get() == 0).await;
    assert_eq!(series(&h), 1);
    h.task.abort();
}
