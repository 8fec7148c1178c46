//! librdkafka's own memory with 1,000 partitions of mixed-size records (the many-partitions memory
//! target's "librdkafka's queue"): a plain consumer that drops each message, slowed to ~100k records/s
//! so that its prefetch queue stays full as the archiver's does, and its peak RSS (VmHWM) per
//! `queued.max.messages.kbytes`. Each setting runs in a process of its own.
//!
//! Usage (against the test services):
//! `./localstack/with-services.sh sh -c 'B="$CARGO_TARGET_DIR/release/examples/librdkafka_memory";
//!  cargo build --release --example librdkafka_memory && $B produce && $B consume 65536 && $B consume 16384'`
//! Further `key=value` arguments after the queue size are set on the consumer too (e.g. `fetch.max.bytes=8388608`).

use std::time::Duration;

use kafka_s3_archiver::commands::demo::generate::{generated, produce_records};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

const TOPIC: &str = "librdkafka-memory";
const RECORDS: usize = 1_000_000;
const PARTITIONS: i32 = 1000;
/// One record in this many has a 512 KiB value; the others 51 B to 2 KiB (as the bench's mixed values).
const LARGE_EVERY: usize = 997;

fn peak_rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .map_or("VmHWM unknown".into(), |l| l.split_whitespace().collect::<Vec<_>>().join(" "))
}

async fn produce(brokers: &str) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().expect("admin client");
    let topic = NewTopic::new(TOPIC, PARTITIONS, TopicReplication::Fixed(1));
    admin.create_topics(&[topic], &AdminOptions::new()).await.expect("create topic");
    let mut rng = fastrand::Rng::with_seed(3);
    let sizes: Vec<usize> =
        (0..RECORDS).map(|i| if i % LARGE_EVERY == 0 { 512 << 10 } else { rng.usize(51..=2048) }).collect();
    produce_records(brokers, TOPIC, PARTITIONS, 0..RECORDS, |i| generated(i, sizes[i])).await.expect("produce");
}

fn consume(brokers: &str, queue_kbytes: &str, extra: &[String]) {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", brokers)
        .set("group.id", "librdkafka-memory")
        .set("enable.auto.commit", "false")
        .set("fetch.queue.backoff.ms", "20")
        .set("queued.max.messages.kbytes", queue_kbytes);
    for setting in extra {
        let (k, v) = setting.split_once('=').expect("key=value");
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    let started = std::time::Instant::now();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Beginning).expect("partition");
    }
    consumer.assign(&tpl).expect("assign");
    let mut consumed = 0;
    while consumed < RECORDS {
        if let Some(Ok(message)) = consumer.poll(Duration::from_millis(100)) {
            drop(message);
            consumed += 1;
            if consumed % 100 == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!("queued.max.messages.kbytes={queue_kbytes} {extra:?}: peak RSS {}, {secs:.1}s", peak_rss());
}

#[tokio::main]
async fn main() {
    let brokers = std::env::var("KSA_TEST_BROKERS").expect("KSA_TEST_BROKERS (run under localstack/with-services.sh)");
    let args: Vec<String> = std::env::args().collect();
    match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("produce"), _) => produce(&brokers).await,
        (Some("consume"), Some(kbytes)) => consume(&brokers, kbytes, &args[3..]),
        _ => eprintln!("usage: librdkafka_memory produce | consume QUEUED_MAX_MESSAGES_KBYTES"),
    }
}
