//! `status --iceberg-catalog`: where each topic's Iceberg table stands beside its archive — when it was
//! last committed and, per partition, the position it records (the offset after the last file it holds)
//! and its lag: the offsets the archive holds durable past that position, which the next commit adds. A
//! table that cannot be read says why in its line; the archive's rows are shown all the same.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::archive::object_key::Prefix;
use crate::clock::rfc3339;
use crate::commands::verify::tables::reader;
use crate::config::CatalogConfig;
use crate::recovery::standing::PartitionStatus;
use crate::store::ObjectStore;
use crate::table::committer::{TableError, TopicTable};
use crate::table::inspect::TablePositions;

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
    /// Why the table could not be read (then nothing else is known of it).
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TablePartition {
    pub partition: i32,
    /// The offset after the last file the table holds; `None`: it holds none of the partition's (its
    /// first commit starts at the chain's position 0).
    pub position: Option<i64>,
    /// Offsets archived durable from that position on, not in the table yet (holes of compaction and
    /// retention gaps counted too); below zero, the table is ahead of the archive (it views another
    /// archive or incarnation of the topic, or objects were removed: its commits stop, `verify` says more).
    pub lag: i64,
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
        let table = TopicTable::new(&catalog.namespace, topic, None);
        match committer.positions(&table).await {
            Ok(Some(positions)) => out.push(table_status(topic, rows, positions)),
            Ok(None) => {}
            Err(e) => out.push(TableStatus {
                topic: topic.to_string(),
                table: table.ident.to_string(),
                snapshot_id: None,
                committed_ms: 0,
                committed: String::new(),
                partitions: Vec::new(),
                error: Some(e.to_string()),
            }),
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
            let lag = r.archived_through.map_or(0, |through| through + 1) - position.unwrap_or(0);
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
        error: None,
    }
}

impl TableStatus {
    /// Its line of the human-readable report.
    pub fn line(&self, out: &mut String) {
        if let Some(why) = &self.error {
            let _ = writeln!(out, "table {}: cannot be read: {why}", self.table);
            return;
        }
        let snapshot = self.snapshot_id.map_or("none".to_string(), |s| s.to_string());
        let partitions: BTreeMap<i32, String> = self
            .partitions
            .iter()
            .map(|p| {
                let at = p.position.map_or("none".to_string(), |at| at.to_string());
                let at = match p.lag {
                    lag if lag < 0 => format!("{at} (AHEAD of the archive by {})", -lag),
                    lag => format!("{at} (lag {lag})"),
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
        let rows = [row(0, Some(99)), row(1, Some(49)), row(2, Some(10)), row(3, None), row(4, Some(5)), row(5, None)];
        let mut other = row(0, Some(7));
        other.topic = "other".into();
        let positions = BTreeMap::from([(0, 100), (1, 20), (2, 30), (3, 0)]);
        let table = TablePositions { table: "kafka.t".into(), snapshot_id: Some(7), updated_ms: 0, positions };
        let status = table_status("t", &[rows.as_slice(), &[other]].concat(), table);
        let got: Vec<(i32, Option<i64>, i64)> =
            status.partitions.iter().map(|p| (p.partition, p.position, p.lag)).collect();
        let want = [
            (0, Some(100), 0),  // caught up
            (1, Some(20), 30),  // 20..=49 archived, not in the table
            (2, Some(30), -19), // ahead of the archive
            (3, Some(0), 0),    // nothing archived
            (4, None, 6),       // nothing of it in the table yet: from the chain's position 0
            (5, None, 0),       // nothing archived, nothing in the table
        ];
        assert_eq!(got, want);
        let mut line = String::new();
        status.line(&mut line);
        assert_eq!(
            line,
            "table kafka.t: snapshot 7, committed 1970-01-01T00:00:00Z; positions 0@100 (lag 0) 1@20 (lag 30) \
             2@30 (AHEAD of the archive by 19) 3@0 (lag 0) 4@none (lag 6) 5@none (lag 0)\n"
        );
        let unreadable = TableStatus { error: Some("the catalog does not answer".into()), ..status };
        let mut line = String::new();
        unreadable.line(&mut line);
        assert_eq!(line, "table kafka.t: cannot be read: the catalog does not answer\n");
    }
}
