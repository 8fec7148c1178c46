//! S3 (and S3-compatible) object store on aws-sdk-s3. Uploads use `If-None-Match: *` so nothing is ever
//! overwritten; large files go up as multipart uploads with parts sent in parallel, and only
//! CompleteMultipartUpload makes them visible. Upload bodies are not hashed for the SigV4 signature
//! (SHA-256 of every byte was the largest single CPU cost of `run`); their integrity is checked by the
//! CRC32 checksum sent with them, which S3 verifies.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::{ByteStream, Length};
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, ServerSideEncryption, StorageClass as S3Class};
use aws_sdk_s3::Client;
use base64::Engine;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use tokio::sync::{Semaphore, SemaphorePermit};

use super::options::{ObjectOptions, Sse};
use super::{ObjectStore, PutOutcome, StoreError};
use crate::archive::keys::{ListPage, ListRequest};
use crate::archive::object_key::Prefix;
use crate::encode::spool::SpoolData;
use crate::store::s3_body;
use crate::store::s3_errors::{classify, ErrorClass};
use crate::store::stale::{PendingSeen, PendingUpload};

/// Multipart part size unless set otherwise (`--upload-part-size`).
pub const DEFAULT_PART_SIZE: u64 = 8 << 20;
/// Parts of one multipart upload sent at once unless set otherwise (`--upload-concurrency`).
pub const DEFAULT_PART_CONCURRENCY: usize = 4;
/// Timeout of one HTTP attempt unless set otherwise (`--s3-attempt-timeout`).
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
/// Requests in flight at once, across all partitions, unless set otherwise (`--s3-max-requests`).
pub const DEFAULT_MAX_REQUESTS: usize = 64;
/// S3's smallest part (all but the last).
pub const MIN_PART_SIZE: u64 = 5 << 20;

/// How to reach S3 and how to upload (the bucket is the destination's). Build it with
/// [`S3Options::new`].
#[derive(Debug, Clone)]
pub struct S3Options {
    /// A custom endpoint (LocalStack, MinIO, ...); implies path-style addressing.
    endpoint: Option<String>,
    region: Option<String>,
    /// Files of twice this size or more go up as multipart uploads in parts of this size.
    part_size: u64,
    /// Parts of one multipart upload sent at once.
    part_concurrency: usize,
    /// Upper bound for one HTTP attempt.
    attempt_timeout: Duration,
    /// Requests in flight at once; more wait for a free slot.
    max_requests: usize,
    /// Encryption and storage class of every object written; the bucket owner of every request.
    objects: ObjectOptions,
}

impl S3Options {
    /// Reaches S3 at `endpoint` when given (`region` or the AWS chain's), uploading with the default
    /// part size, concurrency and attempt timeout.
    pub fn new(endpoint: Option<String>, region: Option<String>) -> Self {
        Self {
            endpoint,
            region,
            part_size: DEFAULT_PART_SIZE,
            part_concurrency: DEFAULT_PART_CONCURRENCY,
            attempt_timeout: DEFAULT_ATTEMPT_TIMEOUT,
            max_requests: DEFAULT_MAX_REQUESTS,
            objects: ObjectOptions::default(),
        }
    }

    /// Multipart uploads in parts of `part_size` (files of twice that or more), `concurrency` at once.
    pub fn uploads(self, part_size: u64, concurrency: usize) -> Self {
        Self { part_size, part_concurrency: concurrency.max(1), ..self }
    }

    pub fn attempt_timeout(self, attempt_timeout: Duration) -> Self {
        Self { attempt_timeout, ..self }
    }

    /// At most `max_requests` requests in flight at once (a thousand partitions rolling together
    /// otherwise open a thousand connections, which S3-compatible servers answer by resetting them).
    pub fn max_requests(self, max_requests: usize) -> Self {
        Self { max_requests: max_requests.max(1), ..self }
    }

    /// Writes every object with these options, and checks the bucket owner on every request.
    pub fn objects(self, objects: ObjectOptions) -> Self {
        Self { objects, ..self }
    }

    pub fn part_size(&self) -> u64 {
        self.part_size
    }

    pub fn part_concurrency(&self) -> usize {
        self.part_concurrency
    }

    /// The custom endpoint, if one is set.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    fn owner(&self) -> Option<String> {
        self.objects.expected_bucket_owner.clone()
    }

    fn sse(&self) -> (Option<ServerSideEncryption>, Option<String>) {
        match &self.objects.sse {
            None => (None, None),
            Some(Sse::Aes256) => (Some(ServerSideEncryption::Aes256), None),
            Some(Sse::Kms { key_id }) => (Some(ServerSideEncryption::AwsKms), key_id.clone()),
        }
    }

    fn storage_class(&self) -> Option<S3Class> {
        self.objects.storage_class.map(|c| S3Class::from(c.as_str()))
    }
}

pub struct S3Store {
    client: Client,
    bucket: String,
    settings: S3Options,
    /// Our multipart uploads seen pending, and since when (see `store::stale`).
    pending_seen: std::sync::Mutex<PendingSeen>,
    /// One permit per request in flight.
    requests: Semaphore,
}

impl S3Store {
    /// Builds the client from aws-config's standard chains (credentials, region, `AWS_ENDPOINT_URL`).
    pub async fn connect(bucket: impl Into<String>, settings: S3Options) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest());
        if let Some(ep) = &settings.endpoint {
            loader = loader.endpoint_url(ep);
        }
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        let shared = loader.load().await;
        let region = shared.region().cloned().unwrap_or_else(|| Region::new("us-east-1"));
        // A custom endpoint (flag or AWS_ENDPOINT_URL) is almost always an S3-compatible server that
        // does not serve virtual-hosted bucket names.
        let path_style = shared.endpoint_url().is_some();
        let config = aws_sdk_s3::config::Builder::from(&shared)
            .region(region)
            .force_path_style(path_style)
            .retry_config(RetryConfig::standard().with_max_attempts(3))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(5))
                    .operation_attempt_timeout(settings.attempt_timeout)
                    .build(),
            )
            .build();
        let requests = Semaphore::new(settings.max_requests);
        Self {
            client: Client::from_conf(config),
            bucket: bucket.into(),
            settings,
            pending_seen: Default::default(),
            requests,
        }
    }

    /// Waits for a free request slot; the request goes out while the permit lives.
    async fn slot(&self) -> SemaphorePermit<'_> {
        self.requests.acquire().await.expect("the request semaphore is never closed")
    }

    /// Aborts our multipart uploads under `prefix` that were started more than `older_than` ago and
    /// never completed (left by crashes), by the store's clock and by this store's own sightings: the
    /// first call only takes note (see `store::stale`). Returns the keys aborted.
    pub async fn abort_stale_uploads(&self, prefix: &Prefix, older_than: Duration) -> Result<Vec<String>, StoreError> {
        let bucket = &self.bucket;
        let mut pending = Vec::new();
        let (mut key_marker, mut id_marker) = (None::<String>, None::<String>);
        loop {
            let slot = self.slot().await;
            let out = self
                .client
                .list_multipart_uploads()
                .bucket(bucket)
                .set_expected_bucket_owner(self.settings.owner())
                .prefix(prefix.as_str())
                .set_key_marker(key_marker.clone())
                .set_upload_id_marker(id_marker.clone())
                .send()
                .await
                .map_err(|e| self.classify("ListMultipartUploads", prefix.as_str(), e))?;
            drop(slot);
            for u in out.uploads() {
                if let (Some(key), Some(id), Some(started)) = (u.key(), u.upload_id(), u.initiated()) {
                    let started = SystemTime::try_from(*started).unwrap_or(SystemTime::UNIX_EPOCH);
                    pending.push(PendingUpload { key: key.to_string(), id: id.to_string(), started });
                }
            }
            if !out.is_truncated().unwrap_or(false) {
                break;
            }
            key_marker = out.next_key_marker().map(str::to_string);
            id_marker = out.next_upload_id_marker().map(str::to_string);
            if key_marker.is_none() && id_marker.is_none() {
                break;
            }
        }
        let stale: Vec<PendingUpload> = {
            let mut seen = self.pending_seen.lock().expect("pending uploads");
            seen.observe(&pending, prefix, SystemTime::now(), older_than).into_iter().cloned().collect()
        };
        let mut aborted = Vec::new();
        for u in stale {
            let _slot = self.slot().await;
            self.client
                .abort_multipart_upload()
                .bucket(bucket)
                .set_expected_bucket_owner(self.settings.owner())
                .key(&u.key)
                .upload_id(&u.id)
                .send()
                .await
                .map_err(|e| self.classify("AbortMultipartUpload", &u.key, e))?;
            self.pending_seen.lock().expect("pending uploads").forget(&u.id);
            aborted.push(u.key);
        }
        Ok(aborted)
    }

    /// The underlying client, for tests that need bucket-level calls.
    pub fn client(&self) -> &Client {
        &self.client
    }

    fn classify<E>(&self, op: &str, key: &str, err: SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let status = err.raw_response().map(|r| r.status().as_u16());
        let code = err.code().map(str::to_string);
        let bucket = &self.bucket;
        let detail = DisplayErrorContext(&err).to_string();
        if matches!(err, SdkError::ConstructionFailure(_)) {
            return StoreError::Permanent {
                what: format!("could not build the S3 request ({op} {key}): {detail}"),
                fix: "check the AWS credentials and region configuration".into(),
            };
        }
        match classify(status, code.as_deref()) {
            ErrorClass::NoSuchBucket => StoreError::Permanent {
                what: format!("bucket {bucket:?} does not exist ({op} {key})"),
                fix: "create the bucket, or check --dest and --s3-endpoint".into(),
            },
            ErrorClass::AccessDenied => StoreError::Permanent {
                what: format!("access to bucket {bucket:?} was denied ({op} {key}): {}", code.unwrap_or_default()),
                fix: match &self.settings.objects.expected_bucket_owner {
                    Some(owner) => format!(
                        "check that account {owner} (--s3-expected-bucket-owner) owns the bucket, and the credentials \
                         (AWS_ACCESS_KEY_ID/AWS_PROFILE) may read, write and list it"
                    ),
                    None => "check the credentials (AWS_ACCESS_KEY_ID/AWS_PROFILE) and that they may read, write and \
                             list the bucket"
                        .into(),
                },
            },
            ErrorClass::NotFound => StoreError::NotFound(key.to_string()),
            ErrorClass::Transient => {
                StoreError::Transient(format!("S3 {op} {key} in bucket {bucket:?} failed: {detail}"))
            }
            ErrorClass::Permanent => StoreError::Permanent {
                what: format!(
                    "S3 {op} {key} in bucket {bucket:?} was refused: HTTP {} {}",
                    status.map_or("-".into(), |s| s.to_string()),
                    code.as_deref().unwrap_or("(no error code)")
                ),
                fix: "retrying will not help: check that this store supports the request (--dest, --s3-endpoint, \
                      --s3-region)"
                    .into(),
            },
        }
    }

    fn is_precondition_failed<E: ProvideErrorMetadata>(
        err: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>,
    ) -> bool {
        err.raw_response().map(|r| r.status().as_u16()) == Some(412) || err.code() == Some("PreconditionFailed")
    }

    async fn body(data: &SpoolData, offset: u64, len: u64) -> Result<ByteStream, StoreError> {
        match data {
            SpoolData::Memory(chunks) => Ok(s3_body::body(chunks.slice(offset as usize, len as usize))),
            SpoolData::Disk(path) => ByteStream::read_from()
                .path(path)
                .offset(offset)
                .length(Length::Exact(len))
                .build()
                .await
                .map_err(|e| StoreError::Transient(format!("reading spool file {}: {e}", path.display()))),
        }
    }

    /// The CRC32 checksum S3 verifies, of `len` bytes of `data` from `offset`. Sending it ourselves keeps
    /// the SDK from wrapping a body read from disk in aws-chunked encoding, which over plain HTTP signs
    /// every 64 KiB chunk with SHA-256 (a tenth of the CPU when archiving incompressible values).
    async fn crc32(data: &SpoolData, offset: u64, len: u64) -> Result<String, StoreError> {
        let crc = match data {
            SpoolData::Memory(_) => data.crc32(offset, len),
            SpoolData::Disk(_) => {
                let data = data.clone();
                tokio::task::spawn_blocking(move || data.crc32(offset, len))
                    .await
                    .map_err(|e| StoreError::Transient(format!("checksumming a spool file: {e}")))?
            }
        }
        .map_err(|e| StoreError::Transient(format!("reading a spool file: {e}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes()))
    }

    async fn put_single(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let (sse, kms_key) = self.settings.sse();
        // Read and checksummed before taking a request slot: the slot is for the request alone.
        let (crc, body) = (Self::crc32(data, 0, len).await?, Self::body(data, 0, len).await?);
        let _slot = self.slot().await;
        let result = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(kms_key)
            .set_storage_class(self.settings.storage_class())
            .key(key)
            .if_none_match("*")
            .content_length(len as i64)
            .checksum_crc32(crc)
            .body(body)
            .customize()
            .disable_payload_signing()
            .send()
            .await;
        match result {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) if Self::is_precondition_failed(&e) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(self.classify("PutObject", key, e)),
        }
    }

    async fn put_multipart(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        let bucket = &self.bucket;
        let (sse, kms_key) = self.settings.sse();
        let slot = self.slot().await;
        let created = self
            .client
            .create_multipart_upload()
            .bucket(bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(kms_key)
            .set_storage_class(self.settings.storage_class())
            .key(key)
            .send()
            .await
            .map_err(|e| self.classify("CreateMultipartUpload", key, e))?;
        drop(slot);
        let upload_id = created
            .upload_id()
            .ok_or_else(|| StoreError::Transient(format!("CreateMultipartUpload for {key} returned no upload id")))?
            .to_string();
        let result = self.send_parts_and_complete(key, &upload_id, data, len).await;
        if !matches!(result, Ok(PutOutcome::Created)) {
            // Nothing became visible; free the parts. Failing to abort leaves an invisible upload that
            // a lifecycle rule or the stale-upload cleanup removes.
            let _slot = self.slot().await;
            let abort = self.client.abort_multipart_upload().bucket(bucket).key(key).upload_id(&upload_id);
            let _ = abort.set_expected_bucket_owner(self.settings.owner()).send().await;
        }
        result
    }

    async fn send_parts_and_complete(
        &self,
        key: &str,
        upload_id: &str,
        data: &SpoolData,
        len: u64,
    ) -> Result<PutOutcome, StoreError> {
        let part_size = self.settings.part_size;
        let parts = len.div_ceil(part_size);
        let mut completed: Vec<CompletedPart> = futures::stream::iter(0..parts)
            .map(|i| async move {
                let offset = i * part_size;
                let size = part_size.min(len - offset);
                let number = i as i32 + 1;
                let (crc, body) = (Self::crc32(data, offset, size).await?, Self::body(data, offset, size).await?);
                let _slot = self.slot().await;
                let out = self
                    .client
                    .upload_part()
                    .bucket(&self.bucket)
                    .set_expected_bucket_owner(self.settings.owner())
                    .key(key)
                    .upload_id(upload_id)
                    .part_number(number)
                    .content_length(size as i64)
                    .checksum_crc32(crc)
                    .body(body)
                    .customize()
                    .disable_payload_signing()
                    .send()
                    .await
                    .map_err(|e| self.classify("UploadPart", key, e))?;
                Ok::<_, StoreError>(CompletedPart::builder().part_number(number).set_e_tag(out.e_tag).build())
            })
            .buffer_unordered(self.settings.part_concurrency)
            .try_collect()
            .await?;
        completed.sort_by_key(|p| p.part_number());
        let _slot = self.slot().await;
        let result = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .key(key)
            .upload_id(upload_id)
            .if_none_match("*")
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(completed)).build())
            .send()
            .await;
        match result {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) if Self::is_precondition_failed(&e) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(self.classify("CompleteMultipartUpload", key, e)),
        }
    }
}

impl S3Store {
    /// GetObject of the whole object, or of `range` (an HTTP Range header's value).
    async fn get_object(&self, key: &str, range: Option<String>) -> Result<Bytes, StoreError> {
        let _slot = self.slot().await;
        let out = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .key(key)
            .set_range(range)
            .send()
            .await
            .map_err(|e| self.classify("GetObject", key, e))?;
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::Transient(format!("reading GetObject {key} body: {e}")))?;
        Ok(body.into_bytes())
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    fn describe(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    async fn put_if_absent(&self, key: &str, data: &SpoolData, len: u64) -> Result<PutOutcome, StoreError> {
        if len >= self.settings.part_size * 2 {
            self.put_multipart(key, data, len).await
        } else {
            self.put_single(key, data, len).await
        }
    }

    async fn list(&self, req: &ListRequest, max_keys: usize) -> Result<ListPage, StoreError> {
        let _slot = self.slot().await;
        let out = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .prefix(&req.prefix)
            .set_start_after(req.start_after.clone())
            .max_keys(max_keys.min(1000) as i32)
            .send()
            .await
            .map_err(|e| self.classify("ListObjectsV2", &req.prefix, e))?;
        let keys = out.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
        Ok(ListPage { keys, truncated: out.is_truncated().unwrap_or(false) })
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        self.get_object(key, None).await
    }

    async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes, StoreError> {
        self.get_object(key, Some(format!("bytes={}-{}", range.start, range.end.saturating_sub(1)))).await
    }

    async fn head(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let _slot = self.slot().await;
        let head = self.client.head_object().bucket(&self.bucket).key(key);
        match head.set_expected_bucket_owner(self.settings.owner()).send().await {
            Ok(out) => Ok(Some(out.content_length().unwrap_or(0).max(0) as u64)),
            Err(e) => match self.classify("HeadObject", key, e) {
                StoreError::NotFound(_) => Ok(None),
                other => Err(other),
            },
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let _slot = self.slot().await;
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .set_expected_bucket_owner(self.settings.owner())
            .key(key)
            .send()
            .await
            .map_err(|e| self.classify("DeleteObject", key, e))?;
        Ok(())
    }
}
