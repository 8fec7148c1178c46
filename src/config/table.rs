//! The tables section of `run`: whether a topic's files are also committed to its Iceberg table
//! (`--table`, per topic too), and the catalog, names and cadence of the commits.

use std::path::PathBuf;
use std::time::Duration;

use super::choices::TableFormat;
use super::units::HumanDuration;
use super::values::read_ca;
use super::{invalid, set, ConfigError, Settings};
use crate::encode::{FileSpec, Format};
use crate::pipeline::TopicProfiles;
use crate::table::cadence::{Cadence, DEFAULT_COMMIT_FILES, DEFAULT_COMMIT_INTERVAL};
use crate::table::catalog::rest::{RestAuth, RestOptions};
use crate::table::catalog::sql::postgres::PostgresOptions;
pub use crate::table::catalog::CatalogLocation;
use tokio_postgres::config::SslMode;

pub const DEFAULT_TABLE: TableFormat = TableFormat::None;
pub const DEFAULT_ICEBERG_CATALOG_NAME: &str = "default";
pub const DEFAULT_ICEBERG_NAMESPACE: &str = "kafka";
/// The OAuth2 scope Iceberg's clients ask for by default.
pub const DEFAULT_ICEBERG_SCOPE: &str = "catalog";
pub const DEFAULT_TABLE_COMMIT_INTERVAL: HumanDuration = HumanDuration(DEFAULT_COMMIT_INTERVAL);
pub const DEFAULT_TABLE_COMMIT_FILES: usize = DEFAULT_COMMIT_FILES;
/// How long connecting to a PostgreSQL catalog may take, unless its URL's `connect_timeout` says.
const POSTGRES_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The server-side limits of a PostgreSQL catalog's statements, below the client's own 30 s: a
/// statement waiting on a lock or running long ends on the server too.
const POSTGRES_SERVER_TIMEOUTS: &str = "-c statement_timeout=20s -c lock_timeout=15s";
/// The shortest `--table-commit-interval`.
const MIN_COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// The catalog of the tables and their namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogConfig {
    pub location: CatalogLocation,
    /// The catalog's name in a SQL catalog's rows.
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    pub catalog: CatalogConfig,
    pub cadence: Cadence,
}

impl Settings {
    /// Whether a topic of these settings (writing `spec` files) has a table.
    pub(super) fn table_format(&self, spec: FileSpec) -> Result<bool, ConfigError> {
        match set(self.table, "--table")? {
            TableFormat::None => Ok(false),
            TableFormat::Iceberg if spec.format() != Format::Parquet => {
                Err(invalid("--table", "iceberg", "an Iceberg table holds Parquet files: use --format parquet".into()))
            }
            TableFormat::Iceberg if !set(self.claims, "--claims")? => Err(invalid(
                "--table",
                "iceberg",
                "a table follows each partition's claims chain, which --claims false does not write".into(),
            )),
            TableFormat::Iceberg => Ok(true),
        }
    }

    /// The tables' catalog and cadence, when a topic of `profiles` has a table.
    pub(super) fn table(&self, profiles: &TopicProfiles) -> Result<Option<TableConfig>, ConfigError> {
        if !profiles.any_table() {
            return Ok(None);
        }
        let how = "--table iceberg commits to a catalog: pass --iceberg-catalog sqlite:///absolute/path.db, \
                   postgresql://user@host:port/database or http(s)://host:port (a REST catalog)";
        let catalog = self.catalog()?.ok_or(ConfigError::Missing { name: "--iceberg-catalog", how })?;
        let interval = set(self.table_commit_interval, "--table-commit-interval")?.0;
        if interval < MIN_COMMIT_INTERVAL {
            let why = format!("use at least {}", HumanDuration(MIN_COMMIT_INTERVAL));
            return Err(invalid("--table-commit-interval", &HumanDuration(interval).to_string(), why));
        }
        let max_files =
            super::positive(set(self.table_commit_files, "--table-commit-files")? as u64, "--table-commit-files")?;
        Ok(Some(TableConfig { catalog, cadence: Cadence { interval, max_files: max_files as usize } }))
    }

    /// The catalog `--iceberg-catalog` names, with its settings and the namespace; none when not given.
    pub fn catalog(&self) -> Result<Option<CatalogConfig>, ConfigError> {
        let Some(url) = &self.iceberg_catalog else { return Ok(None) };
        let location = self.catalog_location(url)?;
        let namespace = set(self.iceberg_namespace.clone(), "--iceberg-namespace")?;
        if namespace.is_empty() || !namespace.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid("--iceberg-namespace", &namespace, "use letters, digits and _ only".into()));
        }
        let name = set(self.iceberg_catalog_name.clone(), "--iceberg-catalog-name")?;
        Ok(Some(CatalogConfig { location, name, namespace }))
    }

    /// Where `--iceberg-catalog` is, with a REST catalog's settings.
    fn catalog_location(&self, url: &str) -> Result<CatalogLocation, ConfigError> {
        let rest_only = [
            ("--iceberg-warehouse", self.iceberg_warehouse.is_some()),
            ("--iceberg-token", self.iceberg_token.is_some()),
            ("--iceberg-credential", self.iceberg_credential.is_some()),
            ("--iceberg-signing-name", self.iceberg_signing_name.is_some()),
            ("--iceberg-signing-region", self.iceberg_signing_region.is_some()),
        ];
        let sql = url.starts_with("sqlite://") || url.starts_with("postgresql://") || url.starts_with("postgres://");
        if sql {
            if let Some((flag, _)) = rest_only.iter().find(|(_, given)| *given) {
                return Err(invalid(
                    flag,
                    "…",
                    "it is a REST catalog's setting; --iceberg-catalog is a SQL one".into(),
                ));
            }
        } else if self.iceberg_catalog_password.is_some() {
            let why = "it is a PostgreSQL catalog's setting; --iceberg-catalog is not one";
            return Err(invalid("--iceberg-catalog-password", "****", why.into()));
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if !path.starts_with('/') {
                return Err(invalid("--iceberg-catalog", url, "write sqlite:///absolute/path.db".into()));
            }
            if self.iceberg_ca.is_some() {
                return Err(invalid("--iceberg-ca", "…", "a SQLite catalog is a local file".into()));
            }
            if self.iceberg_catalog_password.is_some() {
                return Err(invalid("--iceberg-catalog-password", "****", "a SQLite catalog has no password".into()));
            }
            return Ok(CatalogLocation::Sqlite(PathBuf::from(path)));
        }
        if sql {
            return self.postgres(url).map(CatalogLocation::Postgres);
        }
        let https = url.starts_with("https://");
        let host = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")).unwrap_or_default();
        if host.is_empty() {
            let why = "write sqlite:///absolute/path.db or postgresql://user@host:port/database (a SQL catalog), or \
                       http(s)://host:port[/path] (an Iceberg REST catalog; other catalogs are not supported yet)";
            return Err(invalid("--iceberg-catalog", url, why.into()));
        }
        if host.split('/').next().unwrap_or_default().contains('@') {
            let why = "give credentials as --iceberg-token or --iceberg-credential (a secret in the URL would be \
                       shown and logged)";
            return Err(invalid("--iceberg-catalog", "http://****@…", why.into()));
        }
        let local = ["localhost", "127.0.0.1"].iter().any(|h| host.split(['/', ':']).next() == Some(*h))
            || host.starts_with("[::1]");
        if self.iceberg_signing_name.is_some() && !https && !local {
            let why =
                "requests signed for AWS go over https:// (over http the session token travels in the clear and a \
                       signed request can be replayed)";
            return Err(invalid("--iceberg-catalog", url, why.into()));
        }
        let url = url.trim_end_matches('/').trim_end_matches("/v1").to_string();
        let ca = read_ca("--iceberg-ca", self.iceberg_ca.as_deref(), https, "an https:// REST catalog")?;
        Ok(CatalogLocation::Rest(RestOptions {
            url,
            warehouse: self.iceberg_warehouse.clone(),
            auth: self.rest_auth()?,
            ca,
        }))
    }

    /// A PostgreSQL catalog's connection: `url` with the password of --iceberg-catalog-password.
    fn postgres(&self, url: &str) -> Result<PostgresOptions, ConfigError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            let why = format!("{e}; write postgresql://user@host:port/database[?sslmode=require]");
            invalid("--iceberg-catalog", "postgresql://…", why)
        })?;
        if config.get_password().is_some() {
            let why = "give the password as --iceberg-catalog-password (a secret in the URL would be shown and logged)";
            return Err(invalid("--iceberg-catalog", "postgresql://****@…", why.into()));
        }
        if config.get_user().is_none() {
            return Err(invalid(
                "--iceberg-catalog",
                url,
                "name the user: postgresql://user@host:port/database".into(),
            ));
        }
        if config.get_hosts().is_empty() {
            return Err(invalid(
                "--iceberg-catalog",
                url,
                "name the host: postgresql://user@host:port/database".into(),
            ));
        }
        if let Some(password) = &self.iceberg_catalog_password {
            config.password(password.as_str());
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(POSTGRES_CONNECT_TIMEOUT);
        }
        config.application_name(env!("CARGO_PKG_NAME"));
        // Only a server that takes writes; statements the server gives up on before the client does.
        config.target_session_attrs(tokio_postgres::config::TargetSessionAttrs::ReadWrite);
        let options = config.get_options().map_or(String::new(), |o| format!("{o} "));
        config.options(format!("{options}{POSTGRES_SERVER_TIMEOUTS}"));
        let tls = config.get_ssl_mode() != SslMode::Disable;
        let what = "a PostgreSQL catalog with sslmode other than disable";
        let ca = read_ca("--iceberg-ca", self.iceberg_ca.as_deref(), tls, what)?;
        if ca.is_some() {
            // A CA given means TLS: `prefer` (the default) would let a server in the middle say no.
            config.ssl_mode(SslMode::Require);
        }
        Ok(PostgresOptions { config, url: url.to_string(), ca })
    }

    /// How a REST catalog's requests authenticate.
    fn rest_auth(&self) -> Result<RestAuth, ConfigError> {
        if let Some(signing_name) = &self.iceberg_signing_name {
            if self.iceberg_token.is_some() || self.iceberg_credential.is_some() {
                let why = "requests are signed with AWS credentials, or carry a token: not both";
                return Err(invalid("--iceberg-signing-name", signing_name, why.into()));
            }
            if signing_name.is_empty()
                || !signing_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            {
                return Err(invalid(
                    "--iceberg-signing-name",
                    signing_name,
                    "an AWS service name: glue, s3tables".into(),
                ));
            }
            let region = self.iceberg_signing_region.clone();
            return Ok(RestAuth::SigV4 { signing_name: signing_name.clone(), region });
        }
        if self.iceberg_signing_region.is_some() {
            let why = "it is the region of --iceberg-signing-name, which is not given";
            return Err(invalid("--iceberg-signing-region", "…", why.into()));
        }
        match (&self.iceberg_token, &self.iceberg_credential) {
            (None, None) => Ok(RestAuth::None),
            (Some(token), None) => Ok(RestAuth::Bearer(token.clone())),
            (None, Some(credential)) => {
                let Some((client_id, client_secret)) = credential.split_once(':') else {
                    return Err(invalid("--iceberg-credential", "****", "write CLIENT_ID:CLIENT_SECRET".into()));
                };
                let scope = set(self.iceberg_scope.clone(), "--iceberg-scope")?;
                Ok(RestAuth::ClientCredentials {
                    client_id: client_id.into(),
                    client_secret: client_secret.into(),
                    scope,
                })
            }
            (Some(_), Some(_)) => {
                Err(invalid("--iceberg-token", "****", "give a token or client credentials, not both".into()))
            }
        }
    }
}
