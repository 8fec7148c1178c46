//! Restore planning, pure: which objects and records a restore takes, where each record goes, and what
//! is already restored. Every record a restore writes to Kafka carries a header naming its source
//! (`ksa-restored-from: <topic>/<partition>/<offset>`); a re-run reads the target partitions back and
//! skips exactly the source offsets they already hold, so an interrupted restore resumes without
//! duplicates. Exactly, offset by offset: a failed run does not leave a prefix of what it sent (the
//! idempotent producer keeps order only within a run, and messages that time out leave holes such as
//! 1, 4, 5 written and 2, 3 not, as librdkafka documents), so "the highest offset delivered" would skip
//! the holes.

use std::collections::BTreeMap;

use crate::archive::completeness::Marker;
use crate::archive::partition::{OffsetRange, TopicPartition};
use crate::archive::record::Record;

pub const SOURCE_HEADER: &str = "ksa-restored-from";

pub fn source_header_value(tp: &TopicPartition, offset: i64) -> String {
    format!("{}/{}/{offset}", tp.topic(), tp.partition())
}

pub fn parse_source_header(value: &[u8]) -> Option<(TopicPartition, i64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (rest, offset) = text.rsplit_once('/')?;
    let (topic, partition) = rest.rsplit_once('/')?;
    let tp = TopicPartition::new(topic, partition.parse().ok()?).ok()?;
    Some((tp, offset.parse().ok().filter(|o: &i64| *o >= 0)?))
}

/// How source partitions map to target partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Partitioning {
    /// Partition p goes to partition p.
    Same,
    /// By key, as Kafka's default partitioner places keyed records (murmur2); records without a key
    /// stay with their source partition number modulo the target's partition count.
    Key,
}

pub fn target_partition(
    partitioning: Partitioning,
    source_partition: i32,
    key: Option<&[u8]>,
    target_partitions: i32,
) -> i32 {
    match (partitioning, key) {
        (Partitioning::Same, _) => source_partition,
        (Partitioning::Key, Some(key)) => (murmur2(key) & 0x7fff_ffff) % target_partitions,
        (Partitioning::Key, None) => source_partition % target_partitions,
    }
}

/// Kafka's murmur2 (the Java client's default partitioner hash).
pub fn murmur2(data: &[u8]) -> i32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len() as u32;
    let mut h: u32 = 0x9747_b28c ^ len;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// What to do with a time-bucket folder's objects, by its marker, when restoring by time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FolderChoice {
    /// Its records are all outside the selection (or it has none): none of its objects is read.
    Skip,
    /// Its records' timestamps are all inside the selection: every object is read, no claim looked at.
    Read,
    /// It straddles the selection's edge, or its marker does not say: each object's claim decides.
    Look,
}

/// Which records a restore takes: offsets and record timestamps, both inclusive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    pub from_offset: Option<i64>,
    pub to_offset: Option<i64>,
    pub from_time_ms: Option<i64>,
    pub to_time_ms: Option<i64>,
}

impl Selection {
    /// Whether an object holding `range` can hold selected records (names say offsets, not times).
    pub fn wants_object(&self, range: OffsetRange) -> bool {
        self.from_offset.is_none_or(|f| range.end() >= f) && self.to_offset.is_none_or(|t| range.start() <= t)
    }

    /// Whether an object whose records' timestamps span `[min, max]` can hold selected records.
    pub fn wants_times(&self, (min, max): (i64, i64)) -> bool {
        self.from_time_ms.is_none_or(|f| max >= f) && self.to_time_ms.is_none_or(|t| min <= t)
    }

    /// What a complete time-bucket folder's marker lets this selection do with the folder's objects.
    pub fn folder(&self, marker: &Marker) -> FolderChoice {
        match (marker.objects, marker.timestamps) {
            (Some(0), _) => FolderChoice::Skip,
            (_, Some(span)) if !self.wants_times(span) => FolderChoice::Skip,
            (_, Some((min, max))) if self.wants_times((min, min)) && self.wants_times((max, max)) => FolderChoice::Read,
            _ => FolderChoice::Look,
        }
    }

    /// Whether the selection filters by time at all.
    pub fn by_time(&self) -> bool {
        self.from_time_ms.is_some() || self.to_time_ms.is_some()
    }

    pub fn wants(&self, r: &Record) -> bool {
        let offset_ok = self.from_offset.is_none_or(|f| r.offset >= f) && self.to_offset.is_none_or(|t| r.offset <= t);
        let time_ok = match r.timestamp_ms {
            Some(ts) => self.from_time_ms.is_none_or(|f| ts >= f) && self.to_time_ms.is_none_or(|t| ts <= t),
            None => self.from_time_ms.is_none() && self.to_time_ms.is_none(),
        };
        offset_ok && time_ok
    }

    /// At most how many offsets of `range` are selected (for progress estimates).
    pub fn offsets_in(&self, range: OffsetRange) -> u64 {
        self.offsets_of(range).map_or(0, |(start, end)| u64::try_from(end - start + 1).unwrap_or(0))
    }

    /// The first and last offset of `range` the offset bounds select, if any.
    pub fn offsets_of(&self, range: OffsetRange) -> Option<(i64, i64)> {
        let start = self.from_offset.map_or(range.start(), |f| f.max(range.start()));
        let end = self.to_offset.map_or(range.end(), |t| t.min(range.end()));
        Some((start, end)).filter(|(start, end)| start <= end)
    }
}

/// What the target topic already holds: every source offset its records name (from the headers read
/// back from the target), per source partition, whichever target partition holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreProgress {
    delivered: BTreeMap<TopicPartition, OffsetSet>,
}

impl RestoreProgress {
    /// The target holds the record of `source` at `offset`.
    pub fn delivered(&mut self, source: &TopicPartition, offset: i64) {
        self.delivered.entry(source.clone()).or_default().insert(offset);
    }

    /// The target holds the records of `source` from `first` through `last`.
    pub fn delivered_run(&mut self, source: &TopicPartition, first: i64, last: i64) {
        self.delivered.entry(source.clone()).or_default().insert_run(first, last);
    }

    pub fn is_done(&self, source: &TopicPartition, offset: i64) -> bool {
        self.delivered.get(source).is_some_and(|set| set.contains(offset))
    }

    /// Whether the target holds a record of `source` at every offset from `first` through `last`.
    pub fn covers(&self, source: &TopicPartition, first: i64, last: i64) -> bool {
        self.delivered.get(source).is_some_and(|set| set.covers(first, last))
    }

    /// Holes in what earlier runs wrote: runs of offsets beyond one per source partition.
    pub fn holes(&self) -> usize {
        self.delivered.values().map(|set| set.runs() - 1).sum()
    }

    /// Every run of source offsets the target holds: source partition, first and last offset.
    pub fn runs(&self) -> impl Iterator<Item = (&TopicPartition, i64, i64)> {
        self.delivered.iter().flat_map(|(tp, set)| set.runs.iter().map(move |(first, last)| (tp, *first, *last)))
    }

    /// Adds what `other` holds.
    pub fn merge(&mut self, other: &RestoreProgress) {
        for (tp, first, last) in other.runs() {
            self.delivered_run(tp, first, last);
        }
    }
}

/// A set of offsets, as runs of adjacent ones (a restore's are one run per source partition, or a few
/// after a failed run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetSet {
    /// First offset of each run -> its last.
    runs: BTreeMap<i64, i64>,
}

impl OffsetSet {
    pub fn insert(&mut self, offset: i64) {
        if !self.contains(offset) {
            self.insert_run(offset, offset);
        }
    }

    /// Adds `first..=last`, merged with the runs it overlaps or touches.
    pub fn insert_run(&mut self, mut first: i64, mut last: i64) {
        // The runs starting up to right after `last` and ending no earlier than right before `first`:
        // disjoint and apart, so they are the last ones of that range, from the highest start down.
        while let Some((&start, &end)) =
            self.runs.range(..=last.saturating_add(1)).next_back().filter(|(_, end)| end.saturating_add(1) >= first)
        {
            self.runs.remove(&start);
            (first, last) = (first.min(start), last.max(end));
        }
        self.runs.insert(first, last);
    }

    pub fn contains(&self, offset: i64) -> bool {
        self.covers(offset, offset)
    }

    /// Whether every offset from `first` through `last` is in it.
    pub fn covers(&self, first: i64, last: i64) -> bool {
        self.runs.range(..=first).next_back().is_some_and(|(_, end)| last <= *end)
    }

    /// How many runs of adjacent offsets it holds.
    pub fn runs(&self) -> usize {
        self.runs.len()
    }
}

/// Yields each offset of a partition once, in order, from objects read in key order (objects that
/// overlap, from archives written without claims, repeat offsets).
#[derive(Debug, Default)]
pub struct OffsetOnce {
    next: Option<i64>,
}

impl OffsetOnce {
    pub fn first_time(&mut self, offset: i64) -> bool {
        if self.next.is_some_and(|n| offset < n) {
            return false;
        }
        self.next = Some(offset + 1);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::record::TimestampKind;

    #[test]
    fn murmur2_matches_kafka() {
        // Kafka's UtilsTest vectors.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58_897_971);
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    #[test]
    fn target_partitions() {
        assert_eq!(target_partition(Partitioning::Same, 3, Some(b"k"), 1), 3);
        let p = target_partition(Partitioning::Key, 3, Some(b"foobar"), 7);
        assert_eq!(p, (-790_332_482i32 & 0x7fff_ffff) % 7);
        assert_eq!(target_partition(Partitioning::Key, 9, None, 4), 1);
        // The names `--partitioning` takes.
        assert_eq!(<Partitioning as clap::ValueEnum>::from_str("key", false), Ok(Partitioning::Key));
        assert!(<Partitioning as clap::ValueEnum>::from_str("hash", false).is_err());
    }

    #[test]
    fn source_headers_round_trip() {
        let tp = TopicPartition::new("orders.v2", 12).unwrap();
        let v = source_header_value(&tp, 42);
        assert_eq!(v, "orders.v2/12/42");
        assert_eq!(parse_source_header(v.as_bytes()), Some((tp, 42)));
        for bad in ["", "x", "t/1", "t/x/1", "t/1/-5", "a/b/1/2"] {
            assert_eq!(parse_source_header(bad.as_bytes()), None, "{bad}");
        }
    }

    fn rec(offset: i64, ts: Option<i64>) -> Record {
        Record {
            offset,
            timestamp_ms: ts,
            timestamp_kind: TimestampKind::CreateTime,
            key: None,
            value: None,
            headers: vec![],
        }
    }

    #[test]
    fn selections() {
        let all = Selection::default();
        assert!(all.wants(&rec(5, None)));
        let s =
            Selection { from_offset: Some(10), to_offset: Some(20), from_time_ms: Some(100), to_time_ms: Some(200) };
        assert!(s.wants(&rec(10, Some(100))) && s.wants(&rec(20, Some(200))));
        assert!(!s.wants(&rec(9, Some(150))) && !s.wants(&rec(21, Some(150))));
        assert!(!s.wants(&rec(15, Some(99))) && !s.wants(&rec(15, Some(201))) && !s.wants(&rec(15, None)));
        let r = |a, b| OffsetRange::new(a, b).unwrap();
        assert!(s.wants_object(r(0, 10)) && s.wants_object(r(20, 30)) && s.wants_object(r(12, 14)));
        assert!(!s.wants_object(r(0, 9)) && !s.wants_object(r(21, 30)));
        assert_eq!(s.offsets_in(r(0, 100)), 11);
        assert!(s.wants_times((50, 100)) && s.wants_times((200, 300)) && s.wants_times((0, 1000)));
        assert!(!s.wants_times((0, 99)) && !s.wants_times((201, 300)));
        assert!(s.by_time() && !all.by_time() && all.wants_times((1, 2)));
        assert_eq!(s.offsets_in(r(15, 16)), 2);
        assert_eq!(all.offsets_in(r(5, 9)), 5);
    }

    #[test]
    fn progress_is_exact_per_offset() {
        let a = TopicPartition::new("t", 0).unwrap();
        let b = TopicPartition::new("t", 1).unwrap();
        let mut p = RestoreProgress::default();
        // A failed run's messages timed out: 1, 4 and 5 were written, 2 and 3 were not.
        for offset in [1, 4, 5] {
            p.delivered(&a, offset);
        }
        let done: Vec<i64> = (0..7).filter(|o| p.is_done(&a, *o)).collect();
        assert_eq!(done, vec![1, 4, 5], "2 and 3 are restored again, nothing else");
        assert_eq!(p.holes(), 1);
        assert!(!p.is_done(&b, 1), "per source partition");
    }

    #[test]
    fn offset_sets_merge_adjacent_runs() {
        let mut set = OffsetSet::default();
        for offset in [5, 3, 4, 9, 10, 0, 8, 4] {
            set.insert(offset);
        }
        assert_eq!((0..12).filter(|o| set.contains(*o)).collect::<Vec<_>>(), vec![0, 3, 4, 5, 8, 9, 10]);
        assert_eq!(set.runs(), 3, "0, 3..=5 and 8..=10");
        set.insert(1);
        set.insert(2);
        set.insert(6);
        set.insert(7);
        assert_eq!(set.runs(), 1);
        assert!(set.contains(10) && !set.contains(11) && !set.contains(-1));
        set.insert(i64::MAX);
        assert!(set.contains(i64::MAX));
    }

    #[test]
    fn runs_added_whole_merge_with_those_they_overlap_or_touch() {
        let mut set = OffsetSet::default();
        for (first, last) in [(10, 19), (30, 39), (50, 59), (0, 4)] {
            set.insert_run(first, last);
        }
        assert_eq!(set.runs(), 4);
        set.insert_run(20, 29);
        assert_eq!(set.runs(), 3, "touching both sides: 10..=39 is one run");
        set.insert_run(35, 55);
        assert_eq!(set.runs(), 2, "overlapping: 10..=59");
        set.insert_run(5, 9);
        assert_eq!(set.runs(), 1);
        assert!((0..=59).all(|o| set.contains(o)) && !set.contains(60) && !set.contains(-1));
        set.insert_run(62, i64::MAX);
        assert_eq!((set.runs(), set.contains(61), set.contains(i64::MAX)), (2, false, true));
        let mut progress = RestoreProgress::default();
        let tp = TopicPartition::new("t", 0).unwrap();
        progress.delivered_run(&tp, 0, 9);
        let mut more = RestoreProgress::default();
        more.delivered(&tp, 10);
        progress.merge(&more);
        assert_eq!(progress.runs().collect::<Vec<_>>(), vec![(&tp, 0, 10)]);
        assert!(progress.covers(&tp, 0, 10) && progress.covers(&tp, 3, 3) && !progress.covers(&tp, 5, 11));
        assert!(!progress.covers(&TopicPartition::new("t", 1).unwrap(), 0, 0));
    }

    #[test]
    fn each_offset_once() {
        let mut once = OffsetOnce::default();
        let seen: Vec<i64> = [0, 1, 2, 1, 2, 3, 5, 4, 6].into_iter().filter(|o| once.first_time(*o)).collect();
        assert_eq!(seen, vec![0, 1, 2, 3, 5, 6]);
    }

    #[test]
    fn a_folders_marker_decides_whether_its_objects_are_read() {
        let marker = |objects, timestamps| Marker {
            topic: "t".into(),
            bucket: "dt=1970-01-01".into(),
            start_ms: 0,
            end_ms: 1,
            partitions: 1,
            archived_through: BTreeMap::new(),
            objects,
            timestamps,
            writer: "w".into(),
            time_ms: 0,
        };
        let s = Selection { from_time_ms: Some(100), to_time_ms: Some(200), ..Selection::default() };
        assert_eq!(s.folder(&marker(Some(0), None)), FolderChoice::Skip);
        assert_eq!(s.folder(&marker(Some(4), Some((201, 300)))), FolderChoice::Skip);
        assert_eq!(s.folder(&marker(Some(4), Some((10, 99)))), FolderChoice::Skip);
        assert_eq!(s.folder(&marker(Some(4), Some((100, 200)))), FolderChoice::Read);
        assert_eq!(s.folder(&marker(Some(4), Some((50, 150)))), FolderChoice::Look);
        assert_eq!(s.folder(&marker(Some(4), Some((10, 300)))), FolderChoice::Look);
        assert_eq!(s.folder(&marker(Some(4), None)), FolderChoice::Look);
        assert_eq!(s.folder(&marker(None, None)), FolderChoice::Look, "a marker from before the summary");
        let open_ended = Selection { from_time_ms: Some(100), ..Selection::default() };
        assert_eq!(open_ended.folder(&marker(Some(4), Some((100, i64::MAX)))), FolderChoice::Read);
    }
}
