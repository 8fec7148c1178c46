//! Where each consumer group resumes in a restored topic: from a snapshot of its committed offsets on
//! the source topic (`archive::group_offsets`) and the restored records read back from the target in
//! each partition's offset order (each names its source offset in a header). Pure.
//!
//! A group that had committed offset `c` on source partition `p` (the next record it would consume)
//! resumes, in each target partition, at the first record restored from `p` at or after `c`: every
//! record it had not consumed comes at or after that position, so nothing is skipped. Where no such record
//! was restored (it had consumed all that was archived, or more), it resumes right after the last record
//! restored from `p`, never past what was restored. Where the target holds a partition's records in
//! source order (a restore with `--partitioning same` in one or more runs that each went on where the
//! last stopped), records before the position are exactly those the group had consumed: nothing is
//! delivered twice. Where it does not (`--partitioning key` mixing partitions, or a run that filled
//! holes an earlier run left), the records the group had consumed that come after its position are
//! counted (`again`): they are delivered once more, nothing is skipped.

use std::collections::BTreeMap;

/// A group's new position in one target partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMove {
    pub target_partition: i32,
    /// The committed offset to set: the next record the group consumes there.
    pub offset: i64,
    /// The source partition and offset of the record at `offset`; none when the group resumes after the
    /// last record restored (it had consumed everything restored there).
    pub resumes_at: Option<(i32, i64)>,
    /// Records after `offset` the group had consumed already (delivered again).
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
    /// The first record at or after the group's committed offset of its source partition.
    position: Option<(i64, i32, i64)>,
    /// The last record of a source partition the group has an offset for.
    last: Option<i64>,
    again: u64,
}

#[derive(Debug)]
struct GroupState {
    name: String,
    committed: BTreeMap<i32, i64>,
    targets: BTreeMap<i32, TargetState>,
}

/// Folds the restored records read back from the target into each group's positions.
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

    /// A record of the target restored from the source topic; each target partition's records must come
    /// in offset order (partitions may interleave).
    pub fn observe(&mut self, target_partition: i32, target_offset: i64, source_partition: i32, source_offset: i64) {
        for group in &mut self.groups {
            // A partition the group never committed to says nothing about where it is.
            let Some(&committed) = group.committed.get(&source_partition) else { continue };
            let target = group.targets.entry(target_partition).or_default();
            target.last = Some(target_offset);
            match target.position {
                None if source_offset >= committed => {
                    target.position = Some((target_offset, source_partition, source_offset))
                }
                Some(_) if source_offset < committed => target.again += 1,
                _ => {}
            }
        }
    }

    /// Each group's positions in the target partitions that hold records of partitions it committed to.
    pub fn plan(self) -> Vec<GroupMove> {
        self.groups
            .into_iter()
            .map(|group| GroupMove {
                group: group.name,
                partitions: group
                    .targets
                    .into_iter()
                    .filter_map(|(target_partition, t)| {
                        let (offset, resumes_at) = match t.position {
                            Some((offset, p, o)) => (offset, Some((p, o))),
                            None => (t.last? + 1, None),
                        };
                        Some(PartitionMove { target_partition, offset, resumes_at, again: t.again })
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(list: &[(&str, &[(i32, i64)])]) -> BTreeMap<String, BTreeMap<i32, i64>> {
        list.iter().map(|(g, offsets)| (g.to_string(), offsets.iter().copied().collect())).collect()
    }

    /// A move as (target partition, offset, source record there, again).
    type Move = (i32, i64, Option<(i32, i64)>, u64);

    fn moves(plan: &[GroupMove], group: &str) -> Vec<Move> {
        let found = plan.iter().find(|m| m.group == group).unwrap();
        found.partitions.iter().map(|m| (m.target_partition, m.offset, m.resumes_at, m.again)).collect()
    }

    #[test]
    fn a_group_resumes_at_the_record_restored_from_its_committed_offset_whatever_came_before_it() {
        // Partition 0 was archived from offset 100 (retention took 0..99); the target held 7 records of
        // another producer before the restore, and offsets 150..159 were compacted away.
        let snapshot =
            groups(&[("half", &[(0, 160)]), ("none", &[(0, 0)]), ("end", &[(0, 300)]), ("past", &[(0, 900)])]);
        let mut translator = Translator::new(&snapshot);
        for (target, source) in (7..).zip((100..150).chain(160..300)) {
            translator.observe(0, target, 0, source);
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "half"), [(0, 57, Some((0, 160)), 0)]);
        assert_eq!(moves(&plan, "none"), [(0, 7, Some((0, 100)), 0)]);
        assert_eq!(moves(&plan, "end"), [(0, 197, None, 0)], "after the last restored record");
        assert_eq!(moves(&plan, "past"), [(0, 197, None, 0)], "never past what was restored");
    }

    #[test]
    fn partitions_map_to_their_own_target_partitions_and_unknown_ones_are_left_alone() {
        let mut translator = Translator::new(&groups(&[("g", &[(0, 5), (2, 0)])]));
        for o in 0..10 {
            for p in 0..3 {
                translator.observe(p, o, p, o);
            }
        }
        assert_eq!(moves(&translator.plan(), "g"), [(0, 5, Some((0, 5)), 0), (2, 0, Some((2, 0)), 0)]);
    }

    #[test]
    fn records_out_of_source_order_are_counted_as_delivered_again_and_none_is_skipped() {
        // An earlier run left 3..=4 out (a hole), a later one wrote them after 9.
        let mut translator = Translator::new(&groups(&[("g", &[(0, 6)]), ("early", &[(0, 4)])]));
        for (target, source) in [0, 1, 2, 5, 6, 7, 8, 9, 3, 4].into_iter().enumerate() {
            translator.observe(0, target as i64, 0, source);
        }
        let plan = translator.plan();
        assert_eq!(moves(&plan, "g"), [(0, 4, Some((0, 6)), 2)], "3 and 4 come again");
        assert_eq!(moves(&plan, "early"), [(0, 3, Some((0, 5)), 1)], "4 is after the position, 3 again");
    }

    #[test]
    fn partitions_mixed_by_key_take_the_earliest_position_of_any_of_them() {
        let mut translator = Translator::new(&groups(&[("g", &[(0, 2), (1, 1)])]));
        // Target partition 0 holds source 0@0, 1@0, 0@1, 1@1, 0@2, 1@2 in this order.
        for (target, (p, o)) in [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)].into_iter().enumerate() {
            translator.observe(0, target as i64, p, o);
        }
        assert_eq!(
            moves(&translator.plan(), "g"),
            [(0, 3, Some((1, 1)), 0)],
            "what comes before it had all been consumed"
        );
    }
}
