//! The tail search: a state machine that asks for listing pages and is fed them, finding a partition's
//! last data object or last claim from where the commit hint says (see the module above).

use super::CommitHint;
use crate::archive::claim::ClaimKey;
use crate::archive::keys::{ListPage, ListRequest};
use crate::archive::object_key::{ObjectKey, Prefix};
use crate::archive::partition::{OffsetRange, TopicPartition};

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

/// Where a search stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The first request: from the hint, or from the folder's start.
    First,
    /// Nothing at or after the hint: probing backwards from `at`, `distance` below the hint.
    Backward { at: i64, distance: i64 },
    /// The folder goes on past a full page: searching for its last key by start offset. A key starts
    /// at `lo`; none starts at `hi` or later (once known); the next probe lists from `at`; without `hi`
    /// the probes gallop ahead in steps of `step`, doubling.
    Seek { lo: i64, hi: Option<i64>, step: i64, at: i64 },
    /// Listing forward from the last key's start to the folder's end.
    Tail,
}

/// Finds a partition's last data object or last claim in O(log n) list requests: one with a commit
/// hint that names the chain start; otherwise a search over `StartAfter` by start offset (galloping,
/// then bisecting; bounded by the log-end offset when known).
#[derive(Debug)]
pub struct TailSearch {
    prefix: Prefix,
    tp: TopicPartition,
    listing: Listing,
    folder: String,
    phase: Phase,
    /// The offset the backward probes count down from.
    probe_base: i64,
    /// The partition's log-end offset: no key starts at or after it (unless the archive is ahead of
    /// the log, which the search then finds out).
    log_end: Option<i64>,
    log_end_probed: bool,
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
    pub fn data(
        prefix: &Prefix,
        tp: &TopicPartition,
        hint: Option<CommitHint>,
        log_end: Option<i64>,
    ) -> (Self, ListRequest) {
        Self::new(prefix, tp, hint, log_end, Listing::Data)
    }

    /// Starts a search for the partition's last claim.
    pub fn claims(
        prefix: &Prefix,
        tp: &TopicPartition,
        hint: Option<CommitHint>,
        log_end: Option<i64>,
    ) -> (Self, ListRequest) {
        Self::new(prefix, tp, hint, log_end, Listing::Claims)
    }

    fn new(
        prefix: &Prefix,
        tp: &TopicPartition,
        hint: Option<CommitHint>,
        log_end: Option<i64>,
        listing: Listing,
    ) -> (Self, ListRequest) {
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
            phase: Phase::First,
            probe_base: base.unwrap_or(0),
            log_end,
            log_end_probed: false,
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

    /// The start offset a key names, if it is one of this partition's archive keys.
    fn start_of(&self, raw: &str) -> Option<i64> {
        match self.listing {
            Listing::Data => {
                ObjectKey::parse(&self.prefix, raw).ok().filter(|k| k.tp == self.tp).map(|k| k.range.start())
            }
            Listing::Claims => {
                ClaimKey::parse(&self.prefix, raw).ok().filter(|k| k.tp == self.tp).map(|k| k.chain_start)
            }
        }
    }

    /// Feeds the page answering the last request; returns the next request or the result.
    pub fn feed(&mut self, page: ListPage) -> Step {
        if let Phase::Seek { lo, hi, step, at } = self.phase {
            return self.seek(page, lo, hi, step, at);
        }
        if page.truncated && self.phase != Phase::Tail {
            let starts: Vec<Option<i64>> = page.keys.iter().map(|k| self.start_of(k)).collect();
            let ours = starts.iter().flatten();
            if let (Some(&first), Some(&lo)) = (ours.clone().next(), ours.max()) {
                // More keys than a page: search for the last one instead of paging through them all.
                let foreign = page.keys.iter().zip(&starts).filter(|(_, s)| s.is_none()).map(|(k, _)| k.clone());
                self.ignored_keys.extend(foreign);
                return self.probe(lo, None, (lo - first).max(1));
            }
        }
        let found = self.take(&page);
        if page.truncated {
            if let Some(last) = page.keys.last() {
                return self.request(Some(last.clone()));
            }
        }
        match self.phase {
            Phase::First if !found && self.hinted && self.probe_base > 0 => self.backward(0),
            Phase::Backward { at, distance } if !found && at > 0 => self.backward(distance),
            _ => self.done(),
        }
    }

    /// Nothing at or after the last backward probe: the archive ends lower. Probe twice as far back.
    fn backward(&mut self, distance: i64) -> Step {
        let distance = distance.saturating_mul(2).max(1);
        let at = (self.probe_base - distance).max(0);
        self.phase = Phase::Backward { at, distance };
        self.ignored_keys.clear();
        self.request(Some(self.start_after(at)))
    }

    /// One step of the search for the last key (see [`Phase::Seek`]).
    fn seek(&mut self, page: ListPage, mut lo: i64, mut hi: Option<i64>, step: i64, at: i64) -> Step {
        let last_start = page.keys.iter().filter_map(|k| self.start_of(k)).max();
        match last_start {
            None => hi = Some(at),
            Some(_) if !page.truncated => {
                // The folder's end is on this page.
                self.phase = Phase::Tail;
                self.take(&page);
                return self.done();
            }
            Some(start) => lo = lo.max(start),
        }
        self.probe(lo, hi, step.saturating_mul(2))
    }

    /// Asks for the next probe of the search, or lists the tail once the last key's start is known.
    fn probe(&mut self, lo: i64, hi: Option<i64>, step: i64) -> Step {
        let at = match hi {
            Some(hi) if hi - lo <= 1 => {
                self.phase = Phase::Tail;
                return self.request(Some(self.start_after(lo)));
            }
            Some(hi) => lo + (hi - lo) / 2,
            // First make sure nothing starts at the log end or later; then gallop.
            None => match self.log_end.filter(|end| *end > lo && !self.log_end_probed) {
                Some(end) => {
                    self.log_end_probed = true;
                    end
                }
                None => lo.saturating_add(step),
            },
        };
        self.phase = Phase::Seek { lo, hi, step, at };
        self.request(Some(self.start_after(at)))
    }

    /// Takes the keys of a page into the result; true if any is one of this partition's.
    fn take(&mut self, page: &ListPage) -> bool {
        let mut found = false;
        for raw in &page.keys {
            match self.listing {
                Listing::Data => match ObjectKey::parse(&self.prefix, raw) {
                    Ok(k) if k.tp == self.tp => {
                        found = true;
                        self.observe(k);
                    }
                    _ => self.ignored_keys.push(raw.clone()),
                },
                Listing::Claims => match ClaimKey::parse(&self.prefix, raw) {
                    Ok(k) if k.tp == self.tp => {
                        found = true;
                        self.objects_seen += 1;
                        self.last_claim = Some(self.last_claim.map_or(k.chain_start, |s| s.max(k.chain_start)));
                    }
                    _ => self.ignored_keys.push(raw.clone()),
                },
            }
        }
        found
    }

    fn done(&mut self) -> Step {
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
    use crate::archive::object_key::FileKind;

    /// ListObjectsV2 semantics over a set of keys: sorted, after `start_after`, at most `max_keys`.
    fn list(all: &[String], req: &ListRequest, max_keys: usize) -> ListPage {
        let mut sorted = all.to_vec();
        sorted.sort();
        list_sorted(&sorted, req, max_keys)
    }

    /// The same over keys already sorted (fast enough for a million keys).
    fn list_sorted(sorted: &[String], req: &ListRequest, max_keys: usize) -> ListPage {
        let from = match &req.start_after {
            Some(sa) => sorted.partition_point(|k| k <= sa),
            None => sorted.partition_point(|k| k < &req.prefix),
        };
        let keys: Vec<String> =
            sorted[from..].iter().take_while(|k| k.starts_with(&req.prefix)).take(max_keys + 1).cloned().collect();
        ListPage { truncated: keys.len() > max_keys, keys: keys.into_iter().take(max_keys).collect() }
    }

    type Start = fn(&Prefix, &TopicPartition, Option<CommitHint>, Option<i64>) -> (TailSearch, ListRequest);

    /// Runs a plan over `all` keys to the end.
    fn run_plan(start: Start, all: &[String], hint: Option<CommitHint>, log_end: Option<i64>) -> TailListing {
        run_paged(start, all, hint, log_end, 1000)
    }

    /// The same with pages of `page` keys (small pages make small archives need the search).
    fn run_paged(
        start: Start,
        all: &[String],
        hint: Option<CommitHint>,
        log_end: Option<i64>,
        page: usize,
    ) -> TailListing {
        let prefix = Prefix::new("arch");
        let tp = TopicPartition::new("t", 0).unwrap();
        let (mut plan, mut req) = start(&prefix, &tp, hint, log_end);
        for _ in 0..10_000 {
            match plan.feed(list(all, &req, page)) {
                Step::List(next) => req = next,
                Step::Done(r) => return r,
            }
        }
        panic!("planner did not finish");
    }

    fn run(all: &[String], hint: Option<CommitHint>) -> TailListing {
        run_plan(TailSearch::data, all, hint, None)
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
    fn thousands_of_files_are_searched_not_paged_through() {
        let all = chain(3500, 10);
        let r = run(&all, None);
        assert_eq!(r.next_offset, Some(35_000));
        assert!(r.list_requests <= 6, "{} requests", r.list_requests);
        assert!(r.overlaps.is_empty());
    }

    #[test]
    fn a_million_objects_without_any_hint_take_a_few_dozen_requests() {
        // 1,000,000 objects of 1,000 offsets each (the last ends at offset 999,999,999).
        let mut all: Vec<String> = (0..1_000_000).map(|i| k(0, i * 1000, i * 1000 + 999)).collect();
        all.push("arch/topic=t/partition=0/zz-notes.txt".into());
        all.sort();
        let search = |log_end: Option<i64>, hint: Option<CommitHint>| {
            let prefix = Prefix::new("arch");
            let tp = TopicPartition::new("t", 0).unwrap();
            let (mut plan, mut req) = TailSearch::data(&prefix, &tp, hint, log_end);
            loop {
                match plan.feed(list_sorted(&all, &req, 1000)) {
                    Step::List(next) => req = next,
                    Step::Done(r) => return r,
                }
            }
        };
        let bounded = search(Some(1_000_000_000), None);
        assert_eq!(bounded.next_offset, Some(1_000_000_000));
        assert!(bounded.list_requests <= 40, "{} requests with the log end", bounded.list_requests);
        let unbounded = search(None, None);
        assert_eq!(unbounded.next_offset, Some(1_000_000_000));
        assert!(unbounded.list_requests <= 60, "{} requests without the log end", unbounded.list_requests);
        let hinted = search(Some(1_000_000_000), hint(1_000_000_000, Some(999_999_000)));
        assert_eq!((hinted.next_offset, hinted.list_requests), (Some(1_000_000_000), 1));
        // A commit reset to the start (offset 1, no metadata) costs a search, not a million keys.
        let reset = search(Some(1_000_000_000), hint(1, None));
        assert_eq!(reset.next_offset, Some(1_000_000_000));
        assert!(reset.list_requests <= 40, "{} requests after a reset commit", reset.list_requests);
        println!(
            "1,000,000 objects: {} requests with the log end, {} without, {} with a reset commit, 1 with the hint",
            bounded.list_requests, unbounded.list_requests, reset.list_requests
        );
    }

    #[test]
    fn an_archive_ahead_of_the_log_is_still_found_to_its_end() {
        // The topic was re-created: its log end (500) is far below the archive's end.
        let all = chain(5000, 10);
        let r = run_plan(TailSearch::data, &all, None, Some(500));
        assert_eq!(r.next_offset, Some(50_000));
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
            let hint = CommitHint::parse(next, &chain_start.map(CommitHint::metadata_for).unwrap_or_default());
            let r = run(&all, hint);
            proptest::prop_assert_eq!(r.next_offset, expected);
            // With pages of 3 keys (so most archives need the search), and a log end right or wrong (a
            // re-created topic's) or unknown: the same end.
            for log_end in [None, Some(at), Some(at / 2), Some(at + 7)] {
                let r = run_paged(TailSearch::data, &all, hint, log_end, 3);
                proptest::prop_assert_eq!(r.next_offset, expected, "log end {:?}", log_end);
            }
        }
    }

    fn claim_key(s: i64) -> String {
        ClaimKey::new(Prefix::new("arch"), TopicPartition::new("t", 0).unwrap(), s).to_string()
    }

    fn run_claims(all: &[String], hint: Option<CommitHint>) -> TailListing {
        run_plan(TailSearch::claims, all, hint, None)
    }

    #[test]
    fn the_last_claim_is_found_like_the_last_object() {
        let mut all: Vec<String> = (0..2500).map(|i| claim_key(i * 10)).collect();
        all.extend(chain(2500, 10));
        all.push(ClaimKey::new(Prefix::new("arch"), TopicPartition::new("t", 1).unwrap(), 1 << 40).to_string());
        let r = run_claims(&all, None);
        assert_eq!(r.last_claim, Some(24_990));
        assert!(r.list_requests <= 6, "{} requests", r.list_requests);
        assert!(r.ignored_keys.is_empty(), "data objects live in another folder");
        let r = run_claims(&all, hint(25_000, Some(24_990)));
        assert_eq!((r.last_claim, r.list_requests), (Some(24_990), 1));
        let r = run_claims(&all, hint(99_999, None));
        assert_eq!(r.last_claim, Some(24_990));
        assert!(r.list_requests <= 25, "{} requests", r.list_requests);
        assert_eq!(run_claims(&[], None).last_claim, None);
    }
}
