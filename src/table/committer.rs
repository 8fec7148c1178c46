//! Commits a topic's durable archive objects to its table: reads the table, plans per partition from the
//! positions it records ([`plan`]), writes the manifests and the manifest list, and asks the catalog to
//! swap the table's metadata only if nobody committed since it was read. A conflict throws the attempt
//! away and plans again on the newer table; the position moves in the same commit as the files, so
//! whoever commits a file first, it is in the table once.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use thiserror::Error;

use super::catalog::{random_uuid, uri_of, Catalog, CatalogError, Committed, Loaded, TableIdent};
use super::chain::{read_chain, DurableLink};
use super::iceberg::avro_file::AvroFileError;
use super::iceberg::manifest::{self, DataFile, ManifestEntry, SnapshotIds};
use super::iceberg::metadata::{append_snapshot, new_table, Base, Change, NewTable};
use super::iceberg::spec::{
    field_id, table_schema, PartitionSpec, SpecError, PARTITION_COLUMN, PARTITION_SPEC_ID, TIME_COLUMN, TIME_SPEC_ID,
};
use super::partition::file_partition;
use super::plan::{plan, Chain, PlanError};
use super::state::{StateError, TableState};
use crate::archive::claim::ClaimError;
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::archive::time_bucket::BucketWidth;
use crate::encode::spool::SpoolData;
use crate::store::{ObjectStore, StoreError};

/// Commits that meet a newer table are planned again; this many in a row is a fault (another
/// committer cannot be that busy on one table).
const MAX_ATTEMPTS: u32 = 50;

#[derive(Debug, Error)]
pub enum TableError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("the archive could not be read or written: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(
        "the claim for {tp} at {start} names no data object (written by an old version of the archiver): a table \
         needs claims that do; archive the topic to a new prefix"
    )]
    OldClaim { tp: String, start: i64 },
    #[error("table of {tp}: {source}")]
    Plan { tp: String, source: PlanError },
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error("a manifest could not be written or read: {0}")]
    Manifest(#[from] AvroFileError),
    #[error("table {table}: {MAX_ATTEMPTS} commits in a row met a newer table; another committer keeps winning")]
    Contended { table: String },
}

/// A topic's table: its name, how it is partitioned, and the columns of the topic's files.
#[derive(Debug, Clone)]
pub struct TopicTable {
    pub ident: TableIdent,
    pub topic: String,
    pub width: Option<BucketWidth>,
    pub columns: Arc<Schema>,
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    pub snapshot_id: Option<i64>,
    pub files: usize,
    pub records: u64,
    /// Per partition moved, its new position.
    pub positions: BTreeMap<i32, i64>,
    /// Attempts thrown away because the table had moved.
    pub conflicts: u32,
}

pub struct Committer {
    pub store: Arc<dyn ObjectStore>,
    pub catalog: Arc<dyn Catalog>,
    pub prefix: Prefix,
}

/// One planned commit: the files per partition and where each partition's position moves.
struct Planned {
    files: Vec<DataFile>,
    positions: BTreeMap<i32, i64>,
}

impl Committer {
    /// The table's location on the store: `<prefix>/_tables/<namespace>/<table>`.
    pub fn location(&self, ident: &TableIdent) -> String {
        uri_of(self.store.as_ref(), &format!("{}_tables/{}/{}", self.prefix.root(), ident.namespace, ident.name))
    }

    /// Adds every durable object of `partitions` of `table` that the table does not hold yet.
    pub async fn commit(
        &self,
        table: &TopicTable,
        partitions: &[i32],
        topic_id: Option<&str>,
        now_ms: i64,
    ) -> Result<CommitReport, TableError> {
        let mut report = CommitReport::default();
        for _ in 0..MAX_ATTEMPTS {
            let loaded = self.load_or_create(table, topic_id, now_ms).await?;
            let base = Base(&loaded.metadata);
            base.check_version()?;
            let state = TableState::from_properties(base.properties())?;
            state.check_incarnation(topic_id)?;
            let planned = self.plan(table, &base, &state, partitions).await?;
            if planned.files.is_empty() && planned.positions.is_empty() {
                return Ok(report);
            }
            let (change, written) = self.write_snapshot(table, &base, &planned, topic_id, now_ms).await?;
            match self.catalog.commit(&table.ident, &loaded, &change, now_ms).await {
                Ok(Committed::Done(_)) => {
                    report.snapshot_id = change.snapshot["snapshot-id"].as_i64();
                    report.files = planned.files.len();
                    report.records = planned.files.iter().map(|f| f.records).sum();
                    report.positions = planned.positions;
                    return Ok(report);
                }
                Ok(Committed::Conflict) => {
                    report.conflicts += 1;
                    for key in written {
                        let _ = self.store.delete(&key).await; // Nobody's: no snapshot names them.
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(TableError::Contended { table: table.ident.to_string() })
    }

    async fn load_or_create(
        &self,
        table: &TopicTable,
        topic_id: Option<&str>,
        now_ms: i64,
    ) -> Result<Loaded, TableError> {
        if let Some(loaded) = self.catalog.load(&table.ident).await? {
            return Ok(loaded);
        }
        let schema = table_schema(&with_partition(&table.columns), None, 0, 0)?;
        let specs = specs_for(&schema.0, table.width);
        let location = self.location(&table.ident);
        let uuid = random_uuid();
        let properties = TableState::properties(topic_id, &BTreeMap::new());
        let metadata =
            new_table(&NewTable { uuid: &uuid, location: &location, schema, specs: &specs, properties, now_ms });
        match self.catalog.create(&table.ident, &metadata).await? {
            Some(created) => Ok(created),
            None => self.catalog.load(&table.ident).await?.ok_or_else(|| {
                TableError::Catalog(CatalogError::Catalog {
                    catalog: table.ident.to_string(),
                    why: "the table was created by another committer and is gone again".into(),
                })
            }),
        }
    }

    async fn plan(
        &self,
        table: &TopicTable,
        base: &Base<'_>,
        state: &TableState,
        partitions: &[i32],
    ) -> Result<Planned, TableError> {
        let width = table.width.filter(|_| has_time_spec(base));
        let (schema, _) = base.schema()?;
        let columns = (field_id(schema, "offset"), field_id(schema, TIME_COLUMN));
        let mut planned = Planned { files: Vec::new(), positions: BTreeMap::new() };
        for &p in partitions {
            let tp = TopicPartition::new(&table.topic, p).expect("an archived partition");
            let position = state.positions.get(&p).copied();
            let (durable, next) = read_chain(self.store.as_ref(), &self.prefix, &tp, position.unwrap_or(0)).await?;
            let links: Vec<_> = durable.iter().map(|d| d.link.clone()).collect();
            let Some(append) = plan(position, Chain { links: &links, next }, &HashSet::new())
                .map_err(|source| TableError::Plan { tp: tp.to_string(), source })?
            else {
                continue;
            };
            let by_key = |key: &String| durable.iter().find(|d| d.link.object.as_ref() == Some(key));
            for link in append.files.iter().filter_map(by_key) {
                planned.files.push(self.data_file(p, link, width, columns));
            }
            planned.positions.insert(p, append.to);
        }
        Ok(planned)
    }

    /// The data file of a link's object; its offsets' and timestamps' bounds (columns `offset` and
    /// `timestamp`, by field ID) from its claim.
    fn data_file(
        &self,
        partition: i32,
        d: &DurableLink,
        width: Option<BucketWidth>,
        (offset, timestamp): (Option<i32>, Option<i32>),
    ) -> DataFile {
        let key = d.link.object.as_deref().expect("a link with an object");
        let mut bounds = Vec::new();
        if let Some(id) = offset {
            bounds.push((id, d.claim.first.to_le_bytes().to_vec(), d.claim.end.to_le_bytes().to_vec()));
        }
        if let (Some(id), Some((min, max))) = (timestamp, d.claim.timestamps) {
            let micros = |ms: i64| ms.saturating_mul(1000).to_le_bytes().to_vec();
            bounds.push((id, micros(min), micros(max)));
        }
        DataFile {
            path: uri_of(self.store.as_ref(), key),
            kafka_partition: partition,
            partition: file_partition(width, d.claim.timestamps),
            records: d.claim.records,
            size: d.size,
            bounds,
        }
    }

    /// Writes the manifests and manifest list of `planned` on top of `base`; returns the change and
    /// the keys written.
    async fn write_snapshot(
        &self,
        table: &TopicTable,
        base: &Base<'_>,
        planned: &Planned,
        topic_id: Option<&str>,
        now_ms: i64,
    ) -> Result<(Change, Vec<String>), TableError> {
        let ids = SnapshotIds {
            snapshot_id: (fastrand::u64(..) >> 1) as i64,
            parent: base.snapshot_id(),
            sequence_number: base.last_sequence_number() + 1,
        };
        let (schema, _) = base.schema()?;
        let specs = specs_for(schema, table.width.filter(|_| has_time_spec(base)));
        let location = base.location().unwrap_or_default().to_string();
        let uuid = random_uuid();
        let mut written = Vec::new();
        let mut entries = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let files: Vec<DataFile> =
                planned.files.iter().filter(|f| spec_of(&specs, f) == spec.spec_id).cloned().collect();
            if files.is_empty() {
                continue;
            }
            let bytes = manifest::write_manifest(&files, spec, schema, ids, sync(&uuid, i))?;
            let path = format!("{location}/metadata/{uuid}-m{i}.avro");
            written.push(self.put(&path, &bytes).await?);
            entries.push(manifest::list_entry(&path, bytes.len(), &files, spec, ids));
        }
        entries.extend(self.parent_manifests(base).await?);
        let list = manifest::write_manifest_list(&entries, ids, sync(&uuid, specs.len()))?;
        let list_path = format!("{location}/metadata/snap-{}-1-{uuid}.avro", ids.snapshot_id);
        written.push(self.put(&list_path, &list).await?);
        let bytes: u64 = planned.files.iter().map(|f| f.size).sum();
        let records: u64 = planned.files.iter().map(|f| f.records).sum();
        let properties = TableState::properties(topic_id, &planned.positions);
        let schema_id = schema["schema-id"].as_i64().unwrap_or(0);
        let added = (planned.files.len(), records, bytes);
        let snapshot = append_snapshot(base, ids, &list_path, added, &properties, schema_id, now_ms);
        Ok((Change { snapshot, properties, schema: None }, written))
    }

    /// The manifests of the snapshot `base` is at (none for a table without one).
    async fn parent_manifests(&self, base: &Base<'_>) -> Result<Vec<ManifestEntry>, TableError> {
        let Some(list) = base.snapshot().and_then(|s| s["manifest-list"].as_str()) else { return Ok(Vec::new()) };
        let key = super::catalog::key_of(self.store.as_ref(), list).ok_or_else(|| CatalogError::Elsewhere {
            table: base.location().unwrap_or_default().to_string(),
            location: list.to_string(),
            store: self.store.describe(),
        })?;
        Ok(manifest::read_manifest_list(&self.store.get(key).await?)?)
    }

    async fn put(&self, uri: &str, bytes: &[u8]) -> Result<String, TableError> {
        let key = super::catalog::key_of(self.store.as_ref(), uri).expect("written on the store").to_string();
        let data = SpoolData::Memory(bytes::Bytes::copy_from_slice(bytes));
        self.store.put_if_absent(&key, &data, bytes.len() as u64).await?;
        Ok(key)
    }
}

/// Whether the table has the spec by time (made so when it was created with time buckets).
fn has_time_spec(base: &Base) -> bool {
    base.0["partition-specs"].as_array().is_some_and(|s| s.iter().any(|s| s["spec-id"] == TIME_SPEC_ID))
}

/// The files' columns and the table's own, `partition` (the Kafka partition, from each file's
/// partition value: the files do not hold it).
fn with_partition(columns: &Schema) -> Schema {
    let mut fields: Vec<Field> = columns.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(PARTITION_COLUMN, DataType::Int32, true)); // Optional: readers fill it (pyiceberg only then).
    Schema::new(fields)
}

/// The specs of a table of `schema`: by Kafka partition, and by time too with `width` (the default).
fn specs_for(schema: &serde_json::Value, width: Option<BucketWidth>) -> Vec<PartitionSpec> {
    let partition = field_id(schema, PARTITION_COLUMN).expect("every table schema has the partition column");
    let mut specs = vec![PartitionSpec::by_partition(partition)];
    if let (Some(width), Some(time)) = (width, field_id(schema, TIME_COLUMN)) {
        specs.push(PartitionSpec::by_time(partition, width, time));
    }
    specs
}

/// The spec a file goes in: by time when it is within one time partition and the table has the spec.
fn spec_of(specs: &[PartitionSpec], file: &DataFile) -> i32 {
    match (file.partition.ordinal(), specs.last()) {
        (Some(_), Some(last)) => last.spec_id,
        _ => PARTITION_SPEC_ID,
    }
}

/// An Avro file's sync marker, from the commit's UUID and the file's number in it.
fn sync(uuid: &str, i: usize) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (j, b) in uuid.bytes().chain(std::iter::repeat(0)).take(16).enumerate() {
        out[j] = b ^ (i as u8);
    }
    out
}
