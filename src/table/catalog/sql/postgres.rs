//! A SQL catalog's rows in a PostgreSQL database (`postgresql://user@host:port/db`), over TLS when the
//! URL's `sslmode` asks for it. One connection, made at the first statement and again after it breaks;
//! the catalog's tables are created if absent. Row locks order concurrent committers: a second UPDATE
//! of the same row waits for the first and then finds the row no longer names the file it expects.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rustls::pki_types::CertificateDer;
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Rows, SCHEMA};
use crate::table::catalog::TableIdent;

/// How long one statement (or connecting) may take before the connection is given up and made anew.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a PostgreSQL catalog is and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// The connection settings, the password included.
    pub config: Config,
    /// The URL as given (it holds no password).
    pub url: String,
    /// The CA certificates the server's certificate is signed by (none: the system's roots).
    pub ca: Option<Vec<CertificateDer<'static>>>,
}

pub struct PostgresRows {
    options: PostgresOptions,
    client: Mutex<Option<Arc<Connected>>>,
}

/// A connection, and whether its `iceberg_tables` has the `iceberg_type` column (Iceberg's JDBC
/// catalog's schema V1, and ours; V0 tables, made by other tools, lack it).
struct Connected {
    client: Client,
    typed: bool,
}

impl PostgresRows {
    /// The rows of the database `options` name; connects at the first statement.
    pub fn new(options: PostgresOptions) -> Self {
        Self { options, client: Mutex::new(None) }
    }

    /// Runs `statement` with `params` on the connection: the rows it touched.
    async fn execute(&self, statement: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, String> {
        self.with_client(|c| async move { c.client.execute(statement, params).await }).await
    }

    /// Runs `f` on the connection within [`STATEMENT_TIMEOUT`] (the server gives up on it sooner:
    /// the options set `statement_timeout`), connecting first if there is none. A connection that broke,
    /// timed out or is no longer fit to write (the server shutting down, a standby) is dropped, so the
    /// next statement makes a new one.
    async fn with_client<T, F>(&self, f: impl FnOnce(Arc<Connected>) -> F) -> Result<T, String>
    where
        F: Future<Output = Result<T, tokio_postgres::Error>>,
    {
        let connected = {
            let mut slot = self.client.lock().await;
            match slot.as_ref().filter(|c| !c.client.is_closed()) {
                Some(connected) => connected.clone(),
                None => slot.insert(Arc::new(self.connect().await?)).clone(),
            }
        };
        let why = match tokio::time::timeout(STATEMENT_TIMEOUT, f(connected.clone())).await {
            Ok(Ok(answer)) => return Ok(answer),
            // The database refused the statement: the connection stays unless it is unfit.
            Ok(Err(e)) if e.as_db_error().is_some_and(|db| !unfit(db.code())) => return Err(described(&e)),
            Ok(Err(e)) => described(&e),
            Err(_) => format!("no answer within {} s", STATEMENT_TIMEOUT.as_secs()),
        };
        let mut slot = self.client.lock().await;
        if slot.as_ref().is_some_and(|current| Arc::ptr_eq(current, &connected)) {
            *slot = None;
        }
        Err(why)
    }

    /// A new connection, with the catalog's tables made if absent (only then: a user allowed to read
    /// and write them but not to create tables works with tables made for it).
    async fn connect(&self) -> Result<Connected, String> {
        let tls = MakeRustlsConnect::new(crate::http::tls_config(self.options.ca.as_deref()));
        let connecting = tokio::time::timeout(STATEMENT_TIMEOUT, self.options.config.connect(tls));
        let (client, connection) = connecting
            .await
            .map_err(|_| format!("could not connect within {} s", STATEMENT_TIMEOUT.as_secs()))?
            .map_err(|e| described(&e))?;
        let url = self.options.url.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!(catalog = %url, error = %e, "the connection to the SQL catalog broke; the next statement makes a new one");
            }
        });
        let setup = async {
            let found = client.query_one(FOUND, &[]).await?;
            if !(found.try_get::<_, bool>(0)? && found.try_get::<_, bool>(1)?) {
                match client.batch_execute(SCHEMA).await {
                    // Two archivers creating the tables at once: one wins, the tables are there.
                    Err(e)
                        if e.code()
                            .is_some_and(|c| *c == SqlState::UNIQUE_VIOLATION || *c == SqlState::DUPLICATE_TABLE) => {}
                    done => done?,
                }
            }
            client.query_one(TYPED, &[]).await?.try_get::<_, bool>(0)
        };
        match tokio::time::timeout(STATEMENT_TIMEOUT, setup).await {
            Ok(Ok(typed)) => Ok(Connected { client, typed }),
            Ok(Err(e)) => Err(format!("finding or creating the catalog's tables: {}", described(&e))),
            Err(_) => Err(format!("finding the catalog's tables: no answer within {} s", STATEMENT_TIMEOUT.as_secs())),
        }
    }
}

/// Whether the catalog's two tables are there (on the search path).
const FOUND: &str =
    "SELECT to_regclass('iceberg_tables') IS NOT NULL, to_regclass('iceberg_namespace_properties') IS NOT NULL";
/// Whether `iceberg_tables` has the `iceberg_type` column.
const TYPED: &str = "SELECT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() \
                     AND table_name = 'iceberg_tables' AND column_name = 'iceberg_type')";

/// Whether an error the server answered with leaves the connection unfit for the catalog's writes:
/// the connection failing or the server going away (classes 08 and 57P), or a read-only server.
fn unfit(code: &SqlState) -> bool {
    let code = code.code();
    code.starts_with("08") || code.starts_with("57P") || code == SqlState::READ_ONLY_SQL_TRANSACTION.code()
}

#[async_trait]
impl Rows for PostgresRows {
    fn describe(&self) -> String {
        self.options.url.clone()
    }

    async fn location(&self, catalog: &str, table: &TableIdent) -> Result<Option<String>, String> {
        let (namespace, name) = (table.namespace.as_str(), table.name.as_str());
        let row = self
            .with_client(|c| async move {
                let statement = "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 \
                                 AND table_namespace = $2 AND table_name = $3";
                c.client.query_opt(statement, &[&catalog, &namespace, &name]).await
            })
            .await?;
        row.map(|row| row.try_get::<_, Option<String>>(0).map_err(|e| e.to_string())).transpose().map(Option::flatten)
    }

    async fn count(&self, catalog: &str) -> Result<i64, String> {
        let row = self
            .with_client(|c| async move {
                c.client.query_one("SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = $1", &[&catalog]).await
            })
            .await?;
        row.try_get(0).map_err(|e| e.to_string())
    }

    async fn insert(&self, catalog: &str, table: &TableIdent, at: &str) -> Result<bool, String> {
        let (namespace, name) = (table.namespace.as_str(), table.name.as_str());
        let added = self
            .with_client(|c| async move {
                let namespace_row = "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, \
                                     property_value) VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING";
                c.client.execute(namespace_row, &[&catalog, &namespace]).await?;
                let table_row = match c.typed {
                    true => {
                        "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, \
                             previous_metadata_location, iceberg_type) VALUES ($1, $2, $3, $4, NULL, 'TABLE') \
                             ON CONFLICT DO NOTHING"
                    }
                    false => {
                        "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, \
                              previous_metadata_location) VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING"
                    }
                };
                c.client.execute(table_row, &[&catalog, &namespace, &name, &at]).await
            })
            .await?;
        Ok(added == 1)
    }

    async fn swap(&self, catalog: &str, table: &TableIdent, was: &str, at: &str) -> Result<bool, String> {
        let (namespace, name) = (table.namespace.as_str(), table.name.as_str());
        let swapped = self
            .execute(
                "UPDATE iceberg_tables SET metadata_location = $1, previous_metadata_location = $2 \
                 WHERE catalog_name = $3 AND table_namespace = $4 AND table_name = $5 AND metadata_location = $2",
                &[&at, &was, &catalog, &namespace, &name],
            )
            .await?;
        Ok(swapped == 1)
    }
}

/// What the server said (its message and SQLSTATE), or why there was no answer.
fn described(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => {
            let mut why = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(cause) = source {
                why = format!("{why}: {cause}");
                source = cause.source();
            }
            why
        }
    }
}
