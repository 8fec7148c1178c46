//! Compaction on Apache Kafka: a compacted topic (small segments, an eager cleaner) really loses the
//! older records of each key, leaving holes in the offsets. The archiver, SIGKILLed mid-way and
//! restarted under a new group, archives exactly the surviving records, each once, and `verify` finds
//! the holes explained by the claims.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::generated;
use kafka_s3_archiver::source::convert::{kafka_headers, to_future_record};
use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;

const PARTITIONS: i32 = 2;
const BATCHES: usize = 8;
const PER_BATCH: usize = 250;
/// Distinct keys: most records are superseded by a later one with the same key.
const KEYS: usize = 60;

/// Keyed records (every 13th a tombstone, kept for the default day) in batches a little apart, so that they fill several
/// segments the cleaner may compact; then one record per partition to roll the last of them.
async fn produce_keyed(topic: &str) -> usize {
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", brokers()).set("linger.ms", "5").create().expect("producer");
    let mut sent = 0;
    for batch in 0..=BATCHES {
        let n = if batch == BATCHES { PARTITIONS as usize } else { PER_BATCH };
        let mut deliveries = Vec::new();
        for i in sent..sent + n {
            let mut rec = generated(i, 80);
            // Keys in no order, so the survivors (each key's last record) are scattered: holes between them.
            rec.key = Some(format!("key-{}", (i.wrapping_mul(2_654_435_761) >> 7) % KEYS).into_bytes());
            if i % 13 == 0 {
                rec.value = None;
            }
            let partition = (i % PARTITIONS as usize) as i32;
            let fr = to_future_record(topic, partition, &rec, kafka_headers(&rec));
            deliveries.push(producer.send_result(fr).map_err(|(e, _)| e).expect("queued"));
        }
        for d in deliveries {
            d.await.expect("delivery").map_err(|(e, _)| e).expect("delivered");
        }
        sent += n;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    sent
}

/// What survives compaction, once the cleaner has run and the topic reads the same twice in a row.
async fn survivors(topic: &str, produced: usize) -> BTreeMap<i32, Vec<Record>> {
    let started = Instant::now();
    let mut last = read_from_kafka(topic, PARTITIONS);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = read_from_kafka(topic, PARTITIONS);
        let count: usize = now.values().map(Vec::len).sum();
        if count < produced && now == last {
            return now;
        }
        assert!(started.elapsed() < Duration::from_secs(90), "{topic} was not compacted: {count} of {produced}");
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_surviving_records_of_a_compacted_topic_are_archived_exactly_once() {
    let topic = unique("compacted");
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "200"),
        ("min.cleanable.dirty.ratio", "0.01"),
        ("min.compaction.lag.ms", "0"),
    ];
    create_topic_with(&topic, PARTITIONS, &configs).await;
    let produced = produce_keyed(&topic).await;
    let expected = survivors(&topic, produced).await;
    let kept: usize = expected.values().map(Vec::len).sum();
    println!("{produced} records produced, {kept} survive compaction");
    let holes = expected.values().flat_map(|r| r.windows(2)).filter(|w| w[1].offset > w[0].offset + 1).count();
    assert!(holes > 0, "compaction left no holes");

    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();
    let mut first =
        ArchiverProcess::spawn("compacted-1", &archiver_args(&dest, &unique("compacted"), &topic, 40, spool.path()));
    wait_objects(store.as_ref(), &dest.prefix(), &topic, 3, &mut first).await;
    first.kill_hard();
    let mut second =
        ArchiverProcess::spawn("compacted-2", &archiver_args(&dest, &unique("compacted"), &topic, 40, spool.path()));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&expected), &mut [&mut second]).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    assert_exactly_once(&dest, &topic, &expected).await;
}
