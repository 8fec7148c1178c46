//! Where the archive goes: `s3://bucket/prefix` or `file:///absolute/dir`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use thiserror::Error;

use super::object_key::Prefix;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("destination {input:?} is not valid: {why}. Use s3://bucket/optional/prefix or file:///absolute/dir")]
pub struct DestinationError {
    input: String,
    why: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    S3 { bucket: String, prefix: Prefix },
    File { root: PathBuf, prefix: Prefix },
}

impl Destination {
    pub fn prefix(&self) -> &Prefix {
        match self {
            Destination::S3 { prefix, .. } | Destination::File { prefix, .. } => prefix,
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
        } else if let Some(path) = input.strip_prefix("file://") {
            if !path.starts_with('/') {
                return Err(err("a file:// destination needs an absolute path (file:///var/archive)"));
            }
            Ok(Destination::File { root: PathBuf::from(path), prefix: Prefix::default() })
        } else {
            Err(err("the scheme must be s3:// or file://"))
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::S3 { bucket, prefix } if prefix.as_str().is_empty() => write!(f, "s3://{bucket}"),
            Destination::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{}", prefix.as_str()),
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
    }

    #[test]
    fn rejects_bad_destinations() {
        for bad in ["", "/tmp/x", "http://x/y", "s3://", "s3://UPPER/x", "s3://ab", "file://relative/dir", "gs://b/x"] {
            let e = bad.parse::<Destination>().unwrap_err();
            assert!(e.to_string().contains("s3://bucket"), "{bad}: {e}");
        }
    }
}
