//! The Schema Registry (`--schema-registry-url`): schemas fetched by ID over its Confluent-compatible
//! REST API (`client`) and kept for the life of the process in a [`SchemaCache`] (an ID never changes
//! meaning), which the encoders read through `values::SchemaSource`. The pipeline fetches a batch's
//! missing IDs before it encodes the batch, so decoding never waits on the network.

mod client;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use thiserror::Error;

pub use self::client::{RegistryAuth, RegistryClient, RegistryOptions};
use crate::values::avro::{parse_record, AvroRecord};
use crate::values::protobuf::schema::{compile, ProtoFile};
use crate::values::wire::SchemaId;
use crate::values::{json_schema, Fetched, FetchedProtobuf, SchemaSource, SchemaType, ValueSchema};

#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("the Schema Registry at {url} does not answer ({why})")]
    Unavailable { url: String, why: String },
    #[error("the Schema Registry at {url} refused the request (HTTP {status}): check --schema-registry-username/-password or --schema-registry-token")]
    Refused { url: String, status: u16 },
    #[error("the Schema Registry at {url} has no schema {id} (HTTP 404)")]
    NotFound { url: String, id: SchemaId },
    #[error("the Schema Registry at {url} has no subject {subject:?} (HTTP 404): check the subject's name")]
    NoSubject { url: String, subject: String },
    #[error("the Schema Registry at {url} has no version {version} of subject {subject:?}, which the schema refers to (HTTP 404)")]
    MissingReference { url: String, subject: String, version: i64 },
    #[error("the Schema Registry at {url} cannot be reached over TLS ({why}): check its certificate, or give the CA that signed it as --schema-registry-ca")]
    Tls { url: String, why: String },
    #[error("the schema's references at the Schema Registry at {url} cannot be followed: {why}")]
    BadReferences { url: String, why: String },
    #[error("the Schema Registry at {url} answered something unexpected: {why}")]
    BadResponse { url: String, why: String },
}

impl RegistryError {
    /// An answer that stands: the registry has no schema under this ID, or not the schemas it refers
    /// to (its values are misfits). Every other error is worth trying again.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            RegistryError::NotFound { .. }
                | RegistryError::MissingReference { .. }
                | RegistryError::BadReferences { .. }
        )
    }

    /// The registry is down, slow or overloaded (rather than refusing or misconfigured).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }
}

/// A schema as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    /// `AVRO`, `PROTOBUF` or `JSON` (the registry leaves it out for Avro).
    pub schema_type: String,
    pub schema: String,
    /// The schemas this one refers to, and the ones they refer to: each one's name (a Protobuf
    /// schema's import) and text (fetched for Protobuf schemas only; empty for the others).
    pub references: Vec<(String, String)>,
}

/// Every schema fetched so far, and why an ID cannot be used when it cannot.
#[derive(Debug, Default)]
pub struct SchemaCache {
    known: RwLock<HashMap<SchemaId, Cached>>,
}

/// What fetching a schema ended in, and its text when it can be used.
#[derive(Debug)]
struct Cached {
    fetched: Result<Parsed, String>,
    /// `AVRO`, `PROTOBUF` or `JSON` (empty when it could not be fetched).
    schema_type: String,
    text: Option<Arc<str>>,
}

/// A schema as the encoders use it.
#[derive(Debug, Clone)]
enum Parsed {
    Avro(AvroRecord),
    Protobuf(Arc<ProtoFile>),
    Json(ValueSchema),
}

impl SchemaCache {
    /// Whether `id` was fetched (or found missing).
    pub fn has(&self, id: SchemaId) -> bool {
        self.known.read().expect("schema cache").contains_key(&id)
    }

    /// Whether `id` was fetched and is a schema the encoders can use (of some format), or why not.
    pub fn usable(&self, id: SchemaId) -> Option<Result<(), String>> {
        self.known
            .read()
            .expect("schema cache")
            .get(&id)
            .map(|cached| cached.fetched.as_ref().map(drop).map_err(Clone::clone))
    }

    /// Keeps what fetching `id` ended in: its schema, or why it cannot decode values.
    pub fn insert(&self, id: SchemaId, fetched: Result<RegisteredSchema, RegistryError>) {
        let entry = match fetched.map_err(|e| e.to_string()) {
            Ok(registered) => {
                let schema_type = registered.schema_type.clone();
                match parse(&registered) {
                    Ok(parsed) => Cached { fetched: Ok(parsed), schema_type, text: Some(Arc::from(registered.schema)) },
                    Err(why) => Cached { fetched: Err(why), schema_type, text: None },
                }
            }
            Err(why) => Cached { fetched: Err(why), schema_type: String::new(), text: None },
        };
        self.known.write().expect("schema cache").insert(id, entry);
    }
}

impl SchemaSource for SchemaCache {
    fn avro(&self, id: SchemaId) -> Option<Fetched> {
        self.known.read().expect("schema cache").get(&id).map(|cached| match &cached.fetched {
            Ok(Parsed::Avro(record)) => Ok(record.clone()),
            Ok(_) => Err(format!("its type is {}, not AVRO as this file's values", cached.schema_type)),
            Err(why) => Err(why.clone()),
        })
    }

    fn protobuf(&self, id: SchemaId) -> Option<FetchedProtobuf> {
        self.known.read().expect("schema cache").get(&id).map(|cached| match &cached.fetched {
            Ok(Parsed::Protobuf(file)) => Ok(file.clone()),
            Ok(_) => Err(format!("its type is {}, not PROTOBUF as this file's values", cached.schema_type)),
            Err(why) => Err(why.clone()),
        })
    }

    fn json_schema(&self, id: SchemaId) -> Option<Result<ValueSchema, String>> {
        self.known.read().expect("schema cache").get(&id).map(|cached| match &cached.fetched {
            Ok(Parsed::Json(schema)) => Ok(schema.clone()),
            Ok(_) => Err(format!("its type is {}, not JSON as this file's values", cached.schema_type)),
            Err(why) => Err(why.clone()),
        })
    }

    fn text(&self, id: SchemaId) -> Option<Arc<str>> {
        self.known.read().expect("schema cache").get(&id).and_then(|cached| cached.text.clone())
    }

    fn schema_type(&self, id: SchemaId) -> Option<SchemaType> {
        self.known.read().expect("schema cache").get(&id).and_then(|cached| match cached.fetched {
            Ok(Parsed::Avro(_)) => Some(SchemaType::Avro),
            Ok(Parsed::Protobuf(_)) => Some(SchemaType::Protobuf),
            Ok(Parsed::Json(_)) => Some(SchemaType::Json),
            Err(_) => None,
        })
    }
}

/// A registered schema as the encoders use it, when it is one this archiver can decode.
fn parse(registered: &RegisteredSchema) -> Result<Parsed, String> {
    match registered.schema_type.as_str() {
        "AVRO" if !registered.references.is_empty() => {
            Err("it refers to other subjects' schemas, which Avro values do not support yet".into())
        }
        "AVRO" => parse_record(&registered.schema).map(Parsed::Avro).map_err(|e| e.to_string()),
        "PROTOBUF" => compile(&registered.schema, &registered.references)
            .map(|file| Parsed::Protobuf(Arc::new(file)))
            .map_err(|e| e.to_string()),
        "JSON" => json_schema::parse(&registered.schema).map(Parsed::Json).map_err(|e| e.to_string()),
        other => Err(format!("a {other} schema, which is not supported yet")),
    }
}
