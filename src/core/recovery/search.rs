//! The tail search: a state machine that asks for listing pages and is fed them, finding a partition's
//! last data object or last claim from where the commit hint says (see the module above).

use super::{CommitHint, ListPage, ListRequest};
use crate::core::claim::ClaimKey;
use crate::core::object_key::{ObjectKey, Prefix};
use crate::core::partition::{OffsetRange, TopicPartition};

/// Two objects of one partition whose offset ranges overlap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub earlier: OffsetRange,
    pub later: OffsetRange,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailListing {
    /// The first offset not yet in the archive; `None` when the partition has no objects (or when
    /// claims were listed: then the last claim's body tells it).
    pub next_offset: Option<i64>,
    /// The object holding the highest offset.
    pub last_object: Option<ObjectKey>,
    /// When claims were listed: the highest claim start.
    pub last_claim: Option<i64>,
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
    Done(TailListing),
}

/// What a plan lists: the data objects or the claims of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    Data,
    Claims,
}

#[derive(Debug)]
pub struct TailSearch {
    prefix: Prefix,
    tp: TopicPartition,
    listing: Listing,
    folder: String,
    /// While probing backwards: the offset probed from and how far below the hint it is.
    probe: Option<(i64, i64)>,
    /// The offset the backward probes count down from.
    probe_base: i64,
    hinted: bool,
    list_requests: u32,
    last_object: Option<ObjectKey>,
    last_claim: Option<i64>,
    objects_seen: u64,
    ignored_keys: Vec<String>,
    overlaps: Vec<Overlap>,
}

impl TailSearch {
    /// Starts a search for the partition's last data object; returns it with the first request to make.
    pub fn data(prefix: &Prefix, tp: &TopicPartition, hint: Option<CommitHint>) -> (Self, ListRequest) {
        Self::new(prefix, tp, hint, Listing::Data)
    }

    /// Starts a search for the partition's last claim.
    pub fn claims(prefix: &Prefix, tp: &TopicPartition, hint: Option<CommitHint>) -> (Self, ListRequest) {
        Self::new(prefix, tp, hint, Listing::Claims)
    }

    fn new(prefix: &Prefix, tp: &TopicPartition, hint: Option<CommitHint>, listing: Listing) -> (Self, ListRequest) {
        let folder = match listing {
            Listing::Data => prefix.partition_folder(tp),
            Listing::Claims => prefix.claims_folder(tp),
        };
        let base = hint.map(|h| h.chain_start.unwrap_or(h.next_offset - 1));
        let plan = Self {
            prefix: prefix.clone(),
            tp: tp.clone(),
            listing,
            folder: folder.clone(),
            probe: base.map(|b| (b, 0)),
            probe_base: base.unwrap_or(0),
            hinted: hint.is_some(),
            list_requests: 1,
            last_object: None,
            last_claim: None,
            objects_seen: 0,
            ignored_keys: Vec::new(),
            overlaps: Vec::new(),
        };
        let start_after = base.map(|b| plan.start_after(b));
        (plan, ListRequest { prefix: folder, start_after })
    }

    /// The key to list after so that the first key returned starts at `start` or later.
    fn start_after(&self, start: i64) -> String {
        match self.listing {
            Listing::Data => self.prefix.start_after_for(&self.tp, start),
            Listing::Claims => ClaimKey::start_after(&self.prefix, &self.tp, start),
        }
    }

    /// Feeds the page answering the last request; returns the next request or the result.
    pub fn feed(&mut self, page: ListPage) -> Step {
        for raw in &page.keys {
            // Found a key at or after the probe: from here on, just page forward.
            match self.listing {
                Listing::Data => match ObjectKey::parse(&self.prefix, raw) {
                    Ok(k) if k.tp == self.tp => {
                        self.probe = None;
                        self.observe(k);
                    }
                    _ => self.ignored_keys.push(raw.clone()),
                },
                Listing::Claims => match ClaimKey::parse(&self.prefix, raw) {
                    Ok(k) if k.tp == self.tp => {
                        self.probe = None;
                        self.objects_seen += 1;
                        self.last_claim = Some(self.last_claim.map_or(k.chain_start, |s| s.max(k.chain_start)));
                    }
                    _ => self.ignored_keys.push(raw.clone()),
                },
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
                return self.request(Some(self.start_after(next)));
            }
        }
        Step::Done(TailListing {
            next_offset: self.last_object.as_ref().map(|k| k.range.next()),
            last_object: self.last_object.take(),
            last_claim: self.last_claim,
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

    type Start = fn(&Prefix, &TopicPartition, Option<CommitHint>) -> (TailSearch, ListRequest);

    /// Runs a plan over `all` keys to the end.
    fn run_plan(start: Start, all: &[String], hint: Option<CommitHint>) -> TailListing {
        let prefix = Prefix::new("arch");
        let tp = TopicPartition::new("t", 0).unwrap();
        let (mut plan, mut req) = start(&prefix, &tp, hint);
        for _ in 0..10_000 {
            match plan.feed(list(all, &req, 1000)) {
                Step::List(next) => req = next,
                Step::Done(r) => return r,
            }
        }
        panic!("planner did not finish");
    }

    fn run(all: &[String], hint: Option<CommitHint>) -> TailListing {
        run_plan(TailSearch::data, all, hint)
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

    fn hint(next_offset: i64, chain_start: Option<i64>) -> Option<CommitHint> {
        Some(CommitHint { next_offset, chain_start })
    }

    #[test]
    fn a_hint_with_the_chain_start_takes_one_request() {
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
        assert_eq!(
            r.overlaps[0],
            Overlap { earlier: OffsetRange::new(0, 100).unwrap(), later: OffsetRange::new(50, 60).unwrap() }
        );
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
            chain_start in proptest::option::of(0i64..200_000),
        ) {
            let mut all = Vec::new();
            let mut at = 0;
            for (len, hole) in sizes {
                at += hole;
                all.push(k(0, at, at + len - 1));
                at += len;
            }
            let expected = (!all.is_empty()).then_some(at);
            let r = run(&all, CommitHint::parse(next, &chain_start.map(CommitHint::metadata_for).unwrap_or_default()));
            proptest::prop_assert_eq!(r.next_offset, expected);
        }
    }

    fn claim_key(s: i64) -> String {
        ClaimKey::new(Prefix::new("arch"), TopicPartition::new("t", 0).unwrap(), s).to_string()
    }

    fn run_claims(all: &[String], hint: Option<CommitHint>) -> TailListing {
        run_plan(TailSearch::claims, all, hint)
    }

    #[test]
    fn the_last_claim_is_found_like_the_last_object() {
        let mut all: Vec<String> = (0..2500).map(|i| claim_key(i * 10)).collect();
        all.extend(chain(2500, 10));
        all.push(ClaimKey::new(Prefix::new("arch"), TopicPartition::new("t", 1).unwrap(), 1 << 40).to_string());
        let r = run_claims(&all, None);
        assert_eq!((r.last_claim, r.objects_seen, r.list_requests), (Some(24_990), 2500, 3));
        assert!(r.ignored_keys.is_empty(), "data objects live in another folder");
        let r = run_claims(&all, hint(25_000, Some(24_990)));
        assert_eq!((r.last_claim, r.list_requests), (Some(24_990), 1));
        let r = run_claims(&all, hint(99_999, None));
        assert_eq!(r.last_claim, Some(24_990));
        assert!(r.list_requests <= 25, "{} requests", r.list_requests);
        assert_eq!(run_claims(&[], None).last_claim, None);
    }
}
