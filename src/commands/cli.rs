//! The command line: `run` (the service), the operator commands (`verify`, `status`, `restore`, `ddl`),
//! `demo` (the whole loop with no services), and `completions` and `man` for installing it. Each
//! command's flags and what it does with them are in its own folder (`cli.rs`); this dispatches.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};

use super::ddl::cli::DdlArgs;
use super::demo::cli::DemoArgs;
use super::restore::cli::RestoreArgs;
use super::run::RunArgs;
use super::status::cli::StatusArgs;
use super::verify::cli::VerifyArgs;
use super::{ddl, demo, restore, run, status, verify};

#[derive(Parser)]
#[command(
    name = "kafka-s3-archiver",
    version,
    about = "Archives Kafka topics to S3-compatible storage, exactly once, and recovers its position from the archive itself."
)]
pub struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, env = "KSA_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once
pub enum Command {
    /// Archive topics until SIGTERM/SIGINT (a second signal exits at once).
    Run(RunArgs),
    /// Audits an archive: gaps, overlaps, claims without data, foreign keys; with --deep also every
    /// object's contents; with --brokers also the partitions' logs. Exit 0 clean, 1 problems, 2 error.
    Verify(VerifyArgs),
    /// Writes an archived range back into a Kafka topic (or to stdout as JSON lines): per partition in
    /// offset order, each offset once, keys, values, headers and timestamps kept. Re-running an
    /// interrupted restore into Kafka resumes without duplicates.
    Restore(RestoreArgs),
    /// Where every partition stands: archived-through offset (from the archive), the group's committed
    /// offset, log start/end, records not archived yet, newest object, and flags where they disagree.
    Status(StatusArgs),
    /// Prints a table definition for a topic's Parquet archive, for the layout its objects are in
    /// (time-bucketed or not): a DuckDB view, an Athena table with partition projection, a Spark table.
    Ddl(DdlArgs),
    /// Prints a shell completion script, e.g. `completions bash > /etc/bash_completion.d/kafka-s3-archiver`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Prints the man page (roff), or with --dir writes it and one page per command there
    /// (kafka-s3-archiver.1, kafka-s3-archiver-run.1, ...).
    Man {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Runs the whole loop with no services: mock Kafka, local archive, a crash, a restart, a check.
    Demo(DemoArgs),
}

fn init_logging(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    // Colours only on a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn man_pages(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let cli = Cli::command();
    let Some(dir) = dir else {
        return Ok(clap_mangen::Man::new(cli).render(&mut std::io::stdout())?);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut pages = vec![("kafka-s3-archiver".to_string(), cli.clone())];
    for sub in cli.get_subcommands().filter(|c| c.get_name() != "help") {
        let name = format!("kafka-s3-archiver-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().bin_name(name)));
    }
    for (name, command) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut file = std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        clap_mangen::Man::new(command).title(name.to_uppercase()).render(&mut file)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// Parses the command line and runs the command: the process's exit code (`verify`: 0 clean, 1
/// problems, 2 error; the others 0 or 1).
pub fn main() -> ExitCode {
    crate::telemetry::exit_on_panic();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let log = cli.log_format;
    let result = match cli.command {
        Command::Run(args) if args.print_config => run::print_config(args.config, args.settings),
        Command::Run(args) if args.check => {
            init_logging(log, "warn");
            runtime.block_on(run::check(args.config, args.settings))
        }
        Command::Run(args) => {
            init_logging(log, "info");
            runtime.block_on(run::run(args.config, args.settings))
        }
        Command::Verify(args) => {
            init_logging(log, "warn");
            return match runtime.block_on(verify::cli::run(args)) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    ExitCode::from(2)
                }
            };
        }
        Command::Status(args) => {
            init_logging(log, "warn");
            runtime.block_on(status::cli::run(args))
        }
        Command::Restore(args) => {
            init_logging(log, "warn");
            runtime.block_on(restore::cli::run(args))
        }
        Command::Ddl(args) => {
            init_logging(log, "warn");
            runtime.block_on(ddl::cli::run(args))
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kafka-s3-archiver", &mut script);
            std::io::Write::write_all(&mut std::io::stdout(), &script).context("writing to stdout")
        }
        Command::Man { dir } => man_pages(dir),
        Command::Demo(args) => {
            init_logging(log, "warn");
            runtime.block_on(demo::cli::run(args))
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
