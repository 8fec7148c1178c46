//! Command line: `run` (the service) and `demo` (the whole loop with no services).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use kafka_s3_archiver::archive::destination::Destination;
use kafka_s3_archiver::archive::encode::Format;
use kafka_s3_archiver::commands::ddl::engines::Engine;
use kafka_s3_archiver::commands::ddl::{table_ddl, DdlOptions};
use kafka_s3_archiver::commands::demo;
use kafka_s3_archiver::commands::restore::plan::{Partitioning, Selection};
use kafka_s3_archiver::commands::restore::progress::Progress;
use kafka_s3_archiver::commands::restore::{RestoreOptions, RestoreProgressCounters, RestoreTarget};
use kafka_s3_archiver::commands::status::StatusOptions;
use kafka_s3_archiver::commands::verify::VerifyOptions;
use kafka_s3_archiver::config::{self, ArchiverConfig, Settings};
use kafka_s3_archiver::service::archiver::{open_checked_store, open_reader, Archiver};
use kafka_s3_archiver::telemetry::http;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

/// mimalloc instead of glibc's malloc: records are allocated on the consumer thread and freed on the
/// pipeline's, a pattern glibc serves slowly (see the README's Performance section).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `arena_eager_commit` option, by its position in `mi_option_t` (the sys crate names none).
const MI_OPTION_ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Before the first allocation (a constructor, run before Rust's runtime starts): mimalloc's arenas
/// are not committed eagerly, so pages it frees go back to the OS. With its Linux default, peak RSS
/// with 1,000 partitions and the 256 MiB budget was 641–709 MiB instead of glibc's 405–438.
#[used]
#[unsafe(link_section = ".init_array")]
static RETURN_FREED_MEMORY: extern "C" fn() = {
    extern "C" fn return_freed_memory() {
        // SAFETY: stores a process-wide allocator option; nothing is allocated or freed by the call.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ARENA_EAGER_COMMIT, 0) }
    }
    return_freed_memory
};

#[derive(Parser)]
#[command(
    name = "kafka-s3-archiver",
    version,
    about = "Archives Kafka topics to S3-compatible storage, exactly once, and recovers its position from the archive itself."
)]
struct Cli {
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

/// Where an archive is, for the commands that read one.
#[derive(Args)]
struct ArchiveArgs {
    /// The archive: s3://bucket/prefix or file:///absolute/dir.
    #[arg(long, env = "KSA_DEST")]
    dest: String,
    /// Custom S3 endpoint URL (LocalStack, MinIO...); path-style addressing is used with it.
    #[arg(long, env = "KSA_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// S3 region; default: from the standard AWS chain, else us-east-1.
    #[arg(long, env = "KSA_S3_REGION")]
    s3_region: Option<String>,
}

impl ArchiveArgs {
    /// The destination's prefix and a store to read it.
    async fn open(self) -> anyhow::Result<(Destination, std::sync::Arc<dyn kafka_s3_archiver::store::ObjectStore>)> {
        let dest: Destination = self.dest.parse()?;
        let store = open_reader(&dest, self.s3_endpoint, self.s3_region).await?;
        Ok((dest, store))
    }
}

#[derive(Args)]
struct VerifyArgs {
    #[command(flatten)]
    archive: ArchiveArgs,
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

#[derive(Args)]
struct RestoreArgs {
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
}

#[derive(Args)]
struct StatusArgs {
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

#[derive(Args)]
struct DdlArgs {
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

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once
enum Command {
    /// Archive topics until SIGTERM/SIGINT (a second signal exits at once).
    Run {
        /// TOML file with the same settings (environment and flags override it).
        #[arg(long, env = "KSA_CONFIG")]
        config: Option<PathBuf>,
        /// Print the settings in effect (defaults < file < environment < flags; secrets masked) as a
        /// TOML file would give them, check them, and exit without connecting to anything.
        #[arg(long)]
        print_config: bool,
        /// Check the settings, then what start-up checks (the brokers answer with the TLS/SASL settings
        /// given, the named topics exist, the archive can be listed and honours conditional writes),
        /// print the settings in effect (secrets masked) and exit: 0 if all is well, 1 if not.
        #[arg(long, conflicts_with = "print_config")]
        check: bool,
        #[command(flatten)]
        settings: Settings,
    },
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
    Demo {
        /// Records to produce.
        #[arg(long, default_value_t = 30_000)]
        records: usize,
        /// Where to keep the demo's archive [default: a new temporary directory].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// File format.
        #[arg(long, value_enum, default_value_t = Format::Parquet)]
        format: Format,
    },
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

async fn run(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
    let config = flags.resolve(config_file.as_deref())?;
    // Signals are handled from the first moment: one during start-up (which may wait on a slow store or
    // brokers) stops it cleanly, as nothing has been consumed yet.
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let started = tokio::select! {
        started = start(config) => Some(started?),
        _ = term.recv() => None,
        _ = int.recv() => None,
    };
    let Some((archiver, metrics_server)) = started else {
        info!("signal received while starting: stopped before consuming anything");
        return Ok(());
    };
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = tokio::time::sleep(Duration::from_millis(500)) => if archiver.is_finished() { break },
        }
    }
    if !archiver.is_finished() {
        info!("signal received: stopping fetch, uploading buffered data, committing (signal again to exit at once)");
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
            warn!("second signal: exiting now without flushing");
            std::process::exit(130);
        });
    }
    let metrics = archiver.metrics();
    let result = archiver.shutdown().await;
    if let Some(server) = metrics_server {
        server.abort();
    }
    info!("{}", metrics.summary());
    result.map_err(Into::into)
}

/// Everything before archiving: the store and its checks, the metrics endpoint, the consumer.
async fn start(config: ArchiverConfig) -> anyhow::Result<(Archiver, Option<tokio::task::JoinHandle<()>>)> {
    let cannot_use = || format!("cannot use the archive at {}", config.store.dest);
    let store = open_checked_store(&config).await.with_context(cannot_use)?;
    let metrics_listener = match config.metrics.addr {
        Some(addr) => Some(
            http::bind(addr)
                .await
                .with_context(|| format!("cannot serve metrics on --metrics-addr {addr} (in use?)"))?,
        ),
        None => None,
    };
    info!(dest = %config.store.dest, group = %config.source.group, topics = ?config.source.subscription, "starting");
    // Start-up waits (bounded) for the brokers to answer: keep that off the async workers.
    let archiver = tokio::task::spawn_blocking(move || Archiver::start(&config, store)).await??;
    let metrics_server = metrics_listener.map(|listener| http::serve(listener, archiver.metrics()));
    Ok((archiver, metrics_server))
}

/// `run --print-config`: the settings in effect, checked.
fn print_config(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
    let effective = flags.effective(config_file.as_deref())?;
    print!("{}", effective.to_toml());
    effective.resolve(None)?;
    Ok(())
}

async fn check(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
    let effective = flags.effective(config_file.as_deref())?;
    print!("{}", effective.to_toml());
    let config = effective.resolve(None)?;
    for line in kafka_s3_archiver::service::archiver::check(&config).await? {
        println!("# ok: {line}");
    }
    Ok(())
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

fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?} is neither RFC 3339 (2026-11-29T10:00:00Z) nor milliseconds: {e}"))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "times before 1970 are not supported".to_string())?
        .as_millis() as i64)
}

fn kafka_props(kafka: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(kafka.iter().map(|kv| config::parse_kafka_setting(kv)).collect::<Result<_, _>>()?)
}

/// Runs `restore`, showing progress on stderr (see `progress`), then a summary line.
async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
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
    let counters = Arc::new(RestoreProgressCounters::default());
    let started = std::time::Instant::now();
    let progress = Progress::show(counters.clone(), started);
    let result = kafka_s3_archiver::commands::restore::restore(store, &options, &counters).await;
    progress.finish();
    eprintln!("{} in {:.1}s", counters.line(started.elapsed()), started.elapsed().as_secs_f64());
    result.map_err(Into::into)
}

async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let StatusArgs { archive, brokers, group, topics, kafka, json } = args;
    let (dest, store) = archive.open().await?;
    let options = StatusOptions { prefix: dest.prefix().clone(), topics, brokers, props: kafka_props(&kafka)?, group };
    let report = kafka_s3_archiver::commands::status::status(store.as_ref(), &options).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.table());
    }
    Ok(())
}

/// Runs `verify`; `Ok(true)` when the archive is clean.
async fn verify(args: VerifyArgs) -> anyhow::Result<bool> {
    let VerifyArgs { archive, topics, partitions, deep, brokers, kafka, json, concurrency, strict } = args;
    let props = kafka_props(&kafka)?;
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
    let report = kafka_s3_archiver::commands::verify::verify(store.as_ref(), &options)
        .await
        .with_context(|| format!("cannot verify the archive at {}", store.describe()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", report.table());
    }
    Ok(report.is_clean())
}

async fn print_ddl(args: DdlArgs) -> anyhow::Result<()> {
    let (dest, store) = args.archive.open().await?;
    let values = match &args.value_schema {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            Some(kafka_s3_archiver::values::ValueSchema::from_avro(&text)?)
        }
        None => None,
    };
    let opts =
        DdlOptions { topic: args.topic, engine: args.engine, table: args.table, partitions: args.partitions, values };
    print!("{}", table_ddl(store.as_ref(), &dest, &opts).await?);
    Ok(())
}

fn main() -> std::process::ExitCode {
    kafka_s3_archiver::telemetry::exit_on_panic();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let result = match cli.command {
        Command::Run { config, print_config: true, settings, .. } => print_config(config, settings),
        Command::Run { config, check: true, settings, .. } => {
            init_logging(cli.log_format, "warn");
            runtime.block_on(check(config, settings))
        }
        Command::Run { config, settings, .. } => {
            init_logging(cli.log_format, "info");
            runtime.block_on(run(config, settings))
        }
        Command::Verify(args) => {
            init_logging(cli.log_format, "warn");
            let outcome = runtime.block_on(verify(args));
            return match outcome {
                Ok(true) => std::process::ExitCode::SUCCESS,
                Ok(false) => std::process::ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    std::process::ExitCode::from(2)
                }
            };
        }
        Command::Status(args) => {
            init_logging(cli.log_format, "warn");
            runtime.block_on(status(args))
        }
        Command::Restore(args) => {
            init_logging(cli.log_format, "warn");
            runtime.block_on(restore(args))
        }
        Command::Ddl(args) => {
            init_logging(cli.log_format, "warn");
            runtime.block_on(print_ddl(args))
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "kafka-s3-archiver", &mut script);
            std::io::Write::write_all(&mut std::io::stdout(), &script).context("writing to stdout")
        }
        Command::Man { dir } => man_pages(dir),
        Command::Demo { records, dir, format } => {
            init_logging(cli.log_format, "warn");
            let dir = dir
                .unwrap_or_else(|| std::env::temp_dir().join(format!("kafka-s3-archiver-demo-{}", std::process::id())));
            runtime.block_on(demo::run(demo::DemoOptions { records, dir, format })).map(|_| ()).map_err(Into::into)
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
