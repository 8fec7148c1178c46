//! kafka-s3-archiver: archives Kafka topics to S3-compatible object storage, exactly once, named by
//! offset range, recovered by listing the archive.

pub mod archiver;
pub mod check;
pub mod config;
pub mod core;
pub mod ddl;
pub mod demo;
pub mod generate;
pub mod markers;
pub mod pipeline;
pub mod progress;
pub mod restore;
pub mod source;
pub mod status;
pub mod store;
pub mod table;
pub mod tail;
pub mod telemetry;
pub mod verify;
