//! `ddl`'s command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::engines::Engine;
use super::{table_ddl, DdlOptions};
use crate::commands::args::{ArchiveArgs, RegistryArgs};
use crate::registry::{RegistryClient, SchemaCache};
use crate::values::{registered_value_field, value_field};

#[derive(Args)]
pub struct DdlArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
    /// The archived topic.
    #[arg(long)]
    topic: String,
    /// The engine the definition is for.
    #[arg(long, value_enum)]
    engine: Engine,
    /// The table (view) name [default: the topic's name, with _ for other characters than letters and digits].
    #[arg(long)]
    table: Option<String>,
    /// The topic's partition count (Athena's partition projection needs it).
    #[arg(long)]
    partitions: Option<i32>,
    /// For an archive of typed values (--value-format json): the Avro schema file (.avsc) whose fields
    /// `value` is declared with (Athena and Spark; DuckDB's view reads them from the files).
    #[arg(long, conflicts_with = "value_subject")]
    value_schema: Option<PathBuf>,
    /// For an archive of Schema Registry values (--value-format avro, protobuf, json-schema or registry,
    /// with --schema-registry-url): the subject whose newest version `value` is declared with (a
    /// Protobuf schema: its first message), TOPIC-value with Confluent's default naming.
    #[arg(long, requires = "schema_registry_url")]
    value_subject: Option<String>,
    /// For an archive of typed keys (--key-format, with --schema-registry-url): the subject whose newest
    /// version `key` is declared with (TOPIC-key with Confluent's default naming).
    #[arg(long, requires = "schema_registry_url")]
    key_subject: Option<String>,
    #[command(flatten)]
    registry: RegistryArgs,
}

pub async fn run(args: DdlArgs) -> anyhow::Result<()> {
    let (dest, store) = args.archive.open().await?;
    // The registry only when a subject is named (its URL may be in the environment for `run`).
    let subjects = args.value_subject.is_some() || args.key_subject.is_some();
    let registry = if subjects { args.registry.client()? } else { None };
    let values = match (&args.value_schema, &registry, &args.value_subject) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(value_field(&crate::values::ValueSchema::from_avro(&text)?))
        }
        (None, Some(registry), Some(subject)) => Some(registered_field(registry, subject).await?),
        _ => None,
    };
    let keys = match (&registry, &args.key_subject) {
        (Some(registry), Some(subject)) => Some(registered_field(registry, subject).await?.with_name("key")),
        _ => None,
    };
    let opts = DdlOptions {
        topic: args.topic,
        engine: args.engine,
        table: args.table,
        partitions: args.partitions,
        values,
        keys,
    };
    print!("{}", table_ddl(store.as_ref(), &dest, &opts).await?);
    Ok(())
}

/// The typed column of a file of values of `subject`'s newest version.
async fn registered_field(registry: &RegistryClient, subject: &str) -> anyhow::Result<arrow_schema::Field> {
    let (id, schema) = registry.latest(subject).await?;
    let schemas = SchemaCache::default();
    schemas.insert(id, Ok(schema));
    let field = schemas.usable(id).expect("inserted").and_then(|()| registered_value_field(&schemas, id));
    field.map_err(|why| anyhow::anyhow!("subject {subject:?}'s newest schema (ID {id}): {why}"))
}
