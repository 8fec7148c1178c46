//! `restore`'s command line.

use std::sync::Arc;

use clap::Args;

use super::plan::{Partitioning, Selection};
use super::progress::Progress;
use super::translate::{translate, Translation};
use super::{restore, RestoreOptions, RestoreProgressCounters, RestoreTarget};
use crate::commands::args::{kafka_props, parse_time, ArchiveArgs};

#[derive(Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
    /// The archived topic to restore.
    #[arg(long)]
    topic: String,
    /// Only this partition (repeatable) [default: all].
    #[arg(long = "partition")]
    partitions: Vec<i32>,
    /// First offset to restore (inclusive).
    #[arg(long)]
    from_offset: Option<i64>,
    /// Last offset to restore (inclusive).
    #[arg(long)]
    to_offset: Option<i64>,
    /// Only records with a timestamp at or after this (RFC 3339, or milliseconds since the epoch).
    #[arg(long, value_parser = parse_time)]
    from_time: Option<i64>,
    /// Only records with a timestamp at or before this (RFC 3339, or milliseconds since the epoch).
    #[arg(long, value_parser = parse_time)]
    to_time: Option<i64>,
    /// Write into this (existing) topic on --brokers.
    #[arg(long, requires = "brokers", conflicts_with = "to_stdout")]
    to_topic: Option<String>,
    /// Write JSON lines to stdout instead.
    #[arg(long)]
    to_stdout: bool,
    /// Kafka bootstrap servers of the target.
    #[arg(long)]
    brokers: Option<String>,
    /// Extra librdkafka setting KEY=VALUE for the target (repeatable).
    #[arg(long = "kafka", value_name = "KEY=VALUE")]
    kafka: Vec<String>,
    /// same: partition p to partition p; key: by key hash (Kafka's murmur2), for a target with
    /// another partition count.
    #[arg(long, value_enum, default_value_t = Partitioning::Same)]
    partitioning: Partitioning,
    /// At most this many records per second.
    #[arg(long)]
    max_rate: Option<f64>,
    /// Restore typed values archived without their bytes (--value-format json without
    /// --keep-raw-value) as JSON written from their columns: the same fields and values, but not
    /// necessarily the bytes produced (key order, spacing, number and time formats may differ).
    #[arg(long)]
    reencode_json: bool,
    /// Then give the consumer groups of the archived topic their positions in the target topic: the
    /// latest snapshot of their committed offsets in the archive (taken by `run
    /// --archive-group-offsets`), translated to the restored records' offsets and committed in the
    /// target cluster (only for groups with no active member there).
    #[arg(long, requires = "to_topic")]
    translate_group_offsets: bool,
    /// With --translate-group-offsets: the latest snapshot taken at or before this time (RFC 3339, or
    /// milliseconds since the epoch) [default: the latest].
    #[arg(long, requires = "translate_group_offsets", value_parser = parse_time)]
    at: Option<i64>,
    /// With --translate-group-offsets: restore nothing, set nothing; print where each group would resume
    /// in the target as it holds now.
    #[arg(long, requires = "translate_group_offsets")]
    dry_run: bool,
}

/// Runs `restore`, showing progress on stderr (see `progress`), then a summary line.
pub async fn run(args: RestoreArgs) -> anyhow::Result<()> {
    let RestoreArgs {
        archive,
        topic,
        partitions,
        from_offset,
        to_offset,
        from_time,
        to_time,
        to_topic,
        to_stdout,
        brokers,
        kafka,
        partitioning,
        max_rate,
        reencode_json,
        translate_group_offsets,
        at,
        dry_run,
    } = args;
    let target = match (to_topic, to_stdout, brokers) {
        (Some(topic), false, Some(brokers)) => {
            RestoreTarget::Kafka { brokers, props: kafka_props(&kafka)?, topic, partitioning }
        }
        (None, true, _) => RestoreTarget::Stdout,
        _ => anyhow::bail!("say where to restore to: --to-topic NAME --brokers HOST:PORT, or --to-stdout"),
    };
    let (dest, store) = archive.open().await?;
    let options = RestoreOptions {
        prefix: dest.prefix().clone(),
        topic,
        partitions,
        selection: Selection { from_offset, to_offset, from_time_ms: from_time, to_time_ms: to_time },
        target,
        max_rate: max_rate.filter(|r| *r > 0.0),
        reencode_json,
    };
    if !dry_run {
        let counters = Arc::new(RestoreProgressCounters::default());
        let started = std::time::Instant::now();
        let progress = Progress::show(counters.clone(), started);
        let result = restore(store.clone(), &options, &counters).await;
        progress.finish();
        eprintln!("{} in {:.1}s", counters.line(started.elapsed()), started.elapsed().as_secs_f64());
        result?;
    }
    if let (true, RestoreTarget::Kafka { brokers, props, topic: target, .. }) =
        (translate_group_offsets, &options.target)
    {
        let translation =
            Translation { prefix: &options.prefix, topic: &options.topic, at_ms: at, brokers, props, target, dry_run };
        let report = translate(store, &translation).await?;
        print!("{}", report.render(&options.topic, target));
    }
    Ok(())
}
