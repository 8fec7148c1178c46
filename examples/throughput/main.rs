//! Throughput benchmark of `run` against real services (start them with `localstack/bench.sh`).
//!
//! For compressible values (JSON-like, as `generate` makes them) and for incompressible ones (random
//! bytes), produces N records to a topic of 4 partitions (or as many as asked), then measures, in the same run:
//! 1. a plain rdkafka consumer that discards records (the ceiling the broker allows), and one that hands
//!    each record to the archiver's encoder (`encode_alone.rs`: what consuming and encoding cost alone);
//! 2. plain S3 PUTs of the same number of bytes in 16 MiB objects (the ceiling the store allows);
//! 3. the archiver binary archiving the topic to a local directory (the pipeline without S3's costs),
//!    to S3, to S3 with the topic's Iceberg table (a commit a second; how long after the archive the
//!    table held every record too is printed), and to S3 as JSON lines, each from its start until the
//!    archive holds every record (and from its partitions recovered, the steady rate), with its CPU
//!    seconds (user + system, from /proc), its peak RSS (VmHWM) and what the machine's cores did
//!    meanwhile (how busy, and the broker's and the S3 server's CPU seconds); after the run to S3, plain S3 PUTs
//!    of as many objects as it made, of their sizes, one per partition in flight (`replay.rs`);
//! 4. the peers (`peers.rs`: Apache Flink's FileSink, Kafka Connect with Apache Iceberg's sink) on the
//!    same topic and S3, each from its start until every record is durable, checked exactly once;
//! 5. a plain rdkafka producer writing the same records to a new topic, and `restore` of the S3 archive
//!    into a new topic.
//!
//! It ends with one table of all of them and the performance targets' ratios.
//!
//! Usage: cargo run --example throughput -- [records] [value-bytes] [partitions] [max-buffer-bytes]
//! (KSA_BENCH_VALUES=compressible, =random or =mixed measures only those values — mixed sizes with a few
//! 512 KiB ones, only when asked for; =avro or =protobuf, only when asked for too, ~1 KiB orders in the
//! Schema Registry's wire format, archived raw and with `--value-format avro` or `protobuf`;
//! KSA_BENCH_PRODUCER=python writes the records as a user's application does (`produce.py`: Python
//! confluent-kafka's default batches, 0-3 headers; no producer and restore rows then); KSA_BENCH_PEERS
//! names the peers to run (default both, "" none); KSA_BENCH_ARCHIVER_ARGS adds flags to the
//! archiver's command line, e.g. "--spool-memory-threshold 32MiB".)

mod archiver;
#[path = "../../benches/data/avro_order.rs"]
mod avro_order;
mod encode_alone;
mod measure;
mod peers;
mod producer;
#[path = "../../benches/data/proto_order.rs"]
mod proto_order;
mod registry;
mod replay;
mod restore;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::{generated, produce_records};
use kafka_s3_archiver::encode::spool::SpoolData;
use kafka_s3_archiver::store::{ObjectStore, S3Options, S3Store};
use kafka_s3_archiver::values::wire::{frame, SchemaId};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::Message;
use registry::Typed;

use archiver::{archiver, Target};
use measure::{cpu_seconds, memory_state, MachineCpu};

// The service's allocator, so that the encoder measured alone runs as it does in `run`.
kafka_s3_archiver::service_allocator!();

/// Size of the plain S3 PUTs, the archiver's `--roll-bytes` here.
const PUT_OBJECT_BYTES: usize = 16 << 20;
/// Plain S3 PUTs in flight at most (the archiver uploads one file per partition at a time).
const MAX_PUTS_IN_FLIGHT: usize = 16;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run this through localstack/bench.sh"))
}

/// What the record values hold.
#[derive(Debug, Clone, Copy)]
enum Values {
    /// JSON-like text padded with one repeated byte, as `generate` makes it.
    Compressible,
    /// Random bytes.
    Random,
    /// Compressible values of mixed sizes (a twentieth to twice the given size), and one record in
    /// every 997 a large random value of 512 KiB: "mixed sizes, a few large".
    Mixed,
    /// ~1 KiB orders in the Schema Registry's wire format, of the schema registered under this ID.
    Registry(Typed, SchemaId),
}

/// The size of the few large values of `Values::Mixed`.
const LARGE_VALUE_BYTES: usize = 512 << 10;

impl Values {
    fn name(self) -> &'static str {
        match self {
            Values::Compressible => "compressible",
            Values::Random => "random",
            Values::Mixed => "mixed",
            Values::Registry(typed, _) => typed.name(),
        }
    }

    fn record(self, i: usize, value_size: usize) -> Record {
        let mut rng = fastrand::Rng::with_seed(i as u64);
        let random = |rng: &mut fastrand::Rng, n: usize| Some((0..n).map(|_| rng.u8(..)).collect());
        match self {
            Values::Compressible => generated(i, value_size),
            Values::Random => Record { value: random(&mut rng, value_size), ..generated(i, value_size) },
            Values::Mixed if i.is_multiple_of(997) => {
                Record { value: random(&mut rng, LARGE_VALUE_BYTES), ..generated(i, 0) }
            }
            Values::Mixed => generated(i, rng.usize(value_size / 20..=value_size * 2)),
            Values::Registry(typed, id) => Record { value: Some(frame(id, &typed.order(i))), ..generated(i, 0) },
        }
    }
}

/// One topic's worth of produced records, and how to reach the services.
struct Bench {
    brokers: String,
    topic: String,
    values: Values,
    records: usize,
    partitions: i32,
    /// Keys + values produced, in bytes.
    payload_bytes: u64,
    /// Last offset produced per partition.
    last: BTreeMap<i32, i64>,
    /// The archiver's memory budget (`--max-buffer-bytes`), its default when `None`.
    budget: Option<String>,
    /// More flags for the archiver.
    archiver_args: String,
}

/// One line of the results table.
struct Row {
    contender: String,
    values: Values,
    /// From start to the last record: what a user sees.
    seconds: f64,
    /// From its start-up done (its first record, its partitions recovered) to the last record.
    steady_seconds: Option<f64>,
    /// The archiver's: from its start-up done to its pipeline having taken the last record.
    taken_seconds: Option<f64>,
    cpu_seconds: f64,
    peak_rss_kib: Option<u64>,
}

/// When a contender run in this process started, and the CPU time the process had used by then.
struct Started {
    at: Instant,
    cpu_seconds: f64,
}

impl Started {
    fn now() -> Self {
        let cpu_seconds = cpu_seconds("self");
        Self { at: Instant::now(), cpu_seconds }
    }
}

impl Row {
    /// The row of `contender`, run in this process since `started` (no start-up of its own, no RSS).
    fn since(started: &Started, contender: String, values: Values) -> Row {
        Row {
            contender,
            values,
            seconds: started.at.elapsed().as_secs_f64(),
            steady_seconds: None,
            taken_seconds: None,
            cpu_seconds: cpu_seconds("self") - started.cpu_seconds,
            peak_rss_kib: None,
        }
    }

    fn records_per_s(&self, bench: &Bench) -> f64 {
        bench.records as f64 / self.seconds
    }

    fn steady_records_per_s(&self, bench: &Bench) -> Option<f64> {
        self.steady_seconds.map(|s| bench.records as f64 / s)
    }

    fn cpu_per_gb(&self, bench: &Bench) -> f64 {
        self.cpu_seconds / (bench.payload_bytes as f64 / 1e9)
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(100_000, |a| a.parse().expect("records"));
    let value_size: usize = args.next().map_or(1024, |a| a.parse().expect("value bytes"));
    let partitions: i32 = args.next().map_or(4, |a| a.parse().expect("partitions"));
    let budget: Option<String> = args.next();
    println!("{}", memory_state());
    let mut results = Vec::new();
    let only = std::env::var("KSA_BENCH_VALUES").ok();
    // Mixed sizes only when asked for (KSA_BENCH_VALUES=mixed): the many-partitions memory target; Avro
    // and Protobuf too (KSA_BENCH_VALUES=avro|protobuf): `--value-format avro|protobuf` against raw.
    let mut kinds = vec![Values::Compressible, Values::Random, Values::Mixed];
    if let Some(typed) = [Typed::Avro, Typed::Protobuf].into_iter().find(|t| only.as_deref() == Some(t.name())) {
        let subject = format!("bench-{}-{}-value", std::process::id(), typed.name());
        kinds = vec![Values::Registry(typed, registry::register(typed, &subject))];
    }
    let wanted =
        |v: &Values| only.as_deref().map_or(matches!(v, Values::Compressible | Values::Random), |o| o == v.name());
    for values in kinds.into_iter().filter(wanted) {
        let (bench, produced) = produce(values, records, value_size, partitions, budget.clone()).await;
        let mut rows = vec![plain_consumer(&bench), s3_put(&bench).await];
        if !matches!(values, Values::Registry(..)) {
            rows.push(encode_alone::consume_and_encode(&bench));
        }
        if let Values::Registry(typed, _) = values {
            for target in [Target::S3, Target::S3Typed(typed)] {
                let run = archiver(&bench, target).await;
                println!("{} ({}): {}", target.describe(), values.name(), run.details());
                rows.push(run.row(target, values));
            }
            results.push((bench, rows));
            continue;
        }
        for target in [Target::Directory, Target::S3, Target::S3Table, Target::S3JsonLines] {
            let run = archiver(&bench, target).await;
            println!("{} ({}): {}", target.describe(), values.name(), run.details());
            rows.push(run.row(target, values));
            if target == Target::S3 {
                rows.push(replay::replay_puts(&bench).await);
            }
        }
        rows.extend(peers::peers(&bench));
        // Records written by produce.py are not held here: nothing to produce again or restore against.
        if !produced.is_empty() {
            rows.push(producer::plain_producer(&bench, &produced).await);
            drop(produced);
            rows.extend(restore::restore_twice(&bench).await);
        }
        results.push((bench, rows));
    }
    print_table(&results);
}

/// Produces the bench's records; returns them per partition too.
async fn produce(
    values: Values,
    records: usize,
    value_size: usize,
    partitions: i32,
    budget: Option<String>,
) -> (Bench, BTreeMap<i32, Vec<Record>>) {
    let brokers = env("KSA_TEST_BROKERS");
    let topic = format!("bench-{}-{}", std::process::id(), values.name());
    create_topic(&brokers, &topic, partitions).await;
    let started = Instant::now();
    let by = std::env::var("KSA_BENCH_PRODUCER").unwrap_or_default();
    let (produced, last, payload_bytes) = if by == "python" {
        assert!(
            matches!(values, Values::Compressible | Values::Random | Values::Mixed),
            "produce.py writes compressible, random or mixed values"
        );
        let written = producer::python_producer(&brokers, &topic, records, value_size, values.name());
        (BTreeMap::new(), written.last, written.payload_bytes)
    } else {
        let produced = produce_records(&brokers, &topic, partitions, 0..records, |i| values.record(i, value_size))
            .await
            .expect("produce");
        let payload_bytes: u64 = produced
            .values()
            .flatten()
            .map(|r| (r.value.as_ref().map_or(0, Vec::len) + r.key.as_ref().map_or(0, Vec::len)) as u64)
            .sum();
        let last = produced.iter().map(|(p, r)| (*p, r.last().unwrap().offset)).collect();
        (produced, last, payload_bytes)
    };
    println!(
        "produced {records} records with {} values ({:.1} MB of keys+values) in {:.1}s, by {}",
        values.name(),
        payload_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        if by == "python" {
            "produce.py (Python confluent-kafka, its default batches, 0-3 headers)"
        } else {
            "the bench's generator"
        }
    );
    let archiver_args = std::env::var("KSA_BENCH_ARCHIVER_ARGS").unwrap_or_default();
    (Bench { brokers, topic, values, records, partitions, payload_bytes, last, budget, archiver_args }, produced)
}

/// Creates `topic` with `partitions` partitions (one replica).
async fn create_topic(brokers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", brokers).create().unwrap();
    admin
        .create_topics(&[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))], &AdminOptions::new())
        .await
        .unwrap();
}

/// A consumer of the bench topic from its start, alone in a group of its own (`bench-<name>-<pid>`) that
/// commits nothing: a rebalance starts its partitions over (see [`first_time`]).
fn subscribed_consumer(bench: &Bench, name: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bench.brokers)
        .set("group.id", format!("bench-{name}-{}", std::process::id()))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "3000")
        .set("heartbeat.interval.ms", "500")
        .create()
        .unwrap();
    consumer.subscribe(&[&bench.topic]).unwrap();
    consumer
}

/// A plain rdkafka consumer that discards the bench's records, timed from its creation (and from its
/// first record) to the last.
fn plain_consumer(bench: &Bench) -> Row {
    let machine_at_start = MachineCpu::now();
    let started = Started::now();
    let t0 = started.at;
    let consumer = subscribed_consumer(bench, "plain");
    let mut seen = 0usize;
    let mut first_at = None;
    let mut next = BTreeMap::new();
    while seen < bench.records {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            first_at.get_or_insert_with(Instant::now);
            std::hint::black_box(m.payload());
            seen += usize::from(first_time(&mut next, m.partition(), m.offset()));
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "plain consumer stalled at {seen}");
    }
    let steady = first_at.unwrap().elapsed().as_secs_f64();
    let row = Row {
        steady_seconds: Some(steady),
        ..Row::since(&started, "plain rdkafka consumer, discarding".into(), bench.values)
    };
    println!(
        "plain consumer ({}): {:.0} records/s ({:.1}s from its creation, {steady:.1}s from its first record); {}",
        bench.values.name(),
        row.records_per_s(bench),
        row.seconds,
        MachineCpu::now().since(machine_at_start, row.cpu_seconds),
    );
    row
}

/// Whether a consumer that has seen the offsets below `next[partition]` sees `offset` for the first time
/// (a rebalance of a group that commits nothing starts its partitions over); notes it seen.
fn first_time(next: &mut BTreeMap<i32, i64>, partition: i32, offset: i64) -> bool {
    let next = next.entry(partition).or_insert(0);
    let first = offset >= *next;
    *next = (*next).max(offset + 1);
    first
}

/// Plain S3 PUTs of as many random bytes as the bench's keys and values, in objects of the archiver's
/// roll size, one per partition in flight (at most [`MAX_PUTS_IN_FLIGHT`]), through the archiver's S3 client.
async fn s3_put(bench: &Bench) -> Row {
    let endpoint = env("KSA_TEST_S3_ENDPOINT");
    let bucket = format!("bench-{}-{}-put", std::process::id(), bench.values.name());
    let store = S3Store::connect(&bucket, S3Options::new(Some(endpoint), Some("us-east-1".into()))).await;
    store.client().create_bucket().bucket(&bucket).send().await.unwrap();
    let mut rng = fastrand::Rng::with_seed(11);
    let body = bytes::Bytes::from((0..PUT_OBJECT_BYTES).map(|_| rng.u8(..)).collect::<Vec<u8>>());
    let total = bench.payload_bytes as usize;
    let in_flight = (bench.partitions as usize).clamp(1, MAX_PUTS_IN_FLIGHT);
    let machine_at_start = MachineCpu::now();
    let started = Started::now();
    let sizes = (0..total).step_by(PUT_OBJECT_BYTES).map(|from| PUT_OBJECT_BYTES.min(total - from));
    put_objects(&store, sizes, &body, in_flight).await;
    let contender = format!("S3 PUTs of the same bytes, {} MiB objects, {in_flight} at once", PUT_OBJECT_BYTES >> 20);
    let row = Row::since(&started, contender, bench.values);
    let machine = MachineCpu::now().since(machine_at_start, row.cpu_seconds);
    println!("{} ({}): {:.1}s; {machine}", row.contender, bench.values.name(), row.seconds);
    row
}

/// PUTs objects of `sizes` (`put/<n>`, the first bytes of `body`), `in_flight` at once.
async fn put_objects(store: &S3Store, sizes: impl Iterator<Item = usize>, body: &bytes::Bytes, in_flight: usize) {
    futures::stream::iter(sizes.enumerate())
        .map(|(i, len)| {
            let data = SpoolData::memory(body.slice(..len));
            async move { store.put_if_absent(&format!("put/{i:08}"), &data, len as u64).await }
        })
        .buffer_unordered(in_flight)
        .try_collect::<Vec<_>>()
        .await
        .expect("S3 PUT");
}

fn print_table(results: &[(Bench, Vec<Row>)]) {
    println!(
        "\n| values | contender | records/s from start | records/s after start-up | MB/s (keys + values) | CPU s \
         per GB | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (bench, rows) in results {
        for row in rows {
            let rss = row.peak_rss_kib.map_or(String::new(), |k| format!("{:.0} MiB", k as f64 / 1024.0));
            let steady = row.steady_records_per_s(bench).map_or(String::new(), |r| format!("{r:.0}"));
            println!(
                "| {} | {} | {:.0} | {steady} | {:.0} | {:.2} | {rss} |",
                row.values.name(),
                row.contender,
                row.records_per_s(bench),
                bench.payload_bytes as f64 / 1e6 / row.seconds,
                row.cpu_per_gb(bench),
            );
        }
    }
    println!();
    for (bench, rows) in results {
        print_targets(bench, rows);
    }
}

/// The performance targets' ratios: the archiver against the ceilings and against itself at steady rates
/// (start-ups, such as a plain consumer's group join of 0.3-3 s, are not what is compared); against the
/// peers from each one's start, as a user sees them.
fn print_targets(bench: &Bench, rows: &[Row]) {
    let find = |contender: &str| rows.iter().find(|r| r.contender == contender);
    let row = |target: Target| find(target.describe()).expect("measured");
    let (plain, put) = (&rows[0], &rows[1]);
    let steady = |r: &Row| r.steady_records_per_s(bench).unwrap_or_else(|| r.records_per_s(bench));
    let ceiling = steady(plain).min(steady(put));
    let (s3, values) = (row(Target::S3), bench.values.name());
    println!(
        "{values} values: run to S3 archives at {:.2} × min(plain consumer, S3 PUT), steady rates (target ≥ 0.8); \
         uses {:.1} × the plain consumer's CPU per GB (target ≤ 2)",
        steady(s3) / ceiling,
        s3.cpu_per_gb(bench) / plain.cpu_per_gb(bench),
    );
    if let Some(floor) = find(encode_alone::CONSUME_AND_ENCODE) {
        println!(
            "{values} values: run to S3 uses {:.2} × the CPU per GB of consuming and encoding alone, {:.2} (the plain \
             consumer's {:.2} + the encoder's {:.2}; target ≤ 1.3)",
            s3.cpu_per_gb(bench) / floor.cpu_per_gb(bench),
            floor.cpu_per_gb(bench),
            plain.cpu_per_gb(bench),
            floor.cpu_per_gb(bench) - plain.cpu_per_gb(bench),
        );
    }
    if let Some(replayed) = find(replay::REPLAYED_PUTS) {
        println!(
            "{values} values: run to S3 archives at {:.2} × min(plain consumer, S3 PUTs of as many objects of the \
             same sizes at the same concurrency), steady rates (target ≥ 0.8 with 1,000 partitions)",
            steady(s3) / steady(plain).min(steady(replayed)),
        );
    }
    if let Values::Registry(typed, _) = bench.values {
        let decoded = row(Target::S3Typed(typed));
        let taken = |r: &Row| r.taken_seconds.map_or(f64::NAN, |s| bench.records as f64 / s);
        println!(
            "{0} values: run --value-format {0} archives at {1:.2} × raw's rate until every record is durable, \
             {2:.2} × until every record is taken (target ≥ 0.8), {3:.1} × its CPU per GB",
            typed.name(),
            steady(decoded) / steady(s3),
            taken(decoded) / taken(s3),
            decoded.cpu_per_gb(bench) / s3.cpu_per_gb(bench),
        );
        return;
    }
    println!(
        "{values} values: run to S3 with its Iceberg table archives at {:.2} × run to S3 without (target ≥ 0.9), \
         {:.2} × its CPU per GB",
        steady(row(Target::S3Table)) / steady(s3),
        row(Target::S3Table).cpu_per_gb(bench) / s3.cpu_per_gb(bench),
    );
    let rss = |r: &Row| r.peak_rss_kib.unwrap_or(0) as f64;
    for peer in rows.iter().filter(|r| r.contender.starts_with(peers::PEER)) {
        println!(
            "{values} values: run to S3 against {}: {:.1} × its records/s (target ≥ 5), {:.1} × its records per CPU \
             second (target ≥ 10), {:.2} × its peak RSS (target ≤ 0.5)",
            peer.contender,
            s3.records_per_s(bench) / peer.records_per_s(bench),
            peer.cpu_seconds / s3.cpu_seconds,
            rss(s3) / rss(peer),
        );
    }
    let restores = (find(producer::PLAIN_PRODUCER), find(restore::RESTORE), find(restore::RESTORE_AGAIN));
    if let (Some(producer), Some(restore), Some(again)) = restores {
        println!(
            "{values} values: restore writes at {:.2} × the plain producer's rate (target ≥ 0.5); a re-run with \
             every record there takes {:.2} × the restore's time (target ≤ 0.1)",
            restore.records_per_s(bench) / producer.records_per_s(bench),
            again.seconds / restore.seconds,
        );
    }
}
