//! Object names: `<prefix>/topic=<t>/partition=<p>/<t>+<p>+<start:020>+<end:020>.<ext>`, or with time
//! buckets `<prefix>/topic=<t>/dt=<YYYY-MM-DD>[/hour=<HH>]/partition=<p>/<same file name>`.
//!
//! Offsets are zero-padded to 20 digits so that lexicographic key order is offset order, which is what
//! lets recovery list a partition folder from a known key (`StartAfter`) instead of from the beginning.

use std::fmt;

use thiserror::Error;

use super::partition::{OffsetRange, TopicPartition};
use super::time_bucket::Bucket;

/// What a data object holds, told by its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    Parquet,
    Jsonl,
    JsonlGz,
    JsonlZst,
}

impl FileKind {
    pub const ALL: [FileKind; 4] = [FileKind::Parquet, FileKind::Jsonl, FileKind::JsonlGz, FileKind::JsonlZst];

    pub fn extension(self) -> &'static str {
        match self {
            FileKind::Parquet => "parquet",
            FileKind::Jsonl => "jsonl",
            FileKind::JsonlGz => "jsonl.gz",
            FileKind::JsonlZst => "jsonl.zst",
        }
    }

    pub fn from_extension(ext: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.extension() == ext)
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("key {key:?} is not under prefix {prefix:?}")]
    OutsidePrefix { key: String, prefix: String },
    #[error("key {key:?} does not follow <prefix>/topic=<t>/[dt=<YYYY-MM-DD>/[hour=<HH>/]]partition=<p>/<t>+<p>+<start:020>+<end:020>.<ext>: {why}")]
    Malformed { key: String, why: &'static str },
}

/// Where the archive lives inside a bucket or directory. Stored without leading or trailing slashes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Prefix(String);

impl Prefix {
    pub fn new(raw: &str) -> Self {
        Prefix(raw.trim_matches('/').to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `<prefix>/` or the empty string, ready to have a relative key appended.
    pub(crate) fn root(&self) -> String {
        if self.0.is_empty() {
            String::new()
        } else {
            format!("{}/", self.0)
        }
    }

    /// The folder (ending in `/`) that holds every data object of a partition (without time buckets).
    pub fn partition_folder(&self, tp: &TopicPartition) -> String {
        self.data_folder(tp, None)
    }

    /// The folder (ending in `/`) that holds a partition's data objects of one time bucket, or all of
    /// them without time buckets.
    pub fn data_folder(&self, tp: &TopicPartition, bucket: Option<&Bucket>) -> String {
        match bucket {
            Some(b) => format!("{}topic={}/{b}/partition={}/", self.root(), tp.topic(), tp.partition()),
            None => format!("{}topic={}/partition={}/", self.root(), tp.topic(), tp.partition()),
        }
    }

    /// The folder (ending in `/`) that holds a partition's claims (see `claim`); outside the data
    /// folders, so lake readers never see claims.
    pub fn claims_folder(&self, tp: &TopicPartition) -> String {
        format!("{}_claims/topic={}/partition={}/", self.root(), tp.topic(), tp.partition())
    }

    /// The folder (ending in `/`) that holds the claims of every partition of a topic.
    pub fn claims_topic_folder(&self, topic: &str) -> String {
        format!("{}_claims/topic={}/", self.root(), topic)
    }

    /// The folder (ending in `/`) of one time bucket of a topic, above its partitions' folders.
    pub fn bucket_folder(&self, topic: &str, bucket: &Bucket) -> String {
        format!("{}topic={topic}/{bucket}/", self.root())
    }

    /// The folder (ending in `/`) that holds every partition of a topic.
    pub fn topic_folder(&self, topic: &str) -> String {
        format!("{}topic={}/", self.root(), topic)
    }

    /// A string that sorts right before every key of `tp` whose start offset is >= `start`: use it as
    /// `StartAfter` to list a partition from a given offset on.
    pub fn start_after_for(&self, tp: &TopicPartition, start: i64) -> String {
        self.start_after_in(tp, None, start)
    }

    /// Like [`Prefix::start_after_for`], in the partition's folder of `bucket`.
    pub fn start_after_in(&self, tp: &TopicPartition, bucket: Option<&Bucket>, start: i64) -> String {
        format!("{}{}+{}+{:020}", self.data_folder(tp, bucket), tp.topic(), tp.partition(), start)
    }
}

/// The name of one data object.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub prefix: Prefix,
    pub tp: TopicPartition,
    /// The time bucket folder it is in (lake layout), if any.
    pub bucket: Option<Bucket>,
    pub range: OffsetRange,
    pub kind: FileKind,
}

impl ObjectKey {
    pub fn new(prefix: Prefix, tp: TopicPartition, range: OffsetRange, kind: FileKind) -> Self {
        Self { prefix, tp, bucket: None, range, kind }
    }

    /// The same object in the folder of `bucket` (or in the partition folder, without).
    pub fn in_bucket(self, bucket: Option<Bucket>) -> Self {
        Self { bucket, ..self }
    }

    /// Parses a full key under `prefix`. Anything that is not exactly what [`ObjectKey`]'s `Display`
    /// writes is rejected, so a foreign object can never be mistaken for part of the archive.
    pub fn parse(prefix: &Prefix, key: &str) -> Result<Self, KeyError> {
        let malformed = |why| KeyError::Malformed { key: key.to_string(), why };
        let root = prefix.root();
        let rest = key
            .strip_prefix(root.as_str())
            .ok_or_else(|| KeyError::OutsidePrefix { key: key.to_string(), prefix: prefix.as_str().to_string() })?;
        let parts: Vec<&str> = rest.split('/').collect();
        let (topic_dir, bucket, partition_dir, file) = match parts[..] {
            [topic_dir, partition_dir, file] => (topic_dir, None, partition_dir, file),
            [topic_dir, dt, partition_dir, file] => (topic_dir, Some((dt, None)), partition_dir, file),
            [topic_dir, dt, hour, partition_dir, file] => (topic_dir, Some((dt, Some(hour))), partition_dir, file),
            _ => return Err(malformed("expected topic=<t>/[<time bucket>/]partition=<p>/<file> below the prefix")),
        };
        let bucket = match bucket {
            Some((dt, hour)) => Some(
                Bucket::parse(dt, hour).ok_or_else(|| malformed("time bucket is not dt=<YYYY-MM-DD>[/hour=<HH>]"))?,
            ),
            None => None,
        };
        let topic = topic_dir.strip_prefix("topic=").ok_or_else(|| malformed("folder is not topic=<t>"))?;
        let partition_str =
            partition_dir.strip_prefix("partition=").ok_or_else(|| malformed("folder is not partition=<p>"))?;
        let partition = parse_partition(partition_str).ok_or_else(|| malformed("partition is not a number"))?;
        let tp = TopicPartition::new(topic, partition).map_err(|_| malformed("topic name is not valid"))?;

        let mut fields = file.splitn(4, '+');
        let (Some(f_topic), Some(f_partition), Some(f_start), Some(f_rest)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(malformed("file name is not <t>+<p>+<start>+<end>.<ext>"));
        };
        if f_topic != topic || f_partition != partition_str {
            return Err(malformed("file name names another topic or partition than its folder"));
        }
        let (f_end, ext) = f_rest.split_once('.').ok_or_else(|| malformed("file name has no extension"))?;
        let start = parse_padded_offset(f_start).ok_or_else(|| malformed("start offset is not 20 digits"))?;
        let end = parse_padded_offset(f_end).ok_or_else(|| malformed("end offset is not 20 digits"))?;
        let range = OffsetRange::new(start, end).map_err(|_| malformed("start offset is after end offset"))?;
        let kind = FileKind::from_extension(ext).ok_or_else(|| malformed("unknown extension"))?;
        Ok(Self { prefix: prefix.clone(), tp, bucket, range, kind })
    }
}

impl ObjectKey {
    /// The key below its prefix (`topic=<t>/partition=<p>/<file>`), as claims record it.
    pub fn relative(&self) -> String {
        ObjectKey { prefix: Prefix::default(), ..self.clone() }.to_string()
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}+{}+{:020}+{:020}.{}",
            self.prefix.data_folder(&self.tp, self.bucket.as_ref()),
            self.tp.topic(),
            self.tp.partition(),
            self.range.start(),
            self.range.end(),
            self.kind.extension()
        )
    }
}

/// Partition numbers in keys are plain decimal without sign or leading zeros.
pub(crate) fn parse_partition(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

pub(crate) fn parse_padded_offset(s: &str) -> Option<i64> {
    if s.len() != 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::archive::time_bucket::BucketWidth;

    fn key(prefix: &str, topic: &str, p: i32, s: i64, e: i64, kind: FileKind) -> ObjectKey {
        ObjectKey::new(
            Prefix::new(prefix),
            TopicPartition::new(topic, p).unwrap(),
            OffsetRange::new(s, e).unwrap(),
            kind,
        )
    }

    #[test]
    fn formats_the_documented_layout() {
        let k = key("archive/v1", "orders", 3, 0, 41, FileKind::Parquet);
        assert_eq!(
            k.to_string(),
            "archive/v1/topic=orders/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet"
        );
        let k = key("", "t", 0, 7, 7, FileKind::JsonlZst);
        assert_eq!(k.to_string(), "topic=t/partition=0/t+0+00000000000000000007+00000000000000000007.jsonl.zst");
    }

    #[test]
    fn time_buckets_are_folders_between_topic_and_partition() {
        let hour = Bucket::containing(BucketWidth::Hour, 1_795_996_800_000 + 7 * 3_600_000);
        let k = key("a", "orders", 3, 0, 41, FileKind::Parquet).in_bucket(Some(hour));
        let text = "a/topic=orders/dt=2026-11-30/hour=07/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet";
        assert_eq!(k.to_string(), text);
        assert_eq!(ObjectKey::parse(&Prefix::new("a"), text), Ok(k.clone()));
        let day = Bucket::containing(BucketWidth::Day, 1_795_996_800_000);
        let k = k.in_bucket(Some(day));
        assert_eq!(k.to_string(), text.replace("/hour=07", ""));
        assert_eq!(k.relative(), text.replace("/hour=07", "").replacen("a/", "", 1));
        let p = Prefix::new("a");
        for bad in [
            "a/topic=orders/dt=2026-11-31/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet",
            "a/topic=orders/hour=07/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet",
            "a/topic=orders/dt=2026-11-30/hour=7/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet",
            "a/topic=orders/dt=2026-11-30/hour=07/x=1/partition=3/orders+3+00000000000000000000+00000000000000000041.parquet",
            "a/topic=orders/partition=3/dt=2026-11-30/orders+3+00000000000000000000+00000000000000000041.parquet",
        ] {
            assert!(ObjectKey::parse(&p, bad).is_err(), "{bad} should not parse");
        }
    }

    #[test]
    fn prefix_slashes_are_normalised() {
        assert_eq!(Prefix::new("/a/b/"), Prefix::new("a/b"));
        assert_eq!(Prefix::new("///").as_str(), "");
    }

    #[test]
    fn rejects_foreign_and_mislabelled_keys() {
        let p = Prefix::new("pre");
        let good = "pre/topic=t/partition=1/t+1+00000000000000000005+00000000000000000009.jsonl.gz";
        assert!(ObjectKey::parse(&p, good).is_ok());
        let bad = [
            "other/topic=t/partition=1/t+1+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/x/t+1+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/u+1+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/t+2+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=01/t+01+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/t+1+5+9.jsonl",
            "pre/topic=t/partition=1/t+1+00000000000000000009+00000000000000000005.jsonl",
            "pre/topic=t/partition=1/t+1+00000000000000000005+00000000000000000009.csv",
            "pre/topic=t/partition=1/t+1+00000000000000000005+00000000000000000009",
            "pre/topic=t/partition=-1/t+-1+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=a+b/partition=1/a+b+1+00000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/t+1+-0000000000000000005+00000000000000000009.jsonl",
            "pre/topic=t/partition=1/t+1+99999999999999999999+99999999999999999999.jsonl",
            "pre/_claims/topic=t/partition=1/00000000000000000005",
            "pre/topic=t/partition=1/",
        ];
        for k in bad {
            assert!(ObjectKey::parse(&p, k).is_err(), "{k} should not parse");
        }
    }

    #[test]
    fn start_after_sorts_between_neighbours() {
        let p = Prefix::new("x");
        let tp = TopicPartition::new("t", 2).unwrap();
        let sa = p.start_after_for(&tp, 100);
        let before = key("x", "t", 2, 99, 150, FileKind::Parquet).to_string();
        let at = key("x", "t", 2, 100, 100, FileKind::Parquet).to_string();
        let after = key("x", "t", 2, 101, 200, FileKind::Jsonl).to_string();
        assert!(before < sa && sa < at && at < after);
    }

    fn arb_topic() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9._-]{1,40}".prop_filter("not . or ..", |t| t != "." && t != "..")
    }

    proptest! {
        #[test]
        fn format_parse_round_trip(
            prefix in "[a-z0-9/=_-]{0,30}",
            topic in arb_topic(),
            partition in 0i32..=i32::MAX,
            start in 0i64..=i64::MAX,
            len in 0i64..=1_000_000,
            kind_idx in 0usize..4,
            bucket in proptest::option::of((any::<bool>(), 0i64..253_402_300_799_999)),
        ) {
            let end = start.saturating_add(len);
            let bucket = bucket.map(|(hourly, ms)| {
                Bucket::containing(if hourly { BucketWidth::Hour } else { BucketWidth::Day }, ms)
            });
            let k = key(&prefix, &topic, partition, start, end, FileKind::ALL[kind_idx]).in_bucket(bucket);
            let text = k.to_string();
            let parsed = ObjectKey::parse(&Prefix::new(&prefix), &text).unwrap();
            prop_assert_eq!(&parsed, &k);
            prop_assert_eq!(parsed.to_string(), text);
        }

        #[test]
        fn key_order_is_offset_order(topic in arb_topic(), a in 0i64..=i64::MAX / 2, b in 0i64..=i64::MAX / 2) {
            let ka = key("p", &topic, 0, a, a, FileKind::Parquet).to_string();
            let kb = key("p", &topic, 0, b, b, FileKind::Parquet).to_string();
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }

        #[test]
        fn parse_never_panics(s in ".{0,200}") {
            let _ = ObjectKey::parse(&Prefix::new("p"), &s);
        }
    }
}
