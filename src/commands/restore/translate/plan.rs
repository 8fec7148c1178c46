//! Where each consumer group resumes in a restored topic: from a snapshot of its committed offsets on
//! the source topic (`archive::group_offsets`) and every record read back from the target, in each
//! partition's offset order (a restored record names its source offset in a header). Pure.
//!
//! A group that had committed offset `c` on source partition `p` (the next record it would consume) had
//! consumed the records restored from `p` below `c`, and nothing else of the target: not the records
//! restored from `p` at or after `c`, not those restored from partitions it had no offset on, not
//! those other producers wrote. It resumes, in each target partition that holds records restored from a
//! partition it had an offset on, at the first record it had not consumed, so **nothing is skipped**;
//! where it had consumed every record there, right after the last one, never past what the target holds.
//! Where the target holds only restored records, each partition's in source order (a restore with
//! `--partitioning same` into a topic no one else writes to, in one or more runs that each went on
//! where the last stopped), the records before that position are exactly those it had consumed:
//! nothing comes twice. Otherwise (other producers' records before the restored ones, `--partitioning
//! key` mixing partitions, a run that filled holes an earlier one left), the records it had consumed that
//! come after its position are counted (`again`): it reads them once more.

use std::collections::BTreeMap;

/// What the record at a group's new position is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumesAt {
    /// The record restored from this source partition and offset.
    Restored(i32, i64),
    /// A record restored from a partition the group had no offset on, or one another producer wrote.
    Other,
    /// None: the group had consumed every record of the partition; it resumes after the last one.
    AfterLast,
}

/// A group's new position in one target partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMove {
    pub target_partition: i32,
    /// The committed offset to set: the next record the group consumes there.
    pub offset: i64,
    pub resumes_at: ResumesAt,
    /// Records after `offset` the group had consumed already (it reads them again).
    pub again: u64,
}

/// One group's new positions, by target partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMove {
    pub group: String,
    pub partitions: Vec<PartitionMove>,
}

#[derive(Debug, Default)]
struct TargetState {
    /// The first record the group had not consumed, and what it is.
    position: Option<(i64, ResumesAt)>,
    last: Option<i64>,
    again: u64,
    /// Whether the partition holds a record restored from a partition the group had an offset on.
    concerned: bool,
}

#[derive(Debug)]
struct GroupState {
    name: String,
    committed: BTreeMap<i32, i64>,
    targets: BTreeMap<i32, TargetState>,
}

/// Folds the records read back from the target into each group's positions.
#[derive(Debug)]
pub struct Translator {
    groups: Vec<GroupState>,
}

impl Translator {
    /// `groups`: per group, per source partition, its committed offset (a snapshot's).
    pub fn new(groups: &BTreeMap<String, BTreeMap<i32, i64>>) -> Self {
        let groups = groups
            .iter()
            .map(|(name, committed)| GroupState {
                name: name.clone(),
                committed: committed.clone(),
                targets: BTreeMap::new(),
            })
            .collect();
        Self { groups }
    }

    /// A record of the target, and the source partition and offset it was restored from (none: it was
    /// not restored from the source topic). Each target partition's records must come in offset order
    /// (partitions may interleave).
    pub fn observe(&mut self, target_partition: i32, target_offset: i64, source: Option<(i32, i64)>) {
        for group in &mut self.groups {
            let committed = source.and_then(|(p, _)| group.committed.get(&p).copied());
            let consumed = matches!((source, committed), (Some((_, o)), Some(c)) if o < c);
            let target = group.targets.entry(target_partition).or_default();
            target.concerned |= committed.is_some();
            target.last = Some(target_offset);
            match target.position {
                None if !consumed => {
                    let what = match (source, committed) {
                        (Some((p, o)), Some(_)) => ResumesAt::Restored(p, o),
                        _ => ResumesAt::Other,
                    };
                    target.position = Some((target_offset, what));
                }
                Some(_) if consumed => target.again += 1,
                _ => {}
            }
        }
    }

    /// Each group's positions in the target partitions that hold records restored from partitions it
    /// had an offset on (it is left alone in the others: its consumers start there by their
    /// `auto.offset.reset`).
    pub fn plan(self) -> Vec<GroupMove> {
        self.groups
            .into_iter()
            .map(|group| GroupMove {
                group: group.name,
                partitions: group
                    .targets
                    .into_iter()
                    .filter(|(_, t)| t.concerned)
                    .filter_map(|(target_partition, t)| {
                        let (offset, resumes_at) = t.position.or(Some((t.last? + 1, ResumesAt::AfterLast)))?;
                        Some(PartitionMove { target_partition, offset, resumes_at, again: t.again })
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::ResumesAt::{AfterLast, Other, Restored};
    use super::*;

    fn groups(list: &[(&str, &[(i32, i64)])]) -> BTreeMap<String, BTreeMap<i32, i64>> {
        list.iter().map(|(g, offsets)| (g.to_string(), offsets.iter().copied().collect())).collect()
    }

    /// A move as (target partition, offset, the record there, again).
    type Move = (i32, i64, ResumesAt, u64);

    fn moves(plan: &[GroupMove], group: &str) -> Vec<Move> {
        let found = plan.iter().find(|m| m.group == group).unwrap();
        found.partitions.iter().map(|m| (m.target_partition, m.offset, m.resumes_at, m.again)).collect()
    }

    #[test]
    fn a_group_resumes_at_the_record_restored_from_its_committed_offset_never_past_the_last() {
        // Partition 0 was archived from offset 100 (retention took 0..99), and offsets 150..159 were
        // compacted away: restored into target offsets 0..189.
        let snapshot =
            groups(&[("half", &[(0, 160)]), ("none", &[(0, 0)]), ("end", &[(0, 300)]), ("past", &[(0, 900)])]);
        let mut translator = Translator::new(&snapshot);
        for (target, source) in (0..).zip((100..150).chain(160..300)) {
            translator.observe(0, target, Some((0, source)));
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "half"), [(0, 50, Restored(0, 160), 0)]);
        assert_eq!(moves(&plan, "none"), [(0, 0, Restored(0, 100), 0)]);
        assert_eq!(moves(&plan, "end"), [(0, 190, AfterLast, 0)], "after the last restored record");
        assert_eq!(moves(&plan, "past"), [(0, 190, AfterLast, 0)], "never past what was restored");
    }

    #[test]
    fn records_the_group_never_saw_are_not_skipped_and_what_it_reads_again_is_counted() {
        // Another producer wrote 2 records before the restore and 1 in the middle of it.
        let mut translator = Translator::new(&groups(&[("g", &[(0, 5)]), ("done", &[(0, 10)])]));
        let records = [None, None, Some(0), Some(1), Some(2), None, Some(3), Some(4), Some(5), Some(6)];
        for (target, source) in (0..).zip(records) {
            translator.observe(0, target, source.map(|o| (0, o)));
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "g"), [(0, 0, Other, 5)], "0..=4 come again after the others' records");
        assert_eq!(moves(&plan, "done"), [(0, 0, Other, 7)]);
    }

    #[test]
    fn partitions_map_to_their_own_target_partitions_and_those_without_an_offset_are_left_alone() {
        let mut translator = Translator::new(&groups(&[("g", &[(0, 5), (2, 0)])]));
        for o in 0..10 {
            for p in 0..3 {
                translator.observe(p, o, Some((p, o)));
            }
        }
        assert_eq!(moves(&translator.plan(), "g"), [(0, 5, Restored(0, 5), 0), (2, 0, Restored(2, 0), 0)]);
    }

    #[test]
    fn records_out_of_source_order_are_counted_as_read_again_and_none_is_skipped() {
        // An earlier run left 3..=4 out (a hole), a later one wrote them after 9.
        let mut translator = Translator::new(&groups(&[("g", &[(0, 6)]), ("early", &[(0, 4)])]));
        for (target, source) in (0..).zip([0, 1, 2, 5, 6, 7, 8, 9, 3, 4]) {
            translator.observe(0, target, Some((0, source)));
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "g"), [(0, 4, Restored(0, 6), 2)], "3 and 4 come again");
        assert_eq!(moves(&plan, "early"), [(0, 3, Restored(0, 5), 1)], "4 is after the position, 3 again");
    }

    #[test]
    fn partitions_mixed_by_key_take_the_earliest_record_not_consumed_of_any_of_them() {
        let mut translator = Translator::new(&groups(&[("g", &[(0, 2), (1, 1)]), ("one", &[(0, 1)])]));
        // Target partition 0 holds source 0@0, 1@0, 0@1, 1@1, 0@2, 1@2 in this order.
        for (target, source) in (0..).zip([(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]) {
            translator.observe(0, target, Some(source));
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "g"), [(0, 3, Restored(1, 1), 0)], "what comes before it had all been consumed");
        // "one" had no offset on partition 1: 1@0 is not a record it consumed.
        assert_eq!(moves(&plan, "one"), [(0, 1, Other, 0)]);
    }
}
