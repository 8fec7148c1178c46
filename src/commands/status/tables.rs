//! `status --iceberg-catalog`: where each topic's Iceberg table stands beside its archive — when it was
//! last committed and, per partition, the position it records (the offset after the last file it holds)
//! and its lag: the offsets the archive holds durable past that position, which the next commit adds.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use super::rfc3339;
use crate::archive::object_key::Prefix;
use crate::commands::verify::tables::reader;
use crate::config::CatalogConfig;
use crate::recovery::standing::PartitionStatus;
use crate::store::ObjectStore;
use crate::table::catalog::TableIdent;
use crate::table::committer::{TableError, TopicTable};
use crate::table::inspect::TablePositions;
use crate::table::table_name;

/// A topic's table, beside its archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TableStatus {
    pub topic: String,
    pub table: String,
    pub snapshot_id: Option<i64>,
    /// When the table last changed (ms since the epoch), and the same in RFC 3339.
    pub committed_ms: i64,
    pub committed: String,
    pub partitions: Vec<TablePartition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TablePartition {
    pub partition: i32,
    /// The offset after the last file the table holds; `None`: it holds none of the partition's.
    pub position: Option<i64>,
    /// Offsets archived durable from that position on, not in the table yet (from the first archived
    /// offset when the table holds none of the partition's, which `status` does not know: then `None`).
    pub lag: Option<i64>,
}

/// The tables of `topics` in `catalog` (a topic without one is left out), beside `rows`.
pub async fn table_statuses(
    store: Arc<dyn ObjectStore>,
    prefix: &Prefix,
    catalog: &CatalogConfig,
    rows: &[PartitionStatus],
) -> Result<Vec<TableStatus>, TableError> {
    let committer = reader(store, prefix, catalog)?;
    let mut topics: Vec<&str> = rows.iter().map(|r| r.topic.as_str()).collect();
    topics.dedup();
    let mut out = Vec::new();
    for topic in topics {
        let ident = TableIdent { namespace: catalog.namespace.clone(), name: table_name(topic) };
        let table = TopicTable { ident, topic: topic.to_string(), width: None };
        if let Some(positions) = committer.positions(&table).await? {
            out.push(table_status(topic, rows, positions));
        }
    }
    Ok(out)
}

/// A topic's table status: each of its partitions in `rows` beside the position the table records.
pub fn table_status(topic: &str, rows: &[PartitionStatus], table: TablePositions) -> TableStatus {
    let partitions = rows
        .iter()
        .filter(|r| r.topic == topic)
        .map(|r| {
            let position = table.positions.get(&r.partition).copied();
            let lag = position.map(|at| r.archived_through.map_or(0, |through| (through + 1 - at).max(0)));
            TablePartition { partition: r.partition, position, lag }
        })
        .collect();
    TableStatus {
        topic: topic.to_string(),
        table: table.table,
        snapshot_id: table.snapshot_id,
        committed_ms: table.updated_ms,
        committed: rfc3339(table.updated_ms),
        partitions,
    }
}

impl TableStatus {
    /// Its line of the human-readable report.
    pub fn line(&self, out: &mut String) {
        let snapshot = self.snapshot_id.map_or("none".to_string(), |s| s.to_string());
        let partitions: BTreeMap<i32, String> = self
            .partitions
            .iter()
            .map(|p| {
                let at = match (p.position, p.lag) {
                    (Some(at), Some(lag)) => format!("{at} (lag {lag})"),
                    _ => "none".to_string(),
                };
                (p.partition, at)
            })
            .collect();
        let positions: Vec<String> = partitions.iter().map(|(p, at)| format!("{p}@{at}")).collect();
        let _ = writeln!(
            out,
            "table {}: snapshot {snapshot}, committed {}; positions {}",
            self.table,
            self.committed,
            positions.join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::standing::PartitionStatus;

    fn row(partition: i32, archived_through: Option<i64>) -> PartitionStatus {
        PartitionStatus {
            topic: "t".into(),
            partition,
            archived_through,
            pending_claim: None,
            committed: None,
            log_start: 0,
            log_end: 100,
            unarchived: 0,
            newest_object_ms: None,
            flags: vec![],
        }
    }

    #[test]
    fn a_partitions_lag_is_what_the_archive_holds_past_the_tables_position() {
        let rows = [row(0, Some(99)), row(1, Some(49)), row(2, Some(10)), row(3, None), row(4, Some(5))];
        let mut other = row(0, Some(7));
        other.topic = "other".into();
        let positions = BTreeMap::from([(0, 100), (1, 20), (2, 30), (3, 0)]);
        let table = TablePositions { table: "kafka.t".into(), snapshot_id: Some(7), updated_ms: 0, positions };
        let status = table_status("t", &[rows.as_slice(), &[other]].concat(), table);
        let got: Vec<(i32, Option<i64>, Option<i64>)> =
            status.partitions.iter().map(|p| (p.partition, p.position, p.lag)).collect();
        let want = [
            (0, Some(100), Some(0)), // caught up
            (1, Some(20), Some(30)), // 20..=49 archived, not in the table
            (2, Some(30), Some(0)),  // a table ahead of what this listing saw is not a negative lag
            (3, Some(0), Some(0)),   // nothing archived
            (4, None, None),         // nothing of it in the table
        ];
        assert_eq!(got, want);
        let mut line = String::new();
        status.line(&mut line);
        assert_eq!(
            line,
            "table kafka.t: snapshot 7, committed 1970-01-01T00:00:00Z; positions 0@100 (lag 0) 1@20 (lag 30) \
             2@30 (lag 0) 3@0 (lag 0) 4@none\n"
        );
    }
}
