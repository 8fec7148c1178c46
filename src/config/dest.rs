//! `--dest` and the settings of the store it names, validated into a `StoreConfig`.

use super::units::ByteSize;
use super::{invalid, non_empty, set, ConfigError, Settings, SseMode, StoreConfig};
use crate::archive::destination::{Destination, DestinationError};
use crate::store::cloud::{parse_connection_string, AzureCredentials, AzureOptions, GcsOptions};
use crate::store::{ObjectOptions, S3Options, Sse, StorageClass, StoreOptions, MIN_PART_SIZE};

impl Settings {
    /// The destination and how to reach its store; the other commands read an archive with it too.
    pub fn store(&self) -> Result<StoreConfig, ConfigError> {
        let dest_text = non_empty(
            &self.dest,
            "--dest",
            "pass --dest s3://bucket/prefix, gs://bucket/prefix, az://container/prefix or file:///dir",
        )?;
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
        let (gcs, azure) = (self.gcs()?, self.azure()?);
        self.only_for(&dest)?;
        Ok(StoreConfig { dest, settings: StoreOptions { s3, gcs, azure, abort_stale_uploads_after } })
    }

    fn gcs(&self) -> Result<GcsOptions, ConfigError> {
        if let Some(path) = self.gcs_credentials.as_ref().filter(|p| !p.is_file()) {
            let why = "no such file: give a service-account key or application default credentials JSON file".into();
            return Err(invalid("--gcs-credentials", &path.display().to_string(), why));
        }
        Ok(GcsOptions {
            endpoint: self.gcs_endpoint.clone(),
            credentials: self.gcs_credentials.clone(),
            anonymous: self.gcs_anonymous.unwrap_or(false),
        })
    }

    /// The connection string's parts, then the flags over them.
    fn azure(&self) -> Result<AzureOptions, ConfigError> {
        let from_string = match &self.azure_connection_string {
            Some(text) => {
                parse_connection_string(text).map_err(|why| invalid("--azure-connection-string", "****", why))?
            }
            None => Default::default(),
        };
        let credentials = match (&self.azure_access_key, &self.azure_sas_token) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "--azure-sas-token",
                    "****",
                    "it cannot be combined with --azure-access-key".into(),
                ))
            }
            (Some(key), None) => AzureCredentials::AccessKey(key.clone()),
            (None, Some(sas)) => AzureCredentials::Sas(sas.trim_start_matches('?').to_string()),
            (None, None) => from_string.credentials,
        };
        Ok(AzureOptions {
            account: self.azure_account.clone().or(from_string.account),
            endpoint: self.azure_endpoint.clone().or(from_string.endpoint),
            credentials,
        })
    }

    /// A GCS or Azure setting with a destination elsewhere is a mistake worth saying.
    fn only_for(&self, dest: &Destination) -> Result<(), ConfigError> {
        let is_gcs = matches!(dest, Destination::Gcs { .. });
        let is_azure = matches!(dest, Destination::Azure { .. });
        let settings = [
            ("--gcs-endpoint", self.gcs_endpoint.is_some(), is_gcs, "gs://"),
            ("--gcs-credentials", self.gcs_credentials.is_some(), is_gcs, "gs://"),
            ("--gcs-anonymous", self.gcs_anonymous.is_some(), is_gcs, "gs://"),
            ("--azure-account", self.azure_account.is_some(), is_azure, "az://"),
            ("--azure-endpoint", self.azure_endpoint.is_some(), is_azure, "az://"),
            ("--azure-access-key", self.azure_access_key.is_some(), is_azure, "az://"),
            ("--azure-sas-token", self.azure_sas_token.is_some(), is_azure, "az://"),
            ("--azure-connection-string", self.azure_connection_string.is_some(), is_azure, "az://"),
        ];
        match settings.into_iter().find(|(_, set, applies, _)| *set && !applies) {
            Some((name, _, _, scheme)) => {
                Err(invalid(name, "(set)", format!("it applies to {scheme} destinations, and --dest is {dest}")))
            }
            None => Ok(()),
        }
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
