//! Per-topic settings: the config file's `[topic."NAME"]` tables (exactly that topic) and
//! `[topic."^REGEX"]` tables (every topic the expression matches), each a few of the file settings
//! (format, compression, roll, time buckets, values, dead-letter topic, table) over the top-level ones. A topic
//! takes its own table if it has one, else the first matching pattern's in the file's order, else the
//! top level. Each table is validated as the top level is: the settings it gives, layered over the
//! top-level settings, must make a valid profile.

use std::fmt;
use std::sync::Arc;

use figment::providers::Serialized;
use figment::Figment;
use regex_automata::meta::Regex;
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{ConfigError, Settings};
use crate::archive::partition::validate_topic;
use crate::pipeline::{TopicMatch, TopicProfiles};
use crate::registry::SchemaCache;

/// The keys a `[topic."..."]` table may set; every other setting is one of the whole instance.
pub const PER_TOPIC_KEYS: [&str; 13] = [
    "format",
    "compression",
    "roll-records",
    "roll-bytes",
    "roll-age",
    "roll-schedule",
    "time-buckets",
    "time-source",
    "value-format",
    "value-schema",
    "keep-raw-value",
    "dlq-topic",
    "table",
];

/// The `[topic."..."]` tables, in the file's order (which decides between patterns).
#[derive(Debug, Clone, Default)]
pub struct TopicTables(pub Vec<(String, Settings)>);

impl Serialize for TopicTables {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, table) in &self.0 {
            map.serialize_entry(name, table)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for TopicTables {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = TopicTables;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tables of per-topic settings, [topic.\"NAME\"] or [topic.\"^REGEX\"]")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopicTables, A::Error> {
                let mut tables = Vec::new();
                while let Some(entry) = map.next_entry::<String, Settings>()? {
                    tables.push(entry);
                }
                Ok(TopicTables(tables))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

/// Whether `--topic-regex` `re` subscribes `topic`: `^` put before it, as the subscription does (by
/// Rust's regex syntax; librdkafka's differs in corners, e.g. classes like `[[:alpha:]]`).
pub(super) fn subscribed_by_regex(re: &str, topic: &str) -> bool {
    let anchored = if re.starts_with('^') { re.to_string() } else { format!("^{re}") };
    Regex::new(&anchored).is_ok_and(|re| re.is_match(topic))
}

impl Settings {
    /// Every topic's profile: the top level's, and each table's over it.
    pub(super) fn profiles(&self, schemas: &Arc<SchemaCache>) -> Result<TopicProfiles, ConfigError> {
        let mut profiles = TopicProfiles::uniform(self.profile(schemas)?);
        for (name, table) in self.topic.iter().flat_map(|t| &t.0) {
            let in_table = |error| ConfigError::Topic { table: name.clone(), error: Box::new(error) };
            let applies_to = self.applies_to(name)?;
            let profile = self.under(name, table)?.profile(schemas).map_err(in_table)?;
            profiles = profiles.with(applies_to, profile);
        }
        Ok(profiles)
    }

    /// The settings of the topics `table` applies to: its keys over these (the top level's).
    pub(super) fn under(&self, name: &str, table: &Settings) -> Result<Settings, ConfigError> {
        let keys = toml::Table::try_from(table).map_err(|e| ConfigError::Layering(e.to_string()))?;
        if let Some(key) = keys.keys().find(|k| !PER_TOPIC_KEYS.contains(&k.as_str())) {
            return Err(ConfigError::NotPerTopic { table: name.to_string(), key: key.clone() });
        }
        let mut top = Settings { topic: None, ..self.clone() };
        if keys.contains_key("value-format") {
            // The value schema and the dead-letter topic go with the value format that needs them.
            (top.value_schema, top.dlq_topic) = (None, None);
        }
        Figment::from(Serialized::defaults(top)).merge(Serialized::defaults(table)).extract().map_err(|e| {
            ConfigError::Topic { table: name.to_string(), error: Box::new(ConfigError::Layering(e.to_string())) }
        })
    }

    /// What a table's name matches: a pattern if it starts with `^`, else a topic this instance archives.
    fn applies_to(&self, name: &str) -> Result<TopicMatch, ConfigError> {
        let invalid = |why: String| super::invalid("a [topic] table", name, why);
        if name.starts_with('^') {
            let re = Regex::new(name).map_err(|e| invalid(format!("not a regular expression: {e}")))?;
            return Ok(TopicMatch::Pattern(re));
        }
        validate_topic(name).map_err(|e| invalid(e.to_string()))?;
        let named = self.topics.iter().flatten().any(|t| t == name);
        let matched = self.topic_regex.as_deref().is_some_and(|re| subscribed_by_regex(re, name));
        if !named && !matched {
            let why = "it is not a topic being archived: name it in topics (or --topic-regex), or start the \
                       table's name with ^ to match topics by a regular expression";
            return Err(invalid(why.into()));
        }
        Ok(TopicMatch::Name(name.to_string()))
    }

    /// The tables as they apply: each with every per-topic setting in effect for its topics.
    pub(super) fn tables_in_effect(&self) -> Option<TopicTables> {
        let tables = self.topic.as_ref()?.0.iter().map(|(name, table)| {
            let in_effect = self.under(name, table).and_then(|all| all.per_topic_only());
            // A table that does not layer is shown with its per-topic keys only (never a secret).
            let shown = in_effect.unwrap_or_else(|_| table.per_topic_only().unwrap_or_default());
            (name.clone(), shown)
        });
        Some(TopicTables(tables.collect()))
    }

    /// Only the settings a `[topic."..."]` table may give.
    fn per_topic_only(&self) -> Result<Settings, ConfigError> {
        let layering = |e: &dyn fmt::Display| ConfigError::Layering(e.to_string());
        let mut keys = toml::Table::try_from(self).map_err(|e| layering(&e))?;
        keys.retain(|k, _| PER_TOPIC_KEYS.contains(&k));
        keys.try_into().map_err(|e| layering(&e))
    }
}

#[cfg(test)]
mod tests;
