//! What the archiver asks of S3 for every object it writes — data objects, claims and multipart
//! uploads alike: server-side encryption, a storage class, and the account that must own the bucket.

use std::fmt;

/// Server-side encryption (`--s3-sse`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sse {
    /// SSE-S3 (`AES256`).
    Aes256,
    /// SSE-KMS (`aws:kms`) with this key, or the account's `aws/s3` key.
    Kms { key_id: Option<String> },
}

/// An S3 storage class whose objects can be read at once (`--s3-storage-class`). The archiver reads
/// its claims back at every recovery, and `restore` and `verify --deep` read data objects: classes
/// that need a restore first (GLACIER, DEEP_ARCHIVE) would stall both, so they are refused; a bucket
/// lifecycle rule can move old objects there instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageClass(&'static str);

impl StorageClass {
    const READABLE: [&'static str; 7] = [
        "STANDARD",
        "STANDARD_IA",
        "ONEZONE_IA",
        "INTELLIGENT_TIERING",
        "GLACIER_IR",
        "REDUCED_REDUNDANCY",
        "EXPRESS_ONEZONE",
    ];
    const NEED_RESTORE: [&'static str; 2] = ["GLACIER", "DEEP_ARCHIVE"];

    /// Parses a storage class name as S3 spells it; says why when it cannot be used.
    pub fn parse(name: &str) -> Result<Self, String> {
        let upper = name.to_ascii_uppercase();
        if let Some(known) = Self::READABLE.into_iter().find(|c| *c == upper) {
            return Ok(StorageClass(known));
        }
        if Self::NEED_RESTORE.contains(&upper.as_str()) {
            return Err(format!(
                "objects in {upper} must be restored before they can be read, and the archiver reads its claims at \
                 every recovery: use GLACIER_IR, or a bucket lifecycle rule that moves objects to {upper} later"
            ));
        }
        Err(format!("not an S3 storage class; use one of {}", Self::READABLE.join(", ")))
    }

    pub fn as_str(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for StorageClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// Applied to every object written; the bucket owner check to every request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectOptions {
    pub sse: Option<Sse>,
    pub storage_class: Option<StorageClass>,
    /// The 12-digit account ID that must own the bucket (`x-amz-expected-bucket-owner`).
    pub expected_bucket_owner: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_classes_are_checked() {
        assert_eq!(StorageClass::parse("standard_ia").unwrap().as_str(), "STANDARD_IA");
        assert_eq!(StorageClass::parse("GLACIER_IR").unwrap().as_str(), "GLACIER_IR");
        let refused = StorageClass::parse("DEEP_ARCHIVE").unwrap_err();
        assert!(refused.contains("restored before they can be read"), "{refused}");
        assert!(StorageClass::parse("COLD").unwrap_err().contains("one of STANDARD"));
    }
}
