//! The Kafka side. `consumer`: an rdkafka consumer polled on its own thread, so rebalance callbacks
//! (`context`) can block while the async pipeline recovers positions from the archive (on assign) or
//! flushes open files (on revoke). `messages`: what it and the pipeline tell each other. `convert`:
//! messages to records and back (also for `restore` and `generate`). `offsets`: log and committed
//! offsets for `verify` and `status`; `topic_config`: how late topics let records be stamped.
//!
//! Positions are set at assignment time from the archive; the committed offset is only a listing hint.
//! Every assignment of a partition gets a new epoch, carried by its records: records still queued from
//! an earlier assignment are recognised and ignored.

mod consumer;
mod context;
pub mod convert;
mod group;
pub mod headers;
mod messages;
pub mod offsets;
mod out_of_range;
mod pending;
pub mod probe;
pub mod topic_config;
pub mod topic_id;

use std::time::Duration;

use rdkafka::error::KafkaError;
use thiserror::Error;

pub use self::consumer::{KafkaSource, PipelineChannels, SourceOptions, HAND_OVER_BATCH};
pub use self::messages::{AssignedPartition, Commit, Control, Fetched, ResumeAt, SourceCommand, SourceLink, StartFrom};

#[derive(Debug, Error)]
pub enum SourceError {
    #[error("cannot create the Kafka consumer: {0}. Check --brokers and the --kafka settings")]
    Create(KafkaError),
    #[error("cannot subscribe to {topics:?}: {source}")]
    Subscribe { topics: Vec<String>, source: KafkaError },
    #[error("fatal Kafka consumer error: {0}. The archiver stops; restart it once the cause is fixed")]
    Fatal(KafkaError),
    #[error(
        "cannot reach the Kafka brokers {brokers} within {timeout:?} ({why}). Check --brokers, the network, and \
         the TLS/SASL settings (--kafka)"
    )]
    Unreachable { brokers: String, timeout: Duration, why: String },
    #[error("topic {topic:?} does not exist on {brokers}: create it, or correct --topic")]
    UnknownTopic { topic: String, brokers: String },
    #[error("Kafka refuses to let the archiver join group {group:?}: {why}")]
    GroupRefused { group: String, why: String },
}
