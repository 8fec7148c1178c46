//! Archiver processes, run as users run them, and waiting on what they do.

use kafka_s3_archiver::archive::object_key::Prefix;
use kafka_s3_archiver::commands::demo::check::archived_ends;
use kafka_s3_archiver::store::{list_all, ObjectStore};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::kafka::brokers;
use super::s3::TestDest;
use super::unique;

/// An archiver running as its own process, as users run it.
pub struct ArchiverProcess {
    child: Child,
    pub log: PathBuf,
    name: String,
}

/// The usual flags of a test archiver: fast group joins, small files, quick age rolls.
pub fn archiver_args(dest: &TestDest, group: &str, topic: &str, roll_records: u64, spool: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--brokers".into(),
        brokers(),
        "--group".into(),
        group.into(),
        "--topic".into(),
        topic.into(),
        "--dest".into(),
        dest.url(),
        "--roll-records".into(),
        roll_records.to_string(),
        "--roll-age".into(),
        "1s".into(),
        "--revoke-timeout".into(),
        "10s".into(),
        "--spool-dir".into(),
        spool.display().to_string(),
        "--kafka".into(),
        "session.timeout.ms=3000".into(),
        "--kafka".into(),
        "heartbeat.interval.ms=500".into(),
    ];
    args.extend(dest.flags());
    args
}

impl ArchiverProcess {
    pub fn spawn(name: &str, args: &[String]) -> Self {
        let log = std::env::temp_dir().join(format!("{}.log", unique(name)));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
            .args(args)
            .env("RUST_LOG", "info,librdkafka=warn")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("spawn archiver");
        Self { child, log, name: name.to_string() }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL: no flush, no commit.
    pub fn kill_hard(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for a graceful exit. A process spawned a moment ago is first given the time to
    /// install its signal handlers (it has logged, or exited): before that, SIGTERM's default action
    /// would kill it, which is not what this asks.
    pub fn terminate(&mut self) -> ExitStatus {
        let spawned = Instant::now();
        while std::fs::metadata(&self.log).map_or(0, |m| m.len()) == 0 && spawned.elapsed() < Duration::from_secs(30) {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().expect("kill");
        assert!(status.success(), "could not signal {}", self.name);
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            if started.elapsed() > Duration::from_secs(60) {
                let _ = self.child.kill();
                panic!("{} did not exit within 60 s of SIGTERM; log:\n{}", self.name, self.log_text());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the process to exit on its own within `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                started.elapsed() < within,
                "{} still running after {within:?}; log:\n{}",
                self.name,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().expect("wait") {
            panic!("{} exited early with {status}; log:\n{}", self.name, self.log_text());
        }
    }
}

impl Drop for ArchiverProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every partition's archive reaches the given last offsets.
pub async fn wait_archived(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    last: &BTreeMap<i32, i64>,
    procs: &mut [&mut ArchiverProcess],
) {
    let started = Instant::now();
    loop {
        let ends = archived_ends(store, prefix, topic).await.expect("listing");
        if last.iter().all(|(p, o)| ends.get(p).is_some_and(|e| e >= o)) {
            return;
        }
        for p in procs.iter_mut() {
            p.assert_running();
        }
        if started.elapsed() > Duration::from_secs(120) {
            let logs: Vec<String> = procs.iter().map(|p| p.log_text()).collect();
            panic!("archive did not reach {last:?} (has {ends:?}) within 120 s; logs:\n{}", logs.join("\n-----\n"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the topic folder holds at least `n` objects.
pub async fn wait_objects(
    store: &dyn ObjectStore,
    prefix: &Prefix,
    topic: &str,
    n: usize,
    proc_: &mut ArchiverProcess,
) {
    let started = Instant::now();
    while list_all(store, &prefix.topic_folder(topic)).await.expect("listing").len() < n {
        proc_.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "fewer than {n} objects after 90 s; log:\n{}",
            proc_.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the process's log contains `text`.
pub async fn wait_log(proc_: &mut ArchiverProcess, text: &str) {
    let started = Instant::now();
    while !proc_.log_text().contains(text) {
        proc_.assert_running();
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{text:?} not logged within 60 s; log:\n{}",
            proc_.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The same archiver flags with the store (S3, GCS or Azure) reached through `endpoint` (a
/// fault-injecting proxy); an endpoint's path (Azurite's account) is kept.
pub fn through(mut args: Vec<String>, endpoint: &str) -> Vec<String> {
    let flags = ["--s3-endpoint", "--gcs-endpoint", "--azure-endpoint"];
    let at = args.iter().position(|a| flags.contains(&a.as_str())).expect("a store with an endpoint");
    let old = &args[at + 1];
    let path = old.find("://").and_then(|i| old[i + 3..].find('/').map(|j| old[i + 3 + j..].to_string()));
    args[at + 1] = format!("{endpoint}{}", path.unwrap_or_default());
    args
}

/// Sends a signal (STOP, CONT, KILL...) to a process.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().expect("kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

/// Sets `--name value` in archiver flags, replacing the value when the flag is there already.
pub fn set_flag(mut args: Vec<String>, name: &str, value: &str) -> Vec<String> {
    match args.iter().position(|a| a == name) {
        Some(at) => args[at + 1] = value.to_string(),
        None => args.extend([name.to_string(), value.to_string()]),
    }
    args
}

/// A local address no server listens on now (for a server a test starts, e.g. `--metrics-addr`).
pub fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A plain HTTP/1.0 GET; returns the status code and the body.
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(addr).expect("connect to the metrics endpoint");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}
