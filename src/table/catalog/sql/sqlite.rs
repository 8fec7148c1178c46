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
}

impl SqliteRows {
    /// Opens (creating if need be) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, String> {
        let db = Connection::open(path).map_err(|e| e.to_string())?;
        db.busy_timeout(BUSY_TIMEOUT).map_err(|e| e.to_string())?;
        db.execute_batch(SCHEMA).map_err(|e| e.to_string())?;
        Ok(Self { db: Arc::new(Mutex::new(db)), path: path.to_path_buf() })
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
        let added = self
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
