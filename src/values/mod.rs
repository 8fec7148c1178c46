//! Typed values (`--value-format json`): a record's value is JSON, decoded into a declared schema. The
//! schema is a tree of [`Node`]s, read from an Avro schema (`avro`), each value decoded by it into the
//! column in one pass (`json`), mapped to Arrow types (`arrow`) for the Parquet `value` column.

pub(crate) mod arrow;
pub mod avro;
pub(crate) mod bytes;
pub mod column;
pub(crate) mod columns;
pub(crate) mod infer;
pub mod json;
pub mod json_schema;
pub(crate) mod line;
pub mod protobuf;
mod registry;
pub mod wire;

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

pub use self::arrow::{value_field, VALUE_FIELD};
pub use self::infer::Inference;

/// The typed columns of one file's record values: the seam a value format implements (JSON now, in
/// `columns`; decoders of Schema Registry payloads next). Each record's value is pushed; a batch's
/// three columns (`value`, `value_raw`, `value_error`) are taken when the file writes a row group.
pub trait ValueColumns: Send {
    /// Takes a record's value (`None`: a tombstone); `false` when, with `may_roll`, the value does not
    /// fit this file's schema but would fit the next file's (then nothing is taken).
    fn push(&mut self, offset: i64, value: Option<&[u8]>, may_roll: bool) -> bool;

    /// Whether `push` with `may_roll` would refuse `value` because the file has no schema (its first
    /// batch had no value with a usable one) and `value` has one. Asked of a key before its record's
    /// value is pushed: a key refused once the value was taken could not be undone.
    fn refuses(&self, value: Option<&[u8]>) -> bool;

    /// The three columns' fields, in order, once the file's schema is known.
    fn fields(&self) -> Option<[arrow_schema::Field; 3]>;

    /// Builds the batch's columns (`offsets`: its records' offsets) and starts the next batch.
    fn take(&mut self, offsets: &[i64]) -> Result<[arrow_array::ArrayRef; 3], columns::ColumnsError>;

    /// Whether the file's schema changed since the last batch was taken (Avro: it widened to a newer
    /// version that holds the old): then the batches written so far are re-written by [`rewrite`].
    ///
    /// [`rewrite`]: Self::rewrite
    fn widened(&self) -> bool;

    /// The three columns of a batch taken before the file's schema last changed, as the current
    /// schema's (see [`widened`](Self::widened)).
    fn rewrite(&self, columns: [arrow_array::ArrayRef; 3])
        -> Result<[arrow_array::ArrayRef; 3], columns::ColumnsError>;

    /// What the file's values came to so far.
    fn stats(&self) -> &columns::ValueStats;

    /// The bytes the batch's decoded columns hold allocated (for the memory budget: a value's columns
    /// may take far more room than its bytes, as sparse JSON of many optional fields does).
    fn allocated(&self) -> usize;
}

/// Whether `b` is a UUID in its 8-4-4-4-12 hexadecimal form.
pub(crate) fn is_uuid(b: &[u8]) -> bool {
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// `bytes` as text, or why they are not UTF-8 (a decoder's misfit reason).
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| format!("a string that is not UTF-8 ({e})"))
}

/// The typed columns for `format`'s values; `None` for raw values (a binary column of their bytes).
pub fn value_columns(format: &ValueFormat) -> Option<Box<dyn ValueColumns>> {
    match format {
        ValueFormat::Raw => None,
        ValueFormat::Json(json) => Some(Box::new(json::columns::JsonColumns::new(json.clone()))),
        ValueFormat::Avro(avro) => Some(Box::new(avro::columns::AvroColumns::new(avro.clone()))),
        ValueFormat::Protobuf(values) => Some(Box::new(protobuf::columns::ProtobufColumns::new(values.clone()))),
        ValueFormat::JsonSchema(values) => Some(Box::new(json_schema::columns::JsonSchemaColumns::new(values.clone()))),
        ValueFormat::Registry(values) => Some(Box::new(registry::RegistryColumns::new(values.clone()))),
    }
}

/// The `value` field of a file whose values are of the schema registered under `id` (a Protobuf
/// schema: its first message), as `ddl` declares it.
pub fn registered_value_field(schemas: &dyn SchemaSource, id: wire::SchemaId) -> Result<arrow_schema::Field, String> {
    let fields = match schemas.schema_type(id) {
        Some(SchemaType::Avro) => avro::binary::struct_fields(&schemas.avro(id).expect("fetched")?),
        Some(SchemaType::Protobuf) => {
            protobuf::arrow::struct_fields(schemas.protobuf(id).expect("fetched")?.message(&[0])?)
        }
        Some(SchemaType::Json) => return Ok(value_field(&schemas.json_schema(id).expect("fetched")?)),
        None => return Err(format!("schema {id} was not fetched, or cannot be used")),
    };
    Ok(arrow::typed_value_field(fields))
}

/// An Avro schema fetched by ID: its record, or why values naming it cannot be decoded.
pub type Fetched = Result<avro::AvroRecord, String>;
/// A Protobuf schema fetched by ID: its messages, or why values naming it cannot be decoded.
pub type FetchedProtobuf = Result<Arc<protobuf::schema::ProtoFile>, String>;

/// Schemas by ID, fetched (by the registry's client) before the values that name them are encoded.
pub trait SchemaSource: Send + Sync + fmt::Debug {
    /// The Avro record registered under `id`: `None` if it was not fetched; `Err` with the reason when
    /// the registry has no such schema or it cannot be used.
    fn avro(&self, id: wire::SchemaId) -> Option<Fetched>;

    /// The Protobuf schema registered under `id`, as [`avro`](Self::avro) says.
    fn protobuf(&self, id: wire::SchemaId) -> Option<FetchedProtobuf>;

    /// The JSON Schema registered under `id`, as the value schema it declares.
    fn json_schema(&self, id: wire::SchemaId) -> Option<Result<ValueSchema, String>>;

    /// The text of the schema registered under `id`, if it was fetched and can be used.
    fn text(&self, id: wire::SchemaId) -> Option<Arc<str>>;

    /// The type of the schema registered under `id`, if it was fetched and can be used.
    fn schema_type(&self, id: wire::SchemaId) -> Option<SchemaType>;
}

/// The type of a registered schema, which a value's bytes after the header are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaType {
    Avro,
    Protobuf,
    /// JSON Schema.
    Json,
}

impl fmt::Display for SchemaType {
    /// The registry's name for it (`schemaType`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        })
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("the value schema is not JSON: {0}")]
    NotJson(String),
    #[error("value schema, at {path}: {why}")]
    Unsupported { path: String, why: String },
}

/// How a timestamp counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Millis,
    Micros,
}

/// The type of a JSON value, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    Boolean,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    Float,
    Double,
    String,
    /// A string in the 8-4-4-4-12 hexadecimal form.
    Uuid,
    /// A string, one of the symbols.
    Enum(Arc<[String]>),
    /// A count of `unit` since the epoch, or an RFC 3339 string. `utc` is false for Avro's local
    /// timestamps (no time zone).
    Timestamp {
        unit: TimeUnit,
        utc: bool,
    },
    /// Days since the epoch, or a `YYYY-MM-DD` string.
    Date,
    /// A number or numeric string with at most `precision` digits, `scale` of them after the point.
    Decimal {
        precision: u8,
        scale: i8,
    },
    Array(Box<Node>),
    /// An object whose keys are free and whose values all have one type.
    Map(Box<Node>),
    Record(Fields),
}

/// A type, and whether null (or a missing field) is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub ty: ValueType,
    pub nullable: bool,
}

/// One named field of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldNode {
    pub name: String,
    pub node: Node,
}

pub type Fields = Arc<[FieldNode]>;

/// The declared schema of a topic's values: a record (a JSON object) at the top, or (`wrapped`) a
/// schema of another type, each value read as an object of one field, [`avro::NOT_A_RECORD_FIELD`],
/// holding it (a Schema Registry key of JSON Schema `{"type": "string"}`, say).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSchema {
    fields: Fields,
    wrapped: bool,
}

impl ValueSchema {
    /// Reads an Avro schema (`.avsc`) whose top level is a record.
    pub fn from_avro(text: &str) -> Result<Self, SchemaError> {
        avro::parse(text).map(|fields| Self { fields, wrapped: false })
    }

    /// A schema of one field, [`avro::NOT_A_RECORD_FIELD`], that each whole value is read as.
    fn wrapping(node: Node) -> Self {
        Self { fields: Arc::from([FieldNode { name: avro::NOT_A_RECORD_FIELD.into(), node }]), wrapped: true }
    }

    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// Whether each value is read as the one field of an object (see [`ValueSchema`]).
    pub fn wrapped(&self) -> bool {
        self.wrapped
    }
}

/// How record values are archived.
#[derive(Debug, Clone, Default)]
pub enum ValueFormat {
    /// Bytes as they are (the `value` column is binary).
    #[default]
    Raw,
    Json(Arc<JsonValues>),
    /// Avro in the Schema Registry's wire format, decoded by the schemas it names.
    Avro(Arc<AvroValues>),
    /// Protobuf in the Schema Registry's wire format, decoded by the schemas and messages it names.
    Protobuf(Arc<ProtobufValues>),
    /// JSON in the Schema Registry's wire format, typed by the JSON Schemas it names.
    JsonSchema(Arc<JsonSchemaValues>),
    /// Values in the Schema Registry's wire format, each decoded by its schema's own type.
    Registry(Arc<RegistryValues>),
}

impl ValueFormat {
    /// Values in the Schema Registry's wire format of schemas of type `ty` (`None`: of any type, each
    /// file by its first value's), from `schemas`; `keep_raw`: every Avro and Protobuf value keeps its
    /// bytes too.
    pub fn registered(ty: Option<SchemaType>, schemas: Arc<dyn SchemaSource>, keep_raw: bool) -> Self {
        match ty {
            Some(SchemaType::Avro) => {
                ValueFormat::Avro(Arc::new(AvroValues { schemas, keep_raw, successors: Default::default() }))
            }
            Some(SchemaType::Protobuf) => ValueFormat::Protobuf(Arc::new(ProtobufValues { schemas, keep_raw })),
            Some(SchemaType::Json) => ValueFormat::JsonSchema(Arc::new(JsonSchemaValues { schemas })),
            None => ValueFormat::Registry(Arc::new(RegistryValues::new(schemas, keep_raw))),
        }
    }

    pub fn json(&self) -> Option<&Arc<JsonValues>> {
        match self {
            ValueFormat::Json(j) => Some(j),
            ValueFormat::Raw
            | ValueFormat::Avro(_)
            | ValueFormat::Protobuf(_)
            | ValueFormat::JsonSchema(_)
            | ValueFormat::Registry(_) => None,
        }
    }

    /// The schema source of values that name their schemas (`--value-format avro|protobuf|json-schema|
    /// registry`).
    pub fn schemas(&self) -> Option<&Arc<dyn SchemaSource>> {
        match self {
            ValueFormat::Avro(a) => Some(&a.schemas),
            ValueFormat::Protobuf(p) => Some(&p.schemas),
            ValueFormat::JsonSchema(j) => Some(&j.schemas),
            ValueFormat::Registry(r) => Some(&r.avro.schemas),
            ValueFormat::Raw | ValueFormat::Json(_) => None,
        }
    }
}

/// `--value-format json`: the declared schema (none: inferred per file, `--value-schema infer`), and
/// whether every record keeps its raw bytes too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonValues {
    pub declared: Option<ValueSchema>,
    pub keep_raw: bool,
}

/// `--value-format avro`: where the schemas come from, and whether every record keeps its raw bytes.
#[derive(Debug)]
pub struct AvroValues {
    pub schemas: Arc<dyn SchemaSource>,
    pub keep_raw: bool,
    /// Which schema versions supersede which, learned from the values (shared by the profile's files).
    pub successors: avro::columns::Successors,
}

/// `--value-format protobuf`: where the schemas come from, and whether every record keeps its raw
/// bytes (else only those its columns would not give back).
#[derive(Debug)]
pub struct ProtobufValues {
    pub schemas: Arc<dyn SchemaSource>,
    pub keep_raw: bool,
}

/// `--value-format json-schema`: where the schemas come from (every value keeps its bytes).
#[derive(Debug)]
pub struct JsonSchemaValues {
    pub schemas: Arc<dyn SchemaSource>,
}

/// `--value-format registry`: each file's values are of the type of its first value's schema, decoded
/// as that type's format does (one schema source shared by the three).
#[derive(Debug)]
pub struct RegistryValues {
    pub avro: Arc<AvroValues>,
    pub protobuf: Arc<ProtobufValues>,
    pub json_schema: Arc<JsonSchemaValues>,
}

impl RegistryValues {
    pub fn new(schemas: Arc<dyn SchemaSource>, keep_raw: bool) -> Self {
        Self {
            avro: Arc::new(AvroValues { schemas: schemas.clone(), keep_raw, successors: Default::default() }),
            protobuf: Arc::new(ProtobufValues { schemas: schemas.clone(), keep_raw }),
            json_schema: Arc::new(JsonSchemaValues { schemas }),
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Boolean => f.write_str("a boolean"),
            ValueType::Int => f.write_str("a 32-bit integer"),
            ValueType::Long => f.write_str("a 64-bit integer"),
            ValueType::Float | ValueType::Double => f.write_str("a number"),
            ValueType::String => f.write_str("a string"),
            ValueType::Uuid => f.write_str("a UUID string"),
            ValueType::Enum(symbols) => write!(f, "one of {}", symbols.join(", ")),
            ValueType::Timestamp { .. } => f.write_str("a timestamp (epoch count or RFC 3339 string)"),
            ValueType::Date => f.write_str("a date (days since the epoch or YYYY-MM-DD)"),
            ValueType::Decimal { precision, scale } => write!(f, "a decimal({precision}, {scale})"),
            ValueType::Array(_) => f.write_str("an array"),
            ValueType::Map(_) | ValueType::Record(_) => f.write_str("an object"),
        }
    }
}
