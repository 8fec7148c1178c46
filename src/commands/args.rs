//! What the operator commands share on their command lines: where the archive is, librdkafka settings,
//! times.

use std::sync::Arc;

use crate::archive::destination::Destination;
use crate::config;
use crate::store::{self, ObjectStore, Role, StoreOptions};

/// Where an archive is, for the commands that read one.
#[derive(clap::Args)]
pub struct ArchiveArgs {
    /// The archive: s3://bucket/prefix or file:///absolute/dir.
    #[arg(long, env = "KSA_DEST")]
    dest: String,
    /// Custom S3 endpoint URL (LocalStack, MinIO...); path-style addressing is used with it.
    #[arg(long, env = "KSA_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// S3 region; default: from the standard AWS chain, else us-east-1.
    #[arg(long, env = "KSA_S3_REGION")]
    s3_region: Option<String>,
}

impl ArchiveArgs {
    /// The destination's prefix and a store to read it.
    pub async fn open(self) -> anyhow::Result<(Destination, Arc<dyn ObjectStore>)> {
        let dest: Destination = self.dest.parse()?;
        let store = store::open(&dest, &StoreOptions::reading(self.s3_endpoint, self.s3_region), Role::Inspect).await?;
        Ok((dest, store))
    }
}

pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?} is neither RFC 3339 (2026-11-29T10:00:00Z) nor milliseconds: {e}"))?;
    Ok(t.duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| "times before 1970 are not supported".to_string())?
        .as_millis() as i64)
}

pub fn kafka_props(kafka: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    Ok(kafka.iter().map(|kv| config::parse_kafka_setting(kv)).collect::<Result<_, _>>()?)
}
