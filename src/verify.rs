//! `verify`: audits an archive from the outside. One listing of the archive (data keys and claim keys,
//! objects / 1000 requests), a GET for each claim the audit needs (around holes, claims without data),
//! with `--deep` a concurrent read of every object, with `--brokers` the partitions' log offsets. The
//! conclusions are `core::audit`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use futures::stream::{self, StreamExt};
use serde::Serialize;
use thiserror::Error;

use crate::core::audit::{audit, claims_to_read, ObjectContents, PartitionListing, PartitionReport, Problem};
use crate::core::claim::{Claim, ClaimKey};
use crate::core::encode::decode;
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::TopicPartition;
use crate::kafka::{partition_offsets, SourceError};
use crate::store::{list_all_counting, ObjectStore, StoreError};

#[derive(Debug, Error)]
pub enum VerifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kafka(#[from] SourceError),
    #[error("reading the log offsets failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

#[derive(Debug, Clone)]
pub struct VerifyOptions {
    pub prefix: Prefix,
    /// Only these topics (all topics in the archive when empty).
    pub topics: Vec<String>,
    /// Only these partitions (all when empty).
    pub partitions: Vec<i32>,
    pub deep: bool,
    /// Compare with Kafka: bootstrap servers and extra librdkafka settings.
    pub brokers: Option<(String, Vec<(String, String)>)>,
    /// Concurrent GETs.
    pub concurrency: usize,
}

#[derive(Debug, Serialize)]
pub struct VerifyReport {
    pub archive: String,
    pub list_requests: u64,
    pub keys_listed: u64,
    pub claims_read: u64,
    pub objects_read: u64,
    pub partitions: Vec<PartitionReport>,
    /// Keys under the archive's prefix that are neither data objects nor claims.
    pub foreign_keys: Vec<String>,
}

impl VerifyReport {
    pub fn problem_count(&self) -> usize {
        self.partitions.iter().map(|p| p.problems.len()).sum::<usize>() + self.foreign_keys.len()
    }

    pub fn is_clean(&self) -> bool {
        self.problem_count() == 0
    }

    /// The human-readable report.
    pub fn table(&self) -> String {
        let with_log = self.partitions.iter().any(|p| p.log.is_some());
        let mut rows = vec![{
            let mut h = vec!["TOPIC", "PARTITION", "OBJECTS", "CLAIMS", "RECORDS", "FIRST", "LAST"];
            if with_log {
                h.extend(["LOG-START", "LOG-END", "UNARCHIVED"]);
            }
            h.push("STATUS");
            h.into_iter().map(String::from).collect::<Vec<_>>()
        }];
        let opt = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        for p in &self.partitions {
            let mut row = vec![
                p.topic.clone(),
                p.partition.to_string(),
                p.objects.to_string(),
                p.claims.to_string(),
                p.records.map_or("-".into(), |r| r.to_string()),
                opt(p.first_offset),
                opt(p.last_offset),
            ];
            if with_log {
                row.extend([opt(p.log.map(|l| l.log_start)), opt(p.log.map(|l| l.log_end)), opt(p.not_yet_archived)]);
            }
            row.push(match (p.problems.len(), p.pending_claim) {
                (0, None) => "ok".into(),
                (0, Some(s)) => format!("ok (claim {s} in flight)"),
                (n, _) => format!("{n} problem{}", if n == 1 { "" } else { "s" }),
            });
            rows.push(row);
        }
        let mut out = format!("archive {}\n{}", self.archive, crate::table::render(&rows));
        for p in &self.partitions {
            for problem in &p.problems {
                let _ = writeln!(out, "{}/{}: {}", p.topic, p.partition, describe(problem));
            }
        }
        for key in &self.foreign_keys {
            let _ = writeln!(out, "not an archive object (ignored by the archiver): {key}");
        }
        let _ = write!(
            out,
            "{} partitions, {} problems; {} keys listed in {} requests, {} claims read, {} objects read",
            self.partitions.len(),
            self.problem_count(),
            self.keys_listed,
            self.list_requests,
            self.claims_read,
            self.objects_read
        );
        out
    }
}

fn describe(problem: &Problem) -> String {
    match problem {
        Problem::Gap { from, to } => format!("GAP: offsets {from}..={to} are in no object, and no claim explains it"),
        Problem::RetentionGap { from, to } => {
            format!("RETENTION GAP: offsets {from}..={to} were deleted by Kafka retention before they were archived")
        }
        Problem::Overlap { earlier, later } => format!("OVERLAP: {later} overlaps {earlier}"),
        Problem::MissingData { claim, from, to } => {
            format!("MISSING DATA: claim {claim} holds offsets {from}..={to} but no data object does")
        }
        Problem::BadClaim { claim, why } => format!("BAD CLAIM {claim}: {why}"),
        Problem::Mislabelled { key, why } => format!("MISLABELLED {key}: {why}"),
        Problem::Unreadable { key, why } => format!("UNREADABLE {key}: {why}"),
        Problem::AheadOfLog { archive_next, log_end } => format!(
            "AHEAD OF LOG: the archive reaches offset {} but the log ends at {log_end} (topic deleted and re-created?)",
            archive_next - 1
        ),
    }
}

pub async fn verify(store: &dyn ObjectStore, opts: &VerifyOptions) -> Result<VerifyReport, VerifyError> {
    let prefix = &opts.prefix;
    let root = prefix.root();
    let folders = if opts.topics.is_empty() {
        vec![root.clone()]
    } else {
        opts.topics.iter().flat_map(|t| [prefix.topic_folder(t), prefix.claims_topic_folder(t)]).collect()
    };
    let mut list_requests = 0;
    let mut keys = Vec::new();
    for folder in folders {
        let (listed, requests) = list_all_counting(store, &folder).await?;
        keys.extend(listed);
        list_requests += requests;
    }
    let wanted = |tp: &TopicPartition| {
        (opts.topics.is_empty() || opts.topics.iter().any(|t| t == tp.topic()))
            && (opts.partitions.is_empty() || opts.partitions.contains(&tp.partition()))
    };
    let mut listings: BTreeMap<TopicPartition, PartitionListing> = BTreeMap::new();
    let mut foreign_keys = Vec::new();
    let keys_listed = keys.len() as u64;
    for raw in keys {
        if let Ok(k) = ObjectKey::parse(prefix, &raw) {
            if wanted(&k.tp) {
                listings.entry(k.tp.clone()).or_default().objects.push(k);
            }
        } else if let Ok(c) = ClaimKey::parse(prefix, &raw) {
            if wanted(&c.tp) {
                listings.entry(c.tp.clone()).or_default().claims.insert(c.start);
            }
        } else {
            foreign_keys.push(raw);
        }
    }

    let mut logs = BTreeMap::new();
    if let Some((brokers, props)) = &opts.brokers {
        let topics: BTreeSet<String> = if opts.topics.is_empty() {
            listings.keys().map(|tp| tp.topic().to_string()).collect()
        } else {
            opts.topics.iter().cloned().collect()
        };
        let (brokers, props, topics) = (brokers.clone(), props.clone(), topics.into_iter().collect::<Vec<_>>());
        logs = tokio::task::spawn_blocking(move || partition_offsets(&brokers, &props, None, &topics))
            .await??
            .into_iter()
            .map(|(tp, (log, _))| (tp, log))
            .collect();
        for tp in logs.keys().filter(|tp| wanted(tp)) {
            listings.entry(tp.clone()).or_default();
        }
    }

    // Claim bodies the audit needs, and with --deep every object, read concurrently.
    let claim_reads: Vec<(TopicPartition, i64)> =
        listings.iter().flat_map(|(tp, l)| claims_to_read(l).into_iter().map(move |s| (tp.clone(), s))).collect();
    let claims_read = claim_reads.len() as u64;
    let bodies: Vec<((TopicPartition, i64), Result<Claim, String>)> = stream::iter(claim_reads)
        .map(|(tp, start)| async move {
            let key = ClaimKey::new(prefix.clone(), tp.clone(), start).to_string();
            let body = match store.get(&key).await {
                Ok(bytes) => Claim::from_json(&key, &bytes).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            ((tp, start), body)
        })
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    let mut bodies_by_tp: BTreeMap<TopicPartition, BTreeMap<i64, Result<Claim, String>>> = BTreeMap::new();
    for ((tp, start), body) in bodies {
        bodies_by_tp.entry(tp).or_default().insert(start, body);
    }

    let objects: Vec<ObjectKey> =
        if opts.deep { listings.values().flat_map(|l| l.objects.clone()).collect() } else { Vec::new() };
    let objects_read = objects.len() as u64;
    let contents: Vec<(ObjectKey, ObjectContents)> = stream::iter(objects)
        .map(|k| async move {
            let contents = match store.get(&k.to_string()).await {
                Ok(bytes) => match decode(k.kind, bytes) {
                    Ok(records) => ObjectContents::Read {
                        first: records.first().map(|r| r.offset),
                        last: records.last().map(|r| r.offset),
                        records: records.len() as u64,
                        ordered: records.windows(2).all(|w| w[0].offset < w[1].offset),
                    },
                    Err(e) => ObjectContents::Unreadable(e.to_string()),
                },
                Err(e) => ObjectContents::Unreadable(e.to_string()),
            };
            (k, contents)
        })
        .buffer_unordered(opts.concurrency.max(1))
        .collect()
        .await;
    let mut contents_by_tp: BTreeMap<TopicPartition, BTreeMap<String, ObjectContents>> = BTreeMap::new();
    for (k, c) in contents {
        contents_by_tp.entry(k.tp.clone()).or_default().insert(k.to_string(), c);
    }

    let empty_bodies = BTreeMap::new();
    let empty_contents = BTreeMap::new();
    let partitions = listings
        .iter()
        .map(|(tp, listing)| {
            audit(
                tp,
                listing,
                bodies_by_tp.get(tp).unwrap_or(&empty_bodies),
                contents_by_tp.get(tp).unwrap_or(&empty_contents),
                logs.get(tp).copied(),
            )
        })
        .collect();
    Ok(VerifyReport {
        archive: store.describe(),
        list_requests,
        keys_listed,
        claims_read,
        objects_read,
        partitions,
        foreign_keys,
    })
}
