//! Configuration for `run`. Every setting has one name, used three ways: a flag (`--roll-bytes`), an
//! environment variable (`KSA_ROLL_BYTES`) and a key of the TOML file (`roll-bytes`). Layers, each
//! over the one before: the defaults below, the file, the environment, the flags. clap reads the flags
//! and the environment; figment layers them over the file and the defaults, so a new setting cannot be
//! left out of the layering. The result is validated, before anything connects, into one struct per
//! section (source, store, pipeline, metrics).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use figment::providers::Serialized;
use figment::Figment;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::archive::destination::Destination;
use crate::archive::time_bucket::{Bucketing, TimeSource};
use crate::config::units::{ByteSize, HumanDuration};
use crate::encode::roll::RollPolicy;
use crate::encode::{Compression, FileSpec, Format};
use crate::pipeline::{TopicProfile, TopicProfiles};
use crate::registry::{RegistryOptions, SchemaCache};
use crate::store::StoreOptions;

mod choices;
mod defaults;
mod dest;
mod kafka;
mod table;
mod topics;
pub mod units;
mod values;

use self::choices::with_default;
pub use self::choices::{KeyFormatName, SseMode, StartFrom, TableFormat, TimeBuckets, ValueFormatName};
pub use self::defaults::*;
use self::kafka::is_secret;
pub use self::kafka::{parse_kafka_setting, GroupOffsetsConfig};
pub use self::table::{
    CatalogConfig, CatalogLocation, TableConfig, DEFAULT_ICEBERG_CATALOG_NAME, DEFAULT_ICEBERG_NAMESPACE,
    DEFAULT_ICEBERG_SCOPE, DEFAULT_TABLE, DEFAULT_TABLE_COMMIT_FILES, DEFAULT_TABLE_COMMIT_INTERVAL,
};
pub use self::topics::{TopicTables, PER_TOPIC_KEYS};

/// The shortest `--roll-schedule`.
const MIN_ROLL_SCHEDULE: Duration = Duration::from_secs(1);
/// The shortest `--roll-age`: the age timer ticks every 200 ms.
const MIN_ROLL_AGE: Duration = Duration::from_millis(100);

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("the settings cannot be combined: {0}")]
    Layering(String),
    #[error("{name} is required: {how}")]
    Missing { name: &'static str, how: &'static str },
    #[error("{name} = {value:?} is not valid: {why}")]
    Invalid { name: &'static str, value: String, why: String },
    #[error("in [topic.{table:?}]: {error}")]
    Topic { table: String, error: Box<ConfigError> },
    #[error(
        "in [topic.{table:?}]: {key} cannot be set per topic, it is a setting of the whole instance: move it to the \
         top of the file (a topic's table takes only {})", PER_TOPIC_KEYS.join(", ")
    )]
    NotPerTopic { table: String, key: String },
}

/// Every setting of `run`, as given (unset: `None`). The TOML file uses the flag names without the
/// dashes (`topics = [...]` for `--topic`, a `[kafka]` table for `--kafka`), and `[topic."..."]` tables
/// for per-topic settings.
#[serde_with::skip_serializing_none]
#[derive(Debug, Default, Clone, Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    // Source: Kafka.
    /// Kafka bootstrap servers, host:port[,host:port...].
    #[arg(long, env = "KSA_BROKERS", help_heading = "Kafka")]
    pub brokers: Option<String>,
    /// Consumer group shared by all archiver instances of one archive.
    #[arg(long, env = "KSA_GROUP", help_heading = "Kafka")]
    pub group: Option<String>,
    /// Topic to archive (repeatable).
    #[arg(long = "topic", env = "KSA_TOPICS", value_delimiter = ',', help_heading = "Kafka")]
    pub topics: Option<Vec<String>>,
    /// Also archive every topic whose name matches this regular expression (librdkafka regex syntax).
    #[arg(long, env = "KSA_TOPIC_REGEX", help_heading = "Kafka")]
    pub topic_regex: Option<String>,
    /// Extra librdkafka setting KEY=VALUE (repeatable): SASL, TLS, timeouts...
    #[arg(long = "kafka", env = "KSA_KAFKA", value_delimiter = ';', value_name = "KEY=VALUE", help_heading = "Kafka")]
    #[serde(skip)]
    pub kafka_flags: Option<Vec<String>>,
    #[arg(long, env = "KSA_START_FROM", help_heading = "Kafka",
        help = with_default("Where partitions with no archive start", DEFAULT_START_FROM))]
    pub start_from: Option<StartFrom>,
    /// Also keep, every --group-offsets-interval, the committed offsets of the consumer groups whose whole
    /// name matches this regular expression, for the archived topics, in the archive (under
    /// <prefix>/_group-offsets/), for `restore --translate-group-offsets`
    #[arg(long, env = "KSA_ARCHIVE_GROUP_OFFSETS", value_name = "GROUP_REGEX", help_heading = "Kafka")]
    pub archive_group_offsets: Option<String>,
    #[arg(long, env = "KSA_GROUP_OFFSETS_INTERVAL", help_heading = "Kafka",
        help = with_default("With --archive-group-offsets: how often the groups' offsets are kept", DEFAULT_GROUP_OFFSETS_INTERVAL))]
    pub group_offsets_interval: Option<HumanDuration>,

    // Store: the archive.
    /// Where the archive goes: s3://bucket/prefix or file:///absolute/dir.
    #[arg(long, env = "KSA_DEST", help_heading = "Archive")]
    pub dest: Option<String>,
    /// Custom S3 endpoint URL (LocalStack, MinIO...); path-style addressing is used with it.
    /// Without it, aws-config's standard chain applies (AWS_ENDPOINT_URL is honoured).
    #[arg(long, env = "KSA_S3_ENDPOINT", help_heading = "Archive")]
    pub s3_endpoint: Option<String>,
    /// S3 region; default: from the standard AWS chain, else us-east-1.
    #[arg(long, env = "KSA_S3_REGION", help_heading = "Archive")]
    pub s3_region: Option<String>,
    #[arg(long, env = "KSA_UPLOAD_PART_SIZE", help_heading = "Archive",
        help = with_default("Part size of multipart uploads (files of twice this or more use multipart)", DEFAULT_UPLOAD_PART_SIZE))]
    pub upload_part_size: Option<ByteSize>,
    #[arg(long, env = "KSA_UPLOAD_CONCURRENCY", help_heading = "Archive",
        help = with_default("Parts of one multipart upload sent in parallel", DEFAULT_UPLOAD_CONCURRENCY))]
    pub upload_concurrency: Option<usize>,
    #[arg(long, env = "KSA_S3_MAX_REQUESTS", help_heading = "Archive",
        help = with_default("S3 requests in flight at once, across all partitions", DEFAULT_S3_MAX_REQUESTS))]
    pub s3_max_requests: Option<usize>,
    #[arg(long, env = "KSA_S3_ATTEMPT_TIMEOUT", help_heading = "Archive",
        help = with_default("Timeout of one S3 request attempt", DEFAULT_S3_ATTEMPT_TIMEOUT))]
    pub s3_attempt_timeout: Option<HumanDuration>,
    /// Server-side encryption of every object written (data, claims, multipart uploads): AES256 (SSE-S3)
    /// or aws:kms (SSE-KMS); default: the bucket's default encryption.
    #[arg(long, env = "KSA_S3_SSE", help_heading = "Archive")]
    pub s3_sse: Option<SseMode>,
    /// The KMS key (ID, ARN or alias) for --s3-sse aws:kms; default: the account's aws/s3 key.
    #[arg(long, env = "KSA_S3_SSE_KMS_KEY_ID", help_heading = "Archive")]
    pub s3_sse_kms_key_id: Option<String>,
    /// Storage class of every object written, e.g. STANDARD_IA, INTELLIGENT_TIERING, GLACIER_IR;
    /// default: STANDARD. Classes that need a restore before reading (GLACIER, DEEP_ARCHIVE) are refused.
    #[arg(long, env = "KSA_S3_STORAGE_CLASS", help_heading = "Archive")]
    pub s3_storage_class: Option<String>,
    /// The AWS account ID that must own the bucket: every request fails (403) if another account owns it.
    #[arg(long, env = "KSA_S3_EXPECTED_BUCKET_OWNER", help_heading = "Archive")]
    pub s3_expected_bucket_owner: Option<String>,
    /// Custom Google Cloud Storage endpoint URL (an emulator such as fake-gcs-server); default:
    /// https://storage.googleapis.com.
    #[arg(long, env = "KSA_GCS_ENDPOINT", help_heading = "Archive")]
    pub gcs_endpoint: Option<String>,
    /// A service-account key or application-default-credentials JSON file for gs:// destinations;
    /// default: GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default credentials, else the
    /// metadata server (GKE, Compute Engine).
    #[arg(long, env = "KSA_GCS_CREDENTIALS", help_heading = "Archive")]
    pub gcs_credentials: Option<PathBuf>,
    /// Send Google Cloud Storage no credentials at all (emulators, public buckets).
    #[arg(long, env = "KSA_GCS_ANONYMOUS", value_name = "true|false", help_heading = "Archive")]
    pub gcs_anonymous: Option<bool>,
    /// The Azure storage account of az:// destinations; default: AZURE_STORAGE_ACCOUNT_NAME, or the
    /// connection string's.
    #[arg(long, env = "KSA_AZURE_ACCOUNT", help_heading = "Archive")]
    pub azure_account: Option<String>,
    /// Custom Azure Blob endpoint URL (Azurite: http://127.0.0.1:10000/devstoreaccount1); default:
    /// https://ACCOUNT.blob.core.windows.net.
    #[arg(long, env = "KSA_AZURE_ENDPOINT", help_heading = "Archive")]
    pub azure_endpoint: Option<String>,
    /// The storage account's shared key (shown masked); without it, a SAS token, the connection string's
    /// credentials, else Azure AD from the environment (AZURE_CLIENT_ID/_SECRET/_TENANT_ID, workload
    /// identity, managed identity).
    #[arg(long, env = "KSA_AZURE_ACCESS_KEY", hide_env_values = true, help_heading = "Archive")]
    pub azure_access_key: Option<String>,
    /// A shared access signature, the query string without its '?' (shown masked).
    #[arg(long, env = "KSA_AZURE_SAS_TOKEN", hide_env_values = true, help_heading = "Archive")]
    pub azure_sas_token: Option<String>,
    /// An Azure Storage connection string (AccountName, AccountKey or SharedAccessSignature,
    /// BlobEndpoint; UseDevelopmentStorage=true), shown masked; the flags above override its parts.
    #[arg(long, env = "KSA_AZURE_CONNECTION_STRING", hide_env_values = true, help_heading = "Archive")]
    pub azure_connection_string: Option<String>,
    #[arg(long, env = "KSA_ABORT_STALE_UPLOADS_AFTER", help_heading = "Archive",
        help = with_default("On start, abort our multipart uploads older than this (left by crashes)", DEFAULT_ABORT_STALE_UPLOADS_AFTER))]
    pub abort_stale_uploads_after: Option<HumanDuration>,

    // Pipeline: files and budgets.
    #[arg(long, env = "KSA_FORMAT", help_heading = "Files", help = with_default("File format", DEFAULT_FORMAT))]
    pub format: Option<Format>,
    #[arg(long, env = "KSA_COMPRESSION", help_heading = "Files",
        help = with_default(
            "Compression (snappy: Parquet only; a Parquet column that did not compress is left uncompressed)",
            DEFAULT_COMPRESSION
        ))]
    pub compression: Option<Compression>,
    #[arg(long, env = "KSA_ROLL_RECORDS", help_heading = "Files",
        help = with_default("Roll a file after this many records", DEFAULT_ROLL_RECORDS))]
    pub roll_records: Option<u64>,
    #[arg(long, env = "KSA_ROLL_BYTES", help_heading = "Files",
        help = with_default("Roll a file once it is this large, e.g. 64MiB", DEFAULT_ROLL_BYTES))]
    pub roll_bytes: Option<ByteSize>,
    #[arg(long, env = "KSA_ROLL_AGE", help_heading = "Files",
        help = with_default("Roll a file this long after its first record, even if no more arrive, e.g. 30s", DEFAULT_ROLL_AGE))]
    pub roll_age: Option<HumanDuration>,
    /// Also roll every open file at each UTC multiple of this interval (e.g. 1h: at every full hour),
    /// even when no record arrives, so a time bucket's files are closed soon after it ends.
    #[arg(long, env = "KSA_ROLL_SCHEDULE", help_heading = "Files")]
    pub roll_schedule: Option<HumanDuration>,
    #[arg(long, env = "KSA_TIME_BUCKETS", help_heading = "Files",
        help = with_default("Data folders by UTC time: none, day (dt=YYYY-MM-DD/) or hour (dt=YYYY-MM-DD/hour=HH/), \
            between topic= and partition=", DEFAULT_TIME_BUCKETS))]
    pub time_buckets: Option<TimeBuckets>,
    #[arg(long, env = "KSA_TIME_SOURCE", help_heading = "Files",
        help = with_default("The time that puts a record into a time bucket: record (its timestamp) or arrival \
            (when consumed)", DEFAULT_TIME_SOURCE))]
    pub time_source: Option<TimeSource>,
    #[arg(long, env = "KSA_MARKER_INTERVAL", help_heading = "Files",
        help = with_default("With time buckets: how often to look for buckets that became complete and put their \
            _SUCCESS markers", DEFAULT_MARKER_INTERVAL))]
    pub marker_interval: Option<HumanDuration>,
    #[arg(long, env = "KSA_VALUE_FORMAT", help_heading = "Files",
        help = with_default("How record values are archived: raw (the bytes, a binary column); json (decoded into \
            typed columns by --value-schema, or in JSON lines embedded as objects); avro, protobuf or json-schema (Schema \
            Registry payloads, decoded into typed columns by the schema each names, --schema-registry-url); registry (any \
            of the three, each file by its first value's schema type). Records that do not fit keep their bytes in \
            value_raw", DEFAULT_VALUE_FORMAT))]
    pub value_format: Option<ValueFormatName>,
    #[arg(long, env = "KSA_KEY_FORMAT", help_heading = "Files",
        help = with_default("How record keys are archived: raw (the bytes, a binary column); avro, protobuf, json-schema \
            or registry (Schema Registry payloads, decoded into a typed key column as --value-format decodes values, \
            --schema-registry-url; every key also keeps its bytes in key_raw, and one that does not fit is counted \
            with its reason in key_error)", DEFAULT_KEY_FORMAT))]
    pub key_format: Option<KeyFormatName>,
    /// With --value-format json: an Avro schema file (.avsc, a record at the top) declaring the values'
    /// fields, or `infer`: each file's schema from its first records (a file rolls when new fields come)
    #[arg(long, env = "KSA_VALUE_SCHEMA", help_heading = "Files")]
    pub value_schema: Option<PathBuf>,
    #[arg(long, env = "KSA_KEEP_RAW_VALUE", value_name = "true|false", help_heading = "Files",
        help = with_default("With --value-format json, avro, protobuf or registry: keep every record's bytes in value_raw, \
            not only those that do not fit, so restore gives back the same bytes (--value-format avro and protobuf give \
            them back without it; json-schema values always keep theirs)",
            DEFAULT_KEEP_RAW_VALUE))]
    pub keep_raw_value: Option<bool>,
    /// With a typed --value-format (json, avro, protobuf, json-schema, registry): also produce records whose value does not fit to this topic (with
    /// their key, value and headers, and Kafka Connect's __connect.errors.* headers) before their file
    /// is uploaded. They stay in the archive too. The topic must exist
    #[arg(long, env = "KSA_DLQ_TOPIC", help_heading = "Files")]
    pub dlq_topic: Option<String>,
    /// Directory for files too large to keep in memory until upload [default: <system temp>/kafka-s3-archiver-spool]
    #[arg(long, env = "KSA_SPOOL_DIR", help_heading = "Files")]
    pub spool_dir: Option<PathBuf>,
    #[arg(long, env = "KSA_SPOOL_MEMORY_THRESHOLD", help_heading = "Files",
        help = with_default("A file moves from memory to the spool directory beyond this size, or sooner when the files in \
            memory together would pass half of --max-buffer-bytes", DEFAULT_SPOOL_MEMORY_THRESHOLD))]
    pub spool_memory_threshold: Option<ByteSize>,
    #[arg(long, env = "KSA_MAX_BUFFER_BYTES", help_heading = "Files",
        help = with_default("Memory budget for buffered data across all partitions; librdkafka's prefetch queue gets a \
            quarter of it, 1-64 MiB (--kafka queued.max.messages.kbytes=N overrides)", DEFAULT_MAX_BUFFER_BYTES))]
    pub max_buffer_bytes: Option<ByteSize>,
    #[arg(long, env = "KSA_MAX_SPOOL_BYTES", help_heading = "Files",
        help = with_default("Disk budget for the spool directory across all partitions", DEFAULT_MAX_SPOOL_BYTES))]
    pub max_spool_bytes: Option<ByteSize>,
    #[arg(long, env = "KSA_REVOKE_TIMEOUT", help_heading = "Files",
        help = with_default("How long a revoked partition may take to upload its open file before it is dropped", DEFAULT_REVOKE_TIMEOUT))]
    pub revoke_timeout: Option<HumanDuration>,
    #[arg(long, env = "KSA_CLAIMS", value_name = "true|false", help_heading = "Files",
        help = with_default("Claim each file's start offset before uploading it, so that zombie instances and late \
            uploads can never add overlapping objects (one small extra PUT per file). Turn off only to measure", DEFAULT_CLAIMS))]
    pub claims: Option<bool>,

    // Tables.
    #[arg(long, env = "KSA_TABLE", help_heading = "Tables",
        help = with_default("Also commit each topic's durable Parquet files to a table: none, or iceberg (the \
            topic's Iceberg table in --iceberg-catalog, exactly once)", DEFAULT_TABLE))]
    pub table: Option<TableFormat>,
    /// The Iceberg catalog of --table iceberg: sqlite:///absolute/path.db or
    /// postgresql://user@host:port/database[?sslmode=require] (a SQL catalog, its tables created if
    /// absent, as Iceberg's JDBC catalog and pyiceberg's SqlCatalog read it), or
    /// http(s)://host:port[/path] (an Iceberg REST catalog: the URL before /v1)
    #[arg(long, env = "KSA_ICEBERG_CATALOG", help_heading = "Tables")]
    pub iceberg_catalog: Option<String>,
    /// The password of a PostgreSQL catalog's user (shown masked)
    #[arg(long, env = "KSA_ICEBERG_CATALOG_PASSWORD", hide_env_values = true, help_heading = "Tables")]
    pub iceberg_catalog_password: Option<String>,
    /// A REST catalog's warehouse, for catalogs that serve several (sent with GET /v1/config)
    #[arg(long, env = "KSA_ICEBERG_WAREHOUSE", help_heading = "Tables")]
    pub iceberg_warehouse: Option<String>,
    /// A bearer token for the REST catalog (shown masked)
    #[arg(long, env = "KSA_ICEBERG_TOKEN", hide_env_values = true, help_heading = "Tables")]
    pub iceberg_token: Option<String>,
    /// OAuth2 client credentials for the REST catalog, CLIENT_ID:CLIENT_SECRET, exchanged for a token at
    /// its /v1/oauth/tokens, instead of --iceberg-token (shown masked)
    #[arg(long, env = "KSA_ICEBERG_CREDENTIAL", hide_env_values = true, help_heading = "Tables")]
    pub iceberg_credential: Option<String>,
    /// Sign the REST catalog's requests with AWS Signature Version 4 for this service: glue (Glue's
    /// Iceberg endpoint, https://glue.REGION.amazonaws.com/iceberg) or s3tables (S3 Tables'), with the
    /// credentials of AWS's default chain, instead of --iceberg-token or --iceberg-credential
    #[arg(long, env = "KSA_ICEBERG_SIGNING_NAME", help_heading = "Tables")]
    pub iceberg_signing_name: Option<String>,
    /// The region requests are signed for with --iceberg-signing-name [default: AWS's configuration's
    /// (AWS_REGION, the profile)]
    #[arg(long, env = "KSA_ICEBERG_SIGNING_REGION", help_heading = "Tables")]
    pub iceberg_signing_region: Option<String>,
    #[arg(long, env = "KSA_ICEBERG_SCOPE", help_heading = "Tables",
        help = with_default("The OAuth2 scope asked for with --iceberg-credential", DEFAULT_ICEBERG_SCOPE))]
    pub iceberg_scope: Option<String>,
    /// For an https:// REST catalog or a PostgreSQL catalog over TLS: a PEM file of the CA certificates
    /// its certificate is signed by [default: the system's root certificates]
    #[arg(long, env = "KSA_ICEBERG_CA", help_heading = "Tables")]
    pub iceberg_ca: Option<PathBuf>,
    #[arg(long, env = "KSA_ICEBERG_CATALOG_NAME", help_heading = "Tables",
        help = with_default("The catalog's name in a SQL catalog's rows (its readers name it too: pyiceberg's \
            SqlCatalog(name, ...))", DEFAULT_ICEBERG_CATALOG_NAME))]
    pub iceberg_catalog_name: Option<String>,
    #[arg(long, env = "KSA_ICEBERG_NAMESPACE", help_heading = "Tables",
        help = with_default("The namespace of the topics' tables, each named after its topic (characters other \
            than letters, digits and _ as _)", DEFAULT_ICEBERG_NAMESPACE))]
    pub iceberg_namespace: Option<String>,
    #[arg(long, env = "KSA_TABLE_COMMIT_INTERVAL", help_heading = "Tables",
        help = with_default("Commit durable files to the tables at most this often", DEFAULT_TABLE_COMMIT_INTERVAL))]
    pub table_commit_interval: Option<HumanDuration>,
    #[arg(long, env = "KSA_TABLE_COMMIT_FILES", help_heading = "Tables",
        help = with_default("Commit before the interval is up once this many files wait", DEFAULT_TABLE_COMMIT_FILES))]
    pub table_commit_files: Option<usize>,

    // Schema Registry.
    /// The Schema Registry's URL, http(s)://host:port[/path] (Confluent's API; Apicurio Registry's is at
    /// /apis/ccompat/v7), where --value-format avro, protobuf, json-schema and registry find the schema each value
    /// names
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_URL", help_heading = "Schema Registry")]
    pub schema_registry_url: Option<String>,
    /// Basic authentication to the Schema Registry: the user name (with --schema-registry-password)
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_USERNAME", help_heading = "Schema Registry")]
    pub schema_registry_username: Option<String>,
    /// Basic authentication to the Schema Registry: the password (shown masked)
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_PASSWORD", hide_env_values = true, help_heading = "Schema Registry")]
    pub schema_registry_password: Option<String>,
    /// A bearer token for the Schema Registry, instead of basic authentication (shown masked)
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_TOKEN", hide_env_values = true, help_heading = "Schema Registry")]
    pub schema_registry_token: Option<String>,
    /// For an https:// Schema Registry: a PEM file of the CA certificates its certificate is signed by
    /// [default: the system's root certificates]
    #[arg(long, env = "KSA_SCHEMA_REGISTRY_CA", help_heading = "Schema Registry")]
    pub schema_registry_ca: Option<PathBuf>,

    // Metrics.
    /// Serve Prometheus metrics at http://ADDR/metrics, with /healthz and /readyz, e.g. 127.0.0.1:9090.
    #[arg(long, env = "KSA_METRICS_ADDR", help_heading = "Metrics")]
    pub metrics_addr: Option<String>,

    // Last, as a TOML table follows plain keys.
    /// Extra librdkafka settings: the config file's `[kafka]` table (and `--kafka` once layered).
    #[arg(skip)]
    pub kafka: Option<BTreeMap<String, String>>,
    /// Per-topic settings: the config file's `[topic."NAME"]` and `[topic."^REGEX"]` tables.
    #[arg(skip)]
    pub topic: Option<TopicTables>,
}

/// Validated settings of `run`, by section.
#[derive(Debug, Clone)]
pub struct ArchiverConfig {
    pub source: SourceConfig,
    pub store: StoreConfig,
    pub pipeline: PipelineConfig,
    /// Where the topics with `--table iceberg` are committed (none when no topic has one).
    pub table: Option<TableConfig>,
    pub metrics: MetricsConfig,
}

#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub brokers: String,
    pub group: String,
    /// Topic names and `^regex` patterns, as librdkafka subscribes them.
    pub subscription: Vec<String>,
    pub kafka_props: Vec<(String, String)>,
    pub start_from: StartFrom,
    /// Which consumer groups' offsets are kept in the archive, and how often (`--archive-group-offsets`).
    pub group_offsets: Option<GroupOffsetsConfig>,
}

#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Which backend, and where in it.
    pub dest: Destination,
    /// How to reach and write to each backend.
    pub settings: StoreOptions,
}

#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// How each topic's files are written.
    pub profiles: TopicProfiles,
    /// Where the schemas values name come from (`--schema-registry-url`), and those fetched.
    pub registry: Option<RegistryConfig>,
    pub spool_dir: PathBuf,
    pub spool_memory_threshold: u64,
    pub max_buffer_bytes: u64,
    pub max_spool_bytes: u64,
    pub revoke_timeout: Duration,
    pub claims: bool,
    pub marker_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct RegistryConfig {
    pub options: RegistryOptions,
    /// Shared by every topic's values and the pipeline, which fills it.
    pub cache: Arc<SchemaCache>,
}

#[derive(Debug, Clone)]
pub struct MetricsConfig {
    pub addr: Option<SocketAddr>,
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

    /// The settings in effect: these (flags and environment) over the `file`'s, over the defaults.
    /// The `[topic."..."]` tables come from the file only, kept in its order.
    pub fn effective(mut self, file: Option<&Path>) -> Result<Settings, ConfigError> {
        self.kafka = Some(self.kafka_props()?);
        self.kafka_flags = None;
        let mut tables = self.topic.take();
        let mut layers = Figment::from(Serialized::defaults(Settings::defaults()));
        if let Some(path) = file {
            let mut from_file = Settings::from_file(path)?;
            tables = tables.or(from_file.topic.take());
            layers = layers.merge(Serialized::defaults(from_file));
        }
        let mut effective: Settings =
            layers.merge(Serialized::defaults(self)).extract().map_err(|e| ConfigError::Layering(e.to_string()))?;
        effective.topic = tables;
        Ok(effective)
    }

    /// The settings in effect (see [`Settings::effective`]), validated.
    pub fn resolve(self, file: Option<&Path>) -> Result<ArchiverConfig, ConfigError> {
        self.effective(file)?.validate()
    }

    /// The effective settings as a TOML file would give them, secrets masked; each `[topic."..."]` table
    /// with every per-topic setting in effect for its topics.
    pub fn to_toml(&self) -> String {
        let mut shown = self.clone();
        shown.topic = self.tables_in_effect();
        for secret in [
            &mut shown.schema_registry_password,
            &mut shown.schema_registry_token,
            &mut shown.iceberg_token,
            &mut shown.iceberg_credential,
            &mut shown.iceberg_catalog_password,
            &mut shown.azure_access_key,
            &mut shown.azure_sas_token,
            &mut shown.azure_connection_string,
        ] {
            if secret.is_some() {
                *secret = Some("****".into());
            }
        }
        for (key, value) in shown.kafka.iter_mut().flatten() {
            if is_secret(key) {
                *value = "****".into();
            }
        }
        toml::to_string(&shown).expect("settings serialise")
    }

    /// Checks everything; the defaults are layered in already.
    fn validate(self) -> Result<ArchiverConfig, ConfigError> {
        let pipeline = self.pipeline()?;
        Ok(ArchiverConfig {
            source: self.source()?,
            store: self.store()?,
            table: self.table(&pipeline.profiles)?,
            pipeline,
            metrics: MetricsConfig {
                addr: match &self.metrics_addr {
                    None => None,
                    Some(a) => Some(a.parse().map_err(|e| {
                        invalid("--metrics-addr", a, format!("{e}: write IP:PORT, e.g. 127.0.0.1:9090"))
                    })?),
                },
            },
        })
    }

    fn pipeline(&self) -> Result<PipelineConfig, ConfigError> {
        let cache = Arc::new(SchemaCache::default());
        Ok(PipelineConfig {
            profiles: self.profiles(&cache)?,
            registry: self.registry()?.map(|options| RegistryConfig { options, cache }),
            spool_dir: set(self.spool_dir.clone(), "--spool-dir")?,
            spool_memory_threshold: set(self.spool_memory_threshold, "--spool-memory-threshold")?.bytes(),
            max_buffer_bytes: positive(
                set(self.max_buffer_bytes, "--max-buffer-bytes")?.bytes(),
                "--max-buffer-bytes",
            )?,
            max_spool_bytes: positive(set(self.max_spool_bytes, "--max-spool-bytes")?.bytes(), "--max-spool-bytes")?,
            revoke_timeout: set(self.revoke_timeout, "--revoke-timeout")?.0,
            claims: set(self.claims, "--claims")?,
            marker_interval: set(self.marker_interval, "--marker-interval")?.0.max(MIN_ROLL_SCHEDULE),
        })
    }

    /// How the files of a topic with these settings are written (`schemas`: the registry's, shared).
    fn profile(&self, schemas: &Arc<SchemaCache>) -> Result<TopicProfile, ConfigError> {
        let compression = set(self.compression, "--compression")?;
        let spec = FileSpec::new(set(self.format, "--format")?, compression)
            .map_err(|e| invalid("--compression", &compression.to_string(), e.to_string()))?;
        let buckets = set(self.time_buckets, "--time-buckets")?;
        if buckets != TimeBuckets::None && !set(self.claims, "--claims")? {
            let why = "time-bucketed folders need claims: recovery finds a partition's last object through its \
                       claims chain (--claims true)";
            return Err(invalid("--time-buckets", &buckets.to_string(), why.into()));
        }
        let source = set(self.time_source, "--time-source")?;
        Ok(TopicProfile {
            spec,
            roll: self.roll()?,
            bucketing: buckets.width().map(|width| Bucketing { width, source }),
            values: self.values(schemas)?,
            keys: self.keys(schemas)?,
            dlq_topic: self.dlq_topic()?,
            table: self.table_format(spec)?,
        })
    }

    fn roll(&self) -> Result<RollPolicy, ConfigError> {
        let roll = RollPolicy {
            max_records: positive(set(self.roll_records, "--roll-records")?, "--roll-records")?,
            max_bytes: positive(set(self.roll_bytes, "--roll-bytes")?.bytes(), "--roll-bytes")?,
            max_age: set(self.roll_age, "--roll-age")?.0,
            schedule: self.roll_schedule.map(|d| d.0),
        };
        if roll.max_age < MIN_ROLL_AGE {
            let why = format!("use at least {}", HumanDuration(MIN_ROLL_AGE));
            return Err(invalid("--roll-age", &HumanDuration(roll.max_age).to_string(), why));
        }
        if let Some(every) = roll.schedule.filter(|every| *every < MIN_ROLL_SCHEDULE) {
            let why = format!("use at least {}", HumanDuration(MIN_ROLL_SCHEDULE));
            return Err(invalid("--roll-schedule", &HumanDuration(every).to_string(), why));
        }
        Ok(roll)
    }
}

fn invalid(name: &'static str, value: &str, why: String) -> ConfigError {
    ConfigError::Invalid { name, value: value.to_string(), why }
}

/// A setting every layer may leave unset only when it has a default (layered in before validation).
fn set<T>(v: Option<T>, name: &'static str) -> Result<T, ConfigError> {
    v.ok_or(ConfigError::Missing { name, how: "set it with its flag, environment variable or config file key" })
}

fn non_empty(v: &Option<String>, name: &'static str, how: &'static str) -> Result<String, ConfigError> {
    v.clone().filter(|s| !s.trim().is_empty()).ok_or(ConfigError::Missing { name, how })
}

fn positive(v: u64, name: &'static str) -> Result<u64, ConfigError> {
    if v == 0 {
        Err(invalid(name, "0", "it must be greater than zero".into()))
    } else {
        Ok(v)
    }
}

#[cfg(test)]
mod tests;
