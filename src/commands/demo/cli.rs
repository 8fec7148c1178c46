//! `demo`'s command line.

use std::path::PathBuf;

use clap::Args;

use super::{run as run_demo, DemoOptions};
use crate::encode::Format;

#[derive(Args)]
pub struct DemoArgs {
    /// Records to produce.
    #[arg(long, default_value_t = 30_000)]
    records: usize,
    /// Where to keep the demo's archive [default: a new temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// File format.
    #[arg(long, value_enum, default_value_t = Format::Parquet)]
    format: Format,
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let DemoArgs { records, dir, format } = args;
    let dir =
        dir.unwrap_or_else(|| std::env::temp_dir().join(format!("kafka-s3-archiver-demo-{}", std::process::id())));
    run_demo(DemoOptions { records, dir, format }).await?;
    Ok(())
}
