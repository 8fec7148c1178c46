//! Where the archive goes: `s3://bucket/prefix`, `gs://bucket/prefix` (Google Cloud Storage),
//! `az://container/prefix` (Azure Blob Storage) or `file:///absolute/dir`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use thiserror::Error;

use super::object_key::Prefix;

#[derive(Debug, Error, PartialEq, Eq)]
#[error(
    "destination {input:?} is not valid: {why}. Use s3://bucket/optional/prefix, gs://bucket/optional/prefix, \
     az://container/optional/prefix or file:///absolute/dir"
)]
pub struct DestinationError {
    input: String,
    why: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    S3 { bucket: String, prefix: Prefix },
    Gcs { bucket: String, prefix: Prefix },
    Azure { container: String, prefix: Prefix },
    File { root: PathBuf, prefix: Prefix },
}

impl Destination {
    pub fn prefix(&self) -> &Prefix {
        match self {
            Destination::S3 { prefix, .. }
            | Destination::Gcs { prefix, .. }
            | Destination::Azure { prefix, .. }
            | Destination::File { prefix, .. } => prefix,
        }
    }
}

/// S3 bucket naming rules (the subset that matters for a clear early error).
fn valid_bucket(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
        && b.as_bytes()[0].is_ascii_alphanumeric()
        && b.as_bytes()[b.len() - 1].is_ascii_alphanumeric()
}

/// Google Cloud Storage's bucket names: 3-63 characters of a-z, 0-9, '-', '_' and '.', starting and
/// ending with a letter or digit (dotted names may be longer; not checked here).
fn valid_gcs_bucket(b: &str) -> bool {
    (3..=222).contains(&b.len())
        && b.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'-' | b'_'))
        && b.as_bytes()[0].is_ascii_alphanumeric()
        && b.as_bytes()[b.len() - 1].is_ascii_alphanumeric()
        && (b.len() <= 63 || b.contains('.'))
}

/// Azure's container names: 3-63 characters of a-z, 0-9 and single '-', starting and ending with a
/// letter or digit.
fn valid_container(c: &str) -> bool {
    (3..=63).contains(&c.len())
        && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && c.as_bytes()[0].is_ascii_alphanumeric()
        && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric()
        && !c.contains("--")
}

impl FromStr for Destination {
    type Err = DestinationError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = |why| DestinationError { input: input.to_string(), why };
        if let Some(rest) = input.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if !valid_bucket(bucket) {
                return Err(err("the bucket name must be 3-63 characters of a-z, 0-9, '.' and '-'"));
            }
            Ok(Destination::S3 { bucket: bucket.to_string(), prefix: Prefix::new(prefix) })
        } else if let Some(rest) = input.strip_prefix("gs://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if !valid_gcs_bucket(bucket) {
                return Err(err("a GCS bucket name is 3-63 characters of a-z, 0-9, '-', '_' and '.'"));
            }
            Ok(Destination::Gcs { bucket: bucket.to_string(), prefix: Prefix::new(prefix) })
        } else if let Some(rest) = input.strip_prefix("az://") {
            let (container, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if !valid_container(container) {
                return Err(err("an Azure container name is 3-63 characters of a-z, 0-9 and single '-'"));
            }
            Ok(Destination::Azure { container: container.to_string(), prefix: Prefix::new(prefix) })
        } else if let Some(path) = input.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(err("a file:// destination needs an absolute path (file:///var/archive)"));
            }
            Ok(Destination::File { root: PathBuf::from(path), prefix: Prefix::default() })
        } else {
            Err(err("the scheme must be s3://, gs://, az:// or file://"))
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::S3 { bucket, prefix } if prefix.as_str().is_empty() => write!(f, "s3://{bucket}"),
            Destination::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{}", prefix.as_str()),
            Destination::Gcs { bucket, prefix } if prefix.as_str().is_empty() => write!(f, "gs://{bucket}"),
            Destination::Gcs { bucket, prefix } => write!(f, "gs://{bucket}/{}", prefix.as_str()),
            Destination::Azure { container, prefix } if prefix.as_str().is_empty() => write!(f, "az://{container}"),
            Destination::Azure { container, prefix } => write!(f, "az://{container}/{}", prefix.as_str()),
            Destination::File { root, .. } => write!(f, "file://{}", root.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_and_file() {
        assert_eq!(
            "s3://my-bucket/a/b/".parse(),
            Ok(Destination::S3 { bucket: "my-bucket".into(), prefix: Prefix::new("a/b") })
        );
        assert_eq!(
            "s3://my-bucket".parse(),
            Ok(Destination::S3 { bucket: "my-bucket".into(), prefix: Prefix::new("") })
        );
        assert_eq!(
            "file:///var/archive".parse(),
            Ok(Destination::File { root: "/var/archive".into(), prefix: Prefix::default() })
        );
        assert_eq!("s3://b-1/x".parse::<Destination>().unwrap().to_string(), "s3://b-1/x");
        assert_eq!(
            "gs://my_bucket/a/".parse(),
            Ok(Destination::Gcs { bucket: "my_bucket".into(), prefix: Prefix::new("a") })
        );
        assert_eq!(
            "az://archive-1/a/b".parse(),
            Ok(Destination::Azure { container: "archive-1".into(), prefix: Prefix::new("a/b") })
        );
        for round in ["gs://b-1/x", "gs://b-1", "az://c-1/x/y", "az://c-1"] {
            assert_eq!(round.parse::<Destination>().unwrap().to_string(), round);
        }
    }

    #[test]
    fn rejects_bad_destinations() {
        let bad_ones = [
            "",
            "/tmp/x",
            "http://x/y",
            "s3://",
            "s3://UPPER/x",
            "s3://ab",
            "file://relative/dir",
            "gs://b/x",
            "gs://-bucket/x",
            "az://ab",
            "az://my_container",
            "az://a--b",
            "abfss://c@a.dfs.core.windows.net/x",
        ];
        for bad in bad_ones {
            let e = bad.parse::<Destination>().unwrap_err();
            assert!(e.to_string().contains("s3://bucket"), "{bad}: {e}");
        }
    }
}
