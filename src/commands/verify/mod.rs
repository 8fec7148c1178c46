//! `verify`: audits an archive from the outside. One listing of the archive (data keys and claim keys,
//! objects / 1000 requests), a GET for each claim the audit needs (around holes, claims without data),
//! with `--deep` a concurrent read of every object, with `--brokers` the partitions' log offsets. The
//! conclusions are `audit`'s.

pub mod audit;
pub mod cli;
pub mod tables;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use futures::stream::{self, StreamExt};
use serde::Serialize;
use thiserror::Error;

use crate::archive::claim::{Claim, ClaimKey};
use crate::archive::keys::{classify, ArchiveKey};
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::{is_selected, TopicPartition};
use crate::commands::verify::audit::{
    audit, claims_of_short_objects, claims_to_read, ObjectContents, PartitionListing, PartitionReport, Problem,
};
use crate::encode::decode;
use crate::recovery::LogOffsets;
use crate::recovery::TopicIdentity;
use crate::retry::{Patience, Retrying};
use crate::source::offsets::{partition_offsets, OffsetsError};
use crate::store::{list_all_counting, ObjectStore, StoreError};

/// Tries of each store request before `verify` reports the error.
const READ_ATTEMPTS: u32 = 8;

#[derive(Debug, Error)]
pub enum VerifyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Kafka(#[from] OffsetsError),
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
    /// Keys that are not the archive's count as problems (by default they are warnings: a stray file
    /// in a folder should not page anyone).
    pub strict: bool,
}

#[derive(Debug, Serialize)]
pub struct VerifyReport {
    pub archive: String,
    pub list_requests: u64,
    pub keys_listed: u64,
    pub claims_read: u64,
    pub objects_read: u64,
    /// Records of typed archives whose value did not fit the value schema (kept raw), in the objects
    /// read (`--deep`).
    pub value_misfits: u64,
    pub partitions: Vec<PartitionReport>,
    /// Keys under the archive's prefix that are neither data objects nor claims.
    pub foreign_keys: Vec<String>,
    /// Whether the foreign keys count as problems.
    pub strict: bool,
    /// The topics' Iceberg tables checked against the archive (with `--iceberg-catalog`).
    pub tables: Vec<crate::table::inspect::TableCheck>,
}

impl VerifyReport {
    pub fn problem_count(&self) -> usize {
        let foreign = if self.strict { self.foreign_keys.len() } else { 0 };
        let tables: usize = self.tables.iter().map(|t| t.problems.len()).sum();
        self.partitions.iter().map(|p| p.problems.len()).sum::<usize>() + foreign + tables
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
        let mut out = format!("archive {}\n{}", self.archive, crate::commands::grid::render(&rows));
        for p in &self.partitions {
            for problem in &p.problems {
                let _ = writeln!(out, "{}/{}: {}", p.topic, p.partition, describe(problem));
            }
        }
        if self.value_misfits > 0 {
            let _ = writeln!(
                out,
                "{} records kept raw: their value did not fit the value schema (see value_error)",
                self.value_misfits
            );
        }
        self.table_lines(&mut out);
        let severity = if self.strict { "problem" } else { "warning" };
        for key in &self.foreign_keys {
            let _ = writeln!(out, "{severity}: not an archive object (ignored by the archiver): {key}");
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
        Problem::OtherIncarnation { archived, current } => format!(
            "TOPIC RE-CREATED: the archive holds topic ID {archived}, the topic now has ID {current}; the archiver \
             stops this partition (archive the new topic under another --dest prefix)"
        ),
        Problem::UnverifiableIncarnation { archived } => format!(
            "TOPIC ID UNKNOWN: the archive holds topic ID {archived}, but these brokers have no topic IDs, so whether \
             the topic is the one archived cannot be checked; the archiver stops this partition (is --brokers the \
             cluster the archive came from?)"
        ),
    }
}

pub async fn verify(store: &dyn ObjectStore, opts: &VerifyOptions) -> Result<VerifyReport, VerifyError> {
    let store = &Retrying::new(store, Patience::Attempts(READ_ATTEMPTS), None);
    let Listed { mut listings, foreign_keys, list_requests, keys_listed } = list_archive(store, opts).await?;
    let logs = match &opts.brokers {
        Some((brokers, props)) => {
            let topics: BTreeSet<String> = if opts.topics.is_empty() {
                listings.keys().map(|tp| tp.topic().to_string()).collect()
            } else {
                opts.topics.iter().cloned().collect()
            };
            let logs = log_offsets(brokers, props, topics.into_iter().collect()).await?;
            // A partition Kafka has and the archive does not is audited too (everything is unarchived).
            for tp in logs.keys().filter(|tp| opts.wants(tp)) {
                listings.entry(tp.clone()).or_default();
            }
            logs
        }
        None => BTreeMap::new(),
    };
    // With the brokers, each partition's last claim too: it names the topic incarnation archived.
    let mut claims = read_claims(store, &opts.prefix, &listings, opts.concurrency, !logs.is_empty()).await;
    let (contents, value_misfits) = match opts.deep {
        true => read_contents(store, &listings, opts.concurrency).await,
        false => (BTreeMap::new(), 0),
    };
    // The claims of objects holding fewer records than their names say: were they written again?
    let short: Vec<(TopicPartition, i64)> = contents
        .iter()
        .flat_map(|(tp, read)| {
            let listing = &listings[tp];
            let known = claims.get(tp);
            claims_of_short_objects(listing, read)
                .into_iter()
                .filter(move |s| known.is_none_or(|k| !k.contains_key(s)))
                .map(move |s| (tp.clone(), s))
        })
        .collect();
    for (tp, bodies) in read_claim_bodies(store, &opts.prefix, short, opts.concurrency).await {
        claims.entry(tp).or_default().extend(bodies);
    }
    let (no_claims, no_contents) = (BTreeMap::new(), BTreeMap::new());
    let partitions = listings
        .iter()
        .map(|(tp, listing)| {
            let claims = claims.get(tp).unwrap_or(&no_claims);
            let contents = contents.get(tp).unwrap_or(&no_contents);
            let (log, topic) = logs.get(tp).map_or((None, None), |(log, topic)| (Some(*log), Some(topic)));
            audit(tp, listing, claims, contents, log, topic)
        })
        .collect();
    Ok(VerifyReport {
        archive: store.describe(),
        list_requests,
        keys_listed,
        claims_read: claims.values().map(|c| c.len() as u64).sum(),
        objects_read: contents.values().map(|c| c.len() as u64).sum(),
        value_misfits,
        partitions,
        foreign_keys,
        strict: opts.strict,
        tables: Vec::new(),
    })
}

impl VerifyOptions {
    fn wants(&self, tp: &TopicPartition) -> bool {
        (self.topics.is_empty() || self.topics.iter().any(|t| t == tp.topic()))
            && is_selected(&self.partitions, tp.partition())
    }
}

/// The archive as one listing shows it.
struct Listed {
    listings: BTreeMap<TopicPartition, PartitionListing>,
    /// Keys under the prefix that are neither data objects nor claims.
    foreign_keys: Vec<String>,
    list_requests: u64,
    keys_listed: u64,
}

/// Lists the archive once (the whole prefix, or each selected topic's data and claims folders) and
/// sorts the keys into the selected partitions' listings.
async fn list_archive(store: &dyn ObjectStore, opts: &VerifyOptions) -> Result<Listed, StoreError> {
    let prefix = &opts.prefix;
    let folders = if opts.topics.is_empty() {
        vec![prefix.root()]
    } else {
        opts.topics.iter().flat_map(|t| [prefix.topic_folder(t), prefix.claims_topic_folder(t)]).collect()
    };
    let mut listed = Listed { listings: BTreeMap::new(), foreign_keys: Vec::new(), list_requests: 0, keys_listed: 0 };
    for folder in folders {
        let (keys, requests) = list_all_counting(store, &folder).await?;
        listed.list_requests += requests;
        listed.keys_listed += keys.len() as u64;
        for raw in keys {
            match classify(prefix, &raw) {
                ArchiveKey::Data(k) if opts.wants(&k.tp) => {
                    listed.listings.entry(k.tp.clone()).or_default().objects.push(k)
                }
                ArchiveKey::Claim(c) if opts.wants(&c.tp) => {
                    listed.listings.entry(c.tp.clone()).or_default().claims.insert(c.chain_start);
                }
                ArchiveKey::Foreign => listed.foreign_keys.push(raw),
                ArchiveKey::Data(_)
                | ArchiveKey::Claim(_)
                | ArchiveKey::Marker { .. }
                | ArchiveKey::Table
                | ArchiveKey::GroupOffsets(_) => {}
            }
        }
    }
    Ok(listed)
}

/// The partitions' log offsets and topic IDs in Kafka (a blocking client, off the async workers).
async fn log_offsets(
    brokers: &str,
    props: &[(String, String)],
    topics: Vec<String>,
) -> Result<BTreeMap<TopicPartition, (LogOffsets, TopicIdentity)>, VerifyError> {
    let (brokers, props) = (brokers.to_string(), props.to_vec());
    let offsets = tokio::task::spawn_blocking(move || partition_offsets(&brokers, &props, None, &topics)).await??;
    Ok(offsets.into_iter().map(|(tp, offsets)| (tp, (offsets.log, offsets.topic))).collect())
}

type ClaimBodies = BTreeMap<TopicPartition, BTreeMap<i64, Result<Claim, String>>>;

/// The claim bodies the audit needs (around holes, claims without data; with `last`, each partition's
/// last claim too), read concurrently.
async fn read_claims(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    listings: &BTreeMap<TopicPartition, PartitionListing>,
    concurrency: usize,
    last: bool,
) -> ClaimBodies {
    let wanted: Vec<(TopicPartition, i64)> = listings
        .iter()
        .flat_map(|(tp, l)| {
            let mut starts: BTreeSet<i64> = claims_to_read(l).into_iter().collect();
            starts.extend(l.claims.last().filter(|_| last));
            starts.into_iter().map(move |s| (tp.clone(), s))
        })
        .collect();
    read_claim_bodies(store, prefix, wanted, concurrency).await
}

/// The bodies of the claims `wanted`, read concurrently.
async fn read_claim_bodies(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    wanted: Vec<(TopicPartition, i64)>,
    concurrency: usize,
) -> ClaimBodies {
    let bodies: Vec<(TopicPartition, i64, Result<Claim, String>)> = stream::iter(wanted)
        .map(|(tp, chain_start)| async move {
            let key = ClaimKey::new(prefix.clone(), tp.clone(), chain_start).to_string();
            let body = match store.get(&key).await {
                Ok(bytes) => Claim::from_json(&key, &bytes).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            (tp, chain_start, body)
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut by_tp = ClaimBodies::new();
    for (tp, chain_start, body) in bodies {
        by_tp.entry(tp).or_default().insert(chain_start, body);
    }
    by_tp
}

/// Every listed object, read and decoded concurrently (`--deep`).
async fn read_contents(
    store: &dyn ObjectStore,
    listings: &BTreeMap<TopicPartition, PartitionListing>,
    concurrency: usize,
) -> (BTreeMap<TopicPartition, BTreeMap<String, ObjectContents>>, u64) {
    let objects: Vec<ObjectKey> = listings.values().flat_map(|l| l.objects.clone()).collect();
    let contents: Vec<(ObjectKey, ObjectContents, u64)> = stream::iter(objects)
        .map(|k| async move {
            let (contents, misfits) = match store.get(&k.to_string()).await {
                Ok(bytes) => match decode(k.kind, bytes) {
                    Ok(decoded) => (ObjectContents::of(&decoded.records), decoded.misfits),
                    Err(e) => (ObjectContents::Unreadable(e.to_string()), 0),
                },
                Err(e) => (ObjectContents::Unreadable(e.to_string()), 0),
            };
            (k, contents, misfits)
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let mut by_tp: BTreeMap<TopicPartition, BTreeMap<String, ObjectContents>> = BTreeMap::new();
    let mut misfits = 0;
    for (k, c, m) in contents {
        misfits += m;
        by_tp.entry(k.tp.clone()).or_default().insert(k.to_string(), c);
    }
    (by_tp, misfits)
}
