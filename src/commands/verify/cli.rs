//! `verify`'s command line.

use anyhow::Context;
use clap::Args;

use super::tables::check_tables;
use super::{verify, VerifyOptions};
use crate::commands::args::{kafka_props, ArchiveArgs, CatalogArgs};

#[derive(Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
    #[command(flatten)]
    catalog: CatalogArgs,
    /// Only this topic (repeatable) [default: every topic in the archive].
    #[arg(long = "topic")]
    topics: Vec<String>,
    /// Only this partition (repeatable).
    #[arg(long = "partition")]
    partitions: Vec<i32>,
    /// Read every object: readable, offsets ordered, first/last offset as named.
    #[arg(long)]
    deep: bool,
    /// Also compare with the partitions' logs in Kafka (retention gaps, archive ahead of the log).
    #[arg(long)]
    brokers: Option<String>,
    /// Extra librdkafka setting KEY=VALUE for --brokers (repeatable).
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    kafka: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Concurrent reads.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Count keys that are not the archive's (stray files in its folders) as problems, not warnings.
    #[arg(long)]
    strict: bool,
}

/// Runs `verify`; `Ok(true)` when the archive is clean.
pub async fn run(args: VerifyArgs) -> anyhow::Result<bool> {
    let VerifyArgs { archive, catalog, topics, partitions, deep, brokers, kafka, json, concurrency, strict } = args;
    let props = kafka_props(&kafka)?;
    let catalog = catalog.catalog()?;
    let (dest, store) = archive.open().await?;
    let options = VerifyOptions {
        prefix: dest.prefix().clone(),
        topics,
        partitions,
        deep,
        brokers: brokers.map(|b| (b, props)),
        concurrency,
        strict,
    };
    let mut report = verify(store.as_ref(), &options)
        .await
        .with_context(|| format!("cannot verify the archive at {}", store.describe()))?;
    if let Some(catalog) = &catalog {
        let topics = report.topics();
        report.tables = check_tables(store.clone(), dest.prefix(), catalog, &topics)
            .await
            .with_context(|| format!("cannot check the tables of the archive at {}", store.describe()))?;
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.table());
    }
    Ok(report.is_clean())
}
