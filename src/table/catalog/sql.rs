//! The SQL catalog (`sqlite:///abs/path.db`), in the schema Iceberg's JDBC catalog and pyiceberg's
//! `SqlCatalog` share: a row per table naming its current metadata file. A commit writes the next
//! metadata file to the store, then swaps the row's pointer only if it still names the file the commit
//! was planned on (one conditional UPDATE: SQLite's write lock orders concurrent committers).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use serde_json::Value;

use super::key_of;
use super::{next_metadata_file, read_metadata, write_metadata, Catalog, CatalogError, Committed, Loaded, TableIdent};
use crate::store::ObjectStore;
use crate::table::iceberg::metadata::{apply, dropped_from_log, Change, DELETE_AFTER_COMMIT};

/// How long a statement waits for another process's write lock on the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

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

pub struct SqlCatalog {
    db: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// The catalog's name in the rows (readers name it too: pyiceberg's `SqlCatalog(name, ...)`).
    name: String,
    store: Arc<dyn ObjectStore>,
}

impl SqlCatalog {
    /// Opens (creating if need be) the SQLite database at `path`, catalog `name`, whose tables keep
    /// their metadata files on `store`.
    pub fn open(path: PathBuf, name: &str, store: Arc<dyn ObjectStore>) -> Result<Self, CatalogError> {
        let failed = |e: rusqlite::Error| CatalogError::Catalog {
            catalog: format!("sqlite://{}", path.display()),
            why: e.to_string(),
        };
        let db = Connection::open(&path).map_err(failed)?;
        db.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
        db.execute_batch(SCHEMA).map_err(failed)?;
        Ok(Self { db: Arc::new(Mutex::new(db)), path, name: name.to_string(), store })
    }

    fn failed(&self, e: impl std::fmt::Display) -> CatalogError {
        CatalogError::Catalog { catalog: format!("sqlite://{}", self.path.display()), why: e.to_string() }
    }

    /// Runs `f` on the connection, off the async threads.
    async fn with_db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, CatalogError> {
        let db = self.db.clone();
        let run = tokio::task::spawn_blocking(move || f(&db.lock().unwrap_or_else(|p| p.into_inner())));
        run.await.map_err(|e| self.failed(e))?.map_err(|e| self.failed(e))
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    async fn load(&self, table: &TableIdent) -> Result<Option<Loaded>, CatalogError> {
        let (name, t) = (self.name.clone(), table.clone());
        let location = self
            .with_db(move |db| {
                db.query_row(
                    "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 \
                     AND table_name = ?3",
                    params![name, t.namespace, t.name],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
            })
            .await?
            .flatten();
        match location {
            Some(location) => Ok(Some(read_metadata(self.store.as_ref(), table, &location).await?)),
            None => Ok(None),
        }
    }

    async fn check(&self) -> Result<String, CatalogError> {
        let name = self.name.clone();
        let tables: i64 = self
            .with_db(move |db| {
                db.query_row("SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = ?1", params![name], |r| r.get(0))
            })
            .await?;
        Ok(format!("SQL catalog sqlite://{} ({}): {tables} tables", self.path.display(), self.name))
    }

    async fn create(&self, table: &TableIdent, metadata: &Value) -> Result<Option<Loaded>, CatalogError> {
        let location =
            metadata["location"].as_str().ok_or_else(|| self.failed("new table metadata has no location"))?;
        let file = next_metadata_file(location, None);
        let key = write_metadata(self.store.as_ref(), table, &file, metadata).await?;
        let (name, t, at) = (self.name.clone(), table.clone(), file.clone());
        let created = self
            .with_db(move |db| {
                db.execute(
                    "INSERT OR IGNORE INTO iceberg_namespace_properties VALUES (?1, ?2, 'exists', 'true')",
                    params![name, t.namespace],
                )?;
                db.execute(
                    "INSERT OR IGNORE INTO iceberg_tables VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
                    params![name, t.namespace, t.name, at],
                )
            })
            .await?;
        if created == 0 {
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
        let (name, t, at, was) = (self.name.clone(), table.clone(), file.clone(), base.location.clone());
        let swapped = self
            .with_db(move |db| {
                db.execute(
                    "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2 \
                     WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
                    params![at, was, name, t.namespace, t.name],
                )
            })
            .await?;
        if swapped == 0 {
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
