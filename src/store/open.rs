//! The one way to a store: the backend a destination names, opened for what the caller does with it.
//! A backend is a variant of `Destination`, a table in `StoreOptions` and an arm here; nothing above the
//! store changes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::warn;

use super::cloud::{connect_azure, connect_gcs, AzureOptions, GcsOptions};
use super::{LocalStore, ObjectStore, S3Options, S3Store, StoreError};
use crate::archive::destination::Destination;
use crate::archive::object_key::Prefix;

/// Abort our multipart uploads (or remove temporary files) that crashes left pending this long.
pub const DEFAULT_ABORT_STALE_UPLOADS_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How to reach each backend and how to write to it; the destination says which one and where.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// S3 and S3-compatible servers; its part size and concurrency serve every backend's large uploads.
    pub s3: S3Options,
    /// Google Cloud Storage.
    pub gcs: GcsOptions,
    /// Azure Blob Storage.
    pub azure: AzureOptions,
    /// What a crash may leave behind (multipart uploads, temporary files) is cleaned up once this old.
    pub abort_stale_uploads_after: Duration,
}

impl StoreOptions {
    /// The defaults, reaching S3 at `endpoint` (when given) in `region` (or the AWS chain's): what the
    /// commands that only read an archive need.
    pub fn reading(endpoint: Option<String>, region: Option<String>) -> Self {
        Self {
            s3: S3Options::new(endpoint, region),
            gcs: GcsOptions::default(),
            azure: AzureOptions::default(),
            abort_stale_uploads_after: DEFAULT_ABORT_STALE_UPLOADS_AFTER,
        }
    }
}

/// What the store is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The archiver itself: what earlier crashes left behind is cleaned up, at the start and then now
    /// and then for as long as the store is in use.
    Archive,
    /// Checking or reading an archive (`run --check`, `verify`, `status`, `restore`, `ddl`): nothing is
    /// cleaned up.
    Inspect,
}

/// Opens the store `dest` names.
pub async fn open(dest: &Destination, settings: &StoreOptions, role: Role) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let older_than = settings.abort_stale_uploads_after;
    Ok(match (dest, role) {
        (Destination::S3 { bucket, .. }, Role::Inspect) => {
            Arc::new(S3Store::connect(bucket, settings.s3.clone()).await)
        }
        (Destination::S3 { bucket, prefix }, Role::Archive) => {
            let store = Arc::new(S3Store::connect(bucket, settings.s3.clone()).await);
            // The first sweep takes note of what is pending (and fails fast on a bucket we may not use).
            store.abort_stale_uploads(prefix, older_than).await?;
            tokio::spawn(sweep_stale_uploads(Arc::downgrade(&store), prefix.clone(), older_than));
            store
        }
        // What a crash leaves on GCS (a resumable session) or Azure (uncommitted blocks) is invisible and
        // expires by itself: there is nothing to sweep.
        (Destination::Gcs { bucket, .. }, _) => {
            Arc::new(connect_gcs(bucket, &settings.gcs, settings.s3.part_size(), settings.s3.part_concurrency())?)
        }
        (Destination::Azure { container, .. }, _) => Arc::new(connect_azure(
            container,
            &settings.azure,
            settings.s3.part_size(),
            settings.s3.part_concurrency(),
        )?),
        (Destination::File { root, .. }, Role::Inspect) => Arc::new(LocalStore::new(root)?),
        (Destination::File { root, .. }, Role::Archive) => {
            let store = LocalStore::new(root)?;
            let removed = store.remove_stale_temp_files(older_than)?;
            if !removed.is_empty() {
                warn!(count = removed.len(), files = ?removed, "removed stale temporary files left by earlier crashes");
            }
            Arc::new(store)
        }
    })
}

/// Aborts stale multipart uploads now and then, for as long as the store is in use.
async fn sweep_stale_uploads(store: Weak<S3Store>, prefix: Prefix, older_than: Duration) {
    let every = (older_than / 4).clamp(Duration::from_secs(60), Duration::from_secs(3600));
    loop {
        tokio::time::sleep(every).await;
        let Some(store) = store.upgrade() else { return };
        match store.abort_stale_uploads(&prefix, older_than).await {
            Ok(aborted) if aborted.is_empty() => {}
            Ok(aborted) => {
                warn!(count = aborted.len(), keys = ?aborted, "aborted stale multipart uploads left by crashes")
            }
            Err(e) => warn!("looking for stale multipart uploads failed (tried again later): {e}"),
        }
    }
}
