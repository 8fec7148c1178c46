//! The named choices among `run`'s settings (flag values and TOML strings).

use std::fmt::Display;

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::archive::time_bucket::BucketWidth;
pub use crate::source::StartFrom;

/// Server-side encryption asked of S3 for every object written (`--s3-sse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
pub enum SseMode {
    /// SSE-S3: keys managed by S3.
    #[value(name = "AES256")]
    #[serde(rename = "AES256")]
    Aes256,
    /// SSE-KMS: a KMS key (`--s3-sse-kms-key-id`, or the account's aws/s3 key).
    #[value(name = "aws:kms")]
    #[serde(rename = "aws:kms")]
    AwsKms,
}

/// What each topic's files are also committed to (`--table`): nothing, or the topic's Iceberg table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableFormat {
    None,
    Iceberg,
}

impl Display for TableFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TableFormat::None => "none",
            TableFormat::Iceberg => "iceberg",
        })
    }
}

/// Data folders by time (`--time-buckets`): none (one folder per partition), or per UTC day or hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeBuckets {
    None,
    Day,
    Hour,
}

impl TimeBuckets {
    pub(super) fn width(self) -> Option<BucketWidth> {
        match self {
            TimeBuckets::None => None,
            TimeBuckets::Day => Some(BucketWidth::Day),
            TimeBuckets::Hour => Some(BucketWidth::Hour),
        }
    }
}

impl Display for TimeBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeBuckets::None => "none",
            TimeBuckets::Day => "day",
            TimeBuckets::Hour => "hour",
        })
    }
}

pub(super) fn with_default(help: &str, default: impl Display) -> String {
    format!("{help} [default: {default}]")
}

/// How record values are archived (`--value-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueFormatName {
    /// The bytes as they are (a binary column).
    Raw,
    /// JSON decoded into typed columns by `--value-schema`.
    Json,
    /// Avro in the Schema Registry's wire format, decoded into typed columns by the schema each value
    /// names (`--schema-registry-url`).
    Avro,
    /// Protobuf in the Schema Registry's wire format, decoded into typed columns by the schema and
    /// message each value names (`--schema-registry-url`); every value also keeps its bytes.
    Protobuf,
    /// JSON in the Schema Registry's wire format, typed by the JSON Schema each value names
    /// (`--schema-registry-url`); every value also keeps its bytes.
    #[value(name = "json-schema")]
    #[serde(rename = "json-schema")]
    JsonSchema,
    /// Values in the Schema Registry's wire format of any type (Avro, Protobuf, JSON Schema), each file
    /// decoded by its first value's schema type (`--schema-registry-url`).
    Registry,
}

/// How record keys are archived (`--key-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormatName {
    /// The bytes as they are (a binary column).
    Raw,
    /// Avro in the Schema Registry's wire format, decoded into typed columns by the schema each key names.
    Avro,
    /// Protobuf in the Schema Registry's wire format.
    Protobuf,
    /// JSON in the Schema Registry's wire format, typed by its JSON Schema.
    #[value(name = "json-schema")]
    #[serde(rename = "json-schema")]
    JsonSchema,
    /// Any of the three, each file by its first key's schema type.
    Registry,
}

/// A choice as its flag spells it (clap's name for the variant: the same as its TOML spelling).
fn flag_name(choice: &impl ValueEnum, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(choice.to_possible_value().expect("every variant is a choice").get_name())
}

impl Display for KeyFormatName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        flag_name(self, f)
    }
}

impl Display for ValueFormatName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        flag_name(self, f)
    }
}
