//! The pure core: no tokio, no AWS SDK, no rdkafka. Everything here is deterministic given its inputs
//! (time is passed in), so it is tested exhaustively without services.

pub mod audit;
pub mod backoff;
pub mod claim;
pub mod completeness;
pub mod ddl;
pub mod destination;
pub mod encode;
pub mod object_key;
pub mod partition;
pub mod record;
pub mod recovery;
pub mod restore;
pub mod roll;
pub mod s3_errors;
pub mod spool;
pub mod stale;
pub mod status;
pub mod time_bucket;
pub mod typed;
pub mod units;
