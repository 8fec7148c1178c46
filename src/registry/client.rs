//! The registry's REST API over HTTP or HTTPS: `GET /schemas/ids/{id}` (and the schemas it refers to),
//! a subject's newest version (for `ddl`) and, to check it answers, `GET /subjects`. Basic authentication or a bearer token; HTTPS trusts the
//! system's root certificates, or the CA given (`--schema-registry-ca`). Only an ID the
//! registry says it has no schema for (Confluent's error 40403) is an answer that stands; anything else
//! that fails may be fixed — a registry coming back, credentials or a URL corrected — and is retried.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION};
use hyper::{Request, StatusCode};
use rustls::pki_types::CertificateDer;
use serde::Deserialize;

use super::{RegisteredSchema, RegistryError};
use crate::http::{path_segment, send, HttpClient, HttpError};
use crate::values::wire::SchemaId;

/// How long one request may take before the registry counts as unavailable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read (schemas are kilobytes; this bounds a misbehaving server).
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// Confluent's error code for an ID the registry has no schema for.
const SCHEMA_NOT_FOUND: i64 = 40403;

/// The `error_code` of a registry's JSON error answer.
fn error_code(body: &[u8]) -> Option<i64> {
    serde_json::from_slice::<serde_json::Value>(body).ok()?.get("error_code")?.as_i64()
}

/// How requests authenticate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryAuth {
    None,
    Basic { username: String, password: String },
    Bearer(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryOptions {
    /// The API's base URL, e.g. http://registry:8081 (Apicurio: .../apis/ccompat/v7).
    pub url: String,
    pub auth: RegistryAuth,
    /// The certificates an HTTPS registry's is to be signed by (`None`: the system's roots).
    pub ca: Option<Vec<CertificateDer<'static>>>,
}

pub struct RegistryClient {
    options: RegistryOptions,
    http: HttpClient,
}

/// A schema as `GET /schemas/ids/{id}` and `GET /subjects/{subject}/versions/{version}` answer.
#[derive(Deserialize)]
struct SchemaAnswer {
    schema: String,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
    /// Read one by one (see [`Reference`]): one this client cannot read makes the schema unusable, not
    /// the answer unreadable (which would be retried).
    #[serde(default)]
    references: Vec<serde_json::Value>,
}

/// What `GET /subjects/{subject}/versions/latest` answers: the schema, and its ID.
#[derive(Deserialize)]
struct VersionAnswer {
    id: u32,
    #[serde(flatten)]
    schema: SchemaAnswer,
}

/// Another subject's schema that a schema refers to, and the name it is imported by.
#[derive(Deserialize)]
struct Reference {
    name: String,
    subject: String,
    version: i64,
}

/// The most schemas one schema may refer to, directly or not (a cycle or a hostile registry must end).
const MAX_REFERENCES: usize = 256;

impl RegistryClient {
    pub fn new(options: RegistryOptions) -> Self {
        let http = crate::http::client(options.ca.as_deref());
        Self { options, http }
    }

    pub fn url(&self) -> &str {
        &self.options.url
    }

    /// The schema registered under `id`.
    pub async fn schema(&self, id: SchemaId) -> Result<RegisteredSchema, RegistryError> {
        match self.get(&format!("/schemas/ids/{id}")).await? {
            (StatusCode::OK, body) => {
                let parsed: SchemaAnswer = serde_json::from_slice(&body).map_err(|e| self.bad(e.to_string()))?;
                self.registered(parsed).await
            }
            // Confluent's "schema not found" (Apicurio's Confluent API says the same); any other 404 is
            // a wrong URL, not an unknown ID.
            (StatusCode::NOT_FOUND, body) if error_code(&body) == Some(SCHEMA_NOT_FOUND) => {
                Err(RegistryError::NotFound { url: self.options.url.clone(), id })
            }
            (status, body) => Err(self.refused_or_unavailable(status, &body)),
        }
    }

    /// The newest version of `subject`: its schema's ID, and the schema.
    pub async fn latest(&self, subject: &str) -> Result<(SchemaId, RegisteredSchema), RegistryError> {
        match self.get(&format!("/subjects/{}/versions/latest", path_segment(subject))).await? {
            (StatusCode::OK, body) => {
                let parsed: VersionAnswer = serde_json::from_slice(&body).map_err(|e| self.bad(e.to_string()))?;
                Ok((SchemaId(parsed.id), self.registered(parsed.schema).await?))
            }
            (StatusCode::NOT_FOUND, body) if error_code(&body).is_some() => {
                Err(RegistryError::NoSubject { url: self.options.url.clone(), subject: subject.to_string() })
            }
            (status, body) => Err(self.refused_or_unavailable(status, &body)),
        }
    }

    /// A schema answer as the encoders take it, its references fetched.
    async fn registered(&self, parsed: SchemaAnswer) -> Result<RegisteredSchema, RegistryError> {
        let schema_type = parsed.schema_type.unwrap_or_else(|| "AVRO".into());
        // Only Protobuf schemas with references are decoded: the others are only counted.
        let references = match schema_type.as_str() {
            "PROTOBUF" => self.references(self.read_references(parsed.references)?).await?,
            _ => parsed.references.iter().map(|r| (r.to_string(), String::new())).collect(),
        };
        Ok(RegisteredSchema { schema_type, schema: parsed.schema, references })
    }

    fn read_references(&self, references: Vec<serde_json::Value>) -> Result<Vec<Reference>, RegistryError> {
        references
            .into_iter()
            .map(|r| {
                serde_json::from_value(r.clone()).map_err(|e| RegistryError::BadReferences {
                    url: self.options.url.clone(),
                    why: format!("{r}: {e}"),
                })
            })
            .collect()
    }

    /// The schemas `todo` names, and the ones they name, each once: its name and text.
    async fn references(&self, mut todo: Vec<Reference>) -> Result<Vec<(String, String)>, RegistryError> {
        let mut found: Vec<(String, String)> = Vec::new();
        while let Some(reference) = todo.pop() {
            if found.iter().any(|(name, _)| *name == reference.name) {
                continue;
            }
            if found.len() == MAX_REFERENCES || todo.len() > MAX_REFERENCES {
                let why = format!("it refers to more than {MAX_REFERENCES} others");
                return Err(RegistryError::BadReferences { url: self.options.url.clone(), why });
            }
            let Reference { name, subject, version } = reference;
            // A soft-deleted version is still the one the schema refers to.
            let path = format!("/subjects/{}/versions/{version}?deleted=true", path_segment(&subject));
            match self.get(&path).await? {
                (StatusCode::OK, body) => {
                    let parsed: SchemaAnswer = serde_json::from_slice(&body).map_err(|e| self.bad(e.to_string()))?;
                    todo.extend(self.read_references(parsed.references)?);
                    found.push((name, parsed.schema));
                }
                (StatusCode::NOT_FOUND, body) if error_code(&body).is_some() => {
                    return Err(RegistryError::MissingReference { url: self.options.url.clone(), subject, version })
                }
                (status, body) => return Err(self.refused_or_unavailable(status, &body)),
            }
        }
        Ok(found)
    }

    /// How many subjects the registry holds: it answers, and takes the credentials.
    pub async fn subjects(&self) -> Result<usize, RegistryError> {
        match self.get("/subjects").await? {
            (StatusCode::OK, body) => serde_json::from_slice::<Vec<String>>(&body)
                .map(|s| s.len())
                .map_err(|e| self.bad(format!("GET /subjects: {e}"))),
            (status, body) => Err(self.refused_or_unavailable(status, &body)),
        }
    }

    async fn get(&self, path: &str) -> Result<(StatusCode, Bytes), RegistryError> {
        let url = format!("{}{path}", self.options.url.trim_end_matches('/'));
        let mut request = Request::get(&url).header(ACCEPT, "application/vnd.schemaregistry.v1+json, application/json");
        match &self.options.auth {
            RegistryAuth::None => {}
            RegistryAuth::Basic { username, password } => {
                let token = B64.encode(format!("{username}:{password}"));
                request = request.header(AUTHORIZATION, format!("Basic {token}"));
            }
            RegistryAuth::Bearer(token) => request = request.header(AUTHORIZATION, format!("Bearer {token}")),
        }
        let request = request.body(Full::new(Bytes::new())).map_err(|e| self.bad(e.to_string()))?;
        send(&self.http, request, MAX_ANSWER_BYTES, REQUEST_TIMEOUT).await.map_err(|e| match e {
            HttpError::Tls(why) => RegistryError::Tls { url: self.options.url.clone(), why },
            HttpError::Unavailable(why) => RegistryError::Unavailable { url: self.options.url.clone(), why },
            HttpError::TooLarge(_) => self.bad(e.to_string()),
        })
    }

    fn bad(&self, why: String) -> RegistryError {
        RegistryError::BadResponse { url: self.options.url.clone(), why }
    }

    fn refused_or_unavailable(&self, status: StatusCode, body: &[u8]) -> RegistryError {
        let url = self.options.url.clone();
        match status {
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => RegistryError::Refused { url, status: status.as_u16() },
            s if s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::REQUEST_TIMEOUT => {
                RegistryError::Unavailable { url, why: format!("HTTP {s}") }
            }
            StatusCode::NOT_FOUND => self.bad(
                "HTTP 404: no Schema Registry API there; check --schema-registry-url (Apicurio Registry's is at \
                 /apis/ccompat/v7)"
                    .into(),
            ),
            s => self.bad(format!("HTTP {s}: {}", String::from_utf8_lossy(&body[..body.len().min(200)]))),
        }
    }
}
