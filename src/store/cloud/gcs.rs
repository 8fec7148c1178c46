//! Google Cloud Storage: object_store's client for reads, listing and deletes; creates through the JSON
//! API with `ifGenerationMatch=0` — a media upload for a small object, a resumable upload in chunks for
//! a large one (the precondition is checked again when the last chunk lands, so a racing writer's object
//! is never replaced and ours never appears half-written).

use std::sync::Arc;

use async_trait::async_trait;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, LOCATION, RANGE};
use http::{HeaderMap, Method};
use object_store::client::{HttpClient, HttpConnector, HttpRequest, HttpRequestBody, ReqwestConnector};
use object_store::gcp::{GcpCredential, GcpCredentialProvider, GoogleCloudStorageBuilder};
use object_store::StaticCredentialProvider;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

use super::errors::{classify, from_status, Op};
use super::{client_options, exchange, retry_config, Answer, Bodies, CloudStore, CreateIfAbsent, GcsOptions};
use crate::encode::spool::SpoolData;
use crate::store::{PutOutcome, StoreError};

const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";
/// A resumable upload's chunks are multiples of 256 KiB (all but the last).
const CHUNK_ALIGN: u64 = 256 << 10;

/// Opens `gs://bucket`. Credentials: `--gcs-credentials`, else the standard chain (the GOOGLE_*
/// variables, GOOGLE_APPLICATION_CREDENTIALS, gcloud's application default credentials, the metadata
/// server); none with `anonymous`. Objects of `part_size` × 2 or more go up in `part_size` chunks.
pub fn connect_gcs(
    bucket: &str,
    options: &GcsOptions,
    part_size: u64,
    concurrency: usize,
) -> Result<CloudStore, StoreError> {
    let endpoint = options.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT).trim_end_matches('/').to_string();
    let describe = match &options.endpoint {
        Some(e) => format!("gs://{bucket} (endpoint {e})"),
        None => format!("gs://{bucket}"),
    };
    let unusable = |e: String| StoreError::Permanent {
        what: format!("cannot use {describe}: {e}"),
        fix: "check --gcs-endpoint and --gcs-credentials (a service-account key or application default credentials \
              JSON file), or GOOGLE_APPLICATION_CREDENTIALS"
            .into(),
    };
    let mut builder = GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(bucket)
        .with_base_url(&endpoint)
        .with_retry(retry_config())
        .with_client_options(client_options(options.endpoint.as_deref()));
    if options.anonymous {
        // An empty bearer token: no Authorization header on any request (object_store's skip_signature
        // still asks the metadata server for a token before a delete).
        let none = StaticCredentialProvider::new(GcpCredential { bearer: String::new() });
        builder = builder.with_credentials(Arc::new(none));
    } else if let Some(path) = &options.credentials {
        builder = builder.with_application_credentials(path.display().to_string());
    }
    let backend = builder.build().map_err(|e| unusable(e.to_string()))?;
    let http = ReqwestConnector::default()
        .connect(&client_options(options.endpoint.as_deref()))
        .map_err(|e| unusable(e.to_string()))?;
    let writer = GcsWriter {
        http,
        credentials: backend.credentials().clone(),
        endpoint,
        bucket: bucket.to_string(),
        chunk: (part_size / CHUNK_ALIGN).max(1) * CHUNK_ALIGN,
        single_limit: part_size * 2,
        bodies: Bodies::new(part_size, concurrency),
        describe: describe.clone(),
    };
    Ok(CloudStore { backend: Arc::new(backend), writer: Box::new(writer), describe })
}

struct GcsWriter {
    http: HttpClient,
    /// An empty bearer token when anonymous.
    credentials: GcpCredentialProvider,
    endpoint: String,
    bucket: String,
    chunk: u64,
    single_limit: u64,
    bodies: Bodies,
    describe: String,
}

impl GcsWriter {
    fn upload_url(&self, key: &str, kind: &str) -> String {
        let (bucket, name) =
            (utf8_percent_encode(&self.bucket, NON_ALPHANUMERIC), utf8_percent_encode(key, NON_ALPHANUMERIC));
        format!("{}/upload/storage/v1/b/{bucket}/o?uploadType={kind}&ifGenerationMatch=0&name={name}", self.endpoint)
    }

    async fn request(
        &self,
        method: Method,
        url: &str,
        key: &str,
        headers: &[(http::HeaderName, String)],
    ) -> Result<http::request::Builder, StoreError> {
        let mut builder = http::Request::builder().method(method).uri(url);
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        let credential =
            self.credentials.get_credential().await.map_err(|e| classify(Op::Put, key, &self.describe, e))?;
        if !credential.bearer.is_empty() {
            builder = builder.header(AUTHORIZATION, format!("Bearer {}", credential.bearer));
        }
        Ok(builder)
    }

    /// Sends a request whose body is `len` bytes, within its deadline.
    async fn send(&self, key: &str, len: u64, request: Result<HttpRequest, http::Error>) -> Result<Answer, StoreError> {
        let request = request.map_err(|e| StoreError::Permanent {
            what: format!("writing {key} on {}: the request cannot be made: {e}", self.describe),
            fix: "check --gcs-endpoint".into(),
        })?;
        exchange(&self.http, request, len, key, &self.describe).await
    }

    /// One request: the whole object.
    async fn media(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let body = self.bodies.read(data, 0, len).await?;
        let headers = [(CONTENT_TYPE, "application/octet-stream".to_string()), (CONTENT_LENGTH, len.to_string())];
        let request = self.request(Method::POST, &self.upload_url(key, "media"), key, &headers).await?;
        match self.send(key, len, request.body(HttpRequestBody::from(body.payload.clone()))).await? {
            (200 | 201, ..) => Ok(PutOutcome::Created),
            (412, ..) => Ok(PutOutcome::AlreadyExists),
            (status, _, text) => Err(from_status(Op::Put, key, &self.describe, status, &text)),
        }
    }

    /// A resumable upload: a session, then the chunks in order; the object appears with the last one.
    async fn resumable(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let headers = [
            (http::HeaderName::from_static("x-upload-content-type"), "application/octet-stream".to_string()),
            (http::HeaderName::from_static("x-upload-content-length"), len.to_string()),
            (CONTENT_LENGTH, "0".to_string()),
        ];
        let request = self.request(Method::POST, &self.upload_url(key, "resumable"), key, &headers).await?;
        let session = match self.send(key, 0, request.body(HttpRequestBody::empty())).await? {
            (200 | 201, headers, _) => headers.get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_string),
            (412, ..) => return Ok(PutOutcome::AlreadyExists),
            (status, _, text) => return Err(from_status(Op::Put, key, &self.describe, status, &text)),
        };
        let session = session.ok_or_else(|| {
            StoreError::Transient(format!("{} began a resumable upload of {key} without a session URL", self.describe))
        })?;
        let mut offset = 0;
        while offset < len {
            let size = self.chunk.min(len - offset);
            let body = self.bodies.read(data, offset, size).await?;
            let request = http::Request::builder()
                .method(Method::PUT)
                .uri(&session)
                .header(CONTENT_LENGTH, size)
                .header(CONTENT_RANGE, format!("bytes {offset}-{}/{len}", offset + size - 1))
                .body(HttpRequestBody::from(body.payload.clone()));
            let answer = self.send(key, size, request).await?;
            drop(body);
            match answer {
                (200 | 201, ..) if offset + size == len => return Ok(PutOutcome::Created),
                // "Resume Incomplete": the Range header says how much the server holds (none: nothing).
                // A chunk that moved nothing forward ends this attempt; the next one starts afresh.
                (308, headers, _) => match persisted(&headers) {
                    held if held > offset => offset = held,
                    _ => break,
                },
                (412, ..) => return Ok(PutOutcome::AlreadyExists),
                // The session expired or was cancelled: the next attempt starts a new one.
                (404 | 410, _, text) => {
                    let why = format!("{} ended the resumable upload of {key}: {}", self.describe, text.trim());
                    return Err(StoreError::Transient(why));
                }
                (status, _, text) => return Err(from_status(Op::Put, key, &self.describe, status, &text)),
            }
        }
        Err(StoreError::Transient(format!(
            "{} held no more of the resumable upload of {key} after a chunk",
            self.describe
        )))
    }
}

/// The bytes a resumable session holds, from a 308's `Range: bytes=0-N`; none without one.
fn persisted(headers: &HeaderMap) -> u64 {
    let held = || -> Option<u64> {
        let range = headers.get(RANGE)?.to_str().ok()?;
        range.strip_prefix("bytes=0-")?.parse::<u64>().ok().map(|last| last + 1)
    };
    held().unwrap_or(0)
}

#[async_trait]
impl CreateIfAbsent for GcsWriter {
    async fn create(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        if len < self.single_limit {
            self.media(key, data, len).await
        } else {
            self.resumable(key, data, len).await
        }
    }
}
