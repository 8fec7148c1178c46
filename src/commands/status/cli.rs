//! `status`'s command line.

use clap::Args;

use super::{status, StatusOptions};
use crate::commands::args::{kafka_props, ArchiveArgs};

#[derive(Args)]
pub struct StatusArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
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
    let StatusArgs { archive, brokers, group, topics, kafka, json } = args;
    let (dest, store) = archive.open().await?;
    let options = StatusOptions { prefix: dest.prefix().clone(), topics, brokers, props: kafka_props(&kafka)?, group };
    let report = status(store.as_ref(), &options).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.table());
    }
    Ok(())
}
