//! The schemas values and keys name (`--value-format avro|protobuf|...`, `--key-format`), fetched from the
//! Schema Registry before they are encoded: a partition whose next value names a schema not fetched yet parks there (its records
//! are dropped, and read again once the schema is fetched) while every other partition goes on. Every
//! failure but one is retried with backoff for as long as it lasts (the registry coming back,
//! credentials or a URL corrected); an ID the registry says it has no schema for is remembered as such,
//! and its values are kept raw as misfits.

use std::sync::Arc;
use std::time::Duration;

use super::writer::PartitionWriter;
use crate::archive::record::Record;
use crate::registry::{RegistryClient, SchemaCache};
use crate::retry::Backoff;
use crate::telemetry::{Event, Metrics};
use crate::values::wire::{split, SchemaId};

/// The registry and what was fetched from it.
#[derive(Clone)]
pub struct Registry {
    pub client: Arc<RegistryClient>,
    pub cache: Arc<SchemaCache>,
}

/// A schema ID `record`'s value or key names, when its partition's values or keys name schemas and it
/// was not fetched yet. The cache is not asked again for the ID the partition's last value (or key)
/// named, once fetched: it forgets none.
pub(super) fn missing(writer: &mut PartitionWriter, record: &Record, cache: &SchemaCache) -> Option<SchemaId> {
    let [values, keys] = [writer.values_name_schemas(), writer.keys_name_schemas()];
    let mut named = |at: usize, named: bool, payload: Option<&[u8]>| {
        let (id, _) = split(payload.filter(|_| named)?).ok()?;
        let known = &mut writer.fetched_ids[at];
        if *known == Some(id) || cache.has(id) {
            *known = Some(id);
            return None;
        }
        Some(id)
    };
    named(0, values, record.value.as_deref()).or_else(|| named(1, keys, record.key.as_deref()))
}

/// Fetches `id` into the cache, retrying failures that may pass until they do; then says which.
pub(super) async fn fetch(registry: Registry, id: SchemaId, metrics: Arc<Metrics>) -> SchemaId {
    let backoff = Backoff { base: Duration::from_millis(200), max: Duration::from_secs(10) };
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
    let outcome = registry.cache.usable(id).expect("just inserted");
    metrics.emit(Event::SchemaFetched { id: id.0, outcome: outcome.as_ref().map(|_| ()).map_err(String::as_str) });
    id
}
