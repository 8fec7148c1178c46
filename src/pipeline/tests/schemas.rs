//! Records whose values name schemas wait for them; the waiting batch never holds up a revoke or a stop.

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
    let client = RegistryClient::new(RegistryOptions { url, auth: RegistryAuth::None });
    Registry { client: Arc::new(client), cache: Arc::new(SchemaCache::default()) }
}

fn framed(p: i32, offset: i64, epoch: u64) -> Fetched {
    let record = crate::archive::record::Record { value: Some(vec![0, 0, 0, 0, 5, 2]), ..rec(offset, 0) };
    Fetched { tp: tp(p), epoch, record, retention_gap: None }
}

#[tokio::test]
async fn a_batch_waiting_for_a_schema_is_dropped_with_its_partitions_so_a_stop_completes() {
    let h = harness_registry(unreachable_registry());
    h.assign(0, Some(0)).await;
    h.assign(1, Some(0)).await;
    let epochs = h.epochs.lock().unwrap().clone();
    h.records.send(vec![framed(0, 0, epochs[&0]), framed(1, 0, epochs[&1])]).await.unwrap();
    eventually("the registry was asked", || h.metrics.schema_registry_failures.get() > 0).await;
    // Partition 1 goes; 0's record still waits. Then 0 is assigned again: its waiting record is of the
    // old assignment, so nothing is left to wait for.
    h.revoke(1, false).await;
    assert!(!h.task.is_finished());
    h.assign(0, Some(0)).await;
    let Harness { records, task, .. } = h;
    drop(records);
    let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
    assert!(matches!(ended, Ok(Ok(Ok(())))), "the pipeline ends once its source does: {ended:?}");
}
