//! What `verify` concludes about one partition's archive, from its listing (data keys and claim keys),
//! the claim bodies it asked for, optional deep reads of the objects, and optionally the partition's
//! log offsets in Kafka. Pure: the shell lists, reads and asks Kafka.
//!
//! Holes between data objects are harmless when the claims chain explains them (offsets that had no
//! records: compaction, transaction markers); they are a retention gap when the claim says retention
//! deleted them, and a gap otherwise. Only the claims around holes and claims without data are read, so
//! the cost stays one listing plus a GET per hole.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::archive::claim::covering_claim;
use crate::archive::claim::Claim;
use crate::archive::object_key::ObjectKey;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;
use crate::recovery::{check_incarnation, IncarnationMismatch, LogOffsets, TopicIdentity};

/// One partition as listed.
#[derive(Debug, Clone, Default)]
pub struct PartitionListing {
    pub objects: Vec<ObjectKey>,
    /// Start offsets of the claims.
    pub claims: BTreeSet<i64>,
}

/// What reading one object found (`--deep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectContents {
    Read { first: Option<i64>, last: Option<i64>, records: u64, ordered: bool },
    Unreadable(String),
}

impl ObjectContents {
    /// What an object's decoded records say of it.
    pub fn of(records: &[Record]) -> Self {
        ObjectContents::Read {
            first: records.first().map(|r| r.offset),
            last: records.last().map(|r| r.offset),
            records: records.len() as u64,
            ordered: records.windows(2).all(|w| w[0].offset < w[1].offset),
        }
    }

    /// Why the object does not hold what its name says (strictly increasing offsets from exactly the
    /// first to exactly the last offset named), or `None` when it does. An object written again under
    /// the key its claim names (`rewritten`) may hold fewer records at its edges (Kafka's compaction
    /// removed them before it was read again), never any outside its name. An unreadable object is
    /// reported as such, not here.
    pub fn mismatch(&self, key: &ObjectKey, rewritten: bool) -> Option<String> {
        match self {
            ObjectContents::Unreadable(_) => None,
            ObjectContents::Read { ordered: false, .. } => Some("offsets are not strictly increasing".to_string()),
            ObjectContents::Read { .. } if rewritten && self.inside(key) => None,
            ObjectContents::Read { first, last, .. }
                if (*first, *last) != (Some(key.range.start()), Some(key.range.end())) =>
            {
                Some(format!("it holds offsets {first:?}..={last:?}, its name says {}", key.range))
            }
            ObjectContents::Read { .. } => None,
        }
    }

    /// Whether it holds records, all inside its name's range, without reaching both of its edges.
    fn short_inside(&self, key: &ObjectKey) -> bool {
        matches!(self, ObjectContents::Read { first: Some(f), last: Some(l), .. }
            if (*f, *l) != (key.range.start(), key.range.end()) && self.inside(key))
    }

    fn inside(&self, key: &ObjectKey) -> bool {
        matches!(self, ObjectContents::Read { first: Some(f), last: Some(l), .. }
            if key.range.start() <= *f && *l <= key.range.end())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Problem {
    /// Offsets no object holds and nothing explains.
    Gap {
        from: i64,
        to: i64,
    },
    /// Offsets Kafka's retention deleted before they were archived.
    RetentionGap {
        from: i64,
        to: i64,
    },
    Overlap {
        earlier: String,
        later: String,
    },
    /// A claimed range whose data object is missing (not the last claim: that one may be in flight).
    MissingData {
        claim: String,
        from: i64,
        to: i64,
    },
    /// A claim whose body cannot be read, or disagrees with the chain.
    BadClaim {
        claim: String,
        why: String,
    },
    /// Contents disagree with the object's name (`--deep`).
    Mislabelled {
        key: String,
        why: String,
    },
    Unreadable {
        key: String,
        why: String,
    },
    /// The archive holds offsets the partition's log no longer has (topic deleted and re-created?).
    AheadOfLog {
        archive_next: i64,
        log_end: i64,
    },
    /// The archive's last claim names another topic ID than the topic has now: it was deleted and
    /// re-created, and the archive belongs to the old incarnation.
    OtherIncarnation {
        archived: String,
        current: String,
    },
    /// The archive's last claim names a topic ID, but the brokers have no topic IDs: which incarnation
    /// the topic is cannot be checked.
    UnverifiableIncarnation {
        archived: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionReport {
    pub topic: String,
    pub partition: i32,
    pub objects: usize,
    pub claims: usize,
    /// Records in the objects, counted when they are read (`--deep`).
    pub records: Option<u64>,
    pub first_offset: Option<i64>,
    pub last_offset: Option<i64>,
    /// The last claim has no data object yet: written right now, or its writer died (the next
    /// recovery re-writes it). Not a problem by itself.
    pub pending_claim: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogOffsets>,
    /// Offsets in the log not archived yet (`--brokers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_yet_archived: Option<i64>,
    pub problems: Vec<Problem>,
}

/// The claim ranges as the chain defines them: claim k covers [start_k, start_k+1 - 1]; the last one
/// reaches to the end of the offsets.
fn chain_ranges(claims: &BTreeSet<i64>) -> Vec<OffsetRange> {
    let starts: Vec<i64> = claims.iter().copied().collect();
    starts
        .iter()
        .enumerate()
        .map(|(i, s)| {
            OffsetRange::new(*s, starts.get(i + 1).map_or(i64::MAX, |next| next - 1)).expect("sorted, distinct")
        })
        .collect()
}

fn sorted_objects(listing: &PartitionListing) -> Vec<&ObjectKey> {
    let mut objects: Vec<&ObjectKey> = listing.objects.iter().collect();
    objects.sort_by_key(|k| (k.range.start(), k.range.end()));
    objects
}

/// Holes between consecutive objects, and between the chain's first claim and the first object (what
/// precedes both was never archived).
fn holes(objects: &[&ObjectKey], chain: &[OffsetRange]) -> Vec<OffsetRange> {
    let mut out = Vec::new();
    let mut end: Option<i64> = None;
    if let (Some(claim), Some(object)) = (chain.first(), objects.first()) {
        if claim.start() < object.range.start() {
            out.push(OffsetRange::new(claim.start(), object.range.start() - 1).expect("ordered"));
        }
    }
    for k in objects {
        if let Some(e) = end {
            if k.range.start() > e + 1 {
                out.push(OffsetRange::new(e + 1, k.range.start() - 1).expect("ordered"));
            }
        }
        end = Some(end.map_or(k.range.end(), |e| e.max(k.range.end())));
    }
    out
}

fn intersects(a: OffsetRange, b: OffsetRange) -> bool {
    a.start() <= b.end() && b.start() <= a.end()
}

fn fulfilled(range: OffsetRange, objects: &[&ObjectKey]) -> bool {
    objects.iter().any(|k| k.range.start() >= range.start() && k.range.start() <= range.end())
}

/// The claims whose bodies the audit needs: those around holes, those without data, and the ones after
/// those (they say why a claim has no data: retention, or no records).
pub fn claims_to_read(listing: &PartitionListing) -> Vec<i64> {
    let objects = sorted_objects(listing);
    let chain = chain_ranges(&listing.claims);
    let holes = holes(&objects, &chain);
    let without_data = |i: usize| chain.get(i).is_some_and(|c| !fulfilled(*c, &objects));
    chain
        .iter()
        .enumerate()
        .filter(|(i, c)| {
            without_data(*i) || (*i > 0 && without_data(i - 1)) || holes.iter().any(|h| intersects(*h, **c))
        })
        .map(|(_, c)| c.start())
        .collect()
}

/// With the objects read (`--deep`): the claims of objects holding fewer records than their names'
/// edges, which decide whether they were written again under their claimed key.
pub fn claims_of_short_objects(listing: &PartitionListing, contents: &BTreeMap<String, ObjectContents>) -> Vec<i64> {
    listing
        .objects
        .iter()
        .filter(|k| contents.get(&k.to_string()).is_some_and(|c| c.short_inside(k)))
        .filter_map(|k| covering_claim(&listing.claims, k.range.start()))
        .collect()
}

/// Audits one partition.
pub fn audit(
    tp: &TopicPartition,
    listing: &PartitionListing,
    bodies: &BTreeMap<i64, Result<Claim, String>>,
    contents: &BTreeMap<String, ObjectContents>,
    log: Option<LogOffsets>,
    topic: Option<&TopicIdentity>,
) -> PartitionReport {
    let objects = sorted_objects(listing);
    let chain = chain_ranges(&listing.claims);
    let mut problems = overlaps(&objects);
    let last_claim = listing.claims.last().and_then(|start| bodies.get(start)).and_then(|b| b.as_ref().ok());
    match topic.map(|topic| check_incarnation(last_claim, topic)) {
        Some(Err(IncarnationMismatch::Other { archived, current })) => {
            problems.push(Problem::OtherIncarnation { archived, current })
        }
        Some(Err(IncarnationMismatch::Unverifiable { archived })) => {
            problems.push(Problem::UnverifiableIncarnation { archived })
        }
        Some(Ok(())) | None => {}
    }
    let pending_claim = check_claims(tp, &chain, bodies, &objects, &mut problems);
    check_holes(&chain, bodies, &objects, &mut problems);
    // Written again under its claimed key after compaction: its claim names it, and it holds fewer records
    // than the claim's first writer read.
    let rewritten = |k: &ObjectKey, read: &ObjectContents| {
        let claim = covering_claim(&listing.claims, k.range.start()).and_then(|s| bodies.get(&s)?.as_ref().ok());
        let fewer = matches!(read, ObjectContents::Read { records, .. } if claim.is_some_and(|c| *records < c.records));
        fewer && claim.is_some_and(|c| c.object.as_deref() == Some(k.relative().as_str()))
    };
    let records = check_contents(contents, &objects, rewritten, &mut problems);
    let mut problems = merge_retention_gaps(problems);
    let first_offset = objects.first().map(|k| k.range.start());
    let last_offset = objects.iter().map(|k| k.range.end()).max();
    let not_yet_archived = log.and_then(|log| compare_with_log(last_offset, log, &mut problems));
    PartitionReport {
        topic: tp.topic().to_string(),
        partition: tp.partition(),
        objects: objects.len(),
        claims: listing.claims.len(),
        records,
        first_offset,
        last_offset,
        pending_claim,
        log,
        not_yet_archived,
        problems,
    }
}

/// One retention gap where claims report adjacent pieces of it (a claim lost whole, then the gap the
/// next claim records before its first offset).
fn merge_retention_gaps(problems: Vec<Problem>) -> Vec<Problem> {
    let mut merged: Vec<Problem> = Vec::with_capacity(problems.len());
    for p in problems {
        if let Problem::RetentionGap { from, to } = p {
            let adjacent = merged.iter_mut().find_map(|m| match m {
                Problem::RetentionGap { from: f, to: t } if *t + 1 == from || to + 1 == *f => Some((f, t)),
                _ => None,
            });
            if let Some((f, t)) = adjacent {
                (*f, *t) = ((*f).min(from), (*t).max(to));
                continue;
            }
        }
        merged.push(p);
    }
    merged
}

/// Each object against the furthest-reaching one before it.
fn overlaps(objects: &[&ObjectKey]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut reach: Option<&ObjectKey> = None;
    for k in objects {
        if let Some(r) = reach {
            if k.range.start() <= r.range.end() {
                problems.push(Problem::Overlap { earlier: r.to_string(), later: k.to_string() });
            }
        }
        if reach.is_none_or(|r| k.range.end() > r.range.end()) {
            reach = Some(k);
        }
    }
    problems
}

/// Claim bodies that cannot be read or break the chain, and claimed ranges without data. Returns the
/// last claim's chain position when it has no data yet (in flight, or its writer died).
fn check_claims(
    tp: &TopicPartition,
    chain: &[OffsetRange],
    bodies: &BTreeMap<i64, Result<Claim, String>>,
    objects: &[&ObjectKey],
    problems: &mut Vec<Problem>,
) -> Option<i64> {
    let claim_name = |start: i64| format!("{tp}@{start}");
    let mut pending_claim = None;
    for (i, c) in chain.iter().enumerate() {
        let last = i + 1 == chain.len();
        match bodies.get(&c.start()) {
            Some(Err(why)) => problems.push(Problem::BadClaim { claim: claim_name(c.start()), why: why.clone() }),
            Some(Ok(body)) if !last && body.end != c.end() => problems.push(Problem::BadClaim {
                claim: claim_name(c.start()),
                why: format!("it ends at {} but the next claim starts at {}", body.end, c.end() + 1),
            }),
            _ => {}
        }
        if fulfilled(*c, objects) {
            continue;
        }
        if last {
            pending_claim = Some(c.start());
            continue;
        }
        let (from, to) = match bodies.get(&c.start()) {
            Some(Ok(body)) => (body.first, body.end),
            _ => (c.start(), c.end()),
        };
        // Retention took the whole claimed range before anyone archived it, or its records were all
        // compacted away before it was written again: the next claim says so.
        let next = chain.get(i + 1).and_then(|n| bodies.get(&n.start())).and_then(|b| b.as_ref().ok());
        if next.and_then(|n| n.retention_gap_from).is_some_and(|gap_from| gap_from <= from) {
            problems.push(Problem::RetentionGap { from, to });
        } else if next.and_then(|n| n.no_records_from) != Some(c.start()) {
            problems.push(Problem::MissingData { claim: claim_name(c.start()), from, to });
        }
    }
    pending_claim
}

/// Holes between objects: explained by a fulfilled claim (no records there), a retention gap, or a gap.
fn check_holes(
    chain: &[OffsetRange],
    bodies: &BTreeMap<i64, Result<Claim, String>>,
    objects: &[&ObjectKey],
    problems: &mut Vec<Problem>,
) {
    for hole in holes(objects, chain) {
        let mut at = hole.start();
        for c in chain.iter().filter(|c| intersects(**c, hole)) {
            // The chain bounds a claim by the next one; its body bounds the last one.
            let body = bodies.get(&c.start()).and_then(|b| b.as_ref().ok());
            let claim_end = body.map_or(c.end(), |b| b.end.min(c.end()));
            if claim_end < at {
                continue;
            }
            if c.start() > at {
                problems.push(Problem::Gap { from: at, to: c.start() - 1 });
            }
            let part_end = claim_end.min(hole.end());
            if let Some(body) = body.filter(|b| b.retention_gap && at < b.first) {
                problems.push(Problem::RetentionGap { from: at, to: (body.first - 1).min(part_end) });
            }
            // Offsets the claim's writer read but its data object does not hold: the range was written
            // again after its writer died, and retention had deleted them by then.
            if let Some(body) = body.filter(|b| b.first <= part_end && fulfilled(*c, objects)) {
                problems.push(Problem::RetentionGap { from: at.max(body.first), to: part_end });
            }
            // A claim without data is reported by `check_claims`; other offsets of a claim had no records.
            at = part_end + 1;
        }
        if at <= hole.end() {
            problems.push(Problem::Gap { from: at, to: hole.end() });
        }
    }
}

/// What reading the objects found (`--deep`); returns the records counted, when they were read.
fn check_contents(
    contents: &BTreeMap<String, ObjectContents>,
    objects: &[&ObjectKey],
    rewritten: impl Fn(&ObjectKey, &ObjectContents) -> bool,
    problems: &mut Vec<Problem>,
) -> Option<u64> {
    let mut counted: Option<u64> = (!contents.is_empty()).then_some(0);
    for k in objects {
        let key = k.to_string();
        match contents.get(&key) {
            Some(ObjectContents::Unreadable(why)) => problems.push(Problem::Unreadable { key, why: why.clone() }),
            Some(read @ ObjectContents::Read { records, .. }) => {
                counted = counted.map(|n| n + records);
                if let Some(why) = read.mismatch(k, rewritten(k, read)) {
                    problems.push(Problem::Mislabelled { key, why });
                }
            }
            None => {}
        }
    }
    counted
}

/// The archive's end against the partition's log (`--brokers`); returns the offsets not archived yet.
fn compare_with_log(last_offset: Option<i64>, log: LogOffsets, problems: &mut Vec<Problem>) -> Option<i64> {
    let archive_next = last_offset.map_or(log.log_start, |e| e + 1);
    if archive_next > log.log_end {
        problems.push(Problem::AheadOfLog { archive_next, log_end: log.log_end });
        None
    } else if archive_next < log.log_start {
        problems.push(Problem::RetentionGap { from: archive_next, to: log.log_start - 1 });
        Some(log.log_end - log.log_start)
    } else {
        Some(log.log_end - archive_next)
    }
}

#[cfg(test)]
mod tests;
