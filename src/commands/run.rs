//! `run`: the service until SIGTERM/SIGINT, or with `--print-config` / `--check` the settings it
//! would run with.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use tracing::{info, warn};

use crate::config::{ArchiverConfig, Settings};
use crate::registry::RegistryClient;
use crate::service::archiver::{open_checked_store, Archiver};
use crate::telemetry::http;

/// `run`'s command line: the settings (`config::Settings`), and what to do with them.
#[derive(clap::Args)]
pub struct RunArgs {
    /// TOML file with the same settings (environment and flags override it).
    #[arg(long, env = "KSA_CONFIG")]
    pub config: Option<PathBuf>,
    /// Print the settings in effect (defaults < file < environment < flags; secrets masked) as a
    /// TOML file would give them, check them, and exit without connecting to anything.
    #[arg(long)]
    pub print_config: bool,
    /// Check the settings, then what start-up checks (the brokers answer with the TLS/SASL settings
    /// given, the named topics exist, the archive can be listed and honours conditional writes),
    /// print the settings in effect (secrets masked) and exit: 0 if all is well, 1 if not.
    #[arg(long, conflicts_with = "print_config")]
    pub check: bool,
    #[command(flatten)]
    pub settings: Settings,
}

pub async fn run(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
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
    if let Some(registry) = &config.pipeline.registry {
        check_registry(RegistryClient::new(registry.options.clone())).await?;
    }
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

/// The Schema Registry takes the credentials and serves its API at the URL given: start-up stops if
/// not. One that does not answer now may later: the archiver starts, and what needs a schema waits.
async fn check_registry(client: RegistryClient) -> anyhow::Result<()> {
    match client.subjects().await {
        Ok(_) => Ok(()),
        Err(e) if e.is_unavailable() => {
            warn!("{e}; starting anyway: records that need a schema wait until it answers");
            Ok(())
        }
        Err(e) => Err(e).context("cannot use the Schema Registry"),
    }
}

/// `run --print-config`: the settings in effect, checked.
pub fn print_config(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
    let effective = flags.effective(config_file.as_deref())?;
    print!("{}", effective.to_toml());
    effective.resolve(None)?;
    Ok(())
}

pub async fn check(config_file: Option<PathBuf>, flags: Settings) -> anyhow::Result<()> {
    let effective = flags.effective(config_file.as_deref())?;
    print!("{}", effective.to_toml());
    let config = effective.resolve(None)?;
    for line in crate::service::archiver::check(&config).await? {
        println!("# ok: {line}");
    }
    Ok(())
}
