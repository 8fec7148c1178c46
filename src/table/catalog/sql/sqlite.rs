//! A SQL catalog's rows in a SQLite database file (created if absent; SQLite's write lock orders
//! concurrent committers, other processes' included).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};

use super::{Rows, SCHEMA};
use crate::table::catalog::TableIdent;

/// How long a statement waits for another process's write lock on the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct SqliteRows {
    db: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// Whether `iceberg_tables` has the `iceberg_type` column (schema V1, ours; V0 lacks it).
    typed: bool,
}

impl SqliteRows {
    /// Opens (creating if need be) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, String> {
        let db = Connection::open(path).map_err(|e| e.to_string())?;
        db.busy_timeout(BUSY_TIMEOUT).map_err(|e| e.to_string())?;
        db.execute_batch(SCHEMA).map_err(|e| e.to_string())?;
        let typed = db
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'",
                [],
                |row| row.get::<_, i64>(0),
            )
            .map_err(|e| e.to_string())?;
        Ok(Self { db: Arc::new(Mutex::new(db)), path: path.to_path_buf(), typed: typed == 1 })
    }

    /// Runs `f` on the connection, off the async threads.
    async fn with_db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, String> {
        let db = self.db.clone();
        let run = tokio::task::spawn_blocking(move || f(&db.lock().unwrap_or_else(|p| p.into_inner())));
        run.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())
    }
}

#[async_trait]
impl Rows for SqliteRows {
    fn describe(&self) -> String {
        format!("sqlite://{}", self.path.display())
    }

    async fn location(&self, catalog: &str, table: &TableIdent) -> Result<Option<String>, String> {
        let (name, t) = (catalog.to_string(), table.clone());
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
            .await?;
        Ok(location.flatten())
    }

    async fn count(&self, catalog: &str) -> Result<i64, String> {
        let name = catalog.to_string();
        self.with_db(move |db| {
            db.query_row("SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = ?1", params![name], |r| r.get(0))
        })
        .await
    }

    async fn insert(&self, catalog: &str, table: &TableIdent, at: &str) -> Result<bool, String> {
        let (name, t, at) = (catalog.to_string(), table.clone(), at.to_string());
        let table_row = match self.typed {
            true => "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                     metadata_location, previous_metadata_location, iceberg_type) VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
            false => "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                      metadata_location, previous_metadata_location) VALUES (?1, ?2, ?3, ?4, NULL)",
        };
        let added = self
            .with_db(move |db| {
                db.execute(
                    "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, \
                     property_value) VALUES (?1, ?2, 'exists', 'true')",
                    params![name, t.namespace],
                )?;
                db.execute(table_row, params![name, t.namespace, t.name, at])
            })
            .await?;
        Ok(added == 1)
    }

    async fn swap(&self, catalog: &str, table: &TableIdent, was: &str, at: &str) -> Result<bool, String> {
        let (name, t, at, was) = (catalog.to_string(), table.clone(), at.to_string(), was.to_string());
        let swapped = self
            .with_db(move |db| {
                db.execute(
                    "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2 \
                     WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 AND metadata_location = ?2",
                    params![at, was, name, t.namespace, t.name],
                )
            })
            .await?;
        Ok(swapped == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables another tool made in Iceberg's JDBC schema V0 (no `iceberg_type`) are used as they are.
    #[tokio::test]
    async fn a_table_row_goes_into_tables_of_schema_v0_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v0.db");
        let v0 = "CREATE TABLE iceberg_tables (catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT \
                  NULL, table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000), previous_metadata_location \
                  VARCHAR(1000), PRIMARY KEY (catalog_name, table_namespace, table_name))";
        Connection::open(&path).unwrap().execute_batch(v0).unwrap();
        let table = TableIdent { namespace: "kafka".into(), name: "orders".into() };
        for (path, typed) in [(path, false), (dir.path().join("new.db"), true)] {
            let rows = SqliteRows::open(&path).unwrap();
            assert_eq!(rows.typed, typed, "{}", path.display());
            assert!(rows.insert("default", &table, "s3://b/m/00000.metadata.json").await.unwrap());
            assert!(!rows.insert("default", &table, "s3://b/m/00000-other.metadata.json").await.unwrap(), "once");
            assert!(rows.swap("default", &table, "s3://b/m/00000.metadata.json", "s3://b/m/00001.json").await.unwrap());
            let at = rows.location("default", &table).await.unwrap();
            assert_eq!(at.as_deref(), Some("s3://b/m/00001.json"));
        }
    }
}
