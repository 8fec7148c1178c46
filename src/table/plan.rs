//! Which archived files one commit adds to a partition's part of the table, and where the partition's
//! position moves: only the contiguous run of durable links of its claims chain that starts exactly at
//! the table's position.

use thiserror::Error;

use crate::archive::partition::OffsetRange;

/// One link of a partition's claims chain whose data is durable: the offsets its claim covers
/// ([chain start, end]) and its data object's key below the prefix, or none when the claimed range holds
/// no records (compaction removed them before it was read again, or retention deleted them before they
/// were archived: the next claim records the gap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub covers: OffsetRange,
    pub object: Option<String>,
}

/// A partition's chain as a committer listed it after reading the table (so it holds whatever the
/// table's position was moved past): its durable links in chain order, from at or before the position,
/// and the chain position after its last claim, durable or not (only the last claim can lack its data).
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a> {
    pub links: &'a [Link],
    pub next: i64,
}

/// What one commit does to a partition: add `files` (in chain order) and move its position to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    pub to: i64,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlanError {
    #[error(
        "the table's position ({position}) is past the archive's chain, which ends before {archive}: the table \
         was written from another archive or topic incarnation; point --iceberg-namespace at a new table, or \
         drop this one"
    )]
    Ahead { position: i64, archive: i64 },
    #[error(
        "the table's position ({position}) falls inside the archived range {link}, not at a file's start: \
         the table was not written by this archive's chain; point --iceberg-namespace at a new table"
    )]
    Inside { position: i64, link: OffsetRange },
    #[error(
        "the archive has no object at chain position {position}, the table's position, though it has one at \
         {later}: an object was removed from the archive; run `verify` and restore it"
    )]
    Missing { position: i64, later: i64 },
}

/// The append of a partition whose table position is `position` (none: the table holds nothing of it,
/// so it starts at the chain's first link, chain position 0), given its `chain`. Only the contiguous run of links that starts exactly at
/// the position is added: a break ends it (what follows is not durable yet). None when the table is up
/// to date with the durable chain.
pub fn plan(position: Option<i64>, chain: Chain) -> Result<Option<Append>, PlanError> {
    let from = position.unwrap_or(0);
    if from > chain.next {
        return Err(PlanError::Ahead { position: from, archive: chain.next });
    }
    let links = chain.links;
    let at = match links.binary_search_by_key(&from, |l| l.covers.start()) {
        Ok(at) => at,
        Err(after) if after > 0 && from <= links[after - 1].covers.end() => {
            return Err(PlanError::Inside { position: from, link: links[after - 1].covers })
        }
        Err(after) if after < links.len() => {
            return Err(PlanError::Missing { position: from, later: links[after].covers.start() })
        }
        Err(_) => return Ok(None),
    };
    let contiguous = 1 + links[at..].windows(2).take_while(|w| w[1].covers.start() == w[0].covers.next()).count();
    let run = &links[at..at + contiguous];
    let files: Vec<String> = run.iter().filter_map(|l| l.object.clone()).collect();
    let to = run.last().expect("a link at the position").covers.next();
    Ok(Some(Append { to, files }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(start: i64, end: i64) -> Link {
        Link { covers: OffsetRange::new(start, end).unwrap(), object: Some(format!("o{start}")) }
    }

    fn empty(start: i64, end: i64) -> Link {
        Link { covers: OffsetRange::new(start, end).unwrap(), object: None }
    }

    /// The chain of `links`, all its claims durable.
    fn chain(links: &[Link]) -> Chain<'_> {
        Chain { links, next: links.last().map_or(0, |l| l.covers.next()) }
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_new_partition_takes_its_whole_durable_chain() {
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let append = plan(None, chain(&links)).unwrap().unwrap();
        assert_eq!(append, Append { to: 30, files: names(&["o0", "o10", "o20"]) });
    }

    #[test]
    fn only_the_links_from_the_position_on_are_added() {
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let append = plan(Some(10), chain(&links)).unwrap().unwrap();
        assert_eq!(append, Append { to: 30, files: names(&["o10", "o20"]) });
        // Listed from the position on, as a committer lists it.
        assert_eq!(plan(Some(10), chain(&links[1..])).unwrap(), Some(append));
    }

    #[test]
    fn a_table_at_the_chain_end_adds_nothing() {
        let links = [link(0, 9), link(10, 19)];
        assert_eq!(plan(Some(20), chain(&links)), Ok(None));
        assert_eq!(plan(Some(20), Chain { links: &[], next: 20 }), Ok(None));
        assert_eq!(plan(None, chain(&[])), Ok(None));
    }

    #[test]
    fn a_break_in_the_chain_ends_the_run_and_is_never_skipped() {
        // 20..=29 is the last claim, not durable yet.
        let links = [link(0, 9), link(10, 19)];
        let claimed = Chain { links: &links, next: 30 };
        let append = plan(Some(0), claimed).unwrap().unwrap();
        assert_eq!((append.files, append.to), (names(&["o0", "o10"]), 20));
        assert_eq!(plan(Some(20), claimed), Ok(None));
        // A link missing below durable ones is not "not durable yet": its object was removed.
        let holed = [link(0, 9), link(10, 19), link(30, 39)];
        let append = plan(Some(0), chain(&holed)).unwrap().unwrap();
        assert_eq!(append.to, 20, "the run ends at the hole");
        assert_eq!(plan(Some(20), chain(&holed)), Err(PlanError::Missing { position: 20, later: 30 }));
    }

    #[test]
    fn a_link_without_records_moves_the_position_and_adds_no_file() {
        // 10..=19: compaction emptied it, or retention took it before it was archived.
        let links = [link(0, 9), empty(10, 19), link(20, 29)];
        let append = plan(Some(0), chain(&links)).unwrap().unwrap();
        assert_eq!(append, Append { to: 30, files: names(&["o0", "o20"]) });
    }

    #[test]
    fn a_table_that_disagrees_with_the_chain_is_refused() {
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        assert_eq!(plan(Some(40), chain(&links)), Err(PlanError::Ahead { position: 40, archive: 30 }));
        let listed_from_it = Chain { links: &[], next: 30 };
        assert_eq!(plan(Some(40), listed_from_it), Err(PlanError::Ahead { position: 40, archive: 30 }));
        let inside = Err(PlanError::Inside { position: 15, link: OffsetRange::new(10, 19).unwrap() });
        assert_eq!(plan(Some(15), chain(&links)), inside);
        let tail = chain(&links[1..]);
        assert_eq!(plan(None, tail), Err(PlanError::Missing { position: 0, later: 10 }), "not the head");
    }

    #[test]
    fn a_commit_planned_again_on_a_newer_table_adds_only_what_is_still_missing() {
        // Two committers plan from position 0; the other one's commit lands first, moving it to 30.
        let links = [link(0, 9), link(10, 19), link(20, 29)];
        let mine = plan(Some(0), Chain { links: &links[..2], next: 30 }).unwrap().unwrap();
        let theirs = plan(Some(0), chain(&links)).unwrap().unwrap();
        assert_eq!((mine.to, theirs.to), (20, 30));
        // Planned again from the table re-read and the chain listed after it.
        let again = plan(Some(theirs.to), chain(&links)).unwrap();
        assert_eq!(again, None, "nothing is added twice");
    }
}
