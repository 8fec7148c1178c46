//! The SQL catalog (`sqlite:///abs/path.db` or `postgresql://user@host/db`), in the schema Iceberg's
//! JDBC catalog and pyiceberg's `SqlCatalog` share: a row per table naming its current metadata file.
//! A commit writes the next metadata file to the store, then swaps the row's pointer only if it still
//! names the file the commit was planned on (one conditional UPDATE: the database's row lock orders
//! concurrent committers, and the loser's UPDATE matches no row).

pub mod postgres;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::key_of;
use super::{next_metadata_file, read_metadata, write_metadata, Catalog, CatalogError, Committed, Loaded, TableIdent};
use crate::store::ObjectStore;
use crate::table::iceberg::metadata::{apply, dropped_from_log, Change, DELETE_AFTER_COMMIT};

/// The catalog's tables, as Iceberg's JDBC catalog (schema V1) and pyiceberg create them; valid in
/// SQLite and PostgreSQL alike.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000),
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// The four statements a SQL catalog runs, in one database's dialect. An error is the database's
/// message (the catalog says which database).
#[async_trait]
pub trait Rows: Send + Sync {
    /// The database, as `--iceberg-catalog` named it (no password).
    fn describe(&self) -> String;

    /// The metadata file the row of `table` in `catalog` names; none without a row.
    async fn location(&self, catalog: &str, table: &TableIdent) -> Result<Option<String>, String>;

    /// How many tables `catalog` has.
    async fn count(&self, catalog: &str) -> Result<i64, String>;

    /// Adds `table`'s row naming `at` (and its namespace's) unless it has one: whether this added it.
    async fn insert(&self, catalog: &str, table: &TableIdent, at: &str) -> Result<bool, String>;

    /// Points `table`'s row at `at` if it still names `was`: whether it did.
    async fn swap(&self, catalog: &str, table: &TableIdent, was: &str, at: &str) -> Result<bool, String>;
}

pub struct SqlCatalog {
    rows: Box<dyn Rows>,
    /// The catalog's name in the rows (readers name it too: pyiceberg's `SqlCatalog(name, ...)`).
    name: String,
    store: Arc<dyn ObjectStore>,
}

impl SqlCatalog {
    /// Catalog `name` in the database `rows` reads, whose tables keep their metadata files on `store`.
    pub fn new(rows: Box<dyn Rows>, name: &str, store: Arc<dyn ObjectStore>) -> Self {
        Self { rows, name: name.to_string(), store }
    }

    /// Catalog `name` in the SQLite database at `path` (created if absent).
    pub fn sqlite(path: &std::path::Path, name: &str, store: Arc<dyn ObjectStore>) -> Result<Self, CatalogError> {
        let rows = sqlite::SqliteRows::open(path)
            .map_err(|why| CatalogError::Catalog { catalog: format!("sqlite://{}", path.display()), why })?;
        Ok(Self::new(Box::new(rows), name, store))
    }

    fn failed(&self, why: impl std::fmt::Display) -> CatalogError {
        CatalogError::Catalog { catalog: self.rows.describe(), why: why.to_string() }
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    async fn load(&self, table: &TableIdent) -> Result<Option<Loaded>, CatalogError> {
        match self.rows.location(&self.name, table).await.map_err(|e| self.failed(e))? {
            Some(location) => Ok(Some(read_metadata(self.store.as_ref(), table, &location).await?)),
            None => Ok(None),
        }
    }

    async fn check(&self) -> Result<String, CatalogError> {
        let tables = self.rows.count(&self.name).await.map_err(|e| self.failed(e))?;
        Ok(format!("SQL catalog {} ({}): {tables} tables", self.rows.describe(), self.name))
    }

    async fn create(&self, table: &TableIdent, metadata: &Value) -> Result<Option<Loaded>, CatalogError> {
        let location =
            metadata["location"].as_str().ok_or_else(|| self.failed("new table metadata has no location"))?;
        let file = next_metadata_file(location, None);
        let key = write_metadata(self.store.as_ref(), table, &file, metadata).await?;
        if !self.rows.insert(&self.name, table, &file).await.map_err(|e| self.failed(e))? {
            // Another committer's table won: this file is nobody's.
            let _ = self.store.delete(&key).await;
            return Ok(None);
        }
        Ok(Some(Loaded { metadata: metadata.clone(), location: file }))
    }

    async fn commit(
        &self,
        table: &TableIdent,
        base: &Loaded,
        change: &Change,
        now_ms: i64,
    ) -> Result<Committed, CatalogError> {
        let next = apply(&base.metadata, &base.location, change, now_ms);
        let location =
            base.metadata["location"].as_str().ok_or_else(|| self.failed("table metadata has no location"))?;
        let file = next_metadata_file(location, Some(&base.location));
        let key = write_metadata(self.store.as_ref(), table, &file, &next).await?;
        // An error here leaves the file: the swap may have happened with its answer lost.
        if !self.rows.swap(&self.name, table, &base.location, &file).await.map_err(|e| self.failed(e))? {
            let _ = self.store.delete(&key).await; // Nobody's: the table never pointed at it.
            return Ok(Committed::Conflict);
        }
        if next["properties"][DELETE_AFTER_COMMIT] == "true" {
            for dropped in dropped_from_log(&base.metadata, &next) {
                if let Ok(key) = key_of(self.store.as_ref(), &table.to_string(), &dropped) {
                    let _ = self.store.delete(key).await; // Left behind, it is only unreferenced.
                }
            }
        }
        Ok(Committed::Done(Loaded { metadata: next, location: file }))
    }
}
