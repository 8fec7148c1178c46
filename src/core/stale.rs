//! Which never-completed uploads to abort. A crash during a multipart upload leaves parts that cost
//! storage but are invisible to readers; on start the archiver aborts those that are ours (the key names
//! an archive object under our prefix) and old enough that no live writer can still be completing them.

use std::time::{Duration, SystemTime};

use super::object_key::{ObjectKey, Prefix};

/// An upload that was started and never completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingUpload {
    pub key: String,
    pub id: String,
    pub started: SystemTime,
}

/// The uploads to abort at `now`: ours, and started more than `older_than` ago.
pub fn stale_uploads<'a>(
    uploads: &'a [PendingUpload],
    prefix: &Prefix,
    now: SystemTime,
    older_than: Duration,
) -> Vec<&'a PendingUpload> {
    uploads
        .iter()
        .filter(|u| ObjectKey::parse(prefix, &u.key).is_ok())
        .filter(|u| now.duration_since(u.started).is_ok_and(|age| age > older_than))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_old_uploads_are_stale() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let ours = "p/topic=t/partition=0/t+0+00000000000000000000+00000000000000000009.parquet";
        let up = |key: &str, age_s: u64| PendingUpload {
            key: key.into(),
            id: format!("{key}@{age_s}"),
            started: now - Duration::from_secs(age_s),
        };
        let uploads = vec![
            up(ours, 7200),
            up(ours, 60),
            up("p/topic=t/partition=0/notes.txt", 7200),
            up("other/topic=t/partition=0/t+0+00000000000000000000+00000000000000000009.parquet", 7200),
        ];
        let stale = stale_uploads(&uploads, &Prefix::new("p"), now, Duration::from_secs(3600));
        assert_eq!(stale, vec![&uploads[0]]);
        // An upload stamped in the future (clock skew) is never stale.
        let future = vec![PendingUpload { started: now + Duration::from_secs(60), ..uploads[0].clone() }];
        assert!(stale_uploads(&future, &Prefix::new("p"), now, Duration::ZERO).is_empty());
    }
}
