//! Which archived files one commit adds to a partition's part of the table, and where the partition's
//! position moves: only the contiguous run of durable links of its claims chain that starts exactly at
//! the table's position.

use std::collections::HashSet;

use thiserror::Error;

use crate::archive::partition::OffsetRange;

/// One link of a partition's claims chain whose data is durable: the offsets its claim covers
/// ([chain start, end]) and its data object's key below the prefix, or none when the claimed range
/// holds no records (compaction removed them before it was read again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub covers: OffsetRange,
    pub object: Option<String>,
}

/// What one commit does to a partition: add `files` (in chain order) and move its position from
/// `from` (none: the partition had none) to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    pub from: Option<i64>,
    pub to: i64,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error(
        "the table's position ({position}) is past the archive's durable chain, which ends before {archive}: \
         the table was written from another archive or topic incarnation; point --iceberg-namespace at a new \
         table, or drop this one"
    )]
    Ahead { position: i64, archive: i64 },
    #[error(
        "the table's position ({position}) falls inside the archived range {link}, not at a file's start: \
         the table was not written by this archive's chain; point --iceberg-namespace at a new table"
    )]
    Inside { position: i64, link: OffsetRange },
    #[error(
        "the archive's chain starts at {first}, after the table's position ({position}): objects were removed \
         from the archive before the table held them; run `verify` and restore them, or start a new table"
    )]
    Behind { position: i64, first: i64 },
    #[error(
        "{object} is in the table already, though the table's position ({position}) says it is not: the table \
         was written outside this archive's chain; run `verify`"
    )]
    AlreadyIn { object: String, position: i64 },
}

/// The append of a partition whose table position is `position` (none: the table holds nothing of it),
/// given `links`, its chain's durable links in chain order from at or before `position` (a run that
/// breaks ends at the break: what follows is not durable yet), and `in_table`, the data objects of the
/// partition the table holds. None when the table is up to date with the durable chain.
pub fn plan(position: Option<i64>, links: &[Link], in_table: &HashSet<String>) -> Result<Option<Append>, PlanError> {
    let Some(first) = links.first() else {
        return Ok(None);
    };
    let from = position.unwrap_or(first.covers.start());
    let contiguous = 1 + links.windows(2).take_while(|w| w[1].covers.start() == w[0].covers.next()).count();
    let links = &links[..contiguous];
    let at = match links.binary_search_by_key(&from, |l| l.covers.start()) {
        Ok(at) => at,
        Err(0) => return Err(PlanError::Behind { position: from, first: first.covers.start() }),
        Err(after) if from <= links[after - 1].covers.end() => {
            return Err(PlanError::Inside { position: from, link: links[after - 1].covers })
        }
        Err(after) if from == links[after - 1].covers.next() => return Ok(None),
        Err(after) => return Err(PlanError::Ahead { position: from, archive: links[after - 1].covers.next() }),
    };
    let run = &links[at..];
    let files: Vec<String> = run.iter().filter_map(|l| l.object.clone()).collect();
    if let Some(object) = files.iter().find(|f| in_table.contains(*f)) {
        return Err(PlanError::AlreadyIn { object: object.clone(), position: from });
    }
    let to = run.last().expect("a link at the position").covers.next();
    Ok(Some(Append { from: position, to, files }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(start: i64, end: i64) -> Link {
        Link { covers: OffsetRange::new(start, end).unwrap(), object: Some(format!("o{start}")) }
    }

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    const NONE: &[&str] = &[];

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_new_partition_takes_its_whole_durable_chain() {
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let append = plan(None, &links, &set(NONE)).unwrap().unwrap();
        assert_eq!(append, Append { from: None, to: 30, files: files(&["o0", "o10", "o20"]) });
    }

    #[test]
    fn only_the_links_from_the_position_on_are_added() {
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let append = plan(Some(10), &links, &set(&["o0"])).unwrap().unwrap();
        assert_eq!(append, Append { from: Some(10), to: 30, files: files(&["o10", "o20"]) });
    }

    #[test]
    fn a_table_at_the_chain_end_adds_nothing() {
        let links = [link(0, 9), link(10, 19)];
        assert_eq!(plan(Some(20), &links, &set(&["o0", "o10"])), Ok(None));
        assert_eq!(plan(None, &[], &set(NONE)), Ok(None));
    }

    #[test]
    fn a_break_in_the_chain_ends_the_run_and_is_never_skipped() {
        // 20..=29 is claimed but not durable yet: 30..=39 must wait for it.
        let links = [link(0, 9), link(10, 19), link(30, 39)];
        let append = plan(Some(0), &links, &set(NONE)).unwrap().unwrap();
        assert_eq!(append.files, files(&["o0", "o10"]));
        assert_eq!(append.to, 20);
        assert_eq!(plan(Some(20), &links, &set(NONE)), Ok(None));
    }

    #[test]
    fn a_link_without_records_moves_the_position_and_adds_no_file() {
        let empty = Link { covers: OffsetRange::new(10, 19).unwrap(), object: None };
        let links = [link(0, 9), empty, link(20, 29)];
        let append = plan(Some(0), &links, &set(NONE)).unwrap().unwrap();
        assert_eq!(append, Append { from: Some(0), to: 30, files: files(&["o0", "o20"]) });
    }

    #[test]
    fn a_table_that_disagrees_with_the_chain_is_refused() {
        let links = [link(10, 19), link(20, 29)];
        assert_eq!(plan(Some(40), &links, &set(NONE)), Err(PlanError::Ahead { position: 40, archive: 30 }));
        let inside = Err(PlanError::Inside { position: 15, link: OffsetRange::new(10, 19).unwrap() });
        assert_eq!(plan(Some(15), &links, &set(NONE)), inside);
        assert_eq!(plan(Some(0), &links, &set(NONE)), Err(PlanError::Behind { position: 0, first: 10 }));
        let twice = Err(PlanError::AlreadyIn { object: "o20".into(), position: 10 });
        assert_eq!(plan(Some(10), &links, &set(&["o20"])), twice);
    }

    #[test]
    fn a_commit_planned_again_on_a_newer_table_adds_only_what_is_still_missing() {
        // Two committers plan from position 0; the other one's commit lands first, moving it to 20.
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let mine = plan(Some(0), &links[..2], &set(NONE)).unwrap().unwrap();
        let theirs = plan(Some(0), &links, &set(NONE)).unwrap().unwrap();
        assert_eq!((mine.to, theirs.to), (20, 30));
        let again = plan(Some(theirs.to), &links, &set(&["o0", "o10", "o20"])).unwrap();
        assert_eq!(again, None, "nothing is added twice");
    }
}
