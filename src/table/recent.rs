//! The Parquet objects this process has just created, by key, with their size and footer: a commit in
//! the same process adds them without reading them back (a HEAD and a footer GET a file). Only objects
//! the store reported *created* by this process go in (one that already existed may hold other bytes
//! of the same records). Bounded, in objects and in the footers' memory: past either the oldest go
//! first, and a commit reads those from the store as it would any other instance's.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use parquet::file::metadata::ParquetMetaData;

/// How many objects an archiver keeps: a commit adds at most `--table-commit-files` (1000 by default).
pub const RECENT_OBJECTS: usize = 1024;
/// How much memory their footers may take (wide typed values make footers of tens of KiB).
pub const RECENT_FOOTER_BYTES: usize = 32 << 20;

#[derive(Default)]
pub struct RecentObjects {
    capacity: usize,
    max_bytes: usize,
    inner: Mutex<Recent>,
}

#[derive(Default)]
struct Recent {
    by_key: HashMap<String, (u64, Arc<ParquetMetaData>)>,
    order: VecDeque<String>,
    /// The footers' memory.
    bytes: usize,
}

impl RecentObjects {
    /// Keeps up to `capacity` objects whose footers take at most `max_bytes` (none: [`Default`], for
    /// committers with no pipeline beside them).
    pub fn new(capacity: usize, max_bytes: usize) -> Self {
        Self { capacity, max_bytes, inner: Mutex::default() }
    }

    /// The object at `key` was created by this process, `size` bytes long, with `footer`.
    pub fn created(&self, key: &str, size: u64, footer: Arc<ParquetMetaData>) {
        if self.capacity == 0 {
            return;
        }
        let mut recent = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        recent.bytes += footer.memory_size();
        match recent.by_key.insert(key.to_string(), (size, footer)) {
            Some((_, replaced)) => recent.bytes -= replaced.memory_size(),
            None => recent.order.push_back(key.to_string()),
        }
        while recent.order.len() > self.capacity || recent.bytes > self.max_bytes {
            let Some(oldest) = recent.order.pop_front() else { break };
            if let Some((_, footer)) = recent.by_key.remove(&oldest) {
                recent.bytes -= footer.memory_size();
            }
        }
    }

    /// The size and footer of the object at `key`, if this process created it lately.
    pub fn get(&self, key: &str) -> Option<(u64, Arc<ParquetMetaData>)> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).by_key.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer() -> Arc<ParquetMetaData> {
        use parquet::file::metadata::FileMetaData;
        use parquet::schema::types::{SchemaDescriptor, Type};
        let schema = Arc::new(SchemaDescriptor::new(Arc::new(Type::group_type_builder("s").build().unwrap())));
        Arc::new(ParquetMetaData::new(FileMetaData::new(1, 0, None, None, schema, None), vec![]))
    }

    #[test]
    fn the_oldest_objects_go_first_and_a_committer_without_a_pipeline_keeps_none() {
        let recent = RecentObjects::new(2, usize::MAX);
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            recent.created(key, i as u64, footer());
        }
        let sizes: Vec<_> = ["a", "b", "c"].iter().map(|k| recent.get(k).map(|(size, _)| size)).collect();
        assert_eq!(sizes, [None, Some(1), Some(2)]);
        let none = RecentObjects::default();
        none.created("a", 1, footer());
        assert!(none.get("a").is_none());
        // Bounded by the footers' memory too: room for two of them.
        let small = RecentObjects::new(10, 2 * footer().memory_size());
        for key in ["a", "b", "c"] {
            small.created(key, 0, footer());
        }
        assert_eq!(["a", "b", "c"].map(|k| small.get(k).is_some()), [false, true, true]);
    }
}
