//! Recoveries run off the pipeline's loop and retry a failing store for as long as it takes: a brownout
//! never stops the archiver, and revokes, uploads and other partitions go on meanwhile.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::harness::*;
use crate::source::ResumeAt;
use crate::store::ObjectStore;

#[tokio::test]
async fn a_store_brownout_during_recovery_is_waited_out_and_revokes_are_answered_meanwhile() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    // Partition 1 is running before the store starts failing.
    h.assign(1, Some(0)).await;
    h.store.lists_fail.store(true, Ordering::SeqCst);
    let answer = h.start_assign(0, Some(0));
    // The recovery keeps retrying: not ready, the store reported failing.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(answer.try_recv().is_err(), "no position while the store fails");
    assert_eq!(h.metrics.recoveries_in_progress.get(), 1);
    assert_eq!(h.metrics.store_up.get(), 0);
    assert!(!h.metrics.ready());
    // Meanwhile the other partition archives, and a revoke of the stuck one is answered at once.
    h.send(1, 0..3, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(1, 0, 2)]);
    tokio::time::timeout(Duration::from_secs(2), h.revoke(0, false)).await.expect("the revoke is answered");
    // Assigned again while the store still fails; it recovers once the store is back.
    let answer = h.start_assign(0, Some(0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.store.lists_fail.store(false, Ordering::SeqCst);
    let positions = tokio::task::spawn_blocking(move || answer.recv_timeout(Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("recovered once the store answers");
    assert_eq!(positions, vec![(tp(0), ResumeAt::Earliest)]);
    assert!(!h.task.is_finished(), "the pipeline never stopped");
    assert!(h.metrics.list_retries.get() > 0);
    h.task.abort();
}

/// A claim with the topic's ID, as a writer of the first incarnation made it.
fn claim_with_id(start: i64, end: i64, id: &str) -> crate::archive::claim::Claim {
    crate::archive::claim::Claim {
        topic_id: Some(id.into()),
        writer: "other:2".into(),
        ..crate::archive::claim::Claim::for_test(start, start, end)
    }
}

#[tokio::test]
async fn a_topic_id_the_brokers_do_not_tell_is_asked_for_while_the_partition_waits() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant(0, claim_with_id(0, 9, "A")).await;
    // The topic was re-created (now "B"), and the brokers do not tell its ID for a while.
    *h.topic_ids.id.lock().unwrap() = Some("B".into());
    h.topic_ids.failures.store(u32::MAX, Ordering::SeqCst);
    let answer = h.start_assign(0, Some(0));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(answer.try_recv().is_err(), "no position while the ID is unknown");
    assert_eq!(h.metrics.topic_ids_waiting.get(), 1);
    assert!(!h.metrics.ready(), "/readyz says not ready, and why");
    assert!(h.metrics.topic_id_lookup_failures.get() >= 2, "asked again");
    // Once told, the archive of the old incarnation is not continued: the partition is stopped.
    h.topic_ids.failures.store(0, Ordering::SeqCst);
    let positions = tokio::task::spawn_blocking(move || answer.recv_timeout(Duration::from_secs(60))).await.unwrap();
    assert_eq!(positions.unwrap(), vec![(tp(0), ResumeAt::Stop)]);
    assert_eq!(h.metrics.partitions_stopped.get(), 1);
    assert_eq!(h.metrics.topic_ids_waiting.get(), 0);
    h.task.abort();
}

#[tokio::test]
async fn an_archive_with_a_topic_id_is_not_continued_on_brokers_without_ids() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant(0, claim_with_id(0, 9, "A")).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Stop, "claims without the ID would follow one with it");
    assert_eq!(h.metrics.partitions_stopped.get(), 1);
    h.task.abort();
}

#[tokio::test]
async fn claims_record_the_topic_id_once_the_brokers_tell_it() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_claim(0, 0, 0, 9).await;
    let other = bytes::Bytes::from_static(b"theirs");
    h.store.inner.put_if_absent(&key(0, 0, 9), &crate::encode::spool::SpoolData::memory(other), 6).await.unwrap();
    *h.topic_ids.id.lock().unwrap() = Some("A".into());
    h.topic_ids.failures.store(2, Ordering::SeqCst);
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(10));
    h.send(0, 10..13, 10).await;
    assert_eq!(h.wait_keys(2).await, vec![key(0, 0, 9), key(0, 10, 12)]);
    let ids: Vec<Option<String>> = h.claims(0).await.into_iter().map(|c| c.topic_id).collect();
    assert_eq!(ids, vec![None, Some("A".into())]);
    h.task.abort();
}

#[tokio::test]
async fn a_partition_waiting_for_its_topic_id_holds_up_no_other_and_a_revoke_ends_the_wait() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    // Partition 0's topic ID is not told (its topic was deleted, say); partition 1's assignment told it.
    h.topic_ids.failures.store(u32::MAX, Ordering::SeqCst);
    let told = Some(crate::recovery::TopicIdentity::NoIds);
    let answers = h.start_assign_with(&[(0, None), (1, told)], Some(0));
    let first =
        tokio::task::spawn_blocking(move || (answers.recv_timeout(Duration::from_secs(5)), answers)).await.unwrap();
    let (first, answers) = (first.0.expect("partition 1 is answered"), first.1);
    assert_eq!(first, vec![(tp(1), ResumeAt::Earliest)]);
    assert!(answers.try_recv().is_err(), "partition 0 still waits");
    // Partition 0's recovery counts its wait once it has asked the brokers (it may not have yet).
    eventually("partition 0 counted as waiting", || h.metrics.topic_ids_waiting.get() == 1).await;
    // Revoked: the wait ends (nothing stays in progress, and /readyz can say ready again).
    h.revoke(0, false).await;
    eventually("the wait for the topic ID ended", || h.metrics.topic_ids_waiting.get() == 0).await;
    eventually("no recovery in progress", || h.metrics.recoveries_in_progress.get() == 0).await;
    h.task.abort();
}

/// The positions an assignment of `partitions` (one assignment, topic IDs told) is answered with, in
/// partition order.
async fn assign_all(
    h: &Harness,
    partitions: std::ops::Range<i32>,
) -> Vec<(crate::archive::partition::TopicPartition, ResumeAt)> {
    let told: Vec<_> = partitions.clone().map(|p| (p, Some(crate::recovery::TopicIdentity::NoIds))).collect();
    let answers = h.start_assign_with(&told, Some(0));
    let n = told.len();
    let mut positions = tokio::task::spawn_blocking(move || {
        (0..n).flat_map(|_| answers.recv_timeout(Duration::from_secs(10)).expect("answered")).collect::<Vec<_>>()
    })
    .await
    .unwrap();
    positions.sort_by_key(|(tp, _)| tp.partition());
    positions
}

#[tokio::test]
async fn partitions_of_a_topic_new_to_the_archive_recover_from_one_look_at_its_folders() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    let positions = assign_all(&h, 0..8).await;
    assert_eq!(positions, (0..8).map(|p| (tp(p), ResumeAt::Earliest)).collect::<Vec<_>>());
    // Its claims folder and its data folder, one LIST each; not two per partition.
    assert_eq!(h.metrics.recovery_list_requests.get(), 2);
    assert_eq!(h.metrics.recoveries.get(), 8);
    // The partitions archive as any do: each first file claimed and uploaded.
    h.send(5, 0..3, 10).await;
    assert_eq!(h.wait_keys(1).await, vec![key(5, 0, 2)]);
    h.task.abort();
}

#[tokio::test]
async fn a_topic_the_archive_holds_anything_of_recovers_each_partition_from_its_own_folders() {
    // A claim and its object in partition 3 only; then a data object of partition 6 written without
    // claims (an older archiver, or another tool).
    for (planted, expected) in [(3, ResumeAt::Offset(10)), (6, ResumeAt::Offset(5))] {
        let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
        match planted {
            3 => {
                h.plant_claim(3, 0, 0, 9).await;
                h.plant_object(3, 0, 9).await;
            }
            _ => h.plant_object(6, 0, 4).await,
        }
        let positions = assign_all(&h, 0..8).await;
        let wanted: Vec<_> =
            (0..8).map(|p| (tp(p), if p == planted { expected.clone() } else { ResumeAt::Earliest })).collect();
        assert_eq!(positions, wanted, "partition {planted} goes on after what the archive holds");
        assert!(h.metrics.recovery_list_requests.get() >= 16, "each partition listed its own folders");
        h.task.abort();
    }
}

#[tokio::test]
async fn recoveries_list_the_store_a_few_at_a_time() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_object(0, 0, 4).await; // The archive holds the topic: each partition lists its folders.
    *h.store.list_delay.lock().unwrap() = Duration::from_millis(20);
    let n = 3 * crate::pipeline::recoverer::RECOVERIES_AT_ONCE as i32;
    let started = std::time::Instant::now();
    let positions = assign_all(&h, 0..n).await;
    assert_eq!(positions.len(), n as usize);
    let under_way = h.store.lists.1.load(Ordering::SeqCst);
    assert!(under_way as usize <= crate::pipeline::recoverer::RECOVERIES_AT_ONCE, "{under_way} list requests at once");
    // Three turns of two lists each, at least.
    assert!(started.elapsed() >= Duration::from_millis(6 * 20));
    h.task.abort();
}

#[tokio::test]
async fn a_recovery_revoked_while_the_store_fails_gives_its_turn_to_others() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_object(0, 0, 4).await;
    // Partition 1's folder cannot be listed; it is assigned and revoked again and again meanwhile.
    let prefix = crate::archive::object_key::Prefix::default();
    *h.store.failing_prefix.lock().unwrap() = Some(prefix.claims_folder(&tp(1)));
    for _ in 0..=crate::pipeline::recoverer::RECOVERIES_AT_ONCE {
        let _answer = h.start_assign(1, Some(0));
        h.revoke(1, false).await;
    }
    // Another partition still gets a turn, and recovers.
    let answer = h.start_assign(2, Some(0));
    let position = tokio::task::spawn_blocking(move || answer.recv_timeout(Duration::from_secs(10))).await.unwrap();
    assert_eq!(position.expect("partition 2 recovered"), vec![(tp(2), ResumeAt::Earliest)]);
    eventually("the revoked recoveries ended", || h.metrics.recoveries_in_progress.get() == 0).await;
    h.task.abort();
}

#[tokio::test]
async fn partitions_whose_folders_the_store_keeps_failing_hold_no_turn_from_the_others() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.plant_object(0, 0, 4).await;
    // Partitions 1, 10-19 and 100-131 (43, more than the turns) cannot be listed for now.
    *h.store.failing_prefix.lock().unwrap() = Some("_claims/topic=t/partition=1".into());
    let failing: Vec<i32> = [1].into_iter().chain(10..20).chain(100..132).collect();
    let told = Some(crate::recovery::TopicIdentity::NoIds);
    let _waiting = h.start_assign_with(&failing.iter().map(|p| (*p, told.clone())).collect::<Vec<_>>(), Some(0));
    eventually("the failing recoveries started", || h.metrics.recoveries_in_progress.get() == failing.len() as i64)
        .await;
    // Partition 2 recovers meanwhile.
    let answer = h.start_assign(2, Some(0));
    let position = tokio::task::spawn_blocking(move || answer.recv_timeout(Duration::from_secs(10))).await.unwrap();
    assert_eq!(position.expect("partition 2 recovered"), vec![(tp(2), ResumeAt::Earliest)]);
    h.task.abort();
}

#[tokio::test]
async fn recoveries_waiting_for_a_look_at_their_topic_end_when_revoked() {
    let h = harness(policy(3), 1 << 30, Duration::from_secs(10));
    h.store.lists_fail.store(true, Ordering::SeqCst);
    let told = Some(crate::recovery::TopicIdentity::NoIds);
    let _waiting = h.start_assign_with(&[(0, told.clone()), (1, told)], Some(0));
    eventually("both recoveries started", || h.metrics.recoveries_in_progress.get() == 2).await;
    h.revoke(0, false).await;
    h.revoke(1, false).await;
    // The store still fails, and the look at the topic with it: the void recoveries end all the same.
    eventually("the revoked recoveries ended", || h.metrics.recoveries_in_progress.get() == 0).await;
    assert_eq!(h.metrics.recoveries.get(), 0, "neither reported a position");
    h.task.abort();
}
