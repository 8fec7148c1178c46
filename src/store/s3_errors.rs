//! What an S3 error answer means for the archiver: retry it (for as long as it takes), or stop and
//! say what to fix. Decided from the HTTP status and the S3 error code alone.

/// How an S3 error is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Retrying may succeed: no answer (timeout, reset, refused), 5xx but 501, 408, 429, throttling,
    /// a conditional write that raced another.
    Transient,
    /// The key does not exist.
    NotFound,
    NoSuchBucket,
    /// The credentials are refused or may not do this.
    AccessDenied,
    /// Retrying will not help (other 4xx, 501, redirects): the request itself is wrong for this store.
    Permanent,
}

/// S3 error codes that are worth retrying whatever their status. `ConditionalRequestConflict` (409) is
/// S3's answer to a conditional write racing another write of the same key (two claims of one chain
/// position): AWS documents it as retryable, and the retry meets 412 (the other write won) or
/// succeeds. For CompleteMultipartUpload the upload is then started again from its first part.
/// `OperationAborted` (409) is a conflicting operation still in progress on the key.
const TRANSIENT_CODES: [&str; 10] = [
    "ConditionalRequestConflict",
    "OperationAborted",
    "SlowDown",
    "Throttling",
    "ThrottlingException",
    "TooManyRequests",
    "RequestTimeout",
    "InternalError",
    "ServiceUnavailable",
    "RequestLimitExceeded",
];

/// Classifies an error answer; `status` is `None` when no answer came (timeout, reset, refused).
pub fn classify(status: Option<u16>, code: Option<&str>) -> ErrorClass {
    match (status, code) {
        (_, Some("NoSuchBucket")) => ErrorClass::NoSuchBucket,
        (_, Some("AccessDenied" | "InvalidAccessKeyId" | "SignatureDoesNotMatch")) | (Some(403), _) => {
            ErrorClass::AccessDenied
        }
        (_, Some("NoSuchKey" | "NotFound")) | (Some(404), _) => ErrorClass::NotFound,
        (_, Some(code)) if TRANSIENT_CODES.contains(&code) => ErrorClass::Transient,
        (None, _) => ErrorClass::Transient,
        (Some(501), _) => ErrorClass::Permanent,
        (Some(408 | 429 | 500..=599), _) => ErrorClass::Transient,
        (Some(_), _) => ErrorClass::Permanent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_classified_by_status_and_code() {
        let cases: [(Option<u16>, Option<&str>, ErrorClass); 19] = [
            (Some(409), Some("ConditionalRequestConflict"), ErrorClass::Transient),
            (Some(409), Some("OperationAborted"), ErrorClass::Transient),
            (Some(409), Some("BucketAlreadyExists"), ErrorClass::Permanent),
            (None, None, ErrorClass::Transient),
            (Some(500), Some("InternalError"), ErrorClass::Transient),
            (Some(502), None, ErrorClass::Transient),
            (Some(503), Some("SlowDown"), ErrorClass::Transient),
            (Some(408), None, ErrorClass::Transient),
            (Some(429), None, ErrorClass::Transient),
            (Some(400), Some("RequestTimeout"), ErrorClass::Transient),
            (Some(400), Some("InvalidRequest"), ErrorClass::Permanent),
            (Some(400), Some("KeyTooLongError"), ErrorClass::Permanent),
            (Some(400), Some("InvalidArgument"), ErrorClass::Permanent),
            (Some(405), Some("MethodNotAllowed"), ErrorClass::Permanent),
            (Some(501), Some("NotImplemented"), ErrorClass::Permanent),
            (Some(301), Some("PermanentRedirect"), ErrorClass::Permanent),
            (Some(403), Some("RequestTimeTooSkewed"), ErrorClass::AccessDenied),
            (Some(404), Some("NoSuchBucket"), ErrorClass::NoSuchBucket),
            (Some(404), Some("NoSuchKey"), ErrorClass::NotFound),
        ];
        for (status, code, want) in cases {
            assert_eq!(classify(status, code), want, "{status:?} {code:?}");
        }
    }
}
