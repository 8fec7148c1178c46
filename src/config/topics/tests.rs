use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::*;
use crate::archive::time_bucket::BucketWidth;

fn minimal() -> Settings {
    Settings {
        brokers: Some("localhost:9092".into()),
        group: Some("g".into()),
        topics: Some(vec!["orders".into(), "clicks".into()]),
        topic_regex: Some("^logs-.*".into()),
        dest: Some("s3://bucket/pre".into()),
        ..Settings::default()
    }
}

/// `text` as the config file in `dir`.
fn file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("archiver.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn resolve(flags: Settings, text: &str) -> Result<ArchiverConfig, ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    flags.resolve(Some(&file(dir.path(), text)))
}

const TABLES: &str = r#"
    roll-records = 500
    roll-age = "1m"

    [topic."orders"]
    format = "jsonl"
    compression = "gzip"
    roll-records = 10

    [topic."^logs-z"]
    roll-records = 30

    [topic."^logs-"]
    time-buckets = "hour"
    roll-records = 20

    [topic."logs-zeta"]
    roll-records = 40
    "#;

#[test]
fn a_topic_takes_its_table_else_the_first_matching_pattern_in_file_order_else_the_top_level() {
    let c = resolve(minimal(), TABLES).unwrap();
    let p = |topic| c.pipeline.profiles.for_topic(topic).clone();
    let orders = p("orders");
    assert_eq!((orders.spec.format(), orders.spec.compression()), (Format::Jsonl, Compression::Gzip));
    assert_eq!(orders.roll.max_records, 10);
    assert_eq!(orders.roll.max_age, Duration::from_secs(60), "the top level's, where the table is silent");
    assert_eq!((p("clicks").spec.format(), p("clicks").roll.max_records), (Format::Parquet, 500));
    // `^logs-z` comes first in the file, though `^logs-` sorts first: the file's order decides.
    assert_eq!(p("logs-zap").roll.max_records, 30);
    assert_eq!(p("logs-zap").bucketing, None);
    assert_eq!(p("logs-app").roll.max_records, 20);
    assert_eq!(p("logs-app").bucketing.map(|b| b.width), Some(BucketWidth::Hour));
    assert_eq!(p("logs-zeta").roll.max_records, 40, "a name beats the patterns");
}

#[test]
fn flags_reach_into_the_tables_where_they_are_silent() {
    let flags = Settings { roll_age: Some("7s".parse().unwrap()), roll_records: Some(9), ..minimal() };
    let c = resolve(flags, TABLES).unwrap();
    let orders = c.pipeline.profiles.for_topic("orders");
    assert_eq!((orders.roll.max_age, orders.roll.max_records), (Duration::from_secs(7), 10), "the table wins");
    assert_eq!(c.pipeline.profiles.for_topic("clicks").roll.max_records, 9);
    // `--print-config` and `--check` resolve the settings in effect again: the tables stay, in order.
    let dir = tempfile::tempdir().unwrap();
    let again = minimal().effective(Some(&file(dir.path(), TABLES))).unwrap().resolve(None).unwrap();
    assert_eq!(again.pipeline.profiles.for_topic("logs-zap").roll.max_records, 30);
}

#[test]
fn print_config_shows_each_table_with_its_settings_in_effect_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let shown = minimal().effective(Some(&file(dir.path(), TABLES))).unwrap().to_toml();
    let order: Vec<usize> = ["[topic.orders]", "[topic.\"^logs-z\"]", "[topic.\"^logs-\"]", "[topic.logs-zeta]"]
        .iter()
        .map(|t| shown.find(t).unwrap_or_else(|| panic!("{t} missing from:\n{shown}")))
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{shown}");
    let orders = &shown[order[0]..order[1]];
    assert!(orders.contains("roll-records = 10") && orders.contains("roll-age = \"1m\""), "{orders}");
    assert!(!orders.contains("brokers"), "only per-topic settings: {orders}");
    // What is shown is a file that gives the same settings.
    let again = Settings::default().resolve(Some(&file(dir.path(), &shown))).unwrap();
    assert_eq!(again.pipeline.profiles.for_topic("logs-zap").roll.max_records, 30);
}

#[test]
fn a_table_takes_only_per_topic_settings_and_says_which_it_does_not() {
    let err = resolve(minimal(), "[topic.\"orders\"]\nbrokers = \"x:1\"\n").unwrap_err().to_string();
    assert!(err.contains("[topic.\"orders\"]") && err.contains("brokers cannot be set per topic"), "{err}");
    let err = resolve(minimal(), "[topic.\"orders\"]\nroll-sise = 1\n").unwrap_err().to_string();
    assert!(err.contains("roll-sise"), "{err}");
}

#[test]
fn a_table_names_an_archived_topic_or_a_valid_pattern() {
    let err = resolve(minimal(), "[topic.\"ordrs\"]\nformat = \"jsonl\"\n").unwrap_err().to_string();
    assert!(err.contains("\"ordrs\"") && err.contains("not a topic being archived"), "{err}");
    assert!(resolve(minimal(), "[topic.\"logs-new\"]\nformat = \"jsonl\"\n").is_ok(), "matched by --topic-regex");
    let err = resolve(minimal(), "[topic.\"^logs-(\"]\nformat = \"jsonl\"\n").unwrap_err().to_string();
    assert!(err.contains("not a regular expression"), "{err}");
}

#[test]
fn each_table_is_validated_layered_over_the_top_level() {
    let cases = [
        ("[topic.\"orders\"]\nroll-records = 0\n", "--roll-records"),
        ("[topic.\"orders\"]\nformat = \"jsonl\"\ncompression = \"snappy\"\n", "--compression"),
        ("claims = false\n[topic.\"^logs-\"]\ntime-buckets = \"day\"\n", "need claims"),
        ("[topic.\"orders\"]\ndlq-topic = \"orders-dlq\"\n", "--value-format json"),
        ("[topic.\"orders\"]\nvalue-format = \"json\"\n", "--value-schema is required"),
        (
            "[topic.\"orders\"]\nvalue-format = \"json\"\nvalue-schema = \"infer\"\ndlq-topic = \"clicks\"\n",
            "being archived",
        ),
        (
            "[topic.\"^logs-\"]\nvalue-format = \"json\"\nvalue-schema = \"infer\"\ndlq-topic = \"logs-dlq\"\n",
            "being archived",
        ),
    ];
    for (text, expected) in cases {
        let err = resolve(minimal(), text).unwrap_err().to_string();
        assert!(err.contains("in [topic.") && err.contains(expected), "{text}: expected {expected} in: {err}");
    }
}

#[test]
fn a_table_that_sets_the_value_format_does_not_inherit_its_schema_or_dead_letter_topic() {
    let dir = tempfile::tempdir().unwrap();
    let avsc = dir.path().join("v.avsc");
    std::fs::write(&avsc, r#"{"type":"record","name":"V","fields":[{"name":"a","type":"long"}]}"#).unwrap();
    let text = format!(
        "value-format = \"json\"\nvalue-schema = {:?}\ndlq-topic = \"dlq\"\n[topic.\"^logs-\"]\nvalue-format = \"raw\"\n",
        avsc.display().to_string()
    );
    let c = resolve(minimal(), &text).unwrap();
    let logs = c.pipeline.profiles.for_topic("logs-app");
    assert!(matches!(logs.values, crate::values::ValueFormat::Raw) && logs.dlq_topic.is_none());
    assert_eq!(c.pipeline.profiles.for_topic("orders").dlq_topic.as_deref(), Some("dlq"));
}

#[test]
fn a_table_that_does_not_layer_is_shown_without_its_other_keys() {
    let dir = tempfile::tempdir().unwrap();
    let text = "[topic.\"orders\"]\nformat = \"jsonl\"\n[topic.\"orders\".kafka]\n\"sasl.password\" = \"hunter2\"\n";
    let shown = minimal().effective(Some(&file(dir.path(), text))).unwrap().to_toml();
    assert!(!shown.contains("hunter2"), "{shown}");
    assert!(shown.contains("format = \"jsonl\""), "{shown}");
}

#[test]
fn a_dead_letter_topic_the_regex_subscribes_is_refused_as_the_subscription_anchors_it() {
    let flags = Settings { topic_regex: Some("logs|audit".into()), ..minimal() };
    let text = "value-format = \"json\"\nvalue-schema = \"infer\"\ndlq-topic = \"audit-dlq\"\n";
    assert!(resolve(flags.clone(), text).unwrap_err().to_string().contains("being archived"), "^logs|audit");
    let text = "value-format = \"json\"\nvalue-schema = \"infer\"\ndlq-topic = \"app-audit-dlq\"\n";
    let anchored = resolve(flags, text).unwrap_err().to_string();
    assert!(anchored.contains("being archived"), "librdkafka's ^logs|audit matches audit anywhere: {anchored}");
}

#[test]
fn every_per_topic_key_is_a_setting() {
    let all = Settings::defaults();
    let keys = toml::Table::try_from(&all).unwrap();
    for key in PER_TOPIC_KEYS {
        let known = keys.contains_key(key) || ["roll-schedule", "value-schema", "dlq-topic"].contains(&key);
        assert!(known, "{key} is not a setting");
        let table = format!("[topic.\"orders\"]\n{key} = 1\n");
        let err = resolve(minimal(), &table).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!err.contains("cannot be set per topic"), "{key}: {err}");
    }
}
