//! Per-topic profiles: how one topic's files are written (format, compression, roll, time buckets, value
//! format and schema, dead-letter topic). Each partition's writer holds its topic's profile, chosen when
//! the partition is assigned: the profile named exactly after the topic, else the first pattern (in the
//! order given) that matches it, else the default.

use std::sync::Arc;

use regex_automata::meta::Regex;

use crate::archive::time_bucket::Bucketing;
use crate::encode::roll::RollPolicy;
use crate::encode::FileSpec;
use crate::values::ValueFormat;

/// How one topic's files are written.
#[derive(Debug, Clone)]
pub struct TopicProfile {
    pub spec: FileSpec,
    pub roll: RollPolicy,
    /// Time-bucketed data folders (lake layout), if any.
    pub bucketing: Option<Bucketing>,
    /// How record values are archived (raw, or typed JSON).
    pub values: ValueFormat,
    /// How record keys are archived (raw, or typed by the Schema Registry's schemas).
    pub keys: ValueFormat,
    /// Where records whose value does not fit also go (`--dlq-topic`).
    pub dlq_topic: Option<String>,
    /// Whether its durable files are also committed to its Iceberg table (`--table iceberg`).
    pub table: bool,
}

/// What a profile applies to.
#[derive(Debug, Clone)]
pub enum TopicMatch {
    /// Exactly this topic.
    Name(String),
    /// Every topic this regular expression matches (anywhere in the name, unless anchored).
    Pattern(Regex),
}

impl TopicMatch {
    fn matches(&self, topic: &str) -> bool {
        match self {
            TopicMatch::Name(name) => name == topic,
            TopicMatch::Pattern(re) => re.is_match(topic),
        }
    }
}

/// Every topic's profile: the default and the overrides.
#[derive(Debug, Clone)]
pub struct TopicProfiles {
    default: Arc<TopicProfile>,
    /// In the order given; names before patterns when choosing.
    overrides: Vec<(TopicMatch, Arc<TopicProfile>)>,
}

impl TopicProfiles {
    /// Every topic written the same way.
    pub fn uniform(profile: TopicProfile) -> Self {
        Self { default: Arc::new(profile), overrides: Vec::new() }
    }

    /// Also `profile` for the topics `applies_to` matches (after the ones added before it).
    pub fn with(mut self, applies_to: TopicMatch, profile: TopicProfile) -> Self {
        self.overrides.push((applies_to, Arc::new(profile)));
        self
    }

    /// The profile of `topic`: its own by name, else the first pattern's that matches, else the default.
    pub fn for_topic(&self, topic: &str) -> &Arc<TopicProfile> {
        let named = self.overrides.iter().find(|(m, _)| matches!(m, TopicMatch::Name(_)) && m.matches(topic));
        let matched = || self.overrides.iter().find(|(m, _)| matches!(m, TopicMatch::Pattern(_)) && m.matches(topic));
        named.or_else(matched).map_or(&self.default, |(_, p)| p)
    }

    /// Whether any topic's files go into time buckets.
    pub fn any_bucketed(&self) -> bool {
        std::iter::once(&self.default).chain(self.overrides.iter().map(|(_, p)| p)).any(|p| p.bucketing.is_some())
    }

    /// Whether any topic's files are committed to a table.
    pub fn any_table(&self) -> bool {
        std::iter::once(&self.default).chain(self.overrides.iter().map(|(_, p)| p)).any(|p| p.table)
    }

    /// Whether any topic sends records whose value does not fit to a dead-letter topic.
    pub fn any_dead_letters(&self) -> bool {
        std::iter::once(&self.default).chain(self.overrides.iter().map(|(_, p)| p)).any(|p| p.dlq_topic.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{Compression, Format};
    use std::time::Duration;

    fn profile(format: Format, max_records: u64) -> TopicProfile {
        TopicProfile {
            spec: FileSpec::new(format, Compression::None).unwrap(),
            roll: RollPolicy { max_records, max_bytes: 1 << 20, max_age: Duration::from_secs(60), schedule: None },
            bucketing: None,
            values: ValueFormat::Raw,
            keys: ValueFormat::Raw,
            dlq_topic: None,
            table: false,
        }
    }

    fn records(profiles: &TopicProfiles, topic: &str) -> u64 {
        profiles.for_topic(topic).roll.max_records
    }

    #[test]
    fn a_name_beats_patterns_and_the_first_matching_pattern_beats_later_ones() {
        let profiles = TopicProfiles::uniform(profile(Format::Parquet, 1))
            .with(TopicMatch::Pattern(Regex::new("^logs-").unwrap()), profile(Format::Jsonl, 2))
            .with(TopicMatch::Pattern(Regex::new("^logs-audit").unwrap()), profile(Format::Jsonl, 3))
            .with(TopicMatch::Name("logs-audit-eu".into()), profile(Format::Jsonl, 4));
        assert_eq!(records(&profiles, "orders"), 1, "no match: the default");
        assert_eq!(records(&profiles, "logs-app"), 2);
        assert_eq!(records(&profiles, "logs-audit-us"), 2, "the first pattern that matches, in the order given");
        assert_eq!(records(&profiles, "logs-audit-eu"), 4, "a name beats every pattern, wherever it is");
        assert_eq!(records(&profiles, "app-logs-x"), 1, "anchored: logs- must start the name");
        assert_eq!(records(&profiles, "logs-audit-eu2"), 2, "a name matches only itself");
    }

    #[test]
    fn any_bucketed_and_any_dead_letters_look_at_every_profile() {
        let plain = TopicProfiles::uniform(profile(Format::Parquet, 1));
        assert!(!plain.any_bucketed() && !plain.any_dead_letters());
        let mut special = profile(Format::Parquet, 1);
        special.bucketing = Some(Bucketing {
            width: crate::archive::time_bucket::BucketWidth::Hour,
            source: crate::archive::time_bucket::TimeSource::Record,
        });
        special.dlq_topic = Some("dlq".into());
        let some = plain.with(TopicMatch::Name("orders".into()), special);
        assert!(some.any_bucketed() && some.any_dead_letters());
    }
}
