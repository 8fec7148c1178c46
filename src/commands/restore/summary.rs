//! What a restore into Kafka leaves in the target cluster for the next run into the same topic: every
//! source offset the target holds below where each target partition ended once the run was done (its
//! records all delivered), as the metadata of the offsets the read-back group commits there — the end
//! of each target partition, and a chunk of the summary each (Kafka keeps `offset.metadata.max.bytes`,
//! 4096 by default, per partition). A re-run reads back only what the target received after those ends
//! (records produced since, a failed run's), not the whole topic.
//!
//! A summary is used only whole and only for the topic it was made for: every partition's chunk of one
//! summary (the same nonce, each chunk once), the same topic ID, and no partition now ending before its
//! recorded end (a topic deleted and created again, or truncated). Anything else: the whole target is read
//! back, as without a summary.

use super::plan::RestoreProgress;
use crate::archive::partition::TopicPartition;

/// The first word of each chunk: the summary's format.
const VERSION: &str = "ksa-restore-1";
/// The most bytes of one partition's chunk (below Kafka's default 4096).
pub const CHUNK_BYTES: usize = 3800;

/// A summary's chunks, one per target partition in partition order: the topic's ID (`-` when the
/// brokers have none), the run's nonce, then the source offsets the target holds as
/// `topic/partition/first-last` runs. None when they need more than `partitions` chunks.
pub fn encode(progress: &RestoreProgress, topic_id: &str, nonce: &str, partitions: usize) -> Option<Vec<String>> {
    let header = |i: usize| format!("{VERSION} {topic_id} {nonce} {i}/{partitions}");
    let mut chunks = vec![header(0)];
    for (tp, first, last) in progress.runs() {
        let run = format!(" {}/{}/{first}-{last}", tp.topic(), tp.partition());
        if chunks.last().expect("a chunk").len() + run.len() > CHUNK_BYTES {
            chunks.push(header(chunks.len()));
        }
        chunks.last_mut().expect("a chunk").push_str(&run);
    }
    if chunks.len() > partitions {
        return None;
    }
    chunks.extend((chunks.len()..partitions).map(header));
    Some(chunks)
}

/// The source offsets a summary says the target holds, from its chunks (each partition's committed
/// metadata, in partition order) for the topic whose ID is `topic_id`; else why it cannot be used.
pub fn decode(chunks: &[&str], topic_id: &str) -> Result<RestoreProgress, String> {
    let mut progress = RestoreProgress::default();
    let mut nonce = None;
    for (i, chunk) in chunks.iter().enumerate() {
        let mut words = chunk.split(' ');
        if words.next() != Some(VERSION) {
            return Err(format!("partition {i} holds no summary of a restore"));
        }
        if words.next() != Some(topic_id) {
            return Err(format!("partition {i}'s summary is of another topic ID (the topic was created again)"));
        }
        let this = words.next();
        if *nonce.get_or_insert(this) != this {
            return Err(format!("partition {i}'s summary is of another run"));
        }
        if words.next() != Some(format!("{i}/{}", chunks.len()).as_str()) {
            return Err(format!(
                "partition {i}'s summary is not chunk {i} of {} (partitions were added?)",
                chunks.len()
            ));
        }
        for run in words {
            let (tp, first, last) = parse_run(run).ok_or_else(|| format!("partition {i}'s summary has {run:?}"))?;
            progress.delivered_run(&tp, first, last);
        }
    }
    Ok(progress)
}

/// Where a summary says a partition ends: where it ends now (`high`), when the run that leaves the
/// summary is the only writer since it started at `start` (it delivered `delivered` records there, each
/// once: the producer is idempotent); else where it ended at the start, as records another writer added
/// since may be ones the summary does not list (another restore's). A reader of the summary then reads
/// that partition back from there.
pub fn end(start: i64, high: i64, delivered: u64) -> i64 {
    match u64::try_from(high - start) {
        Ok(added) if added == delivered => high,
        _ => start,
    }
}

fn parse_run(run: &str) -> Option<(TopicPartition, i64, i64)> {
    let (rest, span) = run.rsplit_once('/')?;
    let (topic, partition) = rest.rsplit_once('/')?;
    let (first, last) = span.split_once('-')?;
    let (first, last): (i64, i64) = (first.parse().ok()?, last.parse().ok()?);
    let tp = TopicPartition::new(topic, partition.parse().ok()?).ok()?;
    Some((tp, first, last)).filter(|_| 0 <= first && first <= last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(runs: &[(&str, i32, i64, i64)]) -> RestoreProgress {
        let mut p = RestoreProgress::default();
        for (topic, partition, first, last) in runs {
            p.delivered_run(&TopicPartition::new(*topic, *partition).unwrap(), *first, *last);
        }
        p
    }

    fn decoded(chunks: &[String], id: &str) -> Result<RestoreProgress, String> {
        decode(&chunks.iter().map(String::as_str).collect::<Vec<_>>(), id)
    }

    #[test]
    fn a_summary_reads_back_as_the_offsets_it_was_made_of() {
        let held = progress(&[("orders", 0, 0, 999), ("orders", 0, 1500, 1700), ("orders.v2", 3, 10, 10)]);
        let chunks = encode(&held, "AbC-1", "n1", 3).unwrap();
        assert_eq!(chunks.len(), 3, "a chunk per partition, the last ones only their header");
        assert_eq!(chunks[2], "ksa-restore-1 AbC-1 n1 2/3");
        assert_eq!(decoded(&chunks, "AbC-1"), Ok(held));
        assert_eq!(decoded(&encode(&RestoreProgress::default(), "-", "n", 1).unwrap(), "-"), Ok(Default::default()));
    }

    #[test]
    fn a_large_summary_spreads_over_partitions_and_one_too_large_is_not_made() {
        let many: Vec<(&str, i32, i64, i64)> = (0..300).map(|p| ("a-long-topic-name", p, 0, 1_000_000)).collect();
        let held = progress(&many);
        let chunks = encode(&held, "-", "n", 10).unwrap();
        assert!(chunks.iter().all(|c| c.len() <= CHUNK_BYTES) && chunks[1].len() > 1000, "{chunks:?}");
        assert_eq!(decoded(&chunks, "-"), Ok(held.clone()));
        assert_eq!(encode(&held, "-", "n", 2), None);
    }

    #[test]
    fn a_partition_another_writer_wrote_to_ends_where_the_run_started() {
        assert_eq!(end(100, 150, 50), 150, "only this run's 50 records since");
        assert_eq!(end(100, 160, 50), 100, "ten records of another writer: read back from the start");
        assert_eq!(end(100, 100, 0), 100);
        assert_eq!(end(100, 99, 0), 100, "truncated since: the start, which a reader then checks");
    }

    #[test]
    fn only_a_whole_summary_of_one_run_for_the_same_topic_is_used() {
        let held = progress(&[("t", 0, 0, 9), ("t", 1, 0, 9)]);
        let chunks = encode(&held, "ID", "n1", 2).unwrap();
        assert!(decoded(&chunks, "OTHER").unwrap_err().contains("another topic ID"));
        let other_run = encode(&held, "ID", "n2", 2).unwrap();
        let mixed = [chunks[0].clone(), other_run[1].clone()];
        assert!(decoded(&mixed, "ID").unwrap_err().contains("another run"));
        let grown = [chunks[0].clone(), chunks[1].clone(), String::new()];
        assert!(decoded(&grown, "ID").is_err(), "a partition added since holds none");
        assert!(decoded(&chunks[..1], "ID").unwrap_err().contains("not chunk 0 of 1"));
        let corrupt = [chunks[0].replace("0-9", "9-0"), chunks[1].clone()];
        assert!(decoded(&corrupt, "ID").unwrap_err().contains("9-0"));
    }
}
