//! Recoveries run off the pipeline's loop and retry a failing store for as long as it takes: a brownout
//! never stops the archiver, and revokes, uploads and other partitions go on meanwhile.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::harness::*;
use crate::source::ResumeAt;

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
