//! Recovery planning: where a partition's archive ends, computed from listings alone.
//!
//! The planner is a state machine that asks for listing pages and is fed them, so it never touches the
//! network. It rests on one property of the archive: objects of a partition do not overlap and their
//! keys sort by start offset, so listing from any key at or before the last object's start returns
//! the last object, whose end is the archive's end. The Kafka commit says where to list from: its
//! metadata names the start offset of the object it was made for (one request then settles it); a
//! commit without metadata (reset, or a broker that drops metadata) only gives the committed offset,
//! and the planner probes backwards from it in doubling steps (O(log distance) requests) until a
//! listing is not empty. Without any commit, the whole partition folder is listed (objects / 1000
//! requests). The commit is never trusted for the position itself: that always comes from the keys.

use super::object_key::{ObjectKey, Prefix};
use super::partition::{OffsetRange, TopicPartition};

const HINT_METADATA_TAG: &str = "ksa1:";

/// What the archiver finds committed in Kafka: where to start listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitHint {
    /// The committed offset: the archive should hold everything below it.
    pub next_offset: i64,
    /// From the commit metadata: start offset of the object whose end is `next_offset - 1`.
    pub object_start: Option<i64>,
}

impl CommitHint {
    /// The commit metadata string for an object starting at `object_start`.
    pub fn metadata_for(object_start: i64) -> String {
        format!("{HINT_METADATA_TAG}{object_start}")
    }

    /// Reads a committed offset and its metadata back; `None` when no offset is committed.
    pub fn parse(next_offset: i64, metadata: &str) -> Option<Self> {
        if next_offset <= 0 {
            return None;
        }
        let object_start = metadata
            .strip_prefix(HINT_METADATA_TAG)
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|s| (0..next_offset).contains(s));
        Some(Self { next_offset, object_start })
    }
}

/// One listing request: keys under `prefix`, strictly after `start_after`, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    pub prefix: String,
    pub start_after: Option<String>,
}

/// One page of a listing, as S3 ListObjectsV2 returns it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListPage {
    pub keys: Vec<String>,
    pub truncated: bool,
}

/// Two objects of one partition whose offset ranges overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub earlier: OffsetRange,
    pub later: OffsetRange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The first offset not yet in the archive; `None` when the partition has no objects.
    pub next_offset: Option<i64>,
    /// The object holding the highest offset.
    pub last_object: Option<ObjectKey>,
    /// Objects seen (all of them on a full listing; those from the listing's start on otherwise).
    pub objects_seen: u64,
    pub list_requests: u32,
    /// Whether a commit hint chose where the listing started.
    pub hinted: bool,
    /// Keys in the partition folder that are not archive objects (ignored, to be warned about).
    pub ignored_keys: Vec<String>,
    pub overlaps: Vec<Overlap>,
}

#[derive(Debug)]
pub enum Step {
    List(ListRequest),
    Done(Recovered),
}

#[derive(Debug)]
pub struct RecoveryPlan {
    prefix: Prefix,
    tp: TopicPartition,
    folder: String,
    /// While probing backwards: the offset probed from and how far below the hint it is.
    probe: Option<(i64, i64)>,
    /// The offset the backward probes count down from.
    probe_base: i64,
    hinted: bool,
    list_requests: u32,
    last_object: Option<ObjectKey>,
    objects_seen: u64,
    ignored_keys: Vec<String>,
    overlaps: Vec<Overlap>,
}

impl RecoveryPlan {
    /// Starts a plan; returns it with the first request to make.
    pub fn start(prefix: &Prefix, tp: &TopicPartition, hint: Option<CommitHint>) -> (Self, ListRequest) {
        let folder = prefix.partition_folder(tp);
        let base = hint.map(|h| h.object_start.unwrap_or(h.next_offset - 1));
        let plan = Self {
            prefix: prefix.clone(),
            tp: tp.clone(),
            folder: folder.clone(),
            probe: base.map(|b| (b, 0)),
            probe_base: base.unwrap_or(0),
            hinted: hint.is_some(),
            list_requests: 1,
            last_object: None,
            objects_seen: 0,
            ignored_keys: Vec::new(),
            overlaps: Vec::new(),
        };
        let start_after = base.map(|b| prefix.start_after_for(tp, b));
        (plan, ListRequest { prefix: folder, start_after })
    }

    /// Feeds the page answering the last request; returns the next request or the result.
    pub fn feed(&mut self, page: ListPage) -> Step {
        for raw in &page.keys {
            match ObjectKey::parse(&self.prefix, raw) {
                Ok(k) if k.tp == self.tp => {
                    // Found an object at or after the probe: from here on, just page forward.
                    self.probe = None;
                    self.observe(k);
                }
                _ => self.ignored_keys.push(raw.clone()),
            }
        }
        if page.truncated {
            if let Some(last) = page.keys.last() {
                return self.request(Some(last.clone()));
            }
        }
        if let Some((at, distance)) = self.probe {
            if at > 0 {
                // Nothing at or after `at`: the archive ends lower. Probe twice as far back.
                let distance = distance.saturating_mul(2).max(1);
                let next = (self.probe_base - distance).max(0);
                self.probe = Some((next, distance));
                self.ignored_keys.clear();
                return self.request(Some(self.prefix.start_after_for(&self.tp, next)));
            }
        }
        Step::Done(Recovered {
            next_offset: self.last_object.as_ref().map(|k| k.range.next()),
            last_object: self.last_object.take(),
            objects_seen: self.objects_seen,
            list_requests: self.list_requests,
            hinted: self.hinted,
            ignored_keys: std::mem::take(&mut self.ignored_keys),
            overlaps: std::mem::take(&mut self.overlaps),
        })
    }

    fn request(&mut self, start_after: Option<String>) -> Step {
        self.list_requests += 1;
        Step::List(ListRequest { prefix: self.folder.clone(), start_after })
    }

    fn observe(&mut self, key: ObjectKey) {
        self.objects_seen += 1;
        match &self.last_object {
            Some(last) if key.range.start() <= last.range.end() => {
                self.overlaps.push(Overlap { earlier: last.range, later: key.range });
                if key.range.end() > last.range.end() {
                    self.last_object = Some(key);
                }
            }
            _ => self.last_object = Some(key),
        }
    }
}

/// Where consumption resumes, given the archive's next offset and the partition's log start offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartDecision {
    Resume(i64),
    /// Retention deleted `missing` before it was archived: resume at the log start, loudly.
    RetentionGap { missing: OffsetRange, resume_at: i64 },
}

pub fn decide_start(archive_next: i64, log_start: i64) -> StartDecision {
    if archive_next < log_start {
        let missing = OffsetRange::new(archive_next, log_start - 1).expect("archive_next < log_start");
        StartDecision::RetentionGap { missing, resume_at: log_start }
    } else {
        StartDecision::Resume(archive_next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::object_key::FileKind;

    /// ListObjectsV2 semantics over a set of keys: sorted, after `start_after`, at most `max_keys`.
    fn list(all: &[String], req: &ListRequest, max_keys: usize) -> ListPage {
        let mut keys: Vec<&String> = all
            .iter()
            .filter(|k| k.starts_with(&req.prefix) && req.start_after.as_ref().is_none_or(|sa| *k > sa))
            .collect();
        keys.sort();
        ListPage { truncated: keys.len() > max_keys, keys: keys.into_iter().take(max_keys).cloned().collect() }
    }

    fn run(all: &[String], hint: Option<CommitHint>) -> Recovered {
        let prefix = Prefix::new("arch");
        let tp = TopicPartition::new("t", 0).unwrap();
        let (mut plan, mut req) = RecoveryPlan::start(&prefix, &tp, hint);
        for _ in 0..10_000 {
            match plan.feed(list(all, &req, 1000)) {
                Step::List(next) => req = next,
                Step::Done(r) => return r,
            }
        }
        panic!("planner did not finish");
    }

    fn k(p: i32, s: i64, e: i64) -> String {
        ObjectKey::new(
            Prefix::new("arch"),
            TopicPartition::new("t", p).unwrap(),
            OffsetRange::new(s, e).unwrap(),
            FileKind::Parquet,
        )
        .to_string()
    }

    /// `n` contiguous objects of `size` offsets each in partition 0.
    fn chain(n: i64, size: i64) -> Vec<String> {
        (0..n).map(|i| k(0, i * size, i * size + size - 1)).collect()
    }

    #[test]
    fn empty_archive_has_no_position() {
        let r = run(&[], None);
        assert_eq!(r.next_offset, None);
        assert_eq!(r.list_requests, 1);
    }

    #[test]
    fn one_file() {
        let r = run(&[k(0, 0, 9)], None);
        assert_eq!(r.next_offset, Some(10));
        assert_eq!(r.objects_seen, 1);
    }

    #[test]
    fn thousands_of_files_page_through() {
        let all = chain(3500, 10);
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(35_000));
        assert_eq!(r.objects_seen, 3500);
        assert_eq!(r.list_requests, 4);
        assert!(r.overlaps.is_empty());
    }

    fn hint(next_offset: i64, object_start: Option<i64>) -> Option<CommitHint> {
        Some(CommitHint { next_offset, object_start })
    }

    #[test]
    fn a_hint_with_the_object_start_takes_one_request() {
        let all = chain(3500, 10);
        let r = run(&all, hint(35_000, Some(34_990)));
        assert_eq!((r.next_offset, r.list_requests, r.hinted), (Some(35_000), 1, true));
    }

    #[test]
    fn a_lagging_hint_still_finds_later_objects() {
        let all = chain(3500, 10);
        let r = run(&all, hint(30_000, Some(29_990)));
        assert_eq!((r.next_offset, r.list_requests), (Some(35_000), 1));
    }

    #[test]
    fn a_commit_without_metadata_probes_back_in_doubling_steps() {
        let all = chain(3500, 1000);
        let r = run(&all, hint(3_500_000, None));
        assert_eq!(r.next_offset, Some(3_500_000));
        // Probes at 3_499_999 - {0, 1, 2, 4, ..., 1024}: 12 requests, whatever the object count.
        assert_eq!(r.list_requests, 12);
    }

    #[test]
    fn wrong_hints_never_decide_the_position() {
        let all = chain(2500, 10);
        for h in [
            hint(99_999, Some(99_000)),
            hint(99_999, None),
            hint(i64::MAX, None),
            hint(1_005, Some(1_000)),
            hint(35, Some(25)),
            hint(1, None),
        ] {
            let r = run(&all, h);
            assert_eq!(r.next_offset, Some(25_000), "{h:?}");
            assert!(r.list_requests <= 70, "{h:?}: {} requests", r.list_requests);
        }
    }

    #[test]
    fn a_hint_on_an_empty_archive_finds_nothing() {
        let r = run(&[], hint(50, Some(0)));
        assert_eq!((r.next_offset, r.list_requests), (None, 1));
        let r = run(&[], hint(1 << 40, None));
        assert_eq!(r.next_offset, None);
        assert_eq!(r.list_requests, 42);
    }

    #[test]
    fn unparseable_keys_are_ignored_not_fatal() {
        let mut all = chain(3, 10);
        all.push("arch/topic=t/partition=0/README.txt".into());
        all.push("arch/topic=t/partition=0/t+0+5+9.parquet".into());
        all.push("arch/topic=t/partition=0/u+0+00000000000000000100+00000000000000000200.parquet".into());
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(30));
        assert_eq!(r.ignored_keys.len(), 3);
    }

    #[test]
    fn other_partitions_are_not_listed() {
        let mut all = chain(3, 10);
        all.push(k(1, 0, 999));
        all.push(k(10, 0, 999));
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(30));
        assert!(r.ignored_keys.is_empty());
    }

    #[test]
    fn overlaps_are_reported_and_the_highest_end_wins() {
        let all = vec![k(0, 0, 100), k(0, 50, 60), k(0, 101, 120), k(0, 110, 130)];
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(131));
        assert_eq!(r.overlaps.len(), 2);
        assert_eq!(r.overlaps[0], Overlap { earlier: OffsetRange::new(0, 100).unwrap(), later: OffsetRange::new(50, 60).unwrap() });
    }

    #[test]
    fn holes_from_compaction_are_not_overlaps() {
        let all = vec![k(0, 0, 10), k(0, 15, 20), k(0, 40, 41)];
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(42));
        assert!(r.overlaps.is_empty());
    }

    #[test]
    fn hint_metadata_round_trips() {
        let md = CommitHint::metadata_for(1234);
        assert_eq!(CommitHint::parse(2000, &md), hint(2000, Some(1234)));
        assert_eq!(CommitHint::parse(1234, &md), hint(1234, None));
        assert_eq!(CommitHint::parse(2000, ""), hint(2000, None));
        assert_eq!(CommitHint::parse(2000, "ksa1:x"), hint(2000, None));
        assert_eq!(CommitHint::parse(0, &md), None);
        assert_eq!(CommitHint::parse(-1001, ""), None);
    }

    proptest::proptest! {
        /// Whatever the commit says (right, stale, ahead, reset, metadata or not), the position is the
        /// archive's end + 1.
        #[test]
        fn any_hint_yields_the_archive_end(
            sizes in proptest::collection::vec((1i64..500, 0i64..3), 0..300),
            next in 0i64..200_000,
            object_start in proptest::option::of(0i64..200_000),
        ) {
            let mut all = Vec::new();
            let mut at = 0;
            for (len, hole) in sizes {
                at += hole;
                all.push(k(0, at, at + len - 1));
                at += len;
            }
            let expected = (!all.is_empty()).then_some(at);
            let r = run(&all, CommitHint::parse(next, &object_start.map(CommitHint::metadata_for).unwrap_or_default()));
            proptest::prop_assert_eq!(r.next_offset, expected);
        }
    }

    #[test]
    fn start_decisions() {
        assert_eq!(decide_start(100, 0), StartDecision::Resume(100));
        assert_eq!(decide_start(100, 100), StartDecision::Resume(100));
        assert_eq!(
            decide_start(100, 250),
            StartDecision::RetentionGap { missing: OffsetRange::new(100, 249).unwrap(), resume_at: 250 }
        );
    }
}
