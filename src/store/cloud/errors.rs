//! What a GCS or Azure failure means for the archiver: the object is not there, the operator must fix
//! something (a bucket, a credential, a permission), or trying again may help.

use std::fmt;

use crate::store::StoreError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    List,
    Get,
    Head,
    Delete,
    Put,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::List => "listing",
            Op::Get => "reading",
            Op::Head => "looking up",
            Op::Delete => "deleting",
            Op::Put => "writing",
        })
    }
}

/// An HTTP status from the store (object_store's requests or ours) as a `StoreError`; `body` is the
/// store's own explanation, kept in the message.
pub(super) fn from_status(op: Op, key: &str, describe: &str, status: u16, body: &str) -> StoreError {
    let what = format!("{op} {key} on {describe} failed with HTTP {status}: {}", body.trim());
    let permanent = |fix: &str| StoreError::Permanent { what: what.clone(), fix: fix.into() };
    match status {
        404 if op == Op::Get => StoreError::NotFound(key.to_string()),
        404 => permanent("create the bucket or container (the archiver does not create it), or fix --dest"),
        401 | 403 => permanent(CREDENTIALS_FIX),
        408 | 429 => StoreError::Transient(what),
        501 | 505 => permanent("the store does not support this request: use one that does"),
        500..=599 => StoreError::Transient(what),
        300..=399 => permanent("the store redirected the request: check the endpoint setting"),
        _ => permanent("the store refused the request or answered unexpectedly; the message says why"),
    }
}

const CREDENTIALS_FIX: &str = "check the credentials (--gcs-credentials, --azure-access-key, --azure-sas-token, the \
                               environment) and that they may read, write, list and delete objects there";

/// The HTTP status in an object_store error's text ("... status code: 403 Forbidden ..."): its
/// errors keep the status only in their messages.
fn status_in(text: &str) -> Option<u16> {
    let at = text.find("status code: ")? + "status code: ".len();
    text.get(at..at + 3)?.parse().ok()
}

pub(super) fn classify(op: Op, key: &str, describe: &str, e: object_store::Error) -> StoreError {
    use object_store::Error as E;
    let text = e.to_string();
    match e {
        E::NotFound { .. } => from_status(op, key, describe, 404, &text),
        E::PermissionDenied { .. } => from_status(op, key, describe, 403, &text),
        E::Unauthenticated { .. } => from_status(op, key, describe, 401, &text),
        // A listed name object_store cannot take (an empty segment, a control character): no retry
        // lists it.
        E::InvalidPath { .. } => StoreError::Permanent {
            what: format!("{op} {key} on {describe}: {text}"),
            fix: "a foreign object there has a name with an empty segment ('a//b') or a control character: \
                  rename or remove it"
                .into(),
        },
        // Getting a token (the metadata server, Azure AD): refused is the credentials' fault, anything
        // else may pass; never the object's status.
        _ if text.contains("token request") || text.contains("Error getting token") => match status_in(&text) {
            Some(status @ 400..=499) => StoreError::Permanent {
                what: format!("{op} {key} on {describe}: getting a token failed with HTTP {status}: {text}"),
                fix: CREDENTIALS_FIX.into(),
            },
            _ => StoreError::Transient(format!("{op} {key} on {describe}: getting a token: {text}")),
        },
        _ => match status_in(&text) {
            Some(status) => from_status(op, key, describe, status, &text),
            None => StoreError::Transient(format!("{op} {key} on {describe}: {text}")),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_say_who_must_act() {
        let d = "gs://b";
        assert!(matches!(from_status(Op::Get, "k", d, 404, ""), StoreError::NotFound(_)));
        let missing_bucket = from_status(Op::List, "p/", d, 404, "NoSuchBucket");
        assert!(matches!(&missing_bucket, StoreError::Permanent { fix, .. } if fix.contains("create the bucket")));
        assert!(!from_status(Op::Put, "k", d, 403, "").is_transient());
        assert!(!from_status(Op::Put, "k", d, 400, "InvalidBlockList").is_transient());
        assert!(!from_status(Op::Put, "k", d, 501, "NotImplemented").is_transient());
        assert!(!from_status(Op::Put, "k", d, 301, "").is_transient());
        assert!(!from_status(Op::Put, "k", d, 200, "an unexpected answer").is_transient());
        for transient in [408, 429, 500, 503] {
            assert!(from_status(Op::Put, "k", d, transient, "").is_transient(), "{transient}");
        }
    }

    #[test]
    fn the_status_is_found_in_object_stores_messages() {
        let text = "Generic GCS error: Error performing GET http://x/b in 2ms - Server returned non-2xx status code: \
                    400 Bad Request: nope";
        assert_eq!(status_in(text), Some(400));
        assert_eq!(status_in("Generic GCS error: error sending request: connection refused"), None);
    }
}
