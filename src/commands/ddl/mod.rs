//! `ddl`: a table definition for a topic's archive, for the layout its objects are in (found with one
//! listing of the topic's folder: time buckets or not, Parquet or not, the earliest date folder).

pub mod cli;
pub mod engines;

use thiserror::Error;

use crate::archive::destination::Destination;
use crate::archive::keys::classify;
use crate::archive::keys::ListRequest;
use crate::archive::object_key::FileKind;
use crate::commands::ddl::engines::{ddl, table_name, DdlError, Engine, TableLayout};
use crate::store::{ObjectStore, StoreError};

#[derive(Debug, Error)]
pub enum DdlCommandError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Ddl(#[from] DdlError),
    #[error("no data object of topic {topic:?} under {dest}: nothing to describe yet (check --dest and --topic)")]
    Empty { topic: String, dest: String },
    #[error("topic {topic:?} is archived as {ext}; ddl describes Parquet archives (--format parquet)")]
    NotParquet { topic: String, ext: &'static str },
}

pub struct DdlOptions {
    pub topic: String,
    pub engine: Engine,
    /// The table name [default: from the topic name].
    pub table: Option<String>,
    /// The topic's partition count (Athena).
    pub partitions: Option<i32>,
    /// The typed `value` column, for an archive of typed values.
    pub values: Option<arrow_schema::Field>,
    /// The typed `key` column, for an archive of typed keys.
    pub keys: Option<arrow_schema::Field>,
}

/// The definition, for the layout of the first object listed under the topic's folder.
pub async fn table_ddl(
    store: &dyn ObjectStore,
    dest: &Destination,
    opts: &DdlOptions,
) -> Result<String, DdlCommandError> {
    let prefix = dest.prefix();
    let folder = prefix.topic_folder(&opts.topic);
    let page = store.list(&ListRequest { prefix: folder.clone(), start_after: None }, 1000).await?;
    let first = page
        .keys
        .iter()
        .filter_map(|k| classify(prefix, k).data())
        .find(|k| k.tp.topic() == opts.topic)
        .ok_or_else(|| DdlCommandError::Empty { topic: opts.topic.clone(), dest: dest.to_string() })?;
    if first.kind != FileKind::Parquet {
        return Err(DdlCommandError::NotParquet { topic: opts.topic.clone(), ext: first.kind.extension() });
    }
    let location = match dest {
        Destination::S3 { bucket, .. } => format!("s3://{bucket}/{folder}"),
        Destination::Gcs { bucket, .. } => format!("gs://{bucket}/{folder}"),
        // DuckDB's azure extension reads az://; Spark wants abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/.
        Destination::Azure { container, .. } => format!("az://{container}/{folder}"),
        Destination::File { root, .. } => format!("{}/{folder}", root.display().to_string().trim_end_matches('/')),
    };
    let layout = TableLayout {
        table: opts.table.clone().unwrap_or_else(|| table_name(&opts.topic)),
        location,
        buckets: first.bucket.map(|b| b.width()),
        partitions: opts.partitions,
        first_date: first.bucket.map(|b| b.date()),
        values: opts.values.clone(),
        keys: opts.keys.clone(),
    };
    Ok(ddl(opts.engine, &layout)?)
}
