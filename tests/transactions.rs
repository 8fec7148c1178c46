//! Transactions on Apache Kafka: a transactional producer interleaves committed and aborted
//! transactions over two partitions; the archiver, SIGKILLed mid-stream and restarted under a new group,
//! archives exactly the committed records, each once. Aborted records and transaction markers take
//! offsets that no object holds: `verify` finds those holes explained by the claims.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::generated;
use kafka_s3_archiver::source::convert::{kafka_headers, to_future_record};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, Producer};

const PARTITIONS: i32 = 2;
const TRANSACTIONS: usize = 30;
const PER_TRANSACTION: usize = 40;

/// Produces `TRANSACTIONS` transactions of `PER_TRANSACTION` records over the partitions, aborting
/// every third; returns the committed records per partition, with their offsets.
async fn produce_transactions(topic: &str) -> BTreeMap<i32, Vec<Record>> {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers())
        .set("transactional.id", unique("archiver-test-tx"))
        .set("linger.ms", "5")
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(30);
    producer.init_transactions(timeout).expect("init_transactions");
    let mut committed: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
    for t in 0..TRANSACTIONS {
        producer.begin_transaction().expect("begin_transaction");
        let mut sent = Vec::new();
        for i in t * PER_TRANSACTION..(t + 1) * PER_TRANSACTION {
            let rec = generated(i, 100);
            let partition = (i % PARTITIONS as usize) as i32;
            let delivery = producer
                .send_result(to_future_record(topic, partition, &rec, kafka_headers(&rec)))
                .map_err(|(e, _)| e)
                .expect("queued");
            sent.push((rec, delivery));
        }
        let mut delivered = Vec::new();
        for (mut rec, delivery) in sent {
            let d = delivery.await.expect("delivery").map_err(|(e, _)| e).expect("delivered");
            rec.offset = d.offset;
            delivered.push((d.partition, rec));
        }
        if t % 3 == 2 {
            producer.abort_transaction(timeout).expect("abort_transaction");
        } else {
            producer.commit_transaction(timeout).expect("commit_transaction");
            for (p, rec) in delivered {
                committed.entry(p).or_default().push(rec);
            }
        }
    }
    for records in committed.values_mut() {
        records.sort_by_key(|r| r.offset);
    }
    committed
}

#[tokio::test(flavor = "multi_thread")]
async fn only_committed_records_are_archived_exactly_once_across_a_crash() {
    let topic = unique("transactions");
    create_topic(&topic, PARTITIONS).await;
    let committed = produce_transactions(&topic).await;
    let aborted_offsets = TRANSACTIONS / 3 * PER_TRANSACTION;
    let committed_count: usize = committed.values().map(Vec::len).sum();
    assert_eq!(committed_count, TRANSACTIONS * PER_TRANSACTION - aborted_offsets);

    let dest = TestDest::s3().await;
    let store = dest.store().await;
    let spool = tempfile::tempdir().unwrap();
    let mut first = ArchiverProcess::spawn("tx-1", &archiver_args(&dest, &unique("tx"), &topic, 70, spool.path()));
    wait_objects(store.as_ref(), &dest.prefix(), &topic, 4, &mut first).await;
    first.kill_hard();
    let mut second = ArchiverProcess::spawn("tx-2", &archiver_args(&dest, &unique("tx"), &topic, 70, spool.path()));
    wait_archived(store.as_ref(), &dest.prefix(), &topic, &last_offsets(&committed), &mut [&mut second]).await;
    assert!(second.terminate().success(), "{}", second.log_text());
    // Every committed record once, bytes equal; no aborted record; the holes explained by the claims.
    assert_exactly_once(&dest, &topic, &committed).await;
}

/// The range probe (used when a re-written claimed range stops receiving records) tells a range that a
/// `read_committed` consumer sees nothing of (an aborted transaction and its marker) from one that still
/// holds a record.
#[tokio::test(flavor = "multi_thread")]
async fn the_range_probe_sees_what_a_read_committed_consumer_sees() {
    use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
    use kafka_s3_archiver::source::probe::{probe_config, probe_range, RangeProbe};
    let topic = unique("probe");
    create_topic(&topic, PARTITIONS).await;
    let committed = produce_transactions(&topic).await;
    let offsets: Vec<i64> = committed[&0].iter().map(|r| r.offset).collect();
    // The first hole between committed records: an aborted transaction's records, and markers.
    let (before, after) = offsets.windows(2).map(|w| (w[0], w[1])).find(|(a, b)| b - a > 1).expect("a hole");
    let tp = TopicPartition::new(&topic, 0).unwrap();
    let config = probe_config(&brokers(), &[]);
    let probe = |s, e| probe_range(&config, &tp, OffsetRange::new(s, e).unwrap()).expect("probe");
    assert_eq!(probe(before + 1, after - 1), RangeProbe::Empty { log_start: 0 }, "hole {}..={}", before + 1, after - 1);
    assert_eq!(probe(before + 1, after), RangeProbe::HasRecords);
    assert_eq!(probe(before, before), RangeProbe::HasRecords);
    // Past the log's end nothing can be told yet.
    let end = *offsets.last().unwrap();
    assert_eq!(probe(end + 1, end + 100), RangeProbe::Unknown);
}
