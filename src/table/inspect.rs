//! Reads a topic's table back and holds it against the archive (`verify` with a catalog): the files of
//! its current snapshot (its manifest list, then each manifest), and per partition with a recorded
//! position the partition's claims chain from 0 ([`super::audit`] decides). Costs one GET per manifest
//! and, per partition, a LIST of its claims, a GET per claim and a HEAD and footer GET per object.

use std::collections::BTreeMap;

use serde::Serialize;

use super::audit::{audit, expected_objects, TableProblem};
use super::chain::read_chain;
use super::committer::{Committer, TableError, TopicTable};
use super::iceberg::avro_file;
use super::iceberg::metadata::Base;
use super::plan::Chain;
use super::state::TableState;
use crate::archive::partition::TopicPartition;

/// Iceberg's status of a manifest entry whose file a snapshot removed.
const STATUS_DELETED: i64 = 2;

/// What `verify` found of a topic's table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableCheck {
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// Data files in its current snapshot, and their records.
    pub files: usize,
    pub records: u64,
    /// Per partition, the chain position the table records.
    pub positions: BTreeMap<i32, i64>,
    pub problems: Vec<TableProblem>,
}

/// Where a topic's table stands (`status`): its current snapshot, when it was last committed, and per
/// partition the chain position it records (the offset after the last file it holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TablePositions {
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// When its metadata last changed (ms since the epoch).
    pub updated_ms: i64,
    pub positions: BTreeMap<i32, i64>,
}

impl Committer {
    /// Where `table` stands, from one read of its metadata; none when the catalog has no such table. A
    /// table that views another archive (at another location) is refused, as a commit refuses it.
    pub async fn positions(&self, table: &TopicTable) -> Result<Option<TablePositions>, TableError> {
        let Some(loaded) = self.catalog.load(&table.ident).await? else { return Ok(None) };
        let base = Base(&loaded.metadata);
        self.check_base(table, &base)?;
        let state = TableState::from_properties(base.properties())?;
        state.check_topic(&table.topic)?;
        Ok(Some(TablePositions {
            table: table.ident.to_string(),
            snapshot_id: base.snapshot_id(),
            updated_ms: base.last_updated_ms(),
            positions: state.positions,
        }))
    }

    /// The check of `table` against the archive; none when the catalog has no such table.
    pub async fn check(&self, table: &TopicTable) -> Result<Option<TableCheck>, TableError> {
        let Some(loaded) = self.catalog.load(&table.ident).await? else { return Ok(None) };
        let base = Base(&loaded.metadata);
        base.check_version()?;
        let state = TableState::from_properties(base.properties())?;
        state.check_topic(&table.topic)?;
        let files = self.live_files(&base).await?;
        let mut expected = BTreeMap::new();
        for (&p, &position) in &state.positions {
            let tp = TopicPartition::new(&table.topic, p).expect("a recorded partition");
            let (durable, next) =
                read_chain((self.store.as_ref(), &self.recent), &self.prefix, &tp, 0, usize::MAX, false).await?;
            let links: Vec<_> = durable.into_iter().map(|d| d.link).collect();
            expected.insert(p, expected_objects(position, Chain { links: &links, next }));
        }
        let keys: Vec<String> = files.iter().map(|(k, _)| k.clone()).collect();
        Ok(Some(TableCheck {
            table: table.ident.to_string(),
            snapshot_id: base.snapshot_id(),
            files: files.len(),
            records: files.iter().map(|(_, r)| r).sum(),
            positions: state.positions,
            problems: audit(&self.prefix, &table.topic, &keys, &expected),
        }))
    }

    /// The data files of the table's current snapshot: their store keys (a file elsewhere keeps its
    /// URI, which no archive key equals) and record counts.
    async fn live_files(&self, base: &Base<'_>) -> Result<Vec<(String, u64)>, TableError> {
        let mut files = Vec::new();
        for entry in self.manifests(base).await? {
            let path = entry.0["manifest_path"].as_str().unwrap_or_default();
            let manifest = avro_file::read(&self.store.get(self.key(base, path)?).await?)?;
            for record in manifest.records {
                if record["status"].as_i64() == Some(STATUS_DELETED) {
                    continue;
                }
                let file = &record["data_file"];
                let uri = file["file_path"].as_str().unwrap_or_default();
                let key = self.key(base, uri).map_or_else(|_| uri.to_string(), str::to_string);
                files.push((key, file["record_count"].as_u64().unwrap_or(0)));
            }
        }
        Ok(files)
    }
}
