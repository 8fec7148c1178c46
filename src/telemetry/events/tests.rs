use super::*;

/// The series of a per-partition gauge, by its labels' values.
fn series(m: &Metrics, name: &str) -> Vec<(Vec<String>, f64)> {
    values(m, name, |s| s.get_gauge().get_value())
}

/// The series of a per-partition counter, by its labels' values.
fn counted(m: &Metrics, name: &str) -> Vec<(Vec<String>, f64)> {
    values(m, name, |s| s.get_counter().get_value())
}

fn values(m: &Metrics, name: &str, value: fn(&prometheus::proto::Metric) -> f64) -> Vec<(Vec<String>, f64)> {
    let families = m.registry.gather();
    let family = families.iter().find(|f| f.name() == name);
    family.map_or(Vec::new(), |f| {
        f.get_metric()
            .iter()
            .map(|s| (s.get_label().iter().map(|l| l.value().to_string()).collect(), value(s)))
            .collect()
    })
}

#[test]
fn a_partitions_lag_is_told_only_once_its_archived_offset_is_known() {
    let m = Metrics::default();
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 100 });
    assert_eq!(series(&m, "ksa_archived_offset"), vec![], "no archived offset before recovery");
    assert_eq!(series(&m, "ksa_unarchived_records"), vec![], "no lag before recovery");
    let tp = TopicPartition::new("t", 0).unwrap();
    m.archived_through(&tp, 49, None);
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 100 });
    assert_eq!(series(&m, "ksa_unarchived_records"), vec![(vec!["0".to_string(), "t".to_string()], 50.0)]);
    m.forget_partition(&tp);
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 120 });
    assert_eq!(series(&m, "ksa_unarchived_records"), vec![], "no lag once revoked, until recovered again");
}

#[test]
fn a_partitions_archive_rate_and_lag_in_seconds_are_told_while_it_is_held() {
    let m = Metrics::default();
    let tp = TopicPartition::new("t", 0).unwrap();
    let newest = crate::clock::wall_clock_ms() - 90_000;
    m.emit(Event::ObjectUploaded(ObjectUploaded {
        tp: &tp,
        key: "k",
        range: OffsetRange::new(0, 49).unwrap(),
        records: 50,
        bytes: 1,
        row_groups: None,
        elapsed: Duration::ZERO,
        reason: RollReason::Age,
        outcome: PutOutcome::Created,
        values: None,
        keys: None,
        newest_record_ms: Some(newest),
    }));
    let labels = vec!["0".to_string(), "t".to_string()];
    assert_eq!(series(&m, "ksa_archived_record_timestamp_seconds"), vec![(labels.clone(), (newest / 1000) as f64)]);
    assert_eq!(counted(&m, "ksa_partition_records_archived_total"), vec![(labels.clone(), 50.0)]);
    assert_eq!(counted(&m, "ksa_partition_objects_uploaded_total"), vec![(labels.clone(), 1.0)]);
    assert_eq!(series(&m, "ksa_archive_lag_seconds"), vec![], "told with the log end");
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 70 });
    let lag = series(&m, "ksa_archive_lag_seconds")[0].1;
    assert!((90.0..=92.0).contains(&lag), "20 records wait, the newest archived is 90 s old: {lag}");
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 50 });
    assert_eq!(series(&m, "ksa_archive_lag_seconds"), vec![(labels, 0.0)], "all archived");
    m.forget_partition(&tp); // As after a restart: recovered, nothing uploaded yet.
    m.archived_through(&tp, 49, None);
    m.emit(Event::LogEnd { topic: "t", partition: 0, log_end: 80 });
    assert_eq!(series(&m, "ksa_archive_lag_seconds"), vec![], "records wait, for how long is not known");
    m.forget_partition(&tp);
    assert_eq!(series(&m, "ksa_archive_lag_seconds"), vec![]);
    assert_eq!(counted(&m, "ksa_partition_records_archived_total"), vec![], "its next owner counts");
}

#[test]
fn a_stopped_partition_is_told_with_its_reason_until_it_is_revoked() {
    let m = Metrics::default();
    let tp = TopicPartition::new("t", 3).unwrap();
    assert_eq!(series(&m, "ksa_partition_stopped"), vec![]);
    m.emit(Event::PartitionStopped { tp: &tp, reason: StopReason::ArchiveAheadOfLog, why: "re-created" });
    let labels = ["3", "archive_ahead_of_log", "t"].map(String::from).to_vec();
    assert_eq!(series(&m, "ksa_partition_stopped"), vec![(labels, 1.0)]);
    m.forget_partition(&tp);
    assert_eq!(series(&m, "ksa_partition_stopped"), vec![], "its next owner tells it");
}
