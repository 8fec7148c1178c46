//! Topic-partition and offset-range domain types.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PartitionError {
    #[error("topic name {0:?} is not valid: Kafka topic names are 1-249 characters of [a-zA-Z0-9._-]")]
    InvalidTopic(String),
    #[error("partition {0} is negative; Kafka partitions are numbered from 0")]
    NegativePartition(i32),
    #[error("offset range {start}..={end} is not valid: start must be >= 0 and <= end")]
    InvalidRange { start: i64, end: i64 },
}

/// Checks a Kafka topic name: the same rule the broker applies, so a name that passes is safe in object keys.
pub fn validate_topic(topic: &str) -> Result<(), PartitionError> {
    let ok = !topic.is_empty()
        && topic.len() <= 249
        && topic != "."
        && topic != ".."
        && topic.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(PartitionError::InvalidTopic(topic.to_string()))
    }
}

/// Whether `partition` is among those an operator named (`--partition`, repeatable): every one when none
/// is named.
pub fn is_selected(selected: &[i32], partition: i32) -> bool {
    selected.is_empty() || selected.contains(&partition)
}

/// One partition of one topic. Cheap to clone (the name is shared): every consumed record carries one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    topic: Arc<str>,
    partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Result<Self, PartitionError> {
        let topic: String = topic.into();
        validate_topic(&topic)?;
        if partition < 0 {
            return Err(PartitionError::NegativePartition(partition));
        }
        Ok(Self { topic: topic.into(), partition })
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn partition(&self) -> i32 {
        self.partition
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

/// An inclusive run of offsets `start..=end`, with `0 <= start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetRange {
    start: i64,
    end: i64,
}

impl OffsetRange {
    pub fn new(start: i64, end: i64) -> Result<Self, PartitionError> {
        if start < 0 || start > end {
            return Err(PartitionError::InvalidRange { start, end });
        }
        Ok(Self { start, end })
    }

    pub fn start(&self) -> i64 {
        self.start
    }

    pub fn end(&self) -> i64 {
        self.end
    }

    /// The offset right after this range: where the next file of the partition starts at the earliest.
    pub fn next(&self) -> i64 {
        self.end + 1
    }
}

impl fmt::Display for OffsetRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..={}", self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka_rules() {
        for ok in ["a", "orders", "my.topic_v2-x", &"t".repeat(249)] {
            assert!(validate_topic(ok).is_ok(), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a+b", "a b", "é", &"t".repeat(250)] {
            assert!(validate_topic(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn partitions_are_non_negative() {
        assert!(TopicPartition::new("t", 0).is_ok());
        assert_eq!(TopicPartition::new("t", -1), Err(PartitionError::NegativePartition(-1)));
    }

    #[test]
    fn ranges_enforce_order() {
        assert!(OffsetRange::new(0, 0).is_ok());
        assert!(OffsetRange::new(5, 4).is_err());
        assert!(OffsetRange::new(-1, 4).is_err());
        let r = OffsetRange::new(10, 19).unwrap();
        assert_eq!(r.next(), 20);
    }
}
