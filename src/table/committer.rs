//! Commits a topic's durable archive objects to its table: reads the table, plans per partition from the
//! positions it records ([`plan`]), writes the manifests and the manifest list ([`super::snapshot`]),
//! and asks the catalog to swap the table's metadata only if nobody committed since it was read. A
//! conflict throws the attempt away and plans again on the newer table; the position moves in the same
//! commit as the files, so whoever commits a file first, it is in the table once.

use std::collections::BTreeMap;
use std::sync::Arc;

use parquet::file::metadata::ParquetMetaData;
use thiserror::Error;

use super::catalog::{random_uuid, uri_of, Catalog, CatalogError, Committed, Loaded, TableIdent};
use super::chain::{columns, read_chain, DurableLink};
use super::fit::{with_partition, Evolving};
use super::iceberg::avro_file::AvroFileError;
use super::iceberg::manifest::DataFile;
use super::iceberg::metadata::{new_table, Base, NewSchema, NewTable};
use super::iceberg::spec::{field_id, table_schema, time_width, SpecError, TIME_COLUMN};
use super::iceberg::stats::ColumnStats;
use super::partition::file_partition;
use super::plan::{plan, Chain, PlanError};
use super::recent::RecentObjects;
use super::snapshot::{specs_for, WrittenSnapshot};
use super::state::{StateError, TableState};
use crate::archive::claim::ClaimError;
use crate::archive::object_key::Prefix;
use crate::archive::partition::TopicPartition;
use crate::archive::time_bucket::BucketWidth;
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
    #[error(
        "{key} is not a Parquet object: a table holds Parquet files only (the topic was archived with --format jsonl)"
    )]
    NotParquet { key: String },
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
    #[error("{key}'s Parquet footer could not be read: {why}")]
    Footer { key: String, why: String },
    #[error(
        "table {table} is at {location}, not {expected}: it views another archive (another prefix or bucket); \
         point --iceberg-namespace at a table of its own"
    )]
    Foreign { table: String, location: String, expected: String },
}

/// A topic's table: its name, and how it is partitioned when it is created (by time too with time
/// buckets; a table made before keeps its own specs). Its columns are those of the first file it takes.
#[derive(Debug, Clone)]
pub struct TopicTable {
    pub ident: TableIdent,
    pub topic: String,
    pub width: Option<BucketWidth>,
}

impl TopicTable {
    /// `topic`'s table in `namespace`, named after it (`table_name`).
    pub fn new(namespace: &str, topic: &str, width: Option<BucketWidth>) -> Self {
        let ident = TableIdent { namespace: namespace.to_string(), name: super::table_name(topic) };
        Self { ident, topic: topic.to_string(), width }
    }
}

/// What a commit did.
#[derive(Debug, Default)]
pub struct CommitReport {
    pub snapshot_id: Option<i64>,
    pub files: usize,
    pub records: u64,
    /// Per partition moved, its new position.
    pub positions: BTreeMap<i32, i64>,
    /// Per partition of the commit that the table holds files of, its position after the commit (moved
    /// or not).
    pub held: BTreeMap<i32, i64>,
    /// Attempts thrown away because the table had moved.
    pub conflicts: u32,
    /// Partitions left out of the commit, and why (the others went on).
    pub failed: Vec<(i32, TableError)>,
}

pub struct Committer {
    pub store: Arc<dyn ObjectStore>,
    pub catalog: Arc<dyn Catalog>,
    pub prefix: Prefix,
    /// At most this many files go into one commit (the rest wait for the next).
    pub max_files: usize,
    /// The objects this process has just created (empty: read every object from the store).
    pub recent: Arc<RecentObjects>,
}

/// One planned commit: the files per partition and where each partition's position moves.
pub(super) struct Planned {
    pub files: Vec<DataFile>,
    /// The schema the files need, when the table's current one lacks columns of theirs.
    pub schema: Option<NewSchema>,
    pub positions: BTreeMap<i32, i64>,
    /// The width of the table's spec by time, which the files' partition values are of (none: spec 0).
    pub width: Option<BucketWidth>,
    /// The topic the files come from.
    pub topic: String,
    /// The topic incarnation the files come from (the table's, or their claims').
    pub topic_id: Option<String>,
    pub failed: Vec<(i32, TableError)>,
}

impl Committer {
    /// The table's location on the store: `<prefix>/_tables/<namespace>/<table>`.
    pub fn location(&self, ident: &TableIdent) -> String {
        uri_of(self.store.as_ref(), &format!("{}_tables/{}/{}", self.prefix.root(), ident.namespace, ident.name))
    }

    /// That a loaded `table` is of a format version it knows and at this archive's location (not a view
    /// of another archive).
    pub(super) fn check_base(&self, table: &TopicTable, base: &Base<'_>) -> Result<(), TableError> {
        base.check_version()?;
        let expected = self.location(&table.ident);
        if base.location() != Some(expected.as_str()) {
            let location = base.location().unwrap_or("(none)").to_string();
            return Err(TableError::Foreign { table: table.ident.to_string(), location, expected });
        }
        Ok(())
    }

    /// Adds every durable object of `partitions` of `table` that the table does not hold yet.
    pub async fn commit(
        &self,
        table: &TopicTable,
        partitions: &[i32],
        now_ms: i64,
    ) -> Result<CommitReport, TableError> {
        let mut report = CommitReport::default();
        for _ in 0..MAX_ATTEMPTS {
            let Some(loaded) = self.load_or_create(table, partitions, now_ms).await? else { return Ok(report) };
            let base = Base(&loaded.metadata);
            self.check_base(table, &base)?;
            // Never before the table's last change: readers expect its logs in time order.
            let now_ms = now_ms.max(base.last_updated_ms());
            let state = TableState::from_properties(base.properties())?;
            state.check_topic(&table.topic)?;
            report.held = partitions.iter().filter_map(|p| Some((*p, *state.positions.get(p)?))).collect();
            let mut planned = self.plan(table, &base, &state, partitions).await?;
            report.failed = std::mem::take(&mut planned.failed);
            if planned.positions.is_empty() {
                return Ok(report);
            }
            let WrittenSnapshot { change, keys: written, listed } =
                self.write_snapshot(&base, &planned, now_ms).await?;
            match self.catalog.commit(&table.ident, &loaded, &change, now_ms).await? {
                Committed::Done(now) => {
                    self.delete_expired(&base, &now.metadata, &change.expired, &listed).await;
                    report.snapshot_id = change.snapshot["snapshot-id"].as_i64();
                    report.files = planned.files.len();
                    report.records = planned.files.iter().map(|f| f.records).sum();
                    report.held.extend(&planned.positions);
                    report.positions = planned.positions;
                    return Ok(report);
                }
                Committed::Conflict => {
                    report.conflicts += 1;
                    for key in written {
                        let _ = self.store.delete(&key).await; // Nobody's: no snapshot names them.
                    }
                }
            }
        }
        Err(TableError::Contended { table: table.ident.to_string() })
    }

    /// The table, created (with the columns of the first file to add) if the catalog has none; none
    /// when it has none and nothing of `partitions` is archived yet.
    async fn load_or_create(
        &self,
        table: &TopicTable,
        partitions: &[i32],
        now_ms: i64,
    ) -> Result<Option<Loaded>, TableError> {
        if let Some(loaded) = self.catalog.load(&table.ident).await? {
            return Ok(Some(loaded));
        }
        let Some((key, footer, topic_id)) = self.first_object(table, partitions).await? else { return Ok(None) };
        let schema = table_schema(&with_partition(&columns(&key, &footer)?), None, 0, 0)?;
        let specs = specs_for(&schema.0, table.width);
        let location = self.location(&table.ident);
        let uuid = random_uuid();
        let properties = TableState::properties(&table.topic, topic_id.as_deref(), &BTreeMap::new());
        let metadata =
            new_table(&NewTable { uuid: &uuid, location: &location, schema, specs: &specs, properties, now_ms });
        match self.catalog.create(&table.ident, &metadata).await? {
            Some(created) => Ok(Some(created)),
            None => Ok(self.catalog.load(&table.ident).await?),
        }
    }

    /// The first durable data object of `partitions`, if any: its key, footer and topic incarnation.
    async fn first_object(
        &self,
        table: &TopicTable,
        partitions: &[i32],
    ) -> Result<Option<(String, Arc<ParquetMetaData>, Option<String>)>, TableError> {
        for &p in partitions {
            let tp = TopicPartition::new(&table.topic, p).expect("an archived partition");
            let (durable, _) = read_chain((self.store.as_ref(), &self.recent), &self.prefix, &tp, 0, 1, true).await?;
            for d in durable {
                if let (Some(key), Some(footer)) = (d.link.object, d.footer) {
                    return Ok(Some((key, footer, d.claim.topic_id)));
                }
            }
        }
        Ok(None)
    }

    /// Per partition, the durable run from its position (up to `max_files` in all); a partition that
    /// cannot be planned is left out, with why.
    async fn plan(
        &self,
        table: &TopicTable,
        base: &Base<'_>,
        state: &TableState,
        partitions: &[i32],
    ) -> Result<Planned, TableError> {
        let (schema, last_column_id) = base.schema()?;
        let width = time_width(&base.0["partition-specs"], schema)?;
        let columns = (field_id(schema, "offset"), field_id(schema, TIME_COLUMN));
        let mut evolving = Evolving::new(schema.clone(), last_column_id, base.next_schema_id());
        let mut planned = Planned {
            files: Vec::new(),
            schema: None,
            positions: BTreeMap::new(),
            width,
            topic: table.topic.clone(),
            topic_id: state.topic_id.clone(),
            failed: Vec::new(),
        };
        for &p in partitions {
            let room = self.max_files.saturating_sub(planned.files.len());
            if room == 0 {
                break;
            }
            match self.plan_partition(table, state, p, room).await {
                Ok(Some((to, links))) => {
                    let (to, links, refused) = evolving.fit(to, links);
                    let moves = refused.is_none() || !links.is_empty();
                    planned.failed.extend(refused.map(|e| (p, e)));
                    if !moves {
                        continue;
                    }
                    for (d, stats) in links {
                        planned.topic_id = planned.topic_id.take().or_else(|| d.claim.topic_id.clone());
                        planned.files.extend(data_file(self.store.as_ref(), p, &d, width, columns, stats));
                    }
                    planned.positions.insert(p, to);
                }
                Ok(None) => {}
                Err(e) => planned.failed.push((p, e)),
            }
        }
        planned.schema = evolving.evolved();
        Ok(planned)
    }

    /// A partition's run from its position: where the position moves, and the links it adds.
    async fn plan_partition(
        &self,
        table: &TopicTable,
        state: &TableState,
        p: i32,
        room: usize,
    ) -> Result<Option<(i64, Vec<DurableLink>)>, TableError> {
        let tp = TopicPartition::new(&table.topic, p).expect("an archived partition");
        let position = state.positions.get(&p).copied();
        // At most `room` files: the chain is read up to the link holding the last one.
        let (mut durable, next) =
            read_chain((self.store.as_ref(), &self.recent), &self.prefix, &tp, position.unwrap_or(0), room, true)
                .await?;
        let links: Vec<_> = durable.iter().map(|d| d.link.clone()).collect();
        let Some(append) = plan(position, Chain { links: &links, next })
            .map_err(|source| TableError::Plan { tp: tp.to_string(), source })?
        else {
            return Ok(None);
        };
        durable.retain(|d| d.link.covers.start() < append.to);
        for d in &durable {
            state.check_incarnation(d.claim.topic_id.as_deref())?;
        }
        Ok(Some((append.to, durable)))
    }
}

/// The data file of a link's object (none for a link without one); its offsets' and timestamps'
/// bounds (columns `offset` and `timestamp`, by field ID), the latter from its claim, beside the
/// statistics of its footer.
fn data_file(
    store: &dyn ObjectStore,
    partition: i32,
    d: &DurableLink,
    width: Option<BucketWidth>,
    (offset, timestamp): (Option<i32>, Option<i32>),
    stats: ColumnStats,
) -> Option<DataFile> {
    let (range, size, records) = d.object?;
    let key = d.link.object.as_deref()?;
    let mut bounds = Vec::new();
    if let Some(id) = offset {
        bounds.push((id, range.start().to_le_bytes().to_vec(), range.end().to_le_bytes().to_vec()));
    }
    if let (Some(id), Some((min, max))) = (timestamp, d.claim.timestamps) {
        let micros = |ms: i64| ms.saturating_mul(1000).to_le_bytes().to_vec();
        bounds.push((id, micros(min), micros(max)));
    }
    Some(DataFile {
        path: uri_of(store, key),
        kafka_partition: partition,
        partition: file_partition(width, d.claim.timestamps),
        records,
        size,
        bounds,
        stats,
    })
}
