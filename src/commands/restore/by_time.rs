//! Restoring by time without reading what is outside the selection: objects names say offsets, not
//! times, so the times come from what the archiver wrote beside them. A complete time-bucket folder's
//! `_SUCCESS` marker gives the span of its records' timestamps (one GET for the whole folder); for the
//! other objects, each one's claim does (one small GET per object instead of reading it).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use futures::stream::{self, StreamExt};

use super::{ByPartition, RestoreOptions};
use crate::archive::claim::covering_claim;
use crate::archive::completeness::{bucket_of_key, Marker};
use crate::archive::keys::classify;
use crate::archive::object_key::ObjectKey;
use crate::archive::time_bucket::Bucket;
use crate::commands::restore::plan::FolderChoice;
use crate::recovery::claims::claimed_timestamps;
use crate::store::{list_all, ObjectStore, StoreError};

/// What the markers decided.
pub(super) struct ByMarkers {
    /// Folders whose records are all outside the selection, and their objects, dropped.
    pub(super) folders: u64,
    pub(super) objects: u64,
    /// Folders whose records are all inside it: their objects need no claim read.
    pub(super) read: HashSet<Bucket>,
}

/// With a time selection: drops the objects of the complete folders whose markers say no record in
/// them is selected. A marker that cannot be read or parsed, or does not say, decides nothing.
pub(super) async fn skip_by_markers(
    store: &dyn ObjectStore,
    opts: &RestoreOptions,
    markers: &[String],
    by_partition: &mut ByPartition,
) -> Result<ByMarkers, StoreError> {
    let bodies: Vec<Result<Option<(Bucket, Marker)>, StoreError>> = stream::iter(markers)
        .map(|key| async move {
            let Some(bucket) = bucket_of_key(&opts.prefix, &opts.topic, key) else { return Ok(None) };
            match store.get(key).await {
                Ok(body) => Ok(serde_json::from_slice::<Marker>(&body).ok().map(|m| (bucket, m))),
                Err(StoreError::NotFound(_)) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let (mut skip, mut read) = (HashSet::new(), HashSet::new());
    for body in bodies {
        let Some((bucket, marker)) = body? else { continue };
        match opts.selection.folder(&marker) {
            FolderChoice::Skip => skip.insert(bucket),
            FolderChoice::Read => read.insert(bucket),
            FolderChoice::Look => false,
        };
    }
    let objects = drop_objects(by_partition, |k| k.bucket.is_some_and(|b| skip.contains(&b)));
    Ok(ByMarkers { folders: skip.len() as u64, objects, read })
}

/// With a time selection: drops the objects whose claims say their records' timestamps are all outside
/// it; returns how many were dropped. Objects in the folders `read` are not looked at (their marker
/// said); objects without a claim that describes them exactly, or without timestamps in it, are kept.
/// The claims are listed only when some object is to be looked at.
pub(super) async fn skip_by_claims(
    store: &dyn ObjectStore,
    opts: &RestoreOptions,
    read: &HashSet<Bucket>,
    by_partition: &mut ByPartition,
) -> Result<u64, StoreError> {
    let look: Vec<&ObjectKey> =
        by_partition.values().flatten().filter(|k| k.bucket.is_none_or(|b| !read.contains(&b))).collect();
    if look.is_empty() {
        return Ok(0);
    }
    let mut starts: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for raw in list_all(store, &opts.prefix.claims_topic_folder(&opts.topic)).await? {
        if let Some(c) = classify(&opts.prefix, &raw).claim() {
            starts.entry(c.tp.partition()).or_default().insert(c.chain_start);
        }
    }
    let lookups: Vec<(ObjectKey, Option<i64>)> = look
        .into_iter()
        .map(|k| (k.clone(), starts.get(&k.tp.partition()).and_then(|s| covering_claim(s, k.range.start()))))
        .collect();
    let outside: Vec<Option<ObjectKey>> = stream::iter(lookups)
        .map(|(object, claim_start)| async move {
            let Some(start) = claim_start else { return Ok(None) };
            let times = claimed_timestamps(store, &opts.prefix, &object, start).await?;
            Ok(times.is_some_and(|range| !opts.selection.wants_times(range)).then_some(object))
        })
        .buffer_unordered(16)
        .collect::<Vec<Result<Option<ObjectKey>, StoreError>>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let outside: HashSet<ObjectKey> = outside.into_iter().flatten().collect();
    Ok(drop_objects(by_partition, |k| outside.contains(k)))
}

/// Drops the objects `drop` picks (and partitions left with none); returns how many.
fn drop_objects(by_partition: &mut ByPartition, drop: impl Fn(&ObjectKey) -> bool) -> u64 {
    let before: usize = by_partition.values().map(Vec::len).sum();
    for keys in by_partition.values_mut() {
        keys.retain(|k| !drop(k));
    }
    by_partition.retain(|_, keys| !keys.is_empty());
    (before - by_partition.values().map(Vec::len).sum::<usize>()) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::completeness::marker_key;
    use crate::archive::object_key::Prefix;
    use crate::commands::restore::plan::Selection;
    use crate::commands::restore::{objects, RestoreTarget};
    use crate::service::markers::tests::{archive, hour, put, HOUR};
    use crate::store::LocalStore;

    async fn mark(store: &dyn ObjectStore, bucket: Bucket, objects: u64, timestamps: Option<(i64, i64)>) {
        let marker = Marker {
            topic: "t".into(),
            bucket: bucket.to_string(),
            start_ms: bucket.start_ms(),
            end_ms: bucket.end_ms(),
            partitions: 1,
            archived_through: BTreeMap::new(),
            objects: Some(objects),
            timestamps,
            writer: "w".into(),
            time_ms: 0,
        };
        put(store, &marker_key(&Prefix::new("a"), "t", &bucket), serde_json::to_vec(&marker).unwrap()).await;
    }

    /// Restoring hour 1: hour 0's folder is skipped by its marker, hour 1's objects are all read (its
    /// marker says every record is in the hour: the claim, here contradicting it on purpose, is not
    /// read), and in hour 2's folder, which has no marker, each object's claim decides.
    #[tokio::test]
    async fn markers_skip_or_keep_whole_folders_and_claims_decide_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::new(dir.path()).unwrap();
        archive(&store, hour(0), 0, (0, 0, 9), Some((10, 20))).await;
        archive(&store, hour(0), 0, (10, 10, 19), Some((30, 40))).await;
        mark(&store, hour(0), 2, Some((10, 40))).await;
        archive(&store, hour(1), 0, (20, 20, 29), Some((0, 1))).await;
        mark(&store, hour(1), 1, Some((HOUR, HOUR + 9))).await;
        archive(&store, hour(2), 0, (30, 30, 39), Some((HOUR + 5, 2 * HOUR + 5))).await;
        archive(&store, hour(2), 0, (40, 40, 49), Some((2 * HOUR + 6, 2 * HOUR + 9))).await;
        mark(&store, hour(3), 0, None).await;
        let opts = RestoreOptions {
            prefix: Prefix::new("a"),
            topic: "t".into(),
            partitions: vec![],
            selection: Selection { from_time_ms: Some(HOUR), to_time_ms: Some(2 * HOUR - 1), ..Selection::default() },
            target: RestoreTarget::Stdout,
            max_rate: None,
            reencode_json: false,
        };
        let (mut by_partition, markers) = objects(&store, &opts).await.unwrap();
        assert_eq!(markers.len(), 3);
        let by_markers = skip_by_markers(&store, &opts, &markers, &mut by_partition).await.unwrap();
        assert_eq!((by_markers.folders, by_markers.objects), (2, 2), "hour 0 (2 objects) and the empty hour 3");
        assert_eq!(by_markers.read, HashSet::from([hour(1)]));
        assert_eq!(skip_by_claims(&store, &opts, &by_markers.read, &mut by_partition).await.unwrap(), 1);
        let starts: Vec<i64> = by_partition[&0].iter().map(|k| k.range.start()).collect();
        assert_eq!(starts, [20, 30]);
    }
}
