//! `audit`'s tests: listings, claims and contents as `verify` would find them.

use super::*;
use crate::archive::object_key::{FileKind, Prefix};

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0).unwrap()
}

fn obj(s: i64, e: i64) -> ObjectKey {
    ObjectKey::new(Prefix::default(), tp(), OffsetRange::new(s, e).unwrap(), FileKind::Parquet)
}

fn claim(start: i64, first: i64, end: i64, retention_gap: bool) -> Claim {
    let records = (end - first + 1) as u64;
    Claim { records, retention_gap, writer: "w".into(), ..Claim::for_test(start, first, end) }
}

/// Lists, reads the claims the audit asks for, audits.
fn run(objects: &[(i64, i64)], claims: &[Claim], log: Option<LogOffsets>) -> PartitionReport {
    let listing = PartitionListing {
        objects: objects.iter().map(|(s, e)| obj(*s, *e)).collect(),
        claims: claims.iter().map(|c| c.chain_start).collect(),
    };
    let bodies = claims_to_read(&listing)
        .into_iter()
        .map(|s| (s, Ok(claims.iter().find(|c| c.chain_start == s).unwrap().clone())))
        .collect();
    audit(&tp(), &listing, &bodies, &BTreeMap::new(), log, None)
}

#[test]
fn a_contiguous_archive_is_clean() {
    let r = run(&[(0, 9), (10, 19), (20, 29)], &[], None);
    assert!(r.problems.is_empty());
    assert_eq!((r.objects, r.first_offset, r.last_offset, r.records), (3, Some(0), Some(29), None));
    let claims = [claim(0, 0, 9, false), claim(10, 10, 19, false), claim(20, 20, 29, false)];
    let r = run(&[(0, 9), (10, 19), (20, 29)], &claims, None);
    assert!(r.problems.is_empty());
    assert_eq!(r.pending_claim, None);
    // Nothing to explain: no claim body is read.
    let listing = PartitionListing { objects: vec![obj(0, 9), obj(10, 19)], claims: [0, 10].into() };
    assert!(claims_to_read(&listing).is_empty());
}

#[test]
fn holes_are_gaps_unless_claims_explain_them() {
    let r = run(&[(0, 9), (15, 19)], &[], None);
    assert_eq!(r.problems, vec![Problem::Gap { from: 10, to: 14 }]);
    // Compaction or transaction markers: the claim for 10 says its first record was 15.
    let claims = [claim(0, 0, 9, false), claim(10, 15, 19, false)];
    assert!(run(&[(0, 9), (15, 19)], &claims, None).problems.is_empty());
    // Retention deleted 10..=14 before it was archived.
    let claims = [claim(0, 0, 9, false), claim(10, 15, 19, true)];
    assert_eq!(run(&[(0, 9), (15, 19)], &claims, None).problems, vec![Problem::RetentionGap { from: 10, to: 14 }]);
    // The last claim explains nothing beyond its end.
    let claims = [claim(0, 0, 9, false), claim(10, 15, 19, false)];
    assert_eq!(run(&[(0, 9), (15, 19), (30, 39)], &claims, None).problems, vec![Problem::Gap { from: 20, to: 29 }]);
    // Claims that start after the hole do not explain it.
    let claims = [claim(0, 0, 9, false), claim(12, 15, 19, false)];
    assert_eq!(
        run(&[(0, 9), (15, 19)], &claims, None).problems,
        vec![
            Problem::BadClaim { claim: "t/0@0".into(), why: "it ends at 9 but the next claim starts at 12".into() },
            Problem::Gap { from: 10, to: 11 }
        ]
    );
}

#[test]
fn overlaps_are_reported_once_per_object() {
    let r = run(&[(0, 100), (50, 60), (70, 120), (121, 130)], &[], None);
    assert_eq!(
        r.problems,
        vec![
            Problem::Overlap { earlier: obj(0, 100).to_string(), later: obj(50, 60).to_string() },
            Problem::Overlap { earlier: obj(0, 100).to_string(), later: obj(70, 120).to_string() },
        ]
    );
}

#[test]
fn claims_without_data() {
    // The last claim may be in flight: noted, not a problem.
    let claims = [claim(0, 0, 9, false), claim(10, 10, 19, false)];
    let r = run(&[(0, 9)], &claims, None);
    assert!(r.problems.is_empty());
    assert_eq!(r.pending_claim, Some(10));
    // An earlier one lost its data.
    let claims = [claim(0, 0, 9, false), claim(10, 10, 19, false), claim(20, 20, 29, false)];
    let r = run(&[(0, 9), (20, 29)], &claims, None);
    assert_eq!(r.problems, vec![Problem::MissingData { claim: "t/0@10".into(), from: 10, to: 19 }]);
}

#[test]
fn bad_claims() {
    let listing = PartitionListing { objects: vec![obj(0, 9), obj(15, 19)], claims: [0, 10].into() };
    let bodies = BTreeMap::from([(10, Err("not JSON".to_string()))]);
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), None, None);
    assert_eq!(r.problems, vec![Problem::BadClaim { claim: "t/0@10".into(), why: "not JSON".into() }]);
    let bodies = BTreeMap::from([(0, Ok(claim(0, 0, 7, false))), (10, Ok(claim(10, 15, 19, false)))]);
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), None, None);
    assert!(
        matches!(&r.problems[..], [Problem::BadClaim { why, .. }] if why.contains("ends at 7")),
        "{:?}",
        r.problems
    );
}

#[test]
fn deep_reads_check_contents_against_names() {
    let listing =
        PartitionListing { objects: vec![obj(0, 9), obj(10, 19), obj(20, 29), obj(30, 39)], claims: BTreeSet::new() };
    let read =
        |first, last, ordered| ObjectContents::Read { first: Some(first), last: Some(last), records: 10, ordered };
    let contents = BTreeMap::from([
        (obj(0, 9).to_string(), read(0, 9, true)),
        (obj(10, 19).to_string(), read(10, 18, true)),
        (obj(20, 29).to_string(), read(20, 29, false)),
        (obj(30, 39).to_string(), ObjectContents::Unreadable("truncated".into())),
    ]);
    let r = audit(&tp(), &listing, &BTreeMap::new(), &contents, None, None);
    assert_eq!(r.records, Some(30));
    assert!(matches!(&r.problems[0], Problem::Mislabelled { key, .. } if *key == obj(10, 19).to_string()));
    assert!(matches!(&r.problems[1], Problem::Mislabelled { why, .. } if why.contains("increasing")));
    assert_eq!(r.problems[2], Problem::Unreadable { key: obj(30, 39).to_string(), why: "truncated".into() });
    assert_eq!(r.problems.len(), 3);
}

#[test]
fn compared_with_the_log() {
    let log = |log_start, log_end| Some(LogOffsets { log_start, log_end });
    let r = run(&[(0, 9)], &[], log(0, 25));
    assert!(r.problems.is_empty());
    assert_eq!(r.not_yet_archived, Some(15));
    let r = run(&[(0, 9)], &[], log(14, 25));
    assert_eq!(r.problems, vec![Problem::RetentionGap { from: 10, to: 13 }]);
    let r = run(&[(0, 9)], &[], log(0, 5));
    assert_eq!(r.problems, vec![Problem::AheadOfLog { archive_next: 10, log_end: 5 }]);
    let r = run(&[], &[], log(3, 5));
    assert_eq!(r.not_yet_archived, Some(2));
}

#[test]
fn contents_match_the_name_when_first_last_and_order_agree() {
    use crate::archive::record::TimestampKind;
    let read = |offsets: &[i64]| {
        let records: Vec<Record> = offsets
            .iter()
            .map(|&offset| Record {
                offset,
                timestamp_ms: None,
                timestamp_kind: TimestampKind::NotAvailable,
                key: None,
                value: None,
                headers: vec![],
            })
            .collect();
        ObjectContents::of(&records)
    };
    let at = |offsets: &[i64]| read(offsets).mismatch(&obj(10, 12), false);
    assert_eq!(at(&[10, 11, 12]), None);
    assert_eq!(at(&[10, 12]), None, "holes inside an object are fine");
    assert!(at(&[10, 11]).unwrap().contains("its name says 10..=12"));
    assert!(at(&[11, 12]).unwrap().contains("its name says"));
    assert!(at(&[10, 12, 11, 12]).unwrap().contains("increasing"));
    assert!(at(&[]).is_some());
    assert_eq!(ObjectContents::Unreadable("gone".into()).mismatch(&obj(10, 12), false), None);
    // Written again under its claimed key after compaction removed records at its edges.
    let claimed = |offsets: &[i64]| read(offsets).mismatch(&obj(10, 12), true);
    assert_eq!((claimed(&[11]), claimed(&[10, 11]), claimed(&[11, 12])), (None, None, None));
    assert!(claimed(&[9, 11]).is_some() && claimed(&[11, 13]).is_some(), "never outside its name");
    assert!(claimed(&[12, 11]).unwrap().contains("increasing"));
}

#[test]
fn a_claimed_range_compaction_emptied_is_not_missing_data() {
    // 10..=19 was claimed; its writer died; read again, it held no records (compacted away), so the
    // chain went on and the next claim says so.
    let listing = PartitionListing { objects: vec![obj(0, 9), obj(20, 29)], claims: BTreeSet::from([0, 10, 20]) };
    let next = |no_records_from| Claim { no_records_from, ..claim(20, 20, 29, false) };
    let audit_with = |next: Claim| {
        let wanted = claims_to_read(&listing);
        assert!(wanted.contains(&10) && wanted.contains(&20), "the claim without data and the one after it");
        let bodies =
            BTreeMap::from([(0, Ok(claim(0, 0, 9, false))), (10, Ok(claim(10, 10, 19, false))), (20, Ok(next))]);
        audit(&tp(), &listing, &bodies, &BTreeMap::new(), None, None).problems
    };
    assert!(audit_with(next(Some(10))).is_empty());
    assert_eq!(
        audit_with(next(None)),
        vec![Problem::MissingData { claim: "t/0@10".into(), from: 10, to: 19 }],
        "without the next claim's word it is missing"
    );
}

#[test]
fn a_short_object_is_checked_against_its_claim() {
    let listing = PartitionListing { objects: vec![obj(0, 9), obj(10, 19)], claims: BTreeSet::from([0, 10]) };
    let contents =
        |first, last| ObjectContents::Read { first: Some(first), last: Some(last), records: 2, ordered: true };
    let read = BTreeMap::from([(obj(0, 9).to_string(), contents(0, 9)), (obj(10, 19).to_string(), contents(12, 17))]);
    assert_eq!(claims_of_short_objects(&listing, &read), vec![10]);
    let named = Claim { object: Some(obj(10, 19).relative()), ..claim(10, 10, 19, false) };
    let bodies = |c: Claim| BTreeMap::from([(10, Ok(c))]);
    let problems = |c| audit(&tp(), &listing, &bodies(c), &read, None, None).problems;
    assert!(problems(named.clone()).is_empty(), "written again under its claimed key after compaction");
    assert!(matches!(problems(claim(10, 10, 19, false))[..], [Problem::Mislabelled { .. }]), "no claim names it");
    let as_many = Claim { records: 2, ..named };
    assert!(matches!(problems(as_many)[..], [Problem::Mislabelled { .. }]), "its first writer read no more");
}

#[test]
fn an_archive_of_another_incarnation_is_a_problem() {
    let listing = PartitionListing { objects: vec![obj(0, 9)], claims: BTreeSet::from([0]) };
    let old = Claim { topic_id: Some("old".into()), ..claim(0, 0, 9, false) };
    let bodies = BTreeMap::from([(0, Ok(old))]);
    let log = Some(LogOffsets { log_start: 0, log_end: 500 });
    let id = |s: &str| TopicIdentity::Id(s.into());
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), log, Some(&id("new")));
    assert_eq!(r.problems, vec![Problem::OtherIncarnation { archived: "old".into(), current: "new".into() }]);
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), log, Some(&TopicIdentity::NoIds));
    assert_eq!(r.problems, vec![Problem::UnverifiableIncarnation { archived: "old".into() }]);
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), log, Some(&id("old")));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let r = audit(&tp(), &listing, &bodies, &BTreeMap::new(), None, None);
    assert!(r.problems.is_empty(), "without --brokers, nothing to compare: {:?}", r.problems);
}

#[test]
fn a_claimed_range_re_written_after_retention_took_its_start_is_a_retention_gap() {
    // 300..=399 was claimed; its writer died; retention deleted below 350; the next owner re-wrote
    // what was left, 350..=399, under the same claim.
    let claims = [claim(0, 0, 299, false), claim(300, 300, 399, false), claim(400, 400, 599, false)];
    let r = run(&[(0, 299), (350, 399), (400, 599)], &claims, None);
    assert_eq!(r.problems, vec![Problem::RetentionGap { from: 300, to: 349 }]);
}

#[test]
fn a_claimed_range_retention_took_whole_is_a_retention_gap_not_missing_data() {
    let lost = claim(300, 300, 399, false);
    let next = |from| Claim { retention_gap_from: from, ..claim(400, 450, 599, true) };
    let r = run(&[(0, 299), (450, 599)], &[claim(0, 0, 299, false), lost.clone(), next(Some(300))], None);
    assert_eq!(r.problems, vec![Problem::RetentionGap { from: 300, to: 449 }]);
    // Without the next claim saying where the gap began, the claim's data is missing.
    let r = run(&[(0, 299), (450, 599)], &[claim(0, 0, 299, false), lost, next(None)], None);
    assert_eq!(
        r.problems,
        vec![
            Problem::MissingData { claim: "t/0@300".into(), from: 300, to: 399 },
            Problem::RetentionGap { from: 400, to: 449 }
        ]
    );
}
