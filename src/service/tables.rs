//! The table committer (`--table iceberg`): every commit interval (sooner when many files wait, and
//! once after start and after partitions come, so what a crashed owner left uncommitted is repaired),
//! each topic with a table has its partitions held here committed: the durable objects its table does
//! not hold yet are added in one snapshot. A failed commit is tried again at the next interval;
//! nothing is lost meanwhile, the archive being the source of truth.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::clock::wall_clock_ms;
use crate::config::TableConfig;
use crate::pipeline::{AssignedTopics, TopicProfiles};
use crate::table::committer::{Committer, TopicTable};
use crate::telemetry::events::TableCommit;
use crate::telemetry::{Event, Metrics};

/// How often the committer looks whether a commit is due.
const TICK: Duration = Duration::from_millis(500);

pub struct TableOptions {
    pub config: TableConfig,
    pub profiles: Arc<TopicProfiles>,
    pub assigned: AssignedTopics,
}

/// Commits until `stop` says the pipeline has finished (every file uploaded), then once more for every
/// partition held since start, so a graceful stop leaves nothing uncommitted; or until aborted.
pub async fn run(committer: Committer, options: TableOptions, metrics: Arc<Metrics>, mut stop: watch::Receiver<bool>) {
    let started = Instant::now();
    let mut last: Option<Instant> = None;
    let (mut uploaded, mut assignments) = (0, 0);
    // Nothing is known to wait at start: what an earlier run left is looked for once.
    let mut pending = true;
    // A commit took as many files as one may: more wait, and the next commit is due at once.
    let mut backlog = false;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = stop.changed() => {
                // The last commits: their positions are shown whether the partitions are held now or not.
                let held = options.assigned.held_since_start();
                while commit_all(&committer, &options, &metrics, &held, false).await.full {}
                return;
            }
        }
        let (now_uploaded, now_assignments) = (metrics.objects_uploaded.get(), options.assigned.assignments());
        pending |= now_assignments != assignments;
        let backlog_files = if backlog { options.config.cadence.max_files } else { 0 };
        let waiting = (now_uploaded - uploaded) as usize + usize::from(pending) + backlog_files;
        if !options.config.cadence.due(waiting, last, started, Instant::now()) {
            continue;
        }
        last = Some(Instant::now());
        (uploaded, assignments) = (now_uploaded, now_assignments);
        let outcome = commit_all(&committer, &options, &metrics, &options.assigned.held_now(), true).await;
        (pending, backlog) = (!outcome.ok || outcome.full, outcome.full);
    }
}

/// How a round of commits went.
struct Round {
    /// Every commit succeeded.
    ok: bool,
    /// A commit took as many files as one may (more may wait).
    full: bool,
}

/// Commits every topic with a table; `held_only`: the positions shown (`ksa_table_position`) are only
/// those of partitions still held once the commit is done (a partition revoked meanwhile has had its
/// series removed, which a late commit must not bring back).
async fn commit_all(
    committer: &Committer,
    options: &TableOptions,
    metrics: &Metrics,
    held: &BTreeMap<String, BTreeSet<i32>>,
    held_only: bool,
) -> Round {
    let (mut all, mut full) = (true, false);
    for (topic, partitions) in held {
        let profile = options.profiles.for_topic(topic);
        let partitions: Vec<i32> = partitions.iter().copied().collect();
        if !profile.table || partitions.is_empty() {
            continue;
        }
        let table = TopicTable::new(&options.config.catalog.namespace, topic, profile.bucketing.map(|b| b.width));
        let outcome = committer.commit(&table, &partitions, wall_clock_ms()).await;
        let name = table.ident.to_string();
        match outcome {
            Ok(r) => {
                full |= r.files >= committer.max_files;
                for (p, why) in &r.failed {
                    all = false;
                    let why = format!("partition {p}: {why}");
                    metrics.emit(Event::TableCommitted { topic, table: &name, outcome: Err(&why) });
                }
                let mut positions = r.held;
                if held_only {
                    let now = options.assigned.held_now();
                    positions.retain(|p, _| now.get(topic).is_some_and(|held| held.contains(p)));
                }
                let commit = TableCommit {
                    files: r.files,
                    records: r.records,
                    snapshot_id: r.snapshot_id,
                    conflicts: r.conflicts,
                    positions: &positions,
                };
                metrics.emit(Event::TableCommitted { topic, table: &name, outcome: Ok(commit) });
            }
            Err(e) => {
                all = false;
                metrics.emit(Event::TableCommitted { topic, table: &name, outcome: Err(&e.to_string()) });
            }
        }
    }
    Round { ok: all, full }
}
