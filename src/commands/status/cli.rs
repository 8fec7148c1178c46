//! `status`'s command line.

use anyhow::Context;
use clap::Args;

use super::tables::table_statuses;
use super::{status, StatusOptions};
use crate::commands::args::{kafka_props, ArchiveArgs, CatalogArgs};

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Kafka bootstrap servers.
    #[arg(long, env = "KSA_BROKERS")]
    brokers: String,
    /// The archivers' consumer group.
    #[arg(long, env = "KSA_GROUP")]
    group: String,
    /// Topic to show (repeatable).
    #[arg(long = "topic", required = true)]
    topics: Vec<String>,
    /// Extra librdkafka setting KEY=VALUE (repeatable).
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    kafka: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: StatusArgs) -> anyhow::Result<()> {
    let StatusArgs { archive, catalog, brokers, group, topics, kafka, json } = args;
    let catalog = catalog.catalog()?;
    let (dest, store) = archive.open().await?;
    let options = StatusOptions { prefix: dest.prefix().clone(), topics, brokers, props: kafka_props(&kafka)?, group };
    let mut report = status(store.as_ref(), &options).await?;
    if let Some(catalog) = &catalog {
        report.tables = table_statuses(store.clone(), dest.prefix(), catalog, &report.partitions)
            .await
            .with_context(|| format!("cannot read the tables of the archive at {}", store.describe()))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.table());
    }
    Ok(())
}
