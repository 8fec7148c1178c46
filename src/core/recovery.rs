//! Recovery planning: where a partition's archive ends, computed from listings alone.
//!
//! The planner is a state machine that asks for listing pages and is fed them, so it never touches the
//! network. With a commit hint (the Kafka committed offset plus, in the commit metadata, the start
//! offset of the object that commit was for) the first page usually settles it: listing from that
//! object's key returns the object itself (confirming the hint) and anything written after it. Without
//! a hint, or with a hint the archive does not confirm, the whole partition folder is listed.

use super::object_key::{ObjectKey, Prefix};
use super::partition::{OffsetRange, TopicPartition};

const HINT_METADATA_TAG: &str = "ksa1:";

/// What the archiver commits to Kafka alongside the offset: enough to list from the right key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitHint {
    /// The committed offset: the archive should hold everything below it.
    pub next_offset: i64,
    /// Start offset of the object whose end is `next_offset - 1`.
    pub object_start: i64,
}

impl CommitHint {
    /// The commit metadata string for an object starting at `object_start`.
    pub fn metadata_for(object_start: i64) -> String {
        format!("{HINT_METADATA_TAG}{object_start}")
    }

    /// Reads a committed offset and its metadata back; `None` if either is unusable.
    pub fn parse(next_offset: i64, metadata: &str) -> Option<Self> {
        let object_start: i64 = metadata.strip_prefix(HINT_METADATA_TAG)?.parse().ok()?;
        (0 <= object_start && object_start < next_offset).then_some(Self { next_offset, object_start })
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

/// What happened to the commit hint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HintUse {
    Absent,
    Confirmed,
    /// The archive does not hold the object the hint names: the hint was ignored.
    Rejected,
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
    /// Objects seen (all of them on a full listing; those from the hint on otherwise).
    pub objects_seen: u64,
    pub list_requests: u32,
    pub hint: HintUse,
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
    /// `Some` while the hint is being checked on the first page(s).
    pending_hint: Option<CommitHint>,
    hint: HintUse,
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
        let start_after = hint.map(|h| prefix.start_after_for(tp, h.object_start));
        let plan = Self {
            prefix: prefix.clone(),
            tp: tp.clone(),
            folder: folder.clone(),
            pending_hint: hint,
            hint: if hint.is_some() { HintUse::Confirmed } else { HintUse::Absent },
            list_requests: 1,
            last_object: None,
            objects_seen: 0,
            ignored_keys: Vec::new(),
            overlaps: Vec::new(),
        };
        (plan, ListRequest { prefix: folder, start_after })
    }

    /// Feeds the page answering the last request; returns the next request or the result.
    pub fn feed(&mut self, page: ListPage) -> Step {
        for raw in &page.keys {
            let key = match ObjectKey::parse(&self.prefix, raw) {
                Ok(k) if k.tp == self.tp => k,
                _ => {
                    self.ignored_keys.push(raw.clone());
                    continue;
                }
            };
            if let Some(hint) = self.pending_hint.take() {
                if key.range.start() != hint.object_start || key.range.next() != hint.next_offset {
                    return self.restart_without_hint();
                }
            }
            self.observe(key);
        }
        if page.truncated {
            if let Some(last) = page.keys.last() {
                self.list_requests += 1;
                return Step::List(ListRequest { prefix: self.folder.clone(), start_after: Some(last.clone()) });
            }
        }
        if self.pending_hint.is_some() {
            // Listing from the hint found nothing of ours: the named object does not exist.
            return self.restart_without_hint();
        }
        Step::Done(Recovered {
            next_offset: self.last_object.as_ref().map(|k| k.range.next()),
            last_object: self.last_object.take(),
            objects_seen: self.objects_seen,
            list_requests: self.list_requests,
            hint: self.hint,
            ignored_keys: std::mem::take(&mut self.ignored_keys),
            overlaps: std::mem::take(&mut self.overlaps),
        })
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

    fn restart_without_hint(&mut self) -> Step {
        self.pending_hint = None;
        self.hint = HintUse::Rejected;
        self.last_object = None;
        self.objects_seen = 0;
        self.ignored_keys.clear();
        self.overlaps.clear();
        self.list_requests += 1;
        Step::List(ListRequest { prefix: self.folder.clone(), start_after: None })
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

    #[test]
    fn a_correct_hint_takes_one_request() {
        let all = chain(3500, 10);
        let hint = CommitHint { next_offset: 35_000, object_start: 34_990 };
        let r = run(&all, Some(hint));
        assert_eq!((r.next_offset, r.list_requests, r.hint), (Some(35_000), 1, HintUse::Confirmed));
    }

    #[test]
    fn a_lagging_hint_still_finds_later_objects() {
        let all = chain(3500, 10);
        let hint = CommitHint { next_offset: 30_000, object_start: 29_990 };
        let r = run(&all, Some(hint));
        assert_eq!((r.next_offset, r.list_requests, r.hint), (Some(35_000), 1, HintUse::Confirmed));
    }

    #[test]
    fn a_wrong_hint_falls_back_to_a_full_listing() {
        let all = chain(2500, 10);
        for hint in [
            CommitHint { next_offset: 99_999, object_start: 99_000 },
            CommitHint { next_offset: 1_005, object_start: 1_000 },
            CommitHint { next_offset: 35, object_start: 25 },
        ] {
            let r = run(&all, Some(hint));
            assert_eq!((r.next_offset, r.hint), (Some(25_000), HintUse::Rejected), "{hint:?}");
            assert_eq!(r.objects_seen, 2500);
        }
    }

    #[test]
    fn a_hint_on_an_empty_archive_is_rejected() {
        let r = run(&[], Some(CommitHint { next_offset: 50, object_start: 0 }));
        assert_eq!((r.next_offset, r.hint, r.list_requests), (None, HintUse::Rejected, 2));
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
        assert_eq!(CommitHint::parse(2000, &md), Some(CommitHint { next_offset: 2000, object_start: 1234 }));
        assert_eq!(CommitHint::parse(1234, &md), None);
        assert_eq!(CommitHint::parse(2000, ""), None);
        assert_eq!(CommitHint::parse(2000, "ksa1:x"), None);
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
