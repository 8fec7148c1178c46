//! Configuration for `run`: one set of settings read from a TOML file, the environment and flags
//! (flags win over the environment, which wins over the file), then validated before anything connects.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::Deserialize;
use thiserror::Error;

use crate::core::destination::Destination;
use crate::core::encode::{Compression, FileSpec, Format};
use crate::core::roll::RollPolicy;
use crate::core::units::{ByteSize, HumanDuration};

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{name} is required: {how}")]
    Missing { name: &'static str, how: &'static str },
    #[error("{name} = {value:?} is not valid: {why}")]
    Invalid { name: &'static str, value: String, why: String },
}

/// Librdkafka settings the archiver owns: its exactly-once logic depends on them.
const RESERVED_KAFKA_KEYS: [&str; 6] = [
    "group.id",
    "bootstrap.servers",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "enable.partition.eof",
];

/// Every setting of `run`. Each is a flag, an environment variable (KSA_*) and a key of the TOML file
/// named like the flag without its leading dashes (`roll-bytes = "64MiB"`; `topics = [...]` for
/// `--topic`, a `[kafka]` table for `--kafka`).
#[derive(Debug, Default, Clone, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// Kafka bootstrap servers, host:port[,host:port...].
    #[arg(long, env = "KSA_BROKERS")]
    pub brokers: Option<String>,
    /// Consumer group shared by all archiver instances of one archive.
    #[arg(long, env = "KSA_GROUP")]
    pub group: Option<String>,
    /// Topic to archive (repeatable).
    #[arg(long = "topic", env = "KSA_TOPICS", value_delimiter = ',')]
    #[serde(default, rename = "topics")]
    pub topics: Vec<String>,
    /// Also archive every topic whose name matches this regular expression (librdkafka regex syntax).
    #[arg(long, env = "KSA_TOPIC_REGEX")]
    pub topic_regex: Option<String>,
    /// Where the archive goes: s3://bucket/prefix or file:///absolute/dir.
    #[arg(long, env = "KSA_DEST")]
    pub dest: Option<String>,
    /// Custom S3 endpoint URL (LocalStack, MinIO...); path-style addressing is used with it.
    /// Without it, aws-config's standard chain applies (AWS_ENDPOINT_URL is honoured).
    #[arg(long, env = "KSA_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    /// S3 region; default: from the standard AWS chain, else us-east-1.
    #[arg(long, env = "KSA_S3_REGION")]
    pub s3_region: Option<String>,
    /// File format: parquet or jsonl. [default: parquet]
    #[arg(long, env = "KSA_FORMAT")]
    pub format: Option<String>,
    /// Compression: zstd, gzip, snappy (Parquet only) or none. [default: zstd]
    #[arg(long, env = "KSA_COMPRESSION")]
    pub compression: Option<String>,
    /// Roll a file after this many records. [default: 1000000]
    #[arg(long, env = "KSA_ROLL_RECORDS")]
    pub roll_records: Option<u64>,
    /// Roll a file once it is this large, e.g. 64MiB. [default: 64MiB]
    #[arg(long, env = "KSA_ROLL_BYTES")]
    pub roll_bytes: Option<ByteSize>,
    /// Roll a file this long after its first record, even if no more records arrive, e.g. 30s. [default: 5m]
    #[arg(long, env = "KSA_ROLL_AGE")]
    pub roll_age: Option<HumanDuration>,
    /// Extra librdkafka setting KEY=VALUE (repeatable): SASL, TLS, timeouts...
    #[arg(long = "kafka", env = "KSA_KAFKA", value_delimiter = ';', value_name = "KEY=VALUE")]
    #[serde(skip)]
    pub kafka_flags: Vec<String>,
    /// Extra librdkafka settings from the config file: a table of key = "value".
    #[arg(skip)]
    #[serde(default)]
    pub kafka: BTreeMap<String, String>,
    /// Where partitions with no archive start: earliest or latest. [default: earliest]
    #[arg(long, env = "KSA_START_FROM")]
    pub start_from: Option<String>,
    /// Directory for files too large to keep in memory until upload. [default: <system temp>/kafka-s3-archiver-spool]
    #[arg(long, env = "KSA_SPOOL_DIR")]
    pub spool_dir: Option<PathBuf>,
    /// A file moves from memory to the spool directory beyond this size. [default: 8MiB]
    #[arg(long, env = "KSA_SPOOL_MEMORY_THRESHOLD")]
    pub spool_memory_threshold: Option<ByteSize>,
    /// Memory budget for buffered data across all partitions. [default: 256MiB]
    #[arg(long, env = "KSA_MAX_BUFFER_BYTES")]
    pub max_buffer_bytes: Option<ByteSize>,
    /// Disk budget for the spool directory across all partitions. [default: 4GiB]
    #[arg(long, env = "KSA_MAX_SPOOL_BYTES")]
    pub max_spool_bytes: Option<ByteSize>,
    /// Part size of multipart uploads (files larger than twice this use multipart). [default: 8MiB]
    #[arg(long, env = "KSA_UPLOAD_PART_SIZE")]
    pub upload_part_size: Option<ByteSize>,
    /// Parts of one multipart upload sent in parallel. [default: 4]
    #[arg(long, env = "KSA_UPLOAD_CONCURRENCY")]
    pub upload_concurrency: Option<usize>,
    /// Timeout of one S3 request attempt. [default: 60s]
    #[arg(long, env = "KSA_S3_ATTEMPT_TIMEOUT")]
    pub s3_attempt_timeout: Option<HumanDuration>,
    /// How long a revoked partition may take to upload its open file before it is dropped. [default: 20s]
    #[arg(long, env = "KSA_REVOKE_TIMEOUT")]
    pub revoke_timeout: Option<HumanDuration>,
    /// On start, abort our multipart uploads older than this (left by crashes). [default: 24h]
    #[arg(long, env = "KSA_ABORT_STALE_UPLOADS_AFTER")]
    pub abort_stale_uploads_after: Option<HumanDuration>,
    /// Serve Prometheus metrics at http://ADDR/metrics, with /healthz and /readyz, e.g. 127.0.0.1:9090.
    #[arg(long, env = "KSA_METRICS_ADDR")]
    pub metrics_addr: Option<String>,
    /// Claim each file's start offset before uploading it, so that zombie instances and late uploads
    /// can never add overlapping objects (one small extra PUT per file). Turn off only to measure. [default: true]
    #[arg(long, env = "KSA_CLAIMS", value_name = "true|false")]
    pub claims: Option<bool>,
}

macro_rules! prefer {
    ($hi:ident, $lo:ident, $($field:ident),*) => {
        Settings { $($field: $hi.$field.or($lo.$field),)* ..$hi }
    };
}

impl Settings {
    /// Reads a TOML file of settings.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
        toml::from_str(&text).map_err(|e| {
            // One line: where, then what (the TOML error's own text spans several lines).
            let line = e.span().map(|span| text[..span.start].matches('\n').count() + 1);
            let message = match line {
                Some(line) => format!("line {line}: {}", e.message()),
                None => e.message().to_string(),
            };
            ConfigError::Parse { path: path.into(), message }
        })
    }

    /// These settings (flags and environment) over `file`'s.
    pub fn over(self, file: Settings) -> Settings {
        let topics = if self.topics.is_empty() { file.topics.clone() } else { self.topics.clone() };
        let mut kafka = file.kafka.clone();
        kafka.extend(self.kafka.clone());
        let mut merged = prefer!(
            self,
            file,
            brokers,
            group,
            topic_regex,
            dest,
            s3_endpoint,
            s3_region,
            format,
            compression,
            roll_records,
            roll_bytes,
            roll_age,
            start_from,
            spool_dir,
            spool_memory_threshold,
            max_buffer_bytes,
            max_spool_bytes,
            upload_part_size,
            upload_concurrency,
            s3_attempt_timeout,
            revoke_timeout,
            abort_stale_uploads_after,
            claims,
            metrics_addr
        );
        merged.topics = topics;
        merged.kafka = kafka;
        merged
    }

    /// Checks everything and fills defaults.
    pub fn validate(self) -> Result<ArchiverConfig, ConfigError> {
        let brokers = non_empty(self.brokers, "--brokers", "pass --brokers host:port (or KSA_BROKERS)")?;
        let group =
            non_empty(self.group, "--group", "pass --group NAME (or KSA_GROUP); instances of one archive share it")?;
        let mut subscription: Vec<String> = Vec::new();
        for t in &self.topics {
            crate::core::partition::validate_topic(t).map_err(|e| invalid("--topic", t, e.to_string()))?;
            subscription.push(t.clone());
        }
        if let Some(re) = &self.topic_regex {
            if re.is_empty() {
                return Err(invalid("--topic-regex", re, "it is empty".into()));
            }
            subscription.push(if re.starts_with('^') { re.clone() } else { format!("^{re}") });
        }
        if subscription.is_empty() {
            return Err(ConfigError::Missing {
                name: "--topic or --topic-regex",
                how: "name at least one topic to archive",
            });
        }
        let dest_text = non_empty(self.dest, "--dest", "pass --dest s3://bucket/prefix or file:///dir")?;
        let dest: Destination = dest_text
            .parse()
            .map_err(|e: crate::core::destination::DestinationError| invalid("--dest", &dest_text, e.to_string()))?;
        let format: Format = parse_opt(self.format, "--format", Format::Parquet)?;
        let compression: Compression = parse_opt(self.compression, "--compression", Compression::Zstd)?;
        let spec = FileSpec::new(format, compression)
            .map_err(|e| invalid("--compression", &compression.to_string(), e.to_string()))?;
        let roll = RollPolicy {
            max_records: positive(self.roll_records.unwrap_or(1_000_000), "--roll-records")?,
            max_bytes: positive(self.roll_bytes.map_or(64 << 20, ByteSize::bytes), "--roll-bytes")?,
            max_age: self.roll_age.map_or(Duration::from_secs(300), |d| d.0),
        };
        if roll.max_age < Duration::from_millis(100) {
            return Err(invalid("--roll-age", &format!("{:?}", roll.max_age), "use at least 100ms".into()));
        }
        let start_from = match self.start_from.as_deref().unwrap_or("earliest") {
            "earliest" => StartFrom::Earliest,
            "latest" => StartFrom::Latest,
            other => return Err(invalid("--start-from", other, "use earliest or latest".into())),
        };
        let mut kafka_props = self.kafka.clone();
        for kv in &self.kafka_flags {
            let (k, v) = parse_kafka_setting(kv)?;
            kafka_props.insert(k, v);
        }
        for k in kafka_props.keys() {
            if RESERVED_KAFKA_KEYS.contains(&k.as_str()) {
                return Err(invalid(
                    "--kafka",
                    k,
                    "the archiver sets this itself (use --brokers/--group for servers and group)".into(),
                ));
            }
        }
        let part_size = self.upload_part_size.map_or(8 << 20, ByteSize::bytes);
        if part_size < 5 << 20 {
            return Err(invalid(
                "--upload-part-size",
                &ByteSize(part_size).to_string(),
                "S3 needs parts of at least 5MiB".into(),
            ));
        }
        let memory_threshold = self.spool_memory_threshold.map_or(8 << 20, ByteSize::bytes);
        let max_buffer_bytes =
            positive(self.max_buffer_bytes.map_or(256 << 20, ByteSize::bytes), "--max-buffer-bytes")?;
        Ok(ArchiverConfig {
            brokers,
            group,
            subscription,
            dest,
            s3_endpoint: self.s3_endpoint,
            s3_region: self.s3_region,
            spec,
            roll,
            kafka_props: kafka_props.into_iter().collect(),
            start_from,
            spool_dir: self.spool_dir.unwrap_or_else(|| std::env::temp_dir().join("kafka-s3-archiver-spool")),
            spool_memory_threshold: memory_threshold,
            max_buffer_bytes,
            max_spool_bytes: positive(self.max_spool_bytes.map_or(4 << 30, ByteSize::bytes), "--max-spool-bytes")?,
            upload_part_size: part_size,
            upload_concurrency: self.upload_concurrency.unwrap_or(4).max(1),
            s3_attempt_timeout: self.s3_attempt_timeout.map_or(Duration::from_secs(60), |d| d.0),
            revoke_timeout: self.revoke_timeout.map_or(Duration::from_secs(20), |d| d.0),
            abort_stale_uploads_after: self.abort_stale_uploads_after.map_or(Duration::from_secs(24 * 3600), |d| d.0),
            claims: self.claims.unwrap_or(true),
            metrics_addr: match self.metrics_addr {
                None => None,
                Some(a) => {
                    Some(a.parse().map_err(|e| {
                        invalid("--metrics-addr", &a, format!("{e}: write IP:PORT, e.g. 127.0.0.1:9090"))
                    })?)
                }
            },
        })
    }
}

/// One `--kafka KEY=VALUE` setting.
pub fn parse_kafka_setting(kv: &str) -> Result<(String, String), ConfigError> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| invalid("--kafka", kv, "write KEY=VALUE, e.g. security.protocol=SASL_SSL".into()))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

fn invalid(name: &'static str, value: &str, why: String) -> ConfigError {
    ConfigError::Invalid { name, value: value.to_string(), why }
}

fn non_empty(v: Option<String>, name: &'static str, how: &'static str) -> Result<String, ConfigError> {
    v.filter(|s| !s.trim().is_empty()).ok_or(ConfigError::Missing { name, how })
}

fn positive(v: u64, name: &'static str) -> Result<u64, ConfigError> {
    if v == 0 {
        Err(invalid(name, "0", "it must be greater than zero".into()))
    } else {
        Ok(v)
    }
}

fn parse_opt<T: std::str::FromStr<Err = String>>(
    v: Option<String>,
    name: &'static str,
    default: T,
) -> Result<T, ConfigError> {
    match v {
        None => Ok(default),
        Some(s) => s.parse().map_err(|why| invalid(name, &s, why)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    Earliest,
    Latest,
}

/// Validated settings of `run`.
#[derive(Debug, Clone)]
pub struct ArchiverConfig {
    pub brokers: String,
    pub group: String,
    /// Topic names and `^regex` patterns, as librdkafka subscribes them.
    pub subscription: Vec<String>,
    pub dest: Destination,
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    pub spec: FileSpec,
    pub roll: RollPolicy,
    pub kafka_props: Vec<(String, String)>,
    pub start_from: StartFrom,
    pub spool_dir: PathBuf,
    pub spool_memory_threshold: u64,
    pub max_buffer_bytes: u64,
    pub max_spool_bytes: u64,
    pub upload_part_size: u64,
    pub upload_concurrency: usize,
    pub s3_attempt_timeout: Duration,
    pub revoke_timeout: Duration,
    pub abort_stale_uploads_after: Duration,
    pub claims: bool,
    pub metrics_addr: Option<std::net::SocketAddr>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Settings {
        Settings {
            brokers: Some("localhost:9092".into()),
            group: Some("g".into()),
            topics: vec!["orders".into()],
            dest: Some("s3://bucket/pre".into()),
            ..Settings::default()
        }
    }

    #[test]
    fn defaults_fill_in() {
        let c = minimal().validate().unwrap();
        assert_eq!(c.spec.format(), Format::Parquet);
        assert_eq!(c.spec.compression(), Compression::Zstd);
        assert_eq!(c.roll.max_bytes, 64 << 20);
        assert_eq!(c.start_from, StartFrom::Earliest);
        assert_eq!(c.subscription, vec!["orders".to_string()]);
    }

    #[test]
    fn flags_win_over_the_file() {
        let file: Settings = toml::from_str(
            r#"
            brokers = "file:1"
            group = "file-group"
            topics = ["a", "b"]
            dest = "file:///tmp/x"
            roll-bytes = "1MiB"
            roll-age = "10s"
            [kafka]
            "security.protocol" = "SASL_SSL"
            "#,
        )
        .unwrap();
        let flags = Settings {
            group: Some("flag-group".into()),
            roll_age: Some("3s".parse().unwrap()),
            kafka_flags: vec!["sasl.mechanism=PLAIN".into()],
            ..Settings::default()
        };
        let c = flags.over(file).validate().unwrap();
        assert_eq!(c.brokers, "file:1");
        assert_eq!(c.group, "flag-group");
        assert_eq!(c.subscription, vec!["a".to_string(), "b".to_string()]);
        assert_eq!(c.roll.max_bytes, 1 << 20);
        assert_eq!(c.roll.max_age, Duration::from_secs(3));
        assert!(c.kafka_props.contains(&("security.protocol".into(), "SASL_SSL".into())));
        assert!(c.kafka_props.contains(&("sasl.mechanism".into(), "PLAIN".into())));
    }

    #[test]
    fn unknown_keys_in_the_file_are_rejected() {
        let err = toml::from_str::<Settings>("brokers = \"x\"\nroll-sise = \"1MiB\"\n").unwrap_err();
        assert!(err.to_string().contains("roll-sise"), "{err}");
    }

    #[test]
    fn bad_values_name_the_setting() {
        let cases: Vec<(Settings, &str)> = vec![
            (Settings { brokers: None, ..minimal() }, "--brokers"),
            (Settings { topics: vec![], ..minimal() }, "--topic"),
            (Settings { topics: vec!["a/b".into()], ..minimal() }, "--topic"),
            (Settings { dest: Some("/tmp/x".into()), ..minimal() }, "--dest"),
            (Settings { format: Some("csv".into()), ..minimal() }, "--format"),
            (
                Settings { format: Some("jsonl".into()), compression: Some("snappy".into()), ..minimal() },
                "--compression",
            ),
            (Settings { roll_records: Some(0), ..minimal() }, "--roll-records"),
            (Settings { start_from: Some("middle".into()), ..minimal() }, "--start-from"),
            (Settings { kafka_flags: vec!["novalue".into()], ..minimal() }, "--kafka"),
            (Settings { kafka_flags: vec!["enable.auto.commit=true".into()], ..minimal() }, "--kafka"),
            (Settings { upload_part_size: Some(ByteSize(1 << 20)), ..minimal() }, "--upload-part-size"),
        ];
        for (s, name) in cases {
            let err = s.validate().unwrap_err().to_string();
            assert!(err.contains(name), "expected {name} in: {err}");
        }
    }

    #[test]
    fn regex_subscriptions_are_anchored() {
        let c = Settings { topics: vec![], topic_regex: Some("orders-.*".into()), ..minimal() }.validate().unwrap();
        assert_eq!(c.subscription, vec!["^orders-.*".to_string()]);
    }
}
