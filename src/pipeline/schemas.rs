//! The schemas a batch's values name (`--value-format avro`), fetched from the Schema Registry before
//! the batch is encoded: the batch waits (and no more records are taken) while control events, uploads
//! and recoveries go on. Every failure but one is retried with backoff for as long as it lasts (the
//! registry coming back, credentials or a URL corrected); an ID the registry says it has no schema for
//! is remembered as such, and its values are kept raw as misfits.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use super::writer::PartitionWriter;
use crate::archive::partition::TopicPartition;
use crate::registry::{RegistryClient, SchemaCache};
use crate::retry::Backoff;
use crate::source::Fetched;
use crate::telemetry::{Event, Metrics};
use crate::values::wire::{split, SchemaId};
use crate::values::SchemaSource;

/// The registry and what was fetched from it.
#[derive(Clone)]
pub struct Registry {
    pub client: Arc<RegistryClient>,
    pub cache: Arc<SchemaCache>,
}

/// The IDs named by `batch`'s values, in topics whose values name schemas, that were not fetched yet.
pub(super) fn missing(
    batch: &[Fetched],
    writers: &HashMap<TopicPartition, PartitionWriter>,
    cache: &SchemaCache,
) -> BTreeSet<SchemaId> {
    batch
        .iter()
        .filter(|f| writers.get(&f.tp).is_some_and(PartitionWriter::values_name_schemas))
        .filter_map(|f| split(f.record.value.as_deref()?).ok().map(|(id, _)| id))
        .filter(|id| cache.avro(*id).is_none())
        .collect()
}

/// Fetches every ID in `ids` into the cache, retrying failures that may pass until they do.
pub(super) async fn fetch(registry: Registry, ids: BTreeSet<SchemaId>, metrics: Arc<Metrics>) {
    let backoff = Backoff { base: Duration::from_millis(200), max: Duration::from_secs(10) };
    for id in ids {
        let mut attempt = 0;
        let fetched = loop {
            match registry.client.schema(id).await {
                Err(e) if !e.is_final() => {
                    metrics.emit(Event::SchemaRegistryFailed { why: &e.to_string() });
                    tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                    attempt += 1;
                }
                other => break other,
            }
        };
        registry.cache.insert(id, fetched);
        let outcome = registry.cache.avro(id).expect("just inserted").map(drop);
        metrics.emit(Event::SchemaFetched { id: id.0, outcome: outcome.as_ref().map(|_| ()).map_err(String::as_str) });
    }
}
