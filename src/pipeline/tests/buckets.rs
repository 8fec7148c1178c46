//! Time-bucketed folders (lake layout): files follow the records' time buckets forward, late records
//! never send a partition back to an earlier bucket (not even across a restart), re-writes keep the
//! claimed bucket, and scheduled rolls close files on the wall clock.

use std::time::Duration;

use super::harness::*;
use crate::archive::claim::Claim;
use crate::archive::object_key::{FileKind, ObjectKey, Prefix};
use crate::archive::partition::OffsetRange;
use crate::archive::time_bucket::{Bucket, BucketWidth, Bucketing, TimeSource};
use crate::encode::roll::RollPolicy;
use crate::source::ResumeAt;

/// 2026-11-30T00:00:00Z: in the past, so record times are not capped at arrival.
const DAY: i64 = 1_795_996_800_000;
const HOUR: i64 = 3_600_000;

fn by_record_hour() -> Option<Bucketing> {
    Some(Bucketing { width: BucketWidth::Hour, source: TimeSource::Record })
}

fn hourly_key(p: i32, hour: i64, s: i64, e: i64) -> String {
    let bucket = Bucket::containing(BucketWidth::Hour, DAY + hour * HOUR);
    ObjectKey::new(Prefix::default(), tp(p), OffsetRange::new(s, e).unwrap(), FileKind::Jsonl)
        .in_bucket(Some(bucket))
        .to_string()
}

#[tokio::test]
async fn files_move_forward_with_time_and_late_records_stay_in_the_current_bucket() {
    let h = harness_with(policy(100), 1 << 30, Duration::from_secs(10), by_record_hour());
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Earliest);
    h.send_timed(
        0,
        &[
            (0, DAY + HOUR),
            (1, DAY + HOUR + 1),
            (2, DAY + 2 * HOUR - 1),
            (3, DAY + 2 * HOUR),     // hour 02 begins: the hour-01 file rolls
            (4, DAY + 2 * HOUR - 5), // late, stamped 01:59:59: stays in hour 02
            (5, DAY + 3 * HOUR + 7),
            (6, DAY + HOUR), // an hour late: stays in hour 03
        ],
    )
    .await;
    h.drained().await;
    h.revoke(0, false).await;
    let mut keys = h.keys().await;
    keys.sort();
    assert_eq!(keys, vec![hourly_key(0, 1, 0, 2), hourly_key(0, 2, 3, 4), hourly_key(0, 3, 5, 6)]);
    let claims = h.claims(0).await;
    let named: Vec<String> = claims.iter().map(|c| c.object_key(&Prefix::default()).unwrap().to_string()).collect();
    assert_eq!(named, keys, "each claim names its object's key, bucket folder included");
    assert_eq!(claims[1].timestamps, Some((DAY + 2 * HOUR - 5, DAY + 2 * HOUR)));
    assert!(claims.iter().all(|c| c.time_source == Some(TimeSource::Record)), "claims say what bucketed them");
    assert_eq!(h.metrics.objects_by_roll_reason.with_label_values(&["bucket"]).get(), 2);

    // Assigned again (a restart): the position comes from the claims chain, and so does the bucket
    // the partition is in: a late record does not go back to hour 01.
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(7));
    h.send_timed(0, &[(7, DAY + HOUR + 30)]).await;
    h.drained().await;
    h.revoke(0, false).await;
    assert!(h.keys().await.contains(&hourly_key(0, 3, 7, 7)), "{:?}", h.keys().await);
    h.task.abort();
}

#[tokio::test]
async fn a_rewrite_goes_to_the_bucket_its_claim_names() {
    let h = harness_with(policy(100), 1 << 30, Duration::from_secs(10), by_record_hour());
    // A writer claimed [0, 2] for hour 01 and died before uploading it.
    let object = hourly_key(0, 1, 0, 2);
    h.plant(0, Claim { writer: "other:2".into(), object: Some(object.clone()), ..Claim::for_test(0, 0, 2) }).await;
    assert_eq!(h.assign(0, Some(0)).await, ResumeAt::Offset(0));
    // Re-read now, the records would say hour 05 (say, arrival time): the claimed key wins.
    h.send_timed(0, &[(0, DAY + 5 * HOUR), (1, DAY + 5 * HOUR), (2, DAY + 5 * HOUR), (3, DAY + 5 * HOUR)]).await;
    h.drained().await;
    h.revoke(0, false).await;
    let mut keys = h.keys().await;
    keys.sort();
    assert_eq!(keys, vec![object, hourly_key(0, 5, 3, 3)]);
    h.task.abort();
}

#[tokio::test]
async fn a_schedule_rolls_open_files_at_wall_clock_boundaries() {
    let roll = RollPolicy { schedule: Some(Duration::from_secs(1)), ..policy(100) };
    let h = harness(roll, 1 << 30, Duration::from_secs(10));
    h.assign(0, Some(0)).await;
    h.send(0, 0..3, 10).await;
    // The age is an hour; the next whole second is at most a second away.
    assert_eq!(h.wait_keys(1).await, vec![key(0, 0, 2)]);
    let schedule_rolls = || h.metrics.objects_by_roll_reason.with_label_values(&["schedule"]).get();
    eventually("one roll counted as scheduled", || schedule_rolls() == 1).await;
    h.task.abort();
}
