//! `restore --translate-group-offsets`: after a restore into Kafka, the consumer groups of the archived
//! topic are given their positions in the target: the latest snapshot of their committed offsets the
//! archive holds (`run --archive-group-offsets`; at or before `--at`), translated through the target's
//! records (each names its source offset in a header; `plan`), and committed for each group in the
//! target cluster: only for groups with no active member there. A dry run prints the plan and sets
//! nothing.

pub mod plan;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use self::plan::{GroupMove, ResumesAt, Translator};
use super::kafka::kafka_err;
use super::read_back::{consumer_config, read_whole, REQUEST_TIMEOUT};
use super::RestoreError;
use crate::archive::claim::Claim;
use crate::archive::group_offsets::{latest_first, GroupOffsetsSnapshot, SnapshotKey};
use crate::archive::keys::ListRequest;
use crate::archive::object_key::Prefix;
use crate::clock::wall_clock_ms;
use crate::retry::{Patience, Retrying};
use crate::source::offsets::{committed_offsets, partition_count};
use crate::store::{list_between, ObjectStore, StoreError};

/// Group states in which nobody consumes, so its offsets may be set.
const IDLE_STATES: [&str; 3] = ["Empty", "Dead", ""];

/// What to translate, and where to.
pub struct Translation<'a> {
    pub prefix: &'a Prefix,
    /// The archived topic.
    pub topic: &'a str,
    /// The latest snapshot at or before this time (milliseconds since the epoch); the latest when none.
    pub at_ms: Option<i64>,
    pub brokers: &'a str,
    pub props: &'a [(String, String)],
    pub target: &'a str,
    /// Print the plan, set nothing.
    pub dry_run: bool,
}

/// One group's move: its new positions, and its committed offsets in the target before.
pub struct GroupReport {
    pub plan: GroupMove,
    pub before: BTreeMap<i32, i64>,
}

/// What a translation found and did.
pub struct TranslationReport {
    pub snapshot: String,
    pub read_ms: i64,
    /// Records of the target read back.
    pub read: u64,
    pub groups: Vec<GroupReport>,
    pub applied: bool,
}

/// Finds the snapshot, reads the target back, plans, and (unless a dry run) sets the offsets.
pub async fn translate(store: Arc<dyn ObjectStore>, t: &Translation<'_>) -> Result<TranslationReport, RestoreError> {
    let store = Retrying::new(store, Patience::Attempts(super::READ_ATTEMPTS), None);
    let (key, snapshot) = snapshot(&store, t).await?;
    let (brokers, props, target, source) =
        (t.brokers.to_string(), t.props.to_vec(), t.target.to_string(), t.topic.to_string());
    let (groups, dry_run, snapshot_key) = (snapshot.groups.clone(), t.dry_run, key.clone());
    let (read, groups) = tokio::task::spawn_blocking(move || {
        let mut translator = Translator::new(&groups);
        let read = read_whole(&consumer_config(&brokers, &props), &target, &mut |partition, offset, origin| {
            let from = origin.filter(|(from, _)| from.topic() == source).map(|(from, o)| (from.partition(), o));
            translator.observe(partition, offset, from);
        })?;
        let plans: Vec<GroupMove> = translator.plan().into_iter().filter(|g| !g.partitions.is_empty()).collect();
        // Every group is checked before any is set (one that is busy sets none); one client at a time.
        let mut reports = Vec::new();
        for plan in plans {
            let group = Group::open(&brokers, &props, plan)?;
            if !dry_run {
                group.idle(&brokers)?;
            }
            reports.push(GroupReport { before: group.committed(&target)?, plan: group.plan });
        }
        if !dry_run {
            for report in &reports {
                Group::open(&brokers, &props, report.plan.clone())?.set(&target, &snapshot_key)?;
            }
        }
        Ok::<_, RestoreError>((read, reports))
    })
    .await
    .expect("the translation task does not panic")?;
    Ok(TranslationReport { snapshot: key, read_ms: snapshot.read_ms, read, groups, applied: !t.dry_run })
}

/// The latest snapshot of the topic's group offsets read at or before `at_ms`, of the incarnation of the
/// topic the archive holds, and its key.
async fn snapshot(
    store: &dyn ObjectStore,
    t: &Translation<'_>,
) -> Result<(String, GroupOffsetsSnapshot), RestoreError> {
    let archived_id = archived_topic_id(store, t.prefix, t.topic).await?;
    let mut other_incarnation = None;
    // The last day's, then (when none of them was read by `at_ms`, or of the archived incarnation) all.
    for recent in [true, false] {
        for key in snapshots_at(store, t.prefix, t.topic, t.at_ms, recent).await? {
            let body = store.get(&key).await?;
            let snapshot = GroupOffsetsSnapshot::from_json(&key, &body).map_err(RestoreError::Snapshot)?;
            // Named after its slot's start, it was read a little later: maybe after `at_ms`.
            if t.at_ms.is_some_and(|at| snapshot.read_ms > at) {
                continue;
            }
            if !snapshot.of_incarnation(archived_id.as_deref()) {
                other_incarnation.get_or_insert(snapshot.topic_id);
                continue;
            }
            return Ok((key, snapshot));
        }
    }
    let folder = SnapshotKey::folder(t.prefix, t.topic);
    Err(match (other_incarnation, archived_id) {
        (Some(theirs), Some(archived)) => RestoreError::SnapshotOfAnotherIncarnation {
            topic: t.topic.to_string(),
            theirs: theirs.unwrap_or_default(),
            archived,
        },
        _ => RestoreError::NoSnapshot { topic: t.topic.to_string(), folder, at_ms: t.at_ms },
    })
}

/// The topic ID the archive's claims record for `topic` (one chain holds one incarnation of a topic:
/// any claim tells it), if they record one.
async fn archived_topic_id(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
) -> Result<Option<String>, RestoreError> {
    let request = ListRequest { prefix: prefix.claims_topic_folder(topic), start_after: None };
    let Some(key) = store.list(&request, 1).await?.keys.into_iter().next() else { return Ok(None) };
    let body = store.get(&key).await?;
    Ok(Claim::from_json(&key, &body).ok().and_then(|claim| claim.topic_id))
}

/// How far before the time asked for the listing of snapshots starts (they are kept every minute or so:
/// a day of them is a couple of listing requests); the whole folder is listed when none is that recent.
const RECENT_SNAPSHOTS: i64 = 24 * 3600 * 1000;

/// The keys of `topic`'s snapshots of group offsets taken at or before `at_ms` (any time when none), the
/// latest first: `recent`, those of the day before it; else all of them.
pub async fn snapshots_at(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    at_ms: Option<i64>,
    recent: bool,
) -> Result<Vec<String>, StoreError> {
    let key_at = |ms: i64| SnapshotKey { topic: topic.to_string(), taken_ms: ms }.to_key(prefix);
    let start_after = recent.then(|| key_at(at_ms.unwrap_or_else(wall_clock_ms) - RECENT_SNAPSHOTS));
    let request = ListRequest { prefix: SnapshotKey::folder(prefix, topic), start_after };
    let (listed, _) = list_between(store, request, at_ms.map(key_at).as_deref()).await?;
    let keys = latest_first(listed.iter().filter_map(|k| SnapshotKey::parse(prefix, k)), at_ms);
    Ok(keys.iter().map(|k| k.to_key(prefix)).collect())
}

/// A consumer group of the target cluster and its plan, as a client that never joins it.
struct Group {
    plan: GroupMove,
    consumer: BaseConsumer,
}

impl Group {
    fn open(brokers: &str, props: &[(String, String)], plan: GroupMove) -> Result<Self, RestoreError> {
        let mut config = consumer_config(brokers, props);
        config.set("group.id", &plan.group);
        let consumer = config.create().map_err(kafka_err("creating a client of a group"))?;
        Ok(Self { plan, consumer })
    }

    /// Its committed offsets on `topic`.
    fn committed(&self, topic: &str) -> Result<BTreeMap<i32, i64>, RestoreError> {
        let mut tpl = TopicPartitionList::new();
        for p in
            0..partition_count(self.consumer.client(), topic).map_err(kafka_err("reading the target's metadata"))?
        {
            tpl.add_partition(topic, p);
        }
        let committed =
            committed_offsets(&self.consumer, tpl).map_err(kafka_err("reading a group's committed offsets"))?;
        Ok(committed.into_iter().map(|(_, partition, offset)| (partition, offset)).collect())
    }

    /// Whether nobody consumes in the group now: its offsets may be set.
    fn idle(&self, brokers: &str) -> Result<(), RestoreError> {
        let groups = self
            .consumer
            .fetch_group_list(Some(&self.plan.group), REQUEST_TIMEOUT)
            .map_err(kafka_err("describing a group"))?;
        match groups.groups().iter().find(|g| !IDLE_STATES.contains(&g.state())) {
            None => Ok(()),
            Some(busy) => Err(RestoreError::GroupActive {
                group: self.plan.group.clone(),
                state: busy.state().to_string(),
                members: busy.members().len(),
                brokers: brokers.to_string(),
            }),
        }
    }

    /// Commits the plan's offsets, with metadata naming the snapshot.
    fn set(&self, topic: &str, snapshot: &str) -> Result<(), RestoreError> {
        let mut tpl = TopicPartitionList::new();
        for m in &self.plan.partitions {
            let mut elem = tpl.add_partition(topic, m.target_partition);
            elem.set_offset(Offset::Offset(m.offset)).map_err(kafka_err("setting a group's offset"))?;
            elem.set_metadata(format!("kafka-s3-archiver: translated from {snapshot}"));
        }
        self.consumer.commit(&tpl, CommitMode::Sync).map_err(kafka_err("committing a group's offsets"))
    }
}

impl TranslationReport {
    /// The plan, a line per group and partition, as `restore` prints it.
    pub fn render(&self, source: &str, target: &str) -> String {
        let read = crate::clock::rfc3339(self.read_ms);
        let mut out = format!(
            "group offsets of {source} from {} (read {read}), translated through {} records of {target}:\n",
            self.snapshot, self.read
        );
        if self.groups.is_empty() {
            out.push_str("  no group of the snapshot has a record restored in the target: nothing to set\n");
        }
        for g in &self.groups {
            for m in &g.plan.partitions {
                let before = g.before.get(&m.target_partition).map_or("-".to_string(), i64::to_string);
                let why = match m.resumes_at {
                    ResumesAt::Restored(p, o) => format!("resumes at the record restored from {source}/{p}@{o}"),
                    ResumesAt::Other => "resumes at a record it never saw: another producer's, or restored from \
                                         a partition it had no offset on"
                        .to_string(),
                    ResumesAt::AfterLast => "after the last record: it had consumed all of them".to_string(),
                };
                let again = match m.again {
                    0 => String::new(),
                    n => format!("; it reads {n} records again that it had consumed"),
                };
                let _ = writeln!(
                    out,
                    "  {} {target}/{}: {before} -> {} ({why}{again})",
                    g.plan.group, m.target_partition, m.offset
                );
            }
        }
        out.push_str(if self.applied {
            "offsets set\n"
        } else {
            "dry run: nothing set (run again without --dry-run to set them)\n"
        });
        out
    }
}
