//! A commit's new snapshot, written before the catalog is asked to take it: one manifest per partition
//! spec of the files it adds, and the manifest list (its manifests, then every one of its parent's).
//! Every file has a name of its own (the commit's UUID), so one thrown away is nobody's.

use futures::StreamExt;

use super::catalog::{key_of, random_uuid};
use super::committer::{Committer, Planned, TableError};
use super::iceberg::expire::{expired, history_is_a_line, is_expired, oldest_list, orphaned, Expired};
use super::iceberg::manifest::{self, DataFile, ManifestEntry, SnapshotIds};
use super::iceberg::merge;
use super::iceberg::metadata::{append_snapshot, Base, Change, NewSchema};
use super::iceberg::spec::{field_id, PartitionSpec, PARTITION_COLUMN, PARTITION_SPEC_ID, TIME_COLUMN};
use super::state::TableState;
use crate::archive::time_bucket::BucketWidth;
use crate::encode::spool::SpoolData;

impl Committer {
    /// Writes the manifests and manifest list of `planned` on top of `base`.
    pub(super) async fn write_snapshot(
        &self,
        base: &Base<'_>,
        planned: &Planned,
        now_ms: i64,
    ) -> Result<WrittenSnapshot, TableError> {
        let ids = SnapshotIds {
            snapshot_id: (fastrand::u64(..) >> 1) as i64,
            parent: base.snapshot_id(),
            sequence_number: base.last_sequence_number() + 1,
        };
        let schema = match &planned.schema {
            Some(new) => &new.schema,
            None => base.schema()?.0,
        };
        let specs = specs_for(schema, planned.width);
        let location = base.location().unwrap_or_default();
        let uuid = random_uuid();
        let mut written = Vec::new();
        let mut entries = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let files: Vec<DataFile> =
                planned.files.iter().filter(|f| spec_of(&specs, f) == spec.spec_id).cloned().collect();
            if files.is_empty() {
                continue;
            }
            let bytes = manifest::write_manifest(&files, spec, schema, ids, sync(&uuid, i))?;
            let path = format!("{location}/metadata/{uuid}{}{i}.avro", merge::OWN_MANIFEST);
            written.push(self.put(base, &path, &bytes).await?);
            entries.push(manifest::list_entry(&path, bytes.len(), &files, spec, ids));
        }
        let merging = Merging { specs: &specs, schema, ids, uuid: &uuid };
        entries.extend(self.merged_manifests(base, &merging, &mut written).await?);
        let list = manifest::write_manifest_list(&entries, ids, sync(&uuid, specs.len()))?;
        let list_path = format!("{location}/metadata/snap-{}-1-{uuid}.avro", ids.snapshot_id);
        written.push(self.put(base, &list_path, &list).await?);
        let bytes: u64 = planned.files.iter().map(|f| f.size).sum();
        let records: u64 = planned.files.iter().map(|f| f.records).sum();
        let mut properties = TableState::properties(&planned.topic, planned.topic_id.as_deref(), &planned.positions);
        let schema_id = schema["schema-id"].as_i64().unwrap_or(0);
        let added = (planned.files.len(), records, bytes);
        let snapshot = append_snapshot(base, ids, &list_path, added, &properties, schema_id, now_ms);
        properties.extend(planned.schema.as_ref().map(NewSchema::name_mapping));
        let expired = expired(base.0, now_ms);
        let change = Change { snapshot, properties, schema: planned.schema.clone(), expired };
        Ok(WrittenSnapshot { change, keys: written, listed: entries })
    }

    /// The manifests of `base`'s snapshot, with each spec's many small ones of the archiver's merged into
    /// one (written here, its key added to `written`); one that cannot be read now stays as it is.
    async fn merged_manifests(
        &self,
        base: &Base<'_>,
        m: &Merging<'_>,
        written: &mut Vec<String>,
    ) -> Result<Vec<ManifestEntry>, TableError> {
        let mut parent = self.manifests(base).await?;
        for (i, spec) in m.specs.iter().enumerate() {
            let chosen: Vec<(usize, String)> = merge::to_merge(&parent, spec.spec_id)
                .into_iter()
                .filter_map(|at| Some((at, self.key(base, parent[at].0["manifest_path"].as_str()?).ok()?.to_string())))
                .collect();
            let keys: Vec<String> = chosen.iter().map(|(_, key)| key.clone()).collect();
            let read: Vec<_> = futures::stream::iter(keys.into_iter().map(|key| self.own_manifest(key)))
                .buffered(MANIFESTS_AT_ONCE)
                .collect()
                .await;
            let (mut merged, mut records) = (Vec::new(), Vec::new());
            for ((at, _), read) in chosen.iter().zip(read) {
                if let Some(read) = read {
                    records.extend(merge::as_existing(read, &parent[*at]));
                    merged.push(*at);
                }
            }
            if merged.len() < 2 {
                continue;
            }
            let n = m.specs.len() + 1 + i;
            let bytes = manifest::write_entries(&records, spec, m.schema, sync(m.uuid, n))?;
            let path =
                format!("{}/metadata/{}{}{n}.avro", base.location().unwrap_or_default(), m.uuid, merge::OWN_MANIFEST);
            written.push(self.put(base, &path, &bytes).await?);
            let mut at = 0..;
            parent.retain(|_| !merged.contains(&at.next().expect("endless")));
            parent.insert(0, merge::merged_entry(&path, bytes.len(), &records, spec, m.ids));
        }
        Ok(parent)
    }

    /// The entries of the manifest at `key` if the archiver wrote it and it can be read now.
    async fn own_manifest(&self, key: String) -> Option<Vec<serde_json::Value>> {
        let bytes = self.store.get(&key).await.ok()?;
        manifest::read_own_manifest(&bytes).ok().flatten()
    }

    /// Deletes what only the snapshots a commit on `base` removed read, once the catalog's answer (`now`)
    /// shows them gone: their manifest lists (each is its snapshot's own) and the manifests no kept
    /// snapshot lists (`expire::orphaned`; none unless the history is a line, both as planned and as
    /// the catalog now has it, or when a list cannot be read). A file off the table's store is left
    /// alone; a failed delete leaves an unreferenced file, nothing worse.
    pub(super) async fn delete_expired(
        &self,
        base: &Base<'_>,
        now: &serde_json::Value,
        expired: &[Expired],
        listed: &[ManifestEntry],
    ) {
        let lists: Vec<&str> = expired.iter().filter_map(|e| e.manifest_list.as_deref()).collect();
        if lists.is_empty() {
            return;
        }
        // The catalog's answer counts: snapshots it did not remove keep their files, and a branch made
        // meanwhile keeps its manifests.
        if now["snapshots"].as_array().into_iter().flatten().any(|s| is_expired(expired, s)) {
            return;
        }
        let mut orphans = Vec::new();
        if history_is_a_line(base.0, expired) && history_is_a_line(now, &[]) {
            let kept = match oldest_list(now) {
                Some(uri) => self.read_list(base, uri).await,
                None => Some(Vec::new()),
            };
            let mut expired_lists = Vec::new();
            for uri in &lists {
                expired_lists.extend(self.read_list(base, uri).await);
            }
            if let (Some(kept), true) = (kept, expired_lists.len() == lists.len()) {
                orphans = orphaned(&expired_lists, &[&kept, listed]);
            }
        }
        // Orphaned manifests before the lists: a stop half-way leaves a list behind (one unreferenced
        // file) rather than manifests that nothing names any more.
        for uri in orphans.iter().map(String::as_str).chain(lists) {
            if let Ok(key) = self.key(base, uri) {
                let _ = self.store.delete(key).await;
            }
        }
    }

    /// The manifest list at `uri`, if it can be read now.
    async fn read_list(&self, base: &Base<'_>, uri: &str) -> Option<Vec<ManifestEntry>> {
        let bytes = self.store.get(self.key(base, uri).ok()?).await.ok()?;
        manifest::read_manifest_list(&bytes).ok()
    }

    /// The manifests of the snapshot `base` is at (none for a table without one).
    pub(super) async fn manifests(&self, base: &Base<'_>) -> Result<Vec<ManifestEntry>, TableError> {
        let Some(list) = base.snapshot().and_then(|s| s["manifest-list"].as_str()) else { return Ok(Vec::new()) };
        let key = self.key(base, list)?;
        Ok(manifest::read_manifest_list(&self.store.get(key).await?)?)
    }

    /// The store key of a file of the table at `uri`.
    pub(super) fn key<'a>(&self, base: &Base<'_>, uri: &'a str) -> Result<&'a str, TableError> {
        Ok(key_of(self.store.as_ref(), base.location().unwrap_or_default(), uri)?)
    }

    async fn put(&self, base: &Base<'_>, uri: &str, bytes: &[u8]) -> Result<String, TableError> {
        let key = self.key(base, uri)?.to_string();
        let data = SpoolData::memory(bytes::Bytes::copy_from_slice(bytes));
        self.store.put_if_absent(&key, &data, bytes.len() as u64).await?;
        Ok(key)
    }
}

/// A snapshot written, for the catalog to take: its change, the keys written (deleted if it is refused)
/// and the manifests its list names.
pub(super) struct WrittenSnapshot {
    pub change: Change,
    pub keys: Vec<String>,
    pub listed: Vec<ManifestEntry>,
}

/// Manifests read at once to merge them.
const MANIFESTS_AT_ONCE: usize = 8;

/// What a commit's merged manifests are written with.
struct Merging<'a> {
    specs: &'a [PartitionSpec],
    schema: &'a serde_json::Value,
    ids: SnapshotIds,
    uuid: &'a str,
}

/// The specs of a table of `schema`: by Kafka partition, and by time too with `width` (the default).
pub(super) fn specs_for(schema: &serde_json::Value, width: Option<BucketWidth>) -> Vec<PartitionSpec> {
    let partition = field_id(schema, PARTITION_COLUMN).expect("every table schema has the partition column");
    let mut specs = vec![PartitionSpec::by_partition(partition)];
    if let (Some(width), Some(time)) = (width, field_id(schema, TIME_COLUMN)) {
        specs.push(PartitionSpec::by_time(partition, width, time));
    }
    specs
}

/// The spec a file goes in: by time when it is within one time partition and the table has the spec.
fn spec_of(specs: &[PartitionSpec], file: &DataFile) -> i32 {
    match (file.partition.ordinal(), specs.last()) {
        (Some(_), Some(last)) => last.spec_id,
        _ => PARTITION_SPEC_ID,
    }
}

/// An Avro file's sync marker, from the commit's UUID and the file's number in it.
fn sync(uuid: &str, i: usize) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (j, b) in uuid.bytes().chain(std::iter::repeat(0)).take(16).enumerate() {
        out[j] = b ^ (i as u8);
    }
    out
}
