//! Iceberg catalogs: where a table's current metadata is, and the one atomic swap that orders its
//! commits. A commit names the metadata it was planned on; a catalog whose table has moved since
//! refuses it ([`Committed::Conflict`]), and the committer plans again on what it finds.

pub mod rest;
pub mod sigv4;
pub mod sql;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use thiserror::Error;

use crate::store::{ObjectStore, StoreError};
use crate::table::iceberg::metadata::Change;

/// Where an Iceberg catalog is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogLocation {
    /// A SQL catalog in this SQLite database file.
    Sqlite(PathBuf),
    /// A SQL catalog in a PostgreSQL database.
    Postgres(sql::postgres::PostgresOptions),
    /// An Iceberg REST catalog.
    Rest(rest::RestOptions),
}

/// The catalog at `location` (a SQL catalog's rows name it `name`), its tables' files on `store`.
pub fn open(
    location: &CatalogLocation,
    name: &str,
    store: Arc<dyn ObjectStore>,
) -> Result<Arc<dyn Catalog>, CatalogError> {
    Ok(match location {
        CatalogLocation::Sqlite(path) => Arc::new(sql::SqlCatalog::sqlite(path, name, store)?),
        CatalogLocation::Postgres(options) => {
            let rows = sql::postgres::PostgresRows::new(options.clone());
            Arc::new(sql::SqlCatalog::new(Box::new(rows), name, store))
        }
        CatalogLocation::Rest(options) => Arc::new(rest::RestCatalog::new(options.clone(), store)),
    })
}

/// A table's name in its catalog.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableIdent {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for TableIdent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("the catalog {catalog} failed: {why}; check --iceberg-catalog and that the catalog is reachable")]
    Catalog { catalog: String, why: String },
    #[error("table {table}'s metadata file {location} could not be read or written: {source}")]
    Store { table: String, location: String, source: StoreError },
    #[error("table {table}'s metadata file {location} is not Iceberg table metadata: {why}")]
    Metadata { table: String, location: String, why: String },
    #[error("table {table}'s metadata is at {location}, outside the archive's store {store}: the archiver writes tables it keeps on its own store only")]
    Elsewhere { table: String, location: String, store: String },
}

/// A table's metadata as loaded: its content and the file it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub metadata: Value,
    pub location: String,
}

/// How a commit ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Committed {
    /// The table is now at this metadata.
    Done(Loaded),
    /// The table moved since the metadata the commit was planned on: nothing changed.
    Conflict,
}

#[async_trait]
pub trait Catalog: Send + Sync {
    /// The table's metadata, or none when the catalog has no such table.
    async fn load(&self, table: &TableIdent) -> Result<Option<Loaded>, CatalogError>;

    /// Creates the table with `metadata` (at its `location`); none when another committer created it
    /// first (then load theirs).
    async fn create(&self, table: &TableIdent, metadata: &Value) -> Result<Option<Loaded>, CatalogError>;

    /// Asks the catalog something harmless (`run --check`): what it is and that it answers.
    async fn check(&self) -> Result<String, CatalogError>;

    /// Applies `change` to the table if it is still at `base`.
    async fn commit(
        &self,
        table: &TableIdent,
        base: &Loaded,
        change: &Change,
        now_ms: i64,
    ) -> Result<Committed, CatalogError>;
}

/// The store key of `uri` (`<store>/<key>`), a file of `table`; an error when it is not on `store`.
pub fn key_of<'a>(store: &dyn ObjectStore, table: &str, uri: &'a str) -> Result<&'a str, CatalogError> {
    let key = uri.strip_prefix(&store.describe()).and_then(|rest| rest.strip_prefix('/'));
    key.ok_or_else(|| CatalogError::Elsewhere {
        table: table.to_string(),
        location: uri.to_string(),
        store: store.describe(),
    })
}

/// The URI of `key` on `store`, as Iceberg's files name each other.
pub fn uri_of(store: &dyn ObjectStore, key: &str) -> String {
    format!("{}/{key}", store.describe())
}

/// A random (version 4) UUID, for the names of metadata files and tables.
pub fn random_uuid() -> String {
    let mut b: [u8; 16] = fastrand::u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The metadata file after `previous` (none: a new table's first) in the table at `location`:
/// `<location>/metadata/<version:05>-<uuid>.metadata.json`, as Iceberg's catalogs name them.
pub fn next_metadata_file(location: &str, previous: Option<&str>) -> String {
    let version = previous
        .and_then(|p| p.rsplit('/').next())
        .and_then(|name| name.split('-').next())
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |v| v + 1);
    format!("{location}/metadata/{version:05}-{}.metadata.json", random_uuid())
}

/// Reads the metadata file at `location` from `store`.
pub async fn read_metadata(
    store: &dyn ObjectStore,
    table: &TableIdent,
    location: &str,
) -> Result<Loaded, CatalogError> {
    let key = key_of(store, &table.to_string(), location)?;
    let bytes = store.get(key).await.map_err(|source| CatalogError::Store {
        table: table.to_string(),
        location: location.to_string(),
        source,
    })?;
    let metadata = serde_json::from_slice(&bytes).map_err(|e| CatalogError::Metadata {
        table: table.to_string(),
        location: location.to_string(),
        why: e.to_string(),
    })?;
    Ok(Loaded { metadata, location: location.to_string() })
}

/// Writes `metadata` to a new file at `location` on `store` (never over another); returns its key.
pub async fn write_metadata(
    store: &dyn ObjectStore,
    table: &TableIdent,
    location: &str,
    metadata: &Value,
) -> Result<String, CatalogError> {
    let store_error = |source| CatalogError::Store { table: table.to_string(), location: location.to_string(), source };
    let key = key_of(store, &table.to_string(), location)?;
    let body = bytes::Bytes::from(serde_json::to_vec(metadata).expect("JSON serialises"));
    let len = body.len() as u64;
    store.put_if_absent(key, &crate::encode::spool::SpoolData::memory(body), len).await.map_err(store_error)?;
    Ok(key.to_string())
}
