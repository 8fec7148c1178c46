//! `--archive-group-offsets`: at every multiple of the interval, the committed offsets of the consumer
//! groups whose name matches are read for each archived topic and put into the archive as one small
//! object per topic (`archive::group_offsets`), if absent: every instance of the archive does it, the
//! first one's put lands and the others' meet a 412. After an incident, `restore
//! --translate-group-offsets` gives those groups their positions in the restored topic.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::topic_partition_list::TopicPartitionList;
use regex_automata::meta::Regex;

use crate::archive::group_offsets::{GroupOffsetsSnapshot, SnapshotKey};
use crate::archive::object_key::Prefix;
use crate::clock::wall_clock_ms;
use crate::encode::spool::SpoolData;
use crate::pipeline::AssignedTopics;
use crate::source::offsets::{committed_offsets, partition_count};
use crate::source::probe::probe_config;
use crate::source::topic_id::topic_ids;
use crate::store::{ObjectStore, PutOutcome};
use crate::telemetry::{Event, Metrics};

/// How long one request for the groups, a topic's partitions or a group's offsets may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

pub struct GroupOffsetsOptions {
    pub prefix: Prefix,
    /// The topics named in the subscription; those a regex matches are learnt from the assignments.
    pub topics: Vec<String>,
    pub assigned: AssignedTopics,
    pub brokers: String,
    pub kafka_props: Vec<(String, String)>,
    /// The archivers' own group: never kept (its offsets are hints of the archive's own position).
    pub own_group: String,
    /// Matches the whole names of the groups to keep.
    pub groups: Regex,
    pub interval: Duration,
    pub writer_id: String,
}

/// Per topic, per group, per partition: the committed offset.
type Committed = BTreeMap<String, BTreeMap<String, BTreeMap<i32, i64>>>;

/// Takes a snapshot at every multiple of the interval, until the task is aborted.
pub async fn run(store: Arc<dyn ObjectStore>, settings: GroupOffsetsOptions, metrics: Arc<Metrics>) {
    let settings = Arc::new(settings);
    let interval_ms = settings.interval.as_millis() as i64;
    loop {
        let now = wall_clock_ms();
        tokio::time::sleep(Duration::from_millis((interval_ms - now.rem_euclid(interval_ms)) as u64)).await;
        let slot_ms = wall_clock_ms();
        let mut topics = settings.topics.clone();
        topics.extend(settings.assigned.snapshot());
        topics.sort();
        topics.dedup();
        let (s, names) = (settings.clone(), topics.clone());
        let read = tokio::task::spawn_blocking(move || read(&s, &names))
            .await
            .expect("reading the groups' offsets does not panic");
        let read_ms = wall_clock_ms();
        let (committed, topic_ids) = match read {
            Ok(Read { committed, topic_ids, failures, groups_missing }) => {
                for why in &failures {
                    metrics.emit(Event::GroupOffsetsKept { topic: "-", groups: 0, outcome: Err(why) });
                }
                if groups_missing {
                    continue; // Never a snapshot without a group that matches: the slot has none.
                }
                (committed, topic_ids)
            }
            Err(e) => {
                let why = format!("listing the consumer groups: {e}");
                metrics.emit(Event::GroupOffsetsKept { topic: "-", groups: 0, outcome: Err(&why) });
                continue;
            }
        };
        for (topic, groups) in &committed {
            let snapshot = GroupOffsetsSnapshot {
                topic: topic.clone(),
                read_ms,
                writer: settings.writer_id.clone(),
                topic_id: topic_ids.get(topic).cloned(),
                groups: groups.clone(),
            };
            let outcome = put(store.as_ref(), &settings, &snapshot, slot_ms).await;
            let outcome = outcome.as_ref().copied().map_err(String::as_str);
            metrics.emit(Event::GroupOffsetsKept { topic, groups: groups.len(), outcome });
        }
    }
}

/// Puts one topic's snapshot of the slot, if absent; whether it was created.
async fn put(
    store: &dyn ObjectStore,
    s: &GroupOffsetsOptions,
    snapshot: &GroupOffsetsSnapshot,
    slot_ms: i64,
) -> Result<bool, String> {
    let key = SnapshotKey::slot(&snapshot.topic, slot_ms, s.interval.as_millis() as i64).to_key(&s.prefix);
    let body = Bytes::from(snapshot.to_json());
    let len = body.len() as u64;
    match store.put_if_absent(&key, &SpoolData::memory(body), len).await {
        Ok(outcome) => Ok(outcome == PutOutcome::Created),
        Err(e) => Err(format!("putting {key}: {e}")),
    }
}

/// The matching groups' committed offsets on the topics that have any, the topics' IDs the brokers
/// told, and what could not be read: a topic whose partitions are unknown gets no snapshot in this slot;
/// a group whose offsets are, none does (a snapshot without it would win the slot over a whole one).
struct Read {
    committed: Committed,
    topic_ids: BTreeMap<String, String>,
    failures: Vec<String>,
    /// A matching group's offsets could not be read (or were not within the interval).
    groups_missing: bool,
}

/// Reads the matching groups' committed offsets on `topics`, each group through a client of its own that
/// never joins it (created for the read and dropped after: a few groups or hundreds, nothing stays).
/// Blocks.
fn read(s: &GroupOffsetsOptions, topics: &[String]) -> Result<Read, KafkaError> {
    // A consumer that joins no group; as one of a group (`group.id`) it reads the group's offsets.
    let config = probe_config(&s.brokers, &s.kafka_props);
    let lister: BaseConsumer = config.create()?;
    let names = matching_groups(&lister, &s.groups, &s.own_group)?;
    let mut failures = Vec::new();
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        match partition_count(lister.client(), topic) {
            Ok(partitions) => {
                for p in 0..partitions {
                    tpl.add_partition(topic, p);
                }
            }
            Err(e) => failures.push(format!("reading the partitions of {topic}: {e}")),
        }
    }
    let (mut committed, mut groups_missing) = (Committed::new(), false);
    // A slot's read ends within the interval (the next slot reads again), and so does a stop's wait for it.
    let deadline = Instant::now() + s.interval;
    for (read, name) in names.iter().enumerate() {
        if Instant::now() > deadline {
            failures.push(format!("{} groups not read within the interval of {:?}", names.len() - read, s.interval));
            groups_missing = true;
            break;
        }
        let offsets = config
            .clone()
            .set("group.id", name)
            .create::<BaseConsumer>()
            .and_then(|client| committed_offsets(&client, tpl.clone()));
        match offsets {
            Ok(offsets) => {
                for (topic, partition, offset) in offsets {
                    committed.entry(topic).or_default().entry(name.clone()).or_default().insert(partition, offset);
                }
            }
            Err(e) => {
                failures.push(format!("reading the committed offsets of group {name}: {e}"));
                groups_missing = true;
            }
        }
    }
    let topic_ids =
        if topics.is_empty() { Ok(BTreeMap::new()) } else { topic_ids(lister.client(), topics, REQUEST_TIMEOUT) };
    let topic_ids = match topic_ids {
        Ok(ids) => ids.into_iter().filter_map(|(topic, id)| Some((topic, id.id()?.to_string()))).collect(),
        Err(e) => {
            failures.push(format!("reading the topics' IDs (the snapshots go without): {e}"));
            BTreeMap::new()
        }
    };
    Ok(Read { committed, topic_ids, failures, groups_missing })
}

/// The names of the groups the brokers know whose whole name matches `groups`, but `own_group`, sorted.
fn matching_groups(client: &BaseConsumer, groups: &Regex, own_group: &str) -> Result<Vec<String>, KafkaError> {
    let listed = client.fetch_group_list(None, REQUEST_TIMEOUT)?;
    let mut names: Vec<String> = listed
        .groups()
        .iter()
        .map(|g| g.name().to_string())
        .filter(|name| name != own_group && groups.is_match(name))
        .collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// `run --check`: the groups can be listed; how many match now. Blocks.
pub fn check(brokers: &str, props: &[(String, String)], groups: &Regex, own_group: &str) -> Result<usize, KafkaError> {
    let lister: BaseConsumer = probe_config(brokers, props).create()?;
    Ok(matching_groups(&lister, groups, own_group)?.len())
}
