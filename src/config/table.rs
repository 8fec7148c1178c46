//! The tables section of `run`: whether a topic's files are also committed to its Iceberg table
//! (`--table`, per topic too), and the catalog, names and cadence of the commits.

use std::path::PathBuf;
use std::time::Duration;

use super::choices::TableFormat;
use super::units::HumanDuration;
use super::{invalid, set, ConfigError, Settings};
use crate::encode::{FileSpec, Format};
use crate::pipeline::TopicProfiles;
use crate::table::cadence::{Cadence, DEFAULT_COMMIT_FILES, DEFAULT_COMMIT_INTERVAL};

pub const DEFAULT_TABLE: TableFormat = TableFormat::None;
pub const DEFAULT_ICEBERG_CATALOG_NAME: &str = "default";
pub const DEFAULT_ICEBERG_NAMESPACE: &str = "kafka";
pub const DEFAULT_TABLE_COMMIT_INTERVAL: HumanDuration = HumanDuration(DEFAULT_COMMIT_INTERVAL);
pub const DEFAULT_TABLE_COMMIT_FILES: usize = DEFAULT_COMMIT_FILES;
/// The shortest `--table-commit-interval`.
const MIN_COMMIT_INTERVAL: Duration = Duration::from_secs(1);

/// Where an Iceberg catalog is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogLocation {
    /// A SQL catalog in this SQLite database file.
    Sqlite(PathBuf),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    pub catalog: CatalogLocation,
    pub catalog_name: String,
    pub namespace: String,
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
        let how = "--table iceberg commits to a catalog: pass --iceberg-catalog sqlite:///absolute/path.db";
        let url = self.iceberg_catalog.clone().ok_or(ConfigError::Missing { name: "--iceberg-catalog", how })?;
        let catalog = match url.strip_prefix("sqlite://") {
            Some(path) if path.starts_with('/') => CatalogLocation::Sqlite(PathBuf::from(path)),
            Some(_) => return Err(invalid("--iceberg-catalog", &url, "write sqlite:///absolute/path.db".into())),
            None => {
                let why =
                    "write sqlite:///absolute/path.db (a SQL catalog on SQLite; other catalogs are not supported yet)";
                return Err(invalid("--iceberg-catalog", &url, why.into()));
            }
        };
        let namespace = set(self.iceberg_namespace.clone(), "--iceberg-namespace")?;
        if namespace.is_empty() || !namespace.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(invalid("--iceberg-namespace", &namespace, "use letters, digits and _ only".into()));
        }
        let interval = set(self.table_commit_interval, "--table-commit-interval")?.0;
        if interval < MIN_COMMIT_INTERVAL {
            let why = format!("use at least {}", HumanDuration(MIN_COMMIT_INTERVAL));
            return Err(invalid("--table-commit-interval", &HumanDuration(interval).to_string(), why));
        }
        let max_files =
            super::positive(set(self.table_commit_files, "--table-commit-files")? as u64, "--table-commit-files")?;
        Ok(Some(TableConfig {
            catalog,
            catalog_name: set(self.iceberg_catalog_name.clone(), "--iceberg-catalog-name")?,
            namespace,
            cadence: Cadence { interval, max_files: max_files as usize },
        }))
    }
}
