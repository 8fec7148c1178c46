//! Reading the target back at the start of a restore into Kafka, to learn which source offsets it
//! holds (each restored record names its source in a header): from where the last complete run's
//! summary says each partition ended, else from the beginning; and leaving a complete run's summary
//! (`summary`) as the read-back group's committed offsets and their metadata.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::bindings as rd;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use tracing::{info, warn};

use super::kafka::kafka_err;
use super::{summary, RestoreError};
use crate::archive::partition::TopicPartition;
use crate::commands::restore::plan::{parse_source_header, RestoreProgress, SOURCE_HEADER};
use crate::source::offsets::partition_count;

/// How long reading the target back may go without a record or reaching a partition's end before
/// restore gives up (a partition without a leader, a broker that stopped answering).
const READ_BACK_PATIENCE: Duration = Duration::from_secs(120);
/// How long a target partition may lack a leader (a topic created moments ago) before restore gives up.
const LEADER_PATIENCE: Duration = Duration::from_secs(30);
/// The group whose committed offsets in the target cluster hold the summaries of complete restores.
const READ_BACK_GROUP: &str = "kafka-s3-archiver-restore-read-back";
/// How long the brokers may take to answer a request about the target.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// What the target held when the restore started.
#[derive(Debug, Default)]
pub(super) struct ReadBack {
    /// The source offsets it holds.
    pub(super) progress: RestoreProgress,
    /// Its records read back.
    pub(super) read: u64,
    /// Where each partition ended (its high watermark).
    pub(super) highs: Vec<i64>,
}

/// The settings of a consumer of the target in the read-back group (never a member: it assigns).
pub(super) fn consumer_config(brokers: &str, props: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in props {
        config.set(k, v);
    }
    config
        .set("group.id", READ_BACK_GROUP)
        .set("enable.auto.commit", "false")
        // The end of a partition is told, also when its last offsets hold no record to deliver
        // (transaction markers); uncommitted records are read too (restores write none).
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_uncommitted")
        // A summary's end that retention has deleted since: from the first record there is.
        .set("auto.offset.reset", "earliest");
    config
}

/// Reads the target back, up to where each partition ended when the restore started, and collects the
/// source offsets earlier restores delivered (their headers): from where the last complete run's
/// summary ends (`topic_id` given: the summary must be of that topic), else from the beginning. Records
/// produced to the target after the start are not this restore's (a live topic keeps being written
/// to). A summary counts also where the target no longer holds what it lists (deleted by retention,
/// compaction or on purpose since): a record once delivered is not delivered again.
pub(super) fn read_back(
    config: &ClientConfig,
    topic: &str,
    partitions: i32,
    topic_id: Option<&str>,
) -> Result<ReadBack, RestoreError> {
    let consumer: BaseConsumer = config.create().map_err(kafka_err("creating the read-back consumer"))?;
    let mut marks = Vec::new();
    for p in 0..partitions {
        marks.push(
            until_led(LEADER_PATIENCE, Duration::from_millis(200), || {
                consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            })
            .map_err(kafka_err("reading the target's offsets"))?,
        );
    }
    let (mut progress, starts) = match topic_id.map(|id| from_summary(&consumer, topic, &marks, id)) {
        Some(Ok((progress, ends))) => {
            info!(topic, "read back only what the target received after the last complete restore's summary");
            (progress, ends.into_iter().map(Offset::Offset).collect())
        }
        Some(Err(why)) => {
            if marks.iter().any(|(low, high)| high > low) {
                info!(topic, why, "no summary of a complete restore to start from: reading the whole target back");
            }
            (RestoreProgress::default(), vec![Offset::Beginning; marks.len()])
        }
        None => (RestoreProgress::default(), vec![Offset::Beginning; marks.len()]),
    };
    let mut ends = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for ((p, (low, high)), start) in (0..).zip(&marks).zip(starts) {
        let from = match start {
            Offset::Offset(end) => end.max(*low),
            _ => *low,
        };
        if *high > from {
            ends.insert(p, *high);
            tpl.add_partition_offset(topic, p, start).map_err(kafka_err("assigning the target"))?;
        }
    }
    let read = read_until(&consumer, topic, &tpl, ends, &mut |_, _, origin| {
        if let Some((source, offset)) = origin {
            progress.delivered(&source, offset);
        }
    })?;
    if read > 0 {
        info!(topic, records = read, "read the target back to skip what an earlier restore wrote");
    }
    if progress.holes() > 0 {
        warn!(
            topic,
            holes = progress.holes(),
            "an earlier restore failed and left holes in what it wrote (messages that timed out or were refused): \
             they are written now, after what it wrote, so each record is in the target once, but these are not in \
             their original order"
        );
    }
    Ok(ReadBack { progress, read, highs: marks.into_iter().map(|(_, high)| high).collect() })
}

/// Every record of the target up to where each partition ends now, in each partition's offset order:
/// `visit` is given its partition, offset and source (its header's, if any); how many were read.
pub(super) fn read_whole(config: &ClientConfig, topic: &str, visit: &mut Visit<'_>) -> Result<u64, RestoreError> {
    let consumer: BaseConsumer = config.create().map_err(kafka_err("creating the read-back consumer"))?;
    let partitions = partition_count(consumer.client(), topic).map_err(kafka_err("reading the target's metadata"))?;
    let (mut ends, mut tpl) = (BTreeMap::new(), TopicPartitionList::new());
    for p in 0..partitions {
        let (low, high) = until_led(LEADER_PATIENCE, Duration::from_millis(200), || {
            consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)
        })
        .map_err(kafka_err("reading the target's offsets"))?;
        if high > low {
            ends.insert(p, high);
            tpl.add_partition_offset(topic, p, Offset::Beginning).map_err(kafka_err("assigning the target"))?;
        }
    }
    read_until(&consumer, topic, &tpl, ends, visit)
}

/// What reading the target back does with each record: its partition, offset and source.
pub(super) type Visit<'a> = dyn FnMut(i32, i64, Option<(TopicPartition, i64)>) + 'a;

/// Reads the partitions of `tpl` from their offsets up to their `ends`, giving each record to `visit`;
/// how many records were read.
fn read_until(
    consumer: &BaseConsumer,
    topic: &str,
    tpl: &TopicPartitionList,
    mut ends: BTreeMap<i32, i64>,
    visit: &mut Visit<'_>,
) -> Result<u64, RestoreError> {
    if ends.is_empty() {
        return Ok(0);
    }
    consumer.assign(tpl).map_err(kafka_err("assigning the target"))?;
    let mut last_progress = Instant::now();
    let mut read = 0u64;
    while !ends.is_empty() {
        let done = match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(msg)) => {
                read += 1;
                let headers = msg.headers().map(crate::source::headers::read).unwrap_or_default();
                // The last: a record restored, archived again and restored again carries one per restore.
                let origin =
                    headers.iter().rfind(|h| h.key == SOURCE_HEADER.as_bytes()).and_then(|h| h.value.as_deref());
                visit(msg.partition(), msg.offset(), origin.and_then(parse_source_header));
                Some(msg.partition()).filter(|p| ends.get(p).is_some_and(|end| msg.offset() + 1 >= *end))
            }
            // At the partition's end now, so past where it ended at the start.
            Some(Err(KafkaError::PartitionEOF(p))) => Some(p),
            Some(Err(e)) => return Err(RestoreError::Kafka { what: "reading the target back", source: e }),
            None if last_progress.elapsed() > READ_BACK_PATIENCE => {
                return Err(RestoreError::ReadBackStalled { topic: topic.to_string(), waited: READ_BACK_PATIENCE })
            }
            None => continue,
        };
        last_progress = Instant::now();
        if let Some(p) = done.filter(|p| ends.remove(p).is_some()) {
            let mut finished = TopicPartitionList::new();
            finished.add_partition(topic, p);
            // Nothing more of it is needed: records produced to it since are not ours to skip.
            let _ = consumer.pause(&finished);
        }
    }
    Ok(read)
}

/// The last complete restore's summary of what the target holds, and where each partition ended then;
/// else why there is none to use.
fn from_summary(
    consumer: &BaseConsumer,
    topic: &str,
    marks: &[(i64, i64)],
    topic_id: &str,
) -> Result<(RestoreProgress, Vec<i64>), String> {
    let mut tpl = TopicPartitionList::new();
    for p in 0..marks.len() as i32 {
        tpl.add_partition(topic, p);
    }
    let committed = consumer.committed_offsets(tpl, REQUEST_TIMEOUT).map_err(|e| format!("asking for it: {e}"))?;
    let metadata = committed_metadata(&committed);
    let (mut chunks, mut ends) = (Vec::new(), Vec::new());
    for (p, (_, high)) in (0..).zip(marks) {
        let Some((Offset::Offset(end), chunk)) = metadata.get(&p) else {
            return Err(format!("partition {p} holds none"));
        };
        if end > high {
            return Err(format!(
                "partition {p} ends at {high}, before the summary's {end} (created again or truncated)"
            ));
        }
        chunks.push(chunk.clone().ok_or_else(|| format!("partition {p}'s metadata is not text"))?);
        ends.push(*end);
    }
    let progress = summary::decode(&chunks.iter().map(String::as_str).collect::<Vec<_>>(), topic_id)?;
    Ok((progress, ends))
}

/// Each partition's committed offset and metadata (none when its bytes are not UTF-8: rdkafka's own
/// accessor would panic on them).
fn committed_metadata(list: &TopicPartitionList) -> BTreeMap<i32, (Offset, Option<String>)> {
    // SAFETY: `list` owns its librdkafka list for this call; `elems` points at `cnt` elements, each with
    // `metadata` null or pointing at `metadata_size` bytes the list owns. Nothing is kept past the call.
    let elems: &[rd::rd_kafka_topic_partition_t] = unsafe {
        let raw = &*list.ptr();
        match raw.elems.is_null() {
            true => &[],
            false => std::slice::from_raw_parts(raw.elems, raw.cnt.max(0) as usize),
        }
    };
    elems
        .iter()
        .map(|e| {
            let bytes: &[u8] = match e.metadata.is_null() {
                true => &[],
                // SAFETY: see above.
                false => unsafe { std::slice::from_raw_parts(e.metadata as *const u8, e.metadata_size) },
            };
            let offset = match e.offset {
                o if o >= 0 => Offset::Offset(o),
                _ => Offset::Invalid,
            };
            (e.partition, (offset, String::from_utf8(bytes.to_vec()).ok()))
        })
        .collect()
}

/// Commits the summary of `held` (what the target holds, all of it delivered): each partition's end is
/// where it ends now, unless something besides this run's deliveries (`delivered`, per partition) was
/// written to it since the run started at `starts` — another restore's records, say, which the summary
/// does not list — then where it ended at the start. False when the summary does not fit.
pub(super) fn commit_summary(
    config: &ClientConfig,
    topic: &str,
    topic_id: &str,
    held: &RestoreProgress,
    starts: &[i64],
    delivered: &BTreeMap<i32, u64>,
) -> Result<bool, KafkaError> {
    let consumer: BaseConsumer = config.create()?;
    let nonce = format!("{:016x}", fastrand::u64(..));
    let Some(chunks) = summary::encode(held, topic_id, &nonce, starts.len()) else { return Ok(false) };
    let mut tpl = TopicPartitionList::new();
    for ((p, chunk), start) in (0..).zip(chunks).zip(starts) {
        // Every record this run delivered is below its partition's end now (acknowledged by all replicas).
        let (_, high) = consumer.fetch_watermarks(topic, p, REQUEST_TIMEOUT)?;
        let delivered = delivered.get(&p).copied().unwrap_or(0);
        let end = summary::end(*start, high, delivered);
        if end != high {
            info!(
                topic,
                partition = p,
                added = high - start,
                delivered,
                "others wrote to this partition during the restore: a next run reads it back from where this one started"
            );
        }
        let mut elem = tpl.add_partition(topic, p);
        elem.set_offset(Offset::Offset(end))?;
        elem.set_metadata(chunk);
    }
    consumer.commit(&tpl, CommitMode::Sync)?;
    Ok(true)
}

/// Whether `e` says a partition has no leader yet (a topic created moments ago, or a leader moving).
fn leaderless(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::NotLeaderForPartition
                | RDKafkaErrorCode::LeaderNotAvailable
                | RDKafkaErrorCode::UnknownTopicOrPartition
        )
    )
}

/// Runs `op` until it succeeds, fails otherwise than for a missing leader, or `patience` has passed.
fn until_led<T>(
    patience: Duration,
    pause: Duration,
    mut op: impl FnMut() -> Result<T, KafkaError>,
) -> Result<T, KafkaError> {
    let started = Instant::now();
    loop {
        match op() {
            Err(e) if leaderless(&e) && started.elapsed() < patience => std::thread::sleep(pause),
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata_error(code: RDKafkaErrorCode) -> KafkaError {
        KafkaError::MetadataFetch(code)
    }

    #[test]
    fn a_missing_leader_is_waited_for_other_errors_are_not() {
        let mut calls = 0;
        let answer = until_led(Duration::from_secs(5), Duration::ZERO, || {
            calls += 1;
            if calls < 4 {
                Err(metadata_error(RDKafkaErrorCode::NotLeaderForPartition))
            } else {
                Ok((0, 10))
            }
        });
        assert_eq!((answer.unwrap(), calls), ((0, 10), 4));

        let mut calls = 0;
        let answer: Result<(), _> = until_led(Duration::from_secs(5), Duration::ZERO, || {
            calls += 1;
            Err(metadata_error(RDKafkaErrorCode::TopicAuthorizationFailed))
        });
        assert!(answer.is_err());
        assert_eq!(calls, 1, "an authorization error is not retried");

        let answer: Result<(), _> = until_led(Duration::from_millis(30), Duration::from_millis(5), || {
            Err(metadata_error(RDKafkaErrorCode::LeaderNotAvailable))
        });
        assert!(answer.is_err(), "gives up after its patience");
    }
}
