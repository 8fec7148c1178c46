//! Snapshot expiry, as Iceberg's table properties ask for it: each commit adds a snapshot (one a minute
//! by default), and a table that kept them all would carry a longer snapshot list in every metadata
//! file it writes. A commit also removes the snapshots older than `history.expire.max-snapshot-age-ms`
//! (default 5 days), keeping the newest `history.expire.min-snapshots-to-keep` (default 1) and every
//! snapshot a branch or tag names. Only snapshots go: the data files stay (they are the archive's own
//! objects, and every later snapshot holds them); the manifest lists of the removed ones are deleted
//! once the commit is in, and so are the manifests only they listed (small ones merged away since).

use std::collections::HashSet;

use serde_json::Value;

use super::manifest::ManifestEntry;

/// Iceberg's default maximum snapshot age: 5 days.
pub const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 3600 * 1000;
/// Iceberg's default number of snapshots always kept.
pub const DEFAULT_MIN_SNAPSHOTS_TO_KEEP: usize = 1;
/// At most this many snapshots are removed by one commit (a table that kept years of them is trimmed
/// over several).
const MAX_REMOVED_PER_COMMIT: usize = 1000;

const MAIN: &str = "main";
const MAX_AGE_PROPERTY: &str = "history.expire.max-snapshot-age-ms";
const MIN_KEEP_PROPERTY: &str = "history.expire.min-snapshots-to-keep";

/// A removed snapshot: its ID and its manifest list's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired {
    pub snapshot_id: i64,
    pub manifest_list: Option<String>,
}

/// Whether `snapshot` is one of `expired`.
pub fn is_expired(expired: &[Expired], snapshot: &Value) -> bool {
    expired.iter().any(|e| snapshot["snapshot-id"].as_i64() == Some(e.snapshot_id))
}

/// The manifest list of the oldest snapshot `metadata` keeps (by sequence number), if any.
pub fn oldest_list(metadata: &Value) -> Option<&str> {
    let snapshots = metadata["snapshots"].as_array().into_iter().flatten();
    snapshots.min_by_key(|s| s["sequence-number"].as_i64()).and_then(|s| s["manifest-list"].as_str())
}

/// The snapshots of `metadata` a commit at `now_ms` that adds one more (and moves `main` to it)
/// removes, oldest first.
pub fn expired(metadata: &Value, now_ms: i64) -> Vec<Expired> {
    let property = |key: &str| metadata["properties"][key].as_str().and_then(|v| v.parse::<i64>().ok());
    let max_age = property(MAX_AGE_PROPERTY).unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS);
    let min_keep = property(MIN_KEEP_PROPERTY).map_or(DEFAULT_MIN_SNAPSHOTS_TO_KEEP, |n| n.max(0) as usize);
    // Other branches and tags keep theirs; `main` moves to the commit's new snapshot.
    let referenced: Vec<i64> = metadata["refs"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| name.as_str() != MAIN)
        .filter_map(|(_, r)| r["snapshot-id"].as_i64())
        .collect();
    let mut snapshots: Vec<&Value> = metadata["snapshots"].as_array().into_iter().flatten().collect();
    snapshots.sort_by_key(|s| (s["sequence-number"].as_i64(), s["timestamp-ms"].as_i64()));
    // The newest `min_keep` stay, counting the one the commit adds.
    let candidates = snapshots.len().saturating_sub(min_keep.saturating_sub(1));
    snapshots[..candidates]
        .iter()
        .filter(|s| s["timestamp-ms"].as_i64().is_some_and(|t| t < now_ms.saturating_sub(max_age)))
        .filter_map(|s| {
            let id = s["snapshot-id"].as_i64()?;
            let manifest_list = s["manifest-list"].as_str().map(str::to_string);
            (!referenced.contains(&id)).then_some(Expired { snapshot_id: id, manifest_list })
        })
        .take(MAX_REMOVED_PER_COMMIT)
        .collect()
}

/// The manifests the lists of expired snapshots name and no kept list does: those merged away since,
/// which no snapshot left reads. A table's history is a line (its only branch is `main`), and each list
/// names every manifest live at its snapshot, so the oldest kept snapshot's list and the new one's are
/// all the kept lists a manifest of an expired one can be in.
pub fn orphaned(expired_lists: &[Vec<ManifestEntry>], kept_lists: &[&[ManifestEntry]]) -> Vec<String> {
    let path = |m: &ManifestEntry| m.0["manifest_path"].as_str().map(str::to_string);
    let kept: HashSet<String> = kept_lists.iter().flat_map(|l| l.iter()).filter_map(path).collect();
    let mut orphaned: Vec<String> =
        expired_lists.iter().flatten().filter_map(path).filter(|p| !kept.contains(p)).collect();
    orphaned.sort();
    orphaned.dedup();
    orphaned
}

/// Whether what `orphaned` assumes holds of `metadata` once `expired` go: its only ref is `main`, the
/// snapshots kept are all `main`'s ancestors, and every expired one is older than every kept one (a
/// rolled-back or otherwise forked history, or clocks out of step, and nothing is deleted but lists).
pub fn history_is_a_line(metadata: &Value, expired: &[Expired]) -> bool {
    if metadata["refs"].as_object().is_some_and(|refs| refs.keys().any(|name| name != MAIN)) {
        return false;
    }
    let snapshots: Vec<&Value> = metadata["snapshots"].as_array().into_iter().flatten().collect();
    let gone = |s: &Value| is_expired(expired, s);
    let mut ancestors = HashSet::new();
    let mut at = metadata["refs"][MAIN]["snapshot-id"].as_i64();
    while let Some(id) = at.filter(|id| ancestors.insert(*id)) {
        at = snapshots
            .iter()
            .find(|s| s["snapshot-id"].as_i64() == Some(id))
            .and_then(|s| s["parent-snapshot-id"].as_i64());
    }
    let sequence = |s: &&Value| s["sequence-number"].as_i64().unwrap_or(i64::MAX);
    let (gone, kept): (Vec<&Value>, Vec<&Value>) = snapshots.iter().partition(|s| gone(s));
    let newest_gone = gone.iter().map(sequence).max().unwrap_or(i64::MIN);
    kept.iter()
        .all(|s| s["snapshot-id"].as_i64().is_some_and(|id| ancestors.contains(&id)) && sequence(s) > newest_gone)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const DAY: i64 = 24 * 3600 * 1000;

    fn table(properties: Value) -> Value {
        let snapshot = |id: i64, day: i64| json!({"snapshot-id": id, "sequence-number": id, "timestamp-ms": day * DAY, "manifest-list": format!("s3://b/snap-{id}.avro")});
        json!({
            "snapshots": [snapshot(3, 3), snapshot(1, 1), snapshot(2, 2), snapshot(4, 4), snapshot(9, 9)],
            "current-snapshot-id": 9,
            "refs": {"main": {"snapshot-id": 9, "type": "branch"}, "audit": {"snapshot-id": 2, "type": "tag"}},
            "properties": properties,
        })
    }

    fn ids(expired: &[Expired]) -> Vec<i64> {
        expired.iter().map(|e| e.snapshot_id).collect()
    }

    #[test]
    fn snapshots_older_than_five_days_go_except_those_a_branch_or_tag_names() {
        let expired = expired(&table(json!({})), 10 * DAY);
        assert_eq!(ids(&expired), [1, 3, 4], "2 is tagged; 9 is younger");
        assert_eq!(expired[0].manifest_list.as_deref(), Some("s3://b/snap-1.avro"));
        assert_eq!(ids(&super::expired(&table(json!({})), 6 * DAY + 1)), [1], "younger than 5 days: kept");
        let later = super::expired(&table(json!({})), 20 * DAY);
        assert_eq!(ids(&later), [1, 3, 4, 9], "main's goes too: main moves to the commit's new snapshot");
    }

    #[test]
    fn manifests_only_expired_snapshots_list_are_orphaned() {
        let list = |paths: &[&str]| -> Vec<ManifestEntry> {
            paths.iter().map(|p| ManifestEntry(json!({"manifest_path": p}))).collect()
        };
        // m1 and m2 were merged into m3 after the expired snapshots; m0 is still listed.
        let expired = [list(&["m1", "m0"]), list(&["m2", "m1", "m0"])];
        let (oldest_kept, new) = (list(&["m3", "m0"]), list(&["m4", "m3", "m0"]));
        assert_eq!(orphaned(&expired, &[&oldest_kept, &new]), ["m1", "m2"]);
    }

    #[test]
    fn manifests_are_deleted_only_along_a_line_of_snapshots() {
        let line = json!({
            "snapshots": [{"snapshot-id": 1, "sequence-number": 1}, {"snapshot-id": 2, "sequence-number": 2, "parent-snapshot-id": 1},
                          {"snapshot-id": 3, "sequence-number": 3, "parent-snapshot-id": 2}],
            "refs": {"main": {"snapshot-id": 3, "type": "branch"}},
        });
        let gone = |id: i64| vec![Expired { snapshot_id: id, manifest_list: None }];
        assert!(history_is_a_line(&line, &gone(1)));
        assert!(!history_is_a_line(&line, &gone(2)), "1 is kept and older than 2");
        let mut rolled_back = line.clone();
        rolled_back["refs"]["main"]["snapshot-id"] = json!(2); // 3 is no ancestor of main any more
        assert!(!history_is_a_line(&rolled_back, &gone(1)));
        assert!(!history_is_a_line(&table(json!({})), &[]), "the audit tag");
    }

    #[test]
    fn the_tables_own_properties_set_the_age_and_how_many_stay() {
        let kept = table(json!({"history.expire.max-snapshot-age-ms": DAY.to_string(),
                                "history.expire.min-snapshots-to-keep": "4"}));
        // Five snapshots and the commit's new one: the newest four (3, 4, 9 and the new) stay.
        assert_eq!(ids(&expired(&kept, 10 * DAY)), [1]);
        let none = table(json!({"history.expire.max-snapshot-age-ms": (100 * DAY).to_string()}));
        assert_eq!(ids(&expired(&none, 10 * DAY)), Vec::<i64>::new());
    }
}
