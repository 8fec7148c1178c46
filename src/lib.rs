//! kafka-s3-archiver: archives Kafka topics to S3-compatible object storage, exactly once, named by
//! offset range, recovered by listing the archive.

pub mod allocator;
pub mod archive;
pub mod clock;
pub mod commands;
pub mod config;
pub mod encode;
pub mod http;
pub mod pipeline;
pub mod recovery;
pub mod registry;
pub mod retry;
pub mod service;
pub mod source;
pub mod store;
pub mod table;
pub mod telemetry;
pub mod values;
