//! Start-offset claims: one small object per file that makes overlapping data objects impossible.
//!
//! Each partition's files form a chain: a file's chain position `start` is the previous file's claimed
//! end + 1 (0 for the first file ever). Before uploading a file holding offsets [first, end], its
//! writer creates the claim for `start` with `If-None-Match: *`, holding `first` and `end`. At most one
//! claim per start can exist, so the claims form one chain of adjacent ranges [start, end], each owned
//! by exactly one writer, and a data object is only ever uploaded for the range its claim holds. A
//! zombie (an instance that lost its partitions without noticing) loses the race for the next start
//! and drops its buffer; a late upload can only re-create the same object (a 412).
//!
//! Offsets in [start, first - 1] had no records when the writer read them (compaction, transaction
//! markers), or, when `retention_gap` is set, Kafka's retention deleted them before they were archived.
//! So the claims also tell `verify` which holes between data objects are harmless.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::object_key::{parse_padded_offset, parse_partition, KeyError, ObjectKey, Prefix};
use super::partition::{OffsetRange, TopicPartition};
use super::time_bucket::TimeSource;

const EXTENSION: &str = ".json";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ClaimError {
    #[error("claim {key} is not valid JSON of a claim: {why}")]
    Body { key: String, why: String },
    #[error("claim {key} is not consistent: need 0 <= start ({start}) <= first ({first}) <= end ({end})")]
    Inconsistent { key: String, start: i64, first: i64, end: i64 },
    #[error("claim {key} names data object {object:?}, which is not an archive key for offsets {first}..={end}")]
    Object { key: String, object: String, first: i64, end: i64 },
}

/// The name of the claim for chain position `start`:
/// `<prefix>/_claims/topic=<t>/partition=<p>/<start:020>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimKey {
    pub prefix: Prefix,
    pub tp: TopicPartition,
    pub chain_start: i64,
}

impl ClaimKey {
    pub fn new(prefix: Prefix, tp: TopicPartition, chain_start: i64) -> Self {
        Self { prefix, tp, chain_start }
    }

    /// Parses exactly what `Display` writes; anything else is not a claim.
    pub fn parse(prefix: &Prefix, key: &str) -> Result<Self, KeyError> {
        let malformed = |why| KeyError::Malformed { key: key.to_string(), why };
        let root = format!("{}_claims/", prefix.root());
        let rest = key
            .strip_prefix(root.as_str())
            .ok_or_else(|| KeyError::OutsidePrefix { key: key.to_string(), prefix: prefix.as_str().to_string() })?;
        let mut parts = rest.split('/');
        let (Some(topic_dir), Some(partition_dir), Some(file), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed("a claim is _claims/topic=<t>/partition=<p>/<start:020>.json below the prefix"));
        };
        let topic = topic_dir.strip_prefix("topic=").ok_or_else(|| malformed("folder is not topic=<t>"))?;
        let partition = partition_dir
            .strip_prefix("partition=")
            .and_then(parse_partition)
            .ok_or_else(|| malformed("folder is not partition=<p>"))?;
        let tp = TopicPartition::new(topic, partition).map_err(|_| malformed("topic name is not valid"))?;
        let start = file
            .strip_suffix(EXTENSION)
            .and_then(parse_padded_offset)
            .ok_or_else(|| malformed("claim file is not <start:020>.json"))?;
        Ok(Self { prefix: prefix.clone(), tp, chain_start: start })
    }

    /// A string that sorts right before the claim for `start` and after every claim below it.
    pub fn start_after(prefix: &Prefix, tp: &TopicPartition, start: i64) -> String {
        format!("{}{start:020}", prefix.claims_folder(tp))
    }
}

impl fmt::Display for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{:020}{EXTENSION}", self.prefix.claims_folder(&self.tp), self.chain_start)
    }
}

/// The body of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Chain position: the previous claim's end + 1 (`start` in the JSON body).
    #[serde(rename = "start")]
    pub chain_start: i64,
    /// First offset of the data object.
    pub first: i64,
    /// Last offset of the data object; the next claim's start is `end + 1`.
    pub end: i64,
    pub records: u64,
    /// [start, first - 1] was deleted by retention before it could be archived.
    #[serde(default)]
    pub retention_gap: bool,
    /// With `retention_gap`: where the gap began when that is before this claim's chain position, i.e.
    /// retention also took an earlier claim's whole range before anyone archived it (its writer died
    /// between claim and upload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_gap_from: Option<i64>,
    /// The claim at this chain position (the previous one) has no data object because its range, read
    /// again after its writer died, held no records any more (compaction removed them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_records_from: Option<i64>,
    /// Which process wrote it (host and pid), for operators.
    pub writer: String,
    /// When it was written, milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The smallest and largest record timestamp in the data object (ms), so restores by time can skip
    /// objects without reading them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamps: Option<(i64, i64)>,
    /// The Kafka topic ID of the topic incarnation the records came from (absent in claims written
    /// before topic IDs were recorded, or when the broker did not tell it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// The data object's key below the prefix (`topic=<t>/partition=<p>/<t>+<p>+<first>+<end>.<ext>`):
    /// the one key its range may be written under, whatever format the writer that re-writes it uses.
    /// Absent in claims written before it was recorded: then any key of the range fulfils the claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    /// For an object in a time-bucket folder: which time put it there (`record` or `arrival`), so
    /// `status` and the markers know how late later records can come. Absent outside buckets, and in
    /// claims written before it was recorded (taken as record time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_source: Option<TimeSource>,
    /// The Schema Registry IDs of the schemas the data object's typed values were written with
    /// (`--value-format avro`), as its footer's `kafka.schema_ids`, for operators and tools that read
    /// claims only (`restore` reads the schema from the footer). Empty for other values, and in claims
    /// written before they were recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schema_ids: Vec<u32>,
}

impl Claim {
    /// The offsets this claim covers in the chain, [start, end].
    pub fn covers(&self) -> OffsetRange {
        OffsetRange::new(self.chain_start, self.end).expect("checked when built or parsed")
    }

    /// The offsets its data object holds, [first, end].
    pub fn data(&self) -> OffsetRange {
        OffsetRange::new(self.first, self.end).expect("checked when built or parsed")
    }

    /// Whether another claim for the same start names the same data object (the same range, and the
    /// same key when both record one): then writing it is the same work, and both writers may go on.
    /// The same range under another key (another format or compression) is another writer's.
    pub fn same_object(&self, other: &Claim) -> bool {
        let same_key = match (&self.object, &other.object) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        same_key && (self.chain_start, self.first, self.end) == (other.chain_start, other.first, other.end)
    }

    /// The key its data object must have under `prefix`, when the claim records one.
    pub fn object_key(&self, prefix: &Prefix) -> Option<ObjectKey> {
        let relative = ObjectKey::parse(&Prefix::default(), self.object.as_deref()?).ok()?;
        Some(ObjectKey { prefix: prefix.clone(), ..relative })
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a claim serialises")
    }

    pub fn from_json(key: &str, body: &[u8]) -> Result<Self, ClaimError> {
        let claim: Claim =
            serde_json::from_slice(body).map_err(|e| ClaimError::Body { key: key.to_string(), why: e.to_string() })?;
        claim.check(key)?;
        Ok(claim)
    }

    pub fn check(&self, key: &str) -> Result<(), ClaimError> {
        if !(0 <= self.chain_start && self.chain_start <= self.first && self.first <= self.end) {
            return Err(ClaimError::Inconsistent {
                key: key.to_string(),
                start: self.chain_start,
                first: self.first,
                end: self.end,
            });
        }
        match (&self.object, self.object_key(&Prefix::default())) {
            (Some(object), named) if named.as_ref().is_none_or(|k| k.range != self.data()) => Err(ClaimError::Object {
                key: key.to_string(),
                object: object.clone(),
                first: self.first,
                end: self.end,
            }),
            _ => Ok(()),
        }
    }
}

/// The claim that covers a data object starting at `object_start`: the one with the greatest start at
/// or below it.
pub fn covering_claim(claim_starts: &std::collections::BTreeSet<i64>, object_start: i64) -> Option<i64> {
    claim_starts.range(..=object_start).next_back().copied()
}

impl Claim {
    /// A plain claim: `records` records from `first` to `end` at chain position `chain_start`, by
    /// `writer` at time 0, with no gap, timestamps, topic ID or object name (synthetic archives and
    /// tests fill in what they need).
    pub fn plain(chain_start: i64, first: i64, end: i64, records: u64, writer: &str) -> Claim {
        Claim {
            chain_start,
            first,
            end,
            records,
            retention_gap: false,
            retention_gap_from: None,
            no_records_from: None,
            writer: writer.into(),
            time_ms: 0,
            timestamps: None,
            topic_id: None,
            object: None,
            time_source: None,
            schema_ids: Vec::new(),
        }
    }
}

#[cfg(test)]
impl Claim {
    /// A consistent claim of one record, written by `host:1` at time 0 (for tests).
    pub(crate) fn for_test(chain_start: i64, first: i64, end: i64) -> Claim {
        Claim::plain(chain_start, first, end, 1, "host:1")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn objects_map_to_their_claims() {
        let starts = std::collections::BTreeSet::from([0, 10, 25]);
        assert_eq!(covering_claim(&starts, 0), Some(0));
        assert_eq!(covering_claim(&starts, 12), Some(10));
        assert_eq!(covering_claim(&starts, 30), Some(25));
        assert_eq!(covering_claim(&std::collections::BTreeSet::from([5]), 3), None);
    }

    fn claim(start: i64, first: i64, end: i64) -> Claim {
        Claim::for_test(start, first, end)
    }

    #[test]
    fn formats_the_documented_layout() {
        let tp = TopicPartition::new("orders", 3).unwrap();
        let k = ClaimKey::new(Prefix::new("a/b"), tp.clone(), 42);
        assert_eq!(k.to_string(), "a/b/_claims/topic=orders/partition=3/00000000000000000042.json");
        assert_eq!(
            ClaimKey::new(Prefix::default(), tp, 0).to_string(),
            "_claims/topic=orders/partition=3/00000000000000000000.json"
        );
    }

    #[test]
    fn rejects_what_is_not_a_claim() {
        let p = Prefix::new("pre");
        assert!(ClaimKey::parse(&p, "pre/_claims/topic=t/partition=1/00000000000000000005.json").is_ok());
        for bad in [
            "pre/_claims/topic=t/partition=1/00000000000000000005",
            "pre/_claims/topic=t/partition=1/5.json",
            "pre/_claims/topic=t/partition=01/00000000000000000005.json",
            "pre/_claims/topic=t/00000000000000000005.json",
            "pre/_claims/topic=t/partition=1/x/00000000000000000005.json",
            "other/_claims/topic=t/partition=1/00000000000000000005.json",
            "pre/topic=t/partition=1/t+1+00000000000000000005+00000000000000000009.jsonl",
            "pre/_claims/topic=a+b/partition=1/00000000000000000005.json",
        ] {
            assert!(ClaimKey::parse(&p, bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn start_after_sorts_between_neighbours() {
        let p = Prefix::new("x");
        let tp = TopicPartition::new("t", 2).unwrap();
        let sa = ClaimKey::start_after(&p, &tp, 100);
        let before = ClaimKey::new(p.clone(), tp.clone(), 99).to_string();
        let at = ClaimKey::new(p.clone(), tp.clone(), 100).to_string();
        assert!(before < sa && sa < at);
    }

    #[test]
    fn bodies_round_trip_and_are_checked() {
        let c = Claim { retention_gap: true, timestamps: Some((7, 9)), ..claim(10, 15, 20) };
        assert_eq!(Claim::from_json("k", &c.to_json()).unwrap(), c);
        assert!(matches!(Claim::from_json("k", &claim(10, 9, 20).to_json()), Err(ClaimError::Inconsistent { .. })));
        assert!(matches!(Claim::from_json("k", &claim(10, 21, 20).to_json()), Err(ClaimError::Inconsistent { .. })));
        assert!(matches!(Claim::from_json("k", b"{\"start\":1}"), Err(ClaimError::Body { .. })));
        assert!(matches!(Claim::from_json("k", b"garbage"), Err(ClaimError::Body { .. })));
        // A claim from a newer version with more fields is still read.
        let mut v: serde_json::Value = serde_json::from_slice(&c.to_json()).unwrap();
        v["future"] = serde_json::json!(1);
        assert_eq!(Claim::from_json("k", v.to_string().as_bytes()).unwrap(), c);
    }

    #[test]
    fn same_object_ignores_who_and_when_but_not_the_key() {
        let a = claim(0, 0, 99);
        assert!(a.same_object(&Claim { writer: "other:2".into(), time_ms: 5, ..a.clone() }));
        assert!(!a.same_object(&claim(0, 0, 98)));
        assert!(!a.same_object(&claim(0, 1, 99)));
        let named = |ext: &str| Claim {
            object: Some(format!("topic=t/partition=0/t+0+{:020}+{:020}.{ext}", 0, 99)),
            ..claim(0, 0, 99)
        };
        assert!(named("parquet").same_object(&named("parquet")));
        // The same range in another format is another writer's object.
        assert!(!named("parquet").same_object(&named("jsonl")));
        // A claim from before keys were recorded matches any key of its range.
        assert!(a.same_object(&named("jsonl")));
    }

    #[test]
    fn the_recorded_key_is_checked_against_the_range() {
        let named = |object: &str| Claim { object: Some(object.into()), ..claim(0, 5, 9) };
        let ok = named("topic=t/partition=0/t+0+00000000000000000005+00000000000000000009.jsonl.gz");
        assert_eq!(Claim::from_json("k", &ok.to_json()).unwrap(), ok);
        let key = ok.object_key(&Prefix::new("arch")).unwrap();
        assert_eq!(key.to_string(), format!("arch/{}", ok.object.as_deref().unwrap()));
        for bad in [
            "topic=t/partition=0/t+0+00000000000000000005+00000000000000000008.jsonl.gz",
            "topic=t/partition=0/notes.txt",
            "arch/topic=t/partition=0/t+0+00000000000000000005+00000000000000000009.parquet",
        ] {
            let err = Claim::from_json("k", &named(bad).to_json()).unwrap_err();
            assert!(matches!(err, ClaimError::Object { .. }), "{bad}: {err}");
        }
    }

    proptest! {
        #[test]
        fn key_round_trip(topic in "[a-zA-Z0-9._-]{1,40}", partition in 0i32..=i32::MAX, start in 0i64..=i64::MAX, prefix in "[a-z0-9/=_-]{0,20}") {
            prop_assume!(topic != "." && topic != "..");
            let k = ClaimKey::new(Prefix::new(&prefix), TopicPartition::new(&topic, partition).unwrap(), start);
            let text = k.to_string();
            prop_assert_eq!(ClaimKey::parse(&Prefix::new(&prefix), &text).unwrap(), k);
        }

        #[test]
        fn key_order_is_start_order(a in 0i64..=i64::MAX, b in 0i64..=i64::MAX) {
            let tp = TopicPartition::new("t", 0).unwrap();
            let ka = ClaimKey::new(Prefix::new("p"), tp.clone(), a).to_string();
            let kb = ClaimKey::new(Prefix::new("p"), tp, b).to_string();
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }
    }
}
