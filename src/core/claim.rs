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

use super::object_key::{parse_padded_offset, parse_partition, KeyError, Prefix};
use super::partition::{OffsetRange, TopicPartition};

const EXTENSION: &str = ".json";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ClaimError {
    #[error("claim {key} is not valid JSON of a claim: {why}")]
    Body { key: String, why: String },
    #[error("claim {key} is not consistent: need 0 <= start ({start}) <= first ({first}) <= end ({end})")]
    Inconsistent { key: String, start: i64, first: i64, end: i64 },
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

    /// Whether another claim for the same start holds the same data range: then writing its data
    /// object is the same work, and both writers may go on.
    pub fn same_range(&self, other: &Claim) -> bool {
        (self.chain_start, self.first, self.end) == (other.chain_start, other.first, other.end)
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
        if 0 <= self.chain_start && self.chain_start <= self.first && self.first <= self.end {
            Ok(())
        } else {
            Err(ClaimError::Inconsistent {
                key: key.to_string(),
                start: self.chain_start,
                first: self.first,
                end: self.end,
            })
        }
    }
}

#[cfg(test)]
impl Claim {
    /// A consistent claim of one record, written by `host:1` at time 0 (for tests).
    pub(crate) fn for_test(chain_start: i64, first: i64, end: i64) -> Claim {
        Claim {
            chain_start,
            first,
            end,
            records: 1,
            retention_gap: false,
            retention_gap_from: None,
            writer: "host:1".into(),
            time_ms: 0,
            timestamps: None,
            topic_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

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
    fn same_range_ignores_who_and_when() {
        let a = claim(0, 0, 99);
        assert!(a.same_range(&Claim { writer: "other:2".into(), time_ms: 5, ..a.clone() }));
        assert!(!a.same_range(&claim(0, 0, 98)));
        assert!(!a.same_range(&claim(0, 1, 99)));
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
