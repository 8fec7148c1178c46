//! `--dest` and the settings of the store it names, validated into a `StoreConfig`.

use super::units::ByteSize;
use super::{invalid, non_empty, set, ConfigError, Settings, SseMode, StoreConfig};
use crate::archive::destination::{Destination, DestinationError};
use crate::store::{ObjectOptions, S3Options, Sse, StorageClass, StoreOptions, MIN_PART_SIZE};

impl Settings {
    pub(super) fn store(&self) -> Result<StoreConfig, ConfigError> {
        let dest_text = non_empty(&self.dest, "--dest", "pass --dest s3://bucket/prefix or file:///dir")?;
        let dest: Destination =
            dest_text.parse().map_err(|e: DestinationError| invalid("--dest", &dest_text, e.to_string()))?;
        let part_size = set(self.upload_part_size, "--upload-part-size")?;
        if part_size.bytes() < MIN_PART_SIZE {
            let why = format!("S3 needs parts of at least {}", ByteSize(MIN_PART_SIZE));
            return Err(invalid("--upload-part-size", &part_size.to_string(), why));
        }
        let s3 = S3Options::new(self.s3_endpoint.clone(), self.s3_region.clone())
            .uploads(part_size.bytes(), set(self.upload_concurrency, "--upload-concurrency")?)
            .max_requests(set(self.s3_max_requests, "--s3-max-requests")?)
            .attempt_timeout(set(self.s3_attempt_timeout, "--s3-attempt-timeout")?.0)
            .objects(self.object_options()?);
        let abort_stale_uploads_after = set(self.abort_stale_uploads_after, "--abort-stale-uploads-after")?.0;
        Ok(StoreConfig { dest, settings: StoreOptions { s3, abort_stale_uploads_after } })
    }

    fn object_options(&self) -> Result<ObjectOptions, ConfigError> {
        let sse = self.s3_sse.map(|mode| match mode {
            SseMode::Aes256 => Sse::Aes256,
            SseMode::AwsKms => Sse::Kms { key_id: self.s3_sse_kms_key_id.clone() },
        });
        if let (Some(key), false) = (&self.s3_sse_kms_key_id, matches!(sse, Some(Sse::Kms { .. }))) {
            return Err(invalid("--s3-sse-kms-key-id", key, "it needs --s3-sse aws:kms".into()));
        }
        let storage_class = match &self.s3_storage_class {
            Some(name) => Some(StorageClass::parse(name).map_err(|why| invalid("--s3-storage-class", name, why))?),
            None => None,
        };
        let expected_bucket_owner = match &self.s3_expected_bucket_owner {
            Some(id) if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(invalid("--s3-expected-bucket-owner", id, "an AWS account ID is 12 digits".into()));
            }
            other => other.clone(),
        };
        Ok(ObjectOptions { sse, storage_class, expected_bucket_owner })
    }
}
