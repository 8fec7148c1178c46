//! `verify --iceberg-catalog`: each archived topic's Iceberg table held against the archive (see
//! [`crate::table::inspect`]), and how the report shows it.

use std::fmt::Write;
use std::sync::Arc;

use super::VerifyReport;
use crate::archive::object_key::Prefix;
use crate::config::CatalogConfig;
use crate::store::ObjectStore;
use crate::table::audit::TableProblem;
use crate::table::catalog;
use crate::table::committer::{Committer, TableError, TopicTable};
use crate::table::inspect::TableCheck;

/// The tables of `topics` in `catalog`, checked (a topic without a table is left out).
pub async fn check_tables(
    store: Arc<dyn ObjectStore>,
    prefix: &Prefix,
    catalog: &CatalogConfig,
    topics: &[String],
) -> Result<Vec<TableCheck>, TableError> {
    let committer = reader(store, prefix, catalog)?;
    let mut checks = Vec::new();
    for topic in topics {
        let table = TopicTable::new(&catalog.namespace, topic, None);
        checks.extend(committer.check(&table).await?);
    }
    Ok(checks)
}

/// A committer of `catalog` that only reads the tables of the archive at `store` and `prefix`.
pub(crate) fn reader(
    store: Arc<dyn ObjectStore>,
    prefix: &Prefix,
    catalog: &CatalogConfig,
) -> Result<Committer, TableError> {
    Ok(Committer {
        catalog: catalog::open(&catalog.location, &catalog.name, store.clone())?,
        store,
        prefix: prefix.clone(),
        max_files: 0,
        recent: Default::default(),
    })
}

impl VerifyReport {
    /// The archived topics, in order, each once.
    pub fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.partitions.iter().map(|p| p.topic.clone()).collect();
        topics.dedup();
        topics
    }

    /// The tables' lines of the human-readable report.
    pub(super) fn table_lines(&self, out: &mut String) {
        for t in &self.tables {
            let positions: Vec<String> = t.positions.iter().map(|(p, at)| format!("{p}@{at}")).collect();
            let status = match t.problems.len() {
                0 => "ok".to_string(),
                n => format!("{n} problem{}", if n == 1 { "" } else { "s" }),
            };
            let snapshot = t.snapshot_id.map_or("none".to_string(), |s| s.to_string());
            let _ = writeln!(
                out,
                "table {}: snapshot {snapshot}, {} files, {} records, positions {}: {status}",
                t.table,
                t.files,
                t.records,
                positions.join(" ")
            );
            for problem in &t.problems {
                let _ = writeln!(out, "{}: {}", t.table, describe(problem));
            }
        }
    }
}

fn describe(problem: &TableProblem) -> String {
    match problem {
        TableProblem::Twice { file } => format!("TWICE: the table holds {file} more than once"),
        TableProblem::NotArchived { file } => {
            format!("NOT ARCHIVED: the table holds {file}, no data object of the archive's topic")
        }
        TableProblem::Unexpected { partition, file } => {
            format!("UNEXPECTED: partition {partition}'s {file} is in the table but not on its chain before the position it records")
        }
        TableProblem::Missing { partition, file } => {
            format!("MISSING: partition {partition}'s {file} is before the position the table records but not in it")
        }
        TableProblem::Position { partition, why } => format!("POSITION of partition {partition}: {why}"),
    }
}
