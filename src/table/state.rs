//! What a table records of the archive it views, as Iceberg string properties: the topic and its
//! incarnation (Kafka topic ID) and, per partition, its chain position — the claim start right after the last file
//! the table holds. Held in the table's properties (inherited by every later snapshot, so a commit
//! writes only the partitions it moves) and, for the partitions it moves, in the commit's snapshot
//! summary (so an earlier snapshot still says what it covered).

use std::collections::BTreeMap;

use thiserror::Error;

/// The property of a partition's position: `kafka-s3-archiver.position.<partition>`.
const POSITION_PREFIX: &str = "kafka-s3-archiver.position.";
/// The property of the topic incarnation the table's files came from.
const TOPIC_ID: &str = "kafka-s3-archiver.topic-id";
/// The property of the topic the table's files came from.
const TOPIC: &str = "kafka-s3-archiver.topic";

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StateError {
    #[error(
        "table property {key} = {value:?} is not a partition's chain position (a whole number >= 0); fix or remove it"
    )]
    Position { key: String, value: String },
    #[error(
        "the table holds topic incarnation {table}, the archive {archive}: the topic was deleted and created again; \
         point --iceberg-namespace at a new table"
    )]
    Incarnation { table: String, archive: String },
    #[error(
        "the table holds topic {table:?}, not {topic:?}: their names differ only in characters a table name cannot \
         hold; archive one of them without a table (table = \"none\" in its [topic.\"...\"] settings) or with another \
         --iceberg-namespace"
    )]
    Topic { table: String, topic: String },
}

/// The archive's part of a table's properties.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableState {
    /// The topic (none in a table made before it was recorded).
    pub topic: Option<String>,
    pub topic_id: Option<String>,
    /// Per partition, the chain position right after the last file the table holds.
    pub positions: BTreeMap<i32, i64>,
}

impl TableState {
    /// Reads it from a table's properties (or a snapshot's summary); other properties are not ours.
    pub fn from_properties<'a>(properties: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self, StateError> {
        let mut state = Self::default();
        for (key, value) in properties {
            if key == TOPIC_ID {
                state.topic_id = Some(value.to_string());
            } else if key == TOPIC {
                state.topic = Some(value.to_string());
            } else if let Some(partition) = key.strip_prefix(POSITION_PREFIX) {
                let bad = || StateError::Position { key: key.to_string(), value: value.to_string() };
                // Only the form `properties` writes: `05` or `+5` would be a second name for partition 5.
                let canonical = |p: &i32| *p >= 0 && p.to_string() == partition;
                let partition: i32 = partition.parse().ok().filter(canonical).ok_or_else(bad)?;
                let position: i64 = value.parse().ok().filter(|p| *p >= 0).ok_or_else(bad)?;
                state.positions.insert(partition, position);
            }
        }
        Ok(state)
    }

    /// The properties a commit sets: the topic, its ID and the positions of the partitions it moves.
    pub fn properties(topic: &str, topic_id: Option<&str>, moved: &BTreeMap<i32, i64>) -> Vec<(String, String)> {
        let ids = topic_id.map(|id| (TOPIC_ID.to_string(), id.to_string()));
        let positions = moved.iter().map(|(p, at)| (format!("{POSITION_PREFIX}{p}"), at.to_string()));
        [(TOPIC.to_string(), topic.to_string())].into_iter().chain(ids).chain(positions).collect()
    }

    /// Refuses to add `topic`'s files to a table of another topic (`a.b` and `a_b` name one table).
    pub fn check_topic(&self, topic: &str) -> Result<(), StateError> {
        match self.topic.as_deref() {
            Some(table) if table != topic => {
                Err(StateError::Topic { table: table.to_string(), topic: topic.to_string() })
            }
            _ => Ok(()),
        }
    }

    /// Refuses an archive of another topic incarnation than the table's files came from (a table or
    /// an archive that does not know its topic ID agrees with any).
    pub fn check_incarnation(&self, archive: Option<&str>) -> Result<(), StateError> {
        match (self.topic_id.as_deref(), archive) {
            (Some(table), Some(archive)) if table != archive => {
                Err(StateError::Incarnation { table: table.to_string(), archive: archive.to_string() })
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_properties_a_commit_sets_read_back_as_its_state() {
        let moved = BTreeMap::from([(0, 120), (7, 3)]);
        let set = TableState::properties("t.1", Some("AbC"), &moved);
        let mut all = vec![("write.format.default".to_string(), "parquet".to_string())];
        all.extend(set);
        let state = TableState::from_properties(all.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        assert_eq!(state, TableState { topic: Some("t.1".into()), topic_id: Some("AbC".into()), positions: moved });
    }

    #[test]
    fn a_position_that_is_not_a_number_is_refused_not_read_as_none() {
        let keys = ["0", "-1", "05", "+5"].map(|p| format!("kafka-s3-archiver.position.{p}"));
        let values = ["x", "5", "5", "5"];
        for (key, value) in keys.iter().map(String::as_str).zip(values) {
            let read = TableState::from_properties([(key, value)]);
            assert_eq!(read, Err(StateError::Position { key: key.into(), value: value.into() }));
        }
        let negative = TableState::from_properties([("kafka-s3-archiver.position.0", "-3")]);
        assert!(negative.is_err());
    }

    #[test]
    fn another_incarnation_is_refused() {
        let state = TableState { topic_id: Some("one".into()), ..TableState::default() };
        assert!(state.check_incarnation(Some("one")).is_ok());
        assert!(state.check_incarnation(None).is_ok());
        let other = Err(StateError::Incarnation { table: "one".into(), archive: "two".into() });
        assert_eq!(state.check_incarnation(Some("two")), other);
        assert!(TableState::default().check_incarnation(Some("two")).is_ok());
    }

    #[test]
    fn another_topic_is_refused_and_a_table_that_does_not_say_agrees_with_any() {
        let state = TableState { topic: Some("a.b".into()), ..TableState::default() };
        assert!(state.check_topic("a.b").is_ok());
        let other = Err(StateError::Topic { table: "a.b".into(), topic: "a_b".into() });
        assert_eq!(state.check_topic("a_b"), other);
        assert!(TableState::default().check_topic("a_b").is_ok());
    }
}
