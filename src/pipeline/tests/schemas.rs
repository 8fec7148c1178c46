//! Partitions whose values name schemas not fetched yet wait for them; no other partition does, and
//! neither does a revoke or a stop.

use std::sync::Arc;
use std::time::Duration;

use super::harness::*;
use crate::pipeline::schemas::Registry;
use crate::registry::{RegistryAuth, RegistryClient, RegistryOptions, SchemaCache};
use crate::source::Fetched;

/// A registry nobody answers at (a closed port): every fetch fails and is retried.
fn unreachable_registry() -> Registry {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let client = RegistryClient::new(RegistryOptions { url, auth: RegistryAuth::None, ca: None });
    Registry { client: Arc::new(client), cache: Arc::new(SchemaCache::default()) }
}

fn framed(p: i32, offset: i64, epoch: u64) -> Fetched {
    let record = crate::archive::record::Record { value: Some(vec![0, 0, 0, 0, 5, 2]), ..rec(offset, 0) };
    Fetched { tp: tp(p), epoch, record, retention_gap: None }
}

/// A partition whose value names a schema not fetched yet waits, parked; the others go on. Here
/// partition 1's values are in no wire format (misfits, which need no schema): its file is written
/// while partition 0 waits for a registry that does not answer, and a stop then completes.
#[tokio::test]
async fn a_partition_waiting_for_a_schema_holds_up_no_other_nor_a_stop() {
    let h = harness_registry(unreachable_registry());
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    let epochs = h.epochs.lock().unwrap().clone();
    let mut batch = vec![framed(0, 0, epochs[&0])];
    batch.extend((0..100).map(|o| Fetched { tp: tp(1), epoch: epochs[&1], record: rec(o, 10), retention_gap: None }));
    batch.push(framed(0, 1, epochs[&0]));
    h.records.send(batch).await.unwrap();
    let partition_1 = "topic=t/partition=1/t+1+00000000000000000000+00000000000000000099.parquet";
    assert_eq!(h.wait_keys(1).await, [partition_1], "partition 1 rolls its file of 100 records");
    eventually("the registry was asked", || h.metrics.schema_registry_failures.get() > 0).await;
    assert_eq!(h.metrics.schema_waits.get(), 1, "partition 0 parked once, at its first record");
    eventually("/readyz says it waits", || h.metrics.partitions_waiting_for_schemas.get() == 1).await;
    assert!(!h.metrics.ready());
    // Partition 0 goes and comes back: its new writer waits for the same fetch.
    h.revoke(0, false).await;
    h.assign(0, Some(0)).await;
    let epoch = h.epochs.lock().unwrap()[&0];
    h.records.send(vec![framed(0, 0, epoch)]).await.unwrap();
    eventually("it waits again", || h.metrics.schema_waits.get() == 2).await;
    let Harness { records, task, .. } = h;
    drop(records);
    let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "the pipeline ends once its source does: {ended:?}");
}

/// A record that names a schema not fetched yet, and comes after a retention gap: the gap is taken
/// before the partition parks at the record (the record is read again, the gap is not: dropping it
/// with the record would hide it from the claims).
#[tokio::test]
async fn a_retention_gap_before_a_record_that_waits_for_its_schema_is_not_lost() {
    let h = harness_registry(unreachable_registry());
    h.assign(0, Some(0)).await;
    let epoch = h.epochs.lock().unwrap()[&0];
    let record = framed(0, 20, epoch).record;
    let gap = Some(crate::archive::partition::OffsetRange::new(5, 19).unwrap());
    h.records.send(vec![Fetched { tp: tp(0), epoch, record, retention_gap: gap }]).await.unwrap();
    eventually("the partition waits", || h.metrics.schema_waits.get() == 1).await;
    assert_eq!(h.metrics.retention_gaps.get(), 1, "the gap was taken before the partition parked");
    h.task.abort();
}
