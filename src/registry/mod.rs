//! The Schema Registry (`--schema-registry-url`): schemas fetched by ID over its Confluent-compatible
//! REST API (`client`) and kept for the life of the process in a [`SchemaCache`] (an ID never changes
//! meaning), which the encoders read through `values::SchemaSource`. The pipeline fetches a batch's
//! missing IDs before it encodes the batch, so decoding never waits on the network.

mod client;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use thiserror::Error;

pub use self::client::{RegistryAuth, RegistryClient, RegistryOptions};
use crate::values::avro::parse_record;
use crate::values::wire::SchemaId;
use crate::values::{Fetched, SchemaSource};

#[derive(Debug, Error)]
pub enum RegistryError {
    #[error("the Schema Registry at {url} does not answer ({why})")]
    Unavailable { url: String, why: String },
    #[error("the Schema Registry at {url} refused the request (HTTP {status}): check --schema-registry-username/-password or --schema-registry-token")]
    Refused { url: String, status: u16 },
    #[error("the Schema Registry at {url} has no schema {id} (HTTP 404)")]
    NotFound { url: String, id: SchemaId },
    #[error("the Schema Registry at {url} answered something unexpected: {why}")]
    BadResponse { url: String, why: String },
}

impl RegistryError {
    /// An answer that stands: the registry has no schema under this ID (its values are misfits). Every
    /// other error is worth trying again.
    pub fn is_final(&self) -> bool {
        matches!(self, RegistryError::NotFound { .. })
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
    /// Other subjects' schemas this one refers to.
    pub references: usize,
}

/// Every schema fetched so far, and why an ID cannot be used when it cannot.
#[derive(Debug, Default)]
pub struct SchemaCache {
    known: RwLock<HashMap<SchemaId, Cached>>,
}

/// What fetching a schema ended in, and its text when it can be used.
#[derive(Debug)]
struct Cached {
    fetched: Fetched,
    text: Option<Arc<str>>,
}

impl SchemaCache {
    /// Whether `id` was fetched (or found missing).
    pub fn has(&self, id: SchemaId) -> bool {
        self.known.read().expect("schema cache").contains_key(&id)
    }

    /// Keeps what fetching `id` ended in: its Avro record, or why it cannot decode values.
    pub fn insert(&self, id: SchemaId, fetched: Result<RegisteredSchema, RegistryError>) {
        let entry = match fetched.map_err(|e| e.to_string()) {
            Ok(registered) => match avro_record(&registered) {
                Ok(record) => Cached { fetched: Ok(record), text: Some(Arc::from(registered.schema)) },
                Err(why) => Cached { fetched: Err(why), text: None },
            },
            Err(why) => Cached { fetched: Err(why), text: None },
        };
        self.known.write().expect("schema cache").insert(id, entry);
    }
}

impl SchemaSource for SchemaCache {
    fn avro(&self, id: SchemaId) -> Option<Fetched> {
        self.known.read().expect("schema cache").get(&id).map(|cached| cached.fetched.clone())
    }

    fn text(&self, id: SchemaId) -> Option<Arc<str>> {
        self.known.read().expect("schema cache").get(&id).and_then(|cached| cached.text.clone())
    }
}

/// The record a registered schema declares, when it is Avro this archiver can decode.
fn avro_record(registered: &RegisteredSchema) -> Fetched {
    if registered.schema_type != "AVRO" {
        return Err(format!("a {} schema (--value-format avro decodes Avro only)", registered.schema_type));
    }
    if registered.references > 0 {
        return Err("it refers to other subjects' schemas, which is not supported yet".into());
    }
    parse_record(&registered.schema).map_err(|e| e.to_string())
}
