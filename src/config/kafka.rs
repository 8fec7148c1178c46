//! The source of `run`: brokers, group and topics; the librdkafka settings (the `[kafka]` table and
//! `--kafka KEY=VALUE` flags, and the ones the archiver owns); and which consumer groups' offsets it
//! keeps (`--archive-group-offsets`).

use std::collections::BTreeMap;
use std::time::Duration;

use regex_automata::meta::Regex;

use super::{invalid, non_empty, set, ConfigError, Settings, SourceConfig};

/// The shortest interval between two snapshots of the groups' offsets.
const MIN_GROUP_OFFSETS_INTERVAL: Duration = Duration::from_secs(1);

/// Which consumer groups' committed offsets are kept in the archive, and how often.
#[derive(Debug, Clone)]
pub struct GroupOffsetsConfig {
    /// Matches whole group names.
    pub groups: Regex,
    pub interval: Duration,
}

/// Librdkafka settings the archiver owns: its exactly-once logic depends on them. (`isolation.level`:
/// every instance of an archive must see the same records in a range, the committed ones.)
const RESERVED_KAFKA_KEYS: [&str; 7] = [
    "group.id",
    "bootstrap.servers",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "enable.partition.eof",
    "isolation.level",
];

impl Settings {
    /// `--archive-group-offsets` and its interval, checked.
    pub(super) fn group_offsets(&self) -> Result<Option<GroupOffsetsConfig>, ConfigError> {
        let Some(pattern) = &self.archive_group_offsets else { return Ok(None) };
        let groups = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| invalid("--archive-group-offsets", pattern, format!("not a regular expression: {e}")))?;
        let interval = set(self.group_offsets_interval, "--group-offsets-interval")?.0;
        if interval < MIN_GROUP_OFFSETS_INTERVAL {
            let why = format!("at least {MIN_GROUP_OFFSETS_INTERVAL:?}: each snapshot is an object in the archive");
            return Err(invalid("--group-offsets-interval", &format!("{interval:?}"), why));
        }
        Ok(Some(GroupOffsetsConfig { groups, interval }))
    }

    /// The `[kafka]` table with the `--kafka KEY=VALUE` flags over it.
    pub(super) fn kafka_props(&self) -> Result<BTreeMap<String, String>, ConfigError> {
        let mut props = self.kafka.clone().unwrap_or_default();
        for kv in self.kafka_flags.iter().flatten() {
            let (k, v) = parse_kafka_setting(kv)?;
            props.insert(k, v);
        }
        if let Some(k) = props.keys().find(|k| RESERVED_KAFKA_KEYS.contains(&k.as_str())) {
            let why = "the archiver sets this itself (use --brokers/--group for servers and group; it archives \
                       what a read_committed consumer sees)";
            return Err(invalid("--kafka", k, why.into()));
        }
        if let Some(strategy) = props.get("partition.assignment.strategy").filter(|s| s.trim() != "cooperative-sticky")
        {
            let why = "the archiver moves single partitions without a rebalance (incremental assignment), which \
                       only cooperative-sticky allows: leave it unset";
            return Err(invalid("--kafka", &format!("partition.assignment.strategy={strategy}"), why.into()));
        }
        if props.get("statistics.interval.ms").is_some_and(|v| v.trim() == "0") {
            let why = "the archiver reads librdkafka's statistics: to find partitions an out-of-range position \
                       stopped, and for its log-end and lag metrics; give an interval in ms (default 5000)";
            return Err(invalid("--kafka", "statistics.interval.ms=0", why.into()));
        }
        Ok(props)
    }
}

/// One `--kafka KEY=VALUE` setting.
pub fn parse_kafka_setting(kv: &str) -> Result<(String, String), ConfigError> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| invalid("--kafka", kv, "write KEY=VALUE, e.g. security.protocol=SASL_SSL".into()))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// librdkafka settings whose values are not shown (`--print-config`).
pub(super) fn is_secret(key: &str) -> bool {
    ["password", "secret", "sasl.jaas.config", "sasl.oauthbearer.config", "ssl.key.pem"]
        .iter()
        .any(|word| key.contains(word))
}

impl Settings {
    /// Brokers, group, the topics (a regex anchored at the start) and the librdkafka settings.
    pub(super) fn source(&self) -> Result<SourceConfig, ConfigError> {
        let brokers = non_empty(&self.brokers, "--brokers", "pass --brokers host:port (or KSA_BROKERS)")?;
        let group =
            non_empty(&self.group, "--group", "pass --group NAME (or KSA_GROUP); instances of one archive share it")?;
        let mut subscription: Vec<String> = Vec::new();
        for t in self.topics.iter().flatten() {
            crate::archive::partition::validate_topic(t).map_err(|e| invalid("--topic", t, e.to_string()))?;
            subscription.push(t.clone());
        }
        if let Some(re) = &self.topic_regex {
            if re.is_empty() {
                return Err(invalid("--topic-regex", re, "it is empty".into()));
            }
            subscription.push(if re.starts_with('^') { re.clone() } else { format!("^{re}") });
        }
        if subscription.is_empty() {
            let how = "name at least one topic to archive";
            return Err(ConfigError::Missing { name: "--topic or --topic-regex", how });
        }
        Ok(SourceConfig {
            brokers,
            group,
            subscription,
            kafka_props: self.kafka_props()?.into_iter().collect(),
            start_from: set(self.start_from, "--start-from")?,
            group_offsets: self.group_offsets()?,
        })
    }
}
