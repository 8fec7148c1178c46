//! `ddl`'s command line.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::engines::Engine;
use super::{table_ddl, DdlOptions};
use crate::commands::args::ArchiveArgs;

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
    #[arg(long)]
    value_schema: Option<PathBuf>,
}

pub async fn run(args: DdlArgs) -> anyhow::Result<()> {
    let (dest, store) = args.archive.open().await?;
    let values = match &args.value_schema {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(crate::values::ValueSchema::from_avro(&text)?)
        }
        None => None,
    };
    let opts =
        DdlOptions { topic: args.topic, engine: args.engine, table: args.table, partitions: args.partitions, values };
    print!("{}", table_ddl(store.as_ref(), &dest, &opts).await?);
    Ok(())
}
