//! Whether a topic's table is the exact view of its archive it should be (`verify` with a catalog):
//! per partition, the table holds each durable object of the claims chain before its recorded position
//! once, and nothing else; and every file it holds is one of the archive's data objects.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::plan::{plan, Chain, PlanError};
use crate::archive::keys::{classify, ArchiveKey};
use crate::archive::object_key::Prefix;

/// Something wrong with a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TableProblem {
    /// The table holds this file more than once (its records would be read twice).
    Twice { file: String },
    /// The table holds a file that is not a data object of this topic's archive.
    NotArchived { file: String },
    /// The table holds an object of `partition` past its recorded position, or not on its chain.
    Unexpected { partition: i32, file: String },
    /// The table lacks an object of `partition`'s chain before its recorded position.
    Missing { partition: i32, file: String },
    /// `partition`'s recorded position is not where a chain link starts.
    Position { partition: i32, why: String },
}

/// The data objects (keys below the store) a table at `position` must hold of a partition whose chain
/// is `chain` (read from chain position 0): those of its links before the position, which must run
/// without a hole from 0 to exactly the position.
pub fn expected_objects(position: i64, chain: Chain) -> Result<Vec<String>, PlanError> {
    if position > chain.next {
        return Err(PlanError::Ahead { position, archive: chain.next });
    }
    let before: Vec<_> = chain.links.iter().take_while(|l| l.covers.start() < position).cloned().collect();
    // Where the chain goes on after a hole at `at`: its next durable link (or the position).
    let later = |at: i64| chain.links.iter().map(|l| l.covers.start()).find(|s| *s > at).unwrap_or(position);
    match plan(None, Chain { links: &before, next: chain.next })? {
        _ if position == 0 => Ok(Vec::new()),
        Some(append) if append.to == position => Ok(append.files),
        Some(append) if append.to > position => {
            Err(PlanError::Inside { position, link: before.last().expect("a link before the position").covers })
        }
        Some(append) => Err(PlanError::Missing { position: append.to, later: later(append.to) }),
        // Nothing durable before the position, though the chain reaches it: its start is missing.
        None => Err(PlanError::Missing { position: 0, later: later(0) }),
    }
}

/// The problems of a table of `topic` holding `files` (keys below the store), given per partition
/// with a recorded position the objects it must hold (or why none can be said).
pub fn audit(
    prefix: &Prefix,
    topic: &str,
    files: &[String],
    expected: &BTreeMap<i32, Result<Vec<String>, PlanError>>,
) -> Vec<TableProblem> {
    let mut problems = Vec::new();
    let mut held: BTreeMap<i32, BTreeSet<&str>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for file in files {
        if !seen.insert(file.as_str()) {
            problems.push(TableProblem::Twice { file: file.clone() });
            continue;
        }
        match classify(prefix, file) {
            ArchiveKey::Data(key) if key.tp.topic() == topic => {
                held.entry(key.tp.partition()).or_default().insert(file);
            }
            _ => problems.push(TableProblem::NotArchived { file: file.clone() }),
        }
    }
    let partitions: BTreeSet<i32> = held.keys().chain(expected.keys()).copied().collect();
    for partition in partitions {
        let held = held.remove(&partition).unwrap_or_default();
        let wanted: BTreeSet<&str> = match expected.get(&partition) {
            Some(Ok(objects)) => objects.iter().map(String::as_str).collect(),
            Some(Err(why)) => {
                problems.push(TableProblem::Position { partition, why: why.to_string() });
                continue;
            }
            None => BTreeSet::new(),
        };
        for file in held.difference(&wanted) {
            problems.push(TableProblem::Unexpected { partition, file: file.to_string() });
        }
        for file in wanted.difference(&held) {
            problems.push(TableProblem::Missing { partition, file: file.to_string() });
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::partition::OffsetRange;
    use crate::table::plan::Link;

    fn key(p: i32, start: i64, end: i64) -> String {
        format!("topic=t/partition={p}/t+{p}+{start:020}+{end:020}.parquet")
    }

    fn link(p: i32, start: i64, end: i64) -> Link {
        Link { covers: OffsetRange::new(start, end).unwrap(), object: Some(key(p, start, end)) }
    }

    #[test]
    fn a_table_must_hold_its_chain_up_to_its_position_exactly() {
        let links = [link(0, 0, 99), link(0, 100, 199), link(0, 200, 299)];
        let chain = Chain { links: &links, next: 300 };
        assert_eq!(expected_objects(200, chain).unwrap(), vec![key(0, 0, 99), key(0, 100, 199)]);
        assert_eq!(expected_objects(0, chain).unwrap(), Vec::<String>::new());
        assert!(matches!(expected_objects(150, chain), Err(PlanError::Inside { .. })));
        assert!(matches!(expected_objects(400, chain), Err(PlanError::Ahead { .. })));
        // A hole in the chain before the position: the table cannot be exact.
        let holed = [link(0, 0, 99), link(0, 200, 299)];
        let missing = expected_objects(300, Chain { links: &holed, next: 300 });
        assert_eq!(missing, Err(PlanError::Missing { position: 100, later: 200 }));
        // The chain's first object gone: the table's files are fine, the archive lost one.
        let headless = [link(0, 100, 199)];
        let missing = expected_objects(100, Chain { links: &headless, next: 200 });
        assert_eq!(missing, Err(PlanError::Missing { position: 0, later: 100 }));
    }

    #[test]
    fn every_file_once_nothing_else_nothing_missing() {
        let prefix = Prefix::default();
        let expected = BTreeMap::from([(0, Ok(vec![key(0, 0, 99), key(0, 100, 199)])), (1, Ok(vec![key(1, 0, 9)]))]);
        let exact = [key(0, 0, 99), key(0, 100, 199), key(1, 0, 9)];
        assert_eq!(audit(&prefix, "t", &exact, &expected), vec![]);
        let wrong = [key(0, 0, 99), key(0, 0, 99), key(0, 200, 299), "elsewhere/x.parquet".to_string()];
        assert_eq!(
            audit(&prefix, "t", &wrong, &expected),
            vec![
                TableProblem::Twice { file: key(0, 0, 99) },
                TableProblem::NotArchived { file: "elsewhere/x.parquet".into() },
                TableProblem::Unexpected { partition: 0, file: key(0, 200, 299) },
                TableProblem::Missing { partition: 0, file: key(0, 100, 199) },
                TableProblem::Missing { partition: 1, file: key(1, 0, 9) },
            ]
        );
        // A file of a partition the table records no position for is not the table's.
        let stray = [key(2, 0, 9)];
        let none = BTreeMap::new();
        assert_eq!(
            audit(&prefix, "t", &stray, &none),
            vec![TableProblem::Unexpected { partition: 2, file: key(2, 0, 9) }]
        );
    }
}
