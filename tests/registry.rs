//! The Avro decoder against what real producers write: confluent-kafka's AvroSerializer registers a
//! schema with every type the decoder maps (nested record, nullable unions both ways round, enum, array,
//! map, fixed, decimal, timestamp, date, uuid) in a real Schema Registry (Apicurio's Confluent-compatible
//! API) and produces framed values to Kafka; the test reads them back from Kafka, takes each value's
//! schema ID from its frame, fetches that schema from the registry, and decodes every value into Arrow
//! columns that must hold exactly what the producer wrote. Then `run --value-format avro` archives such
//! a topic through the registry, as do `--value-format protobuf`, `json-schema` and `registry`.

mod common;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMillisecondType;
use arrow_array::types::{Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, StructArray};
use common::s3_proxy::{Fault, S3Proxy};
use common::*;
use kafka_s3_archiver::archive::claim::Claim;
use kafka_s3_archiver::archive::partition::TopicPartition;
use kafka_s3_archiver::archive::record::Record;
use kafka_s3_archiver::commands::demo::generate::{generated, produce_records};
use kafka_s3_archiver::store::list_all;
use kafka_s3_archiver::values::avro::binary::{append_record, struct_fields, Reader};
use kafka_s3_archiver::values::avro::parse_record;
use kafka_s3_archiver::values::column::{Room, Struct};
use serde_json::Value;

const RECORDS: usize = 400;

/// One producer at a time: Apicurio Registry 3.3.3 (in memory) was seen never answering one of two
/// registrations of the same schema under different subjects made at the same moment.
static PRODUCING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// How long the producer may take (it registers its schema, then produces and flushes within 30 s).
const PRODUCER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(90);

/// The producer's view of each delivered record (one JSON object per line).
fn produce(topic: &str) -> Vec<Value> {
    produce_with("produce_avro.py", topic, RECORDS)
}

/// Runs `script` (in tests/registry) for `topic` and `count`: what it prints of each delivered record.
fn produce_with(script: &str, topic: &str, count: usize) -> Vec<Value> {
    let _one_at_a_time = PRODUCING.lock().unwrap_or_else(|e| e.into_inner());
    let script = format!("{}/tests/registry/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::NamedTempFile::new().unwrap();
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = std::process::Command::new(env("KSA_TEST_PRODUCER_PYTHON"))
        .args([&script, &brokers(), &env("KSA_TEST_SCHEMA_REGISTRY"), topic, &count.to_string()])
        .stdout(out.reopen().unwrap())
        .stderr(err.reopen().unwrap())
        .spawn()
        .expect("run the producer");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > PRODUCER_TIMEOUT {
            let _ = child.kill();
            let stderr = std::fs::read_to_string(err.path()).unwrap_or_default();
            panic!("the producer did not finish within {PRODUCER_TIMEOUT:?} (the registry did not answer?): {stderr}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let stderr = std::fs::read_to_string(err.path()).unwrap_or_default();
    assert!(status.success(), "producer failed: {stderr}");
    std::fs::read_to_string(out.path()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A new one-partition `topic` with `RECORDS` records from `script`, then one whose value is `misfit`:
/// what the producer printed, and what Kafka holds.
async fn produce_then_a_misfit(
    script: &str,
    topic: &str,
    misfit: &[u8],
) -> (Vec<Value>, std::collections::BTreeMap<i32, Vec<Record>>) {
    create_topic(topic, 1).await;
    let produced = produce_with(script, topic, RECORDS);
    assert_eq!(produced.len(), RECORDS);
    let not_framed = || Record { value: Some(misfit.to_vec()), ..generated(0, 1) };
    produce_records(&brokers(), topic, 1, 0..1, |_| not_framed()).await.unwrap();
    (produced, read_from_kafka(topic, 1))
}

/// `run ARGS --check` passes and says it reached the registry at `registry`.
fn assert_check_reaches(args: &[String], registry: &str) {
    let check =
        std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver")).args(args).arg("--check").output().unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "{stdout}{}", String::from_utf8_lossy(&check.stderr));
    assert!(stdout.contains(&format!("schema registry {registry}: reachable")), "{stdout}");
}

/// GET `path` of the registry's API: the JSON body.
fn registry_get(path: &str) -> Value {
    let url = env("KSA_TEST_SCHEMA_REGISTRY");
    let rest = url.strip_prefix("http://").expect("an http:// registry");
    let (addr, base) = rest.split_once('/').expect("a path after the address");
    // Apicurio 3.3.3 was seen closing a connection without an answer once (status 0): asked again.
    let mut answer = http_get(addr, &format!("/{base}{path}"));
    for _ in 0..4 {
        if answer.0 != 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        answer = http_get(addr, &format!("/{base}{path}"));
    }
    let (status, body) = answer;
    assert_eq!(status, 200, "GET {url}{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}{path}: {e}: {body}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn values_framed_by_confluents_avro_serializer_decode_into_what_was_produced() {
    let topic = unique("registry-avro");
    create_topic(&topic, 1).await;
    let produced = produce(&topic);
    assert_eq!(produced.len(), RECORDS);
    let records = read_from_kafka(&topic, 1).remove(&0).unwrap_or_default();
    assert_eq!(records.len(), RECORDS);

    let first = records[0].value.as_deref().unwrap();
    assert_eq!(first[0], 0, "the magic byte");
    let id = u32::from_be_bytes(first[1..5].try_into().unwrap());
    let registered = registry_get(&format!("/schemas/ids/{id}"));
    assert!(registered.get("schemaType").is_none_or(|t| t == "AVRO"), "{registered}");
    let fields = parse_record(registered["schema"].as_str().unwrap()).unwrap();

    let mut value = Struct::new(struct_fields(&fields), &Room::rows(RECORDS));
    for r in &records {
        let payload = r.value.as_deref().unwrap();
        assert_eq!((payload[0], u32::from_be_bytes(payload[1..5].try_into().unwrap())), (0, id), "one schema");
        let mut reader = Reader::new(&payload[5..]);
        append_record(&fields, &mut reader, &mut value).unwrap_or_else(|e| panic!("offset {}: {e}", r.offset));
        assert!(reader.at_end(), "offset {}: bytes left after the value", r.offset);
    }
    let rows = value.finish().unwrap();
    rows.to_data().validate_full().unwrap();
    for (row, want) in produced.iter().enumerate() {
        assert_eq!(want["offset"].as_i64(), Some(records[row].offset));
        assert_row(&rows, row, want);
    }
}

fn assert_row(rows: &StructArray, row: usize, want: &Value) {
    let col = |name: &str| rows.column_by_name(name).unwrap_or_else(|| panic!("no column {name}")).clone();
    let text = |name: &str| {
        let c = col(name);
        (!c.is_null(row)).then(|| c.as_string::<i32>().value(row).to_string())
    };
    let at = format!("row {row}");
    assert_eq!(col("id").as_primitive::<Int64Type>().value(row), want["id"].as_i64().unwrap(), "{at}");
    assert_eq!(text("name").as_deref(), want["name"].as_str(), "{at}");
    assert_eq!(text("level").as_deref(), want["level"].as_str(), "{at}");
    assert_eq!(text("note").as_deref(), want["note"].as_str(), "{at}");
    let amount = col("amount").as_primitive::<Decimal128Type>().value(row);
    assert_eq!(amount, i128::from(want["amount_unscaled"].as_i64().unwrap()), "{at}");
    assert_eq!(col("at").as_primitive::<TimestampMillisecondType>().value(row), want["at_ms"].as_i64().unwrap());
    assert_eq!(i64::from(col("day").as_primitive::<Date32Type>().value(row)), want["day"].as_i64().unwrap());
    assert_eq!(text("uid").as_deref(), want["uid"].as_str(), "{at}");
    let tags = col("tags").as_list::<i32>().value(row);
    let tags: Vec<&str> = tags.as_string::<i32>().iter().flatten().collect();
    let want_tags: Vec<&str> = want["tags"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(tags, want_tags, "{at}");
    let attrs = col("attrs").as_map().value(row);
    let keys: Vec<&str> = attrs.column(0).as_string::<i32>().iter().flatten().collect();
    let values = attrs.column(1).as_primitive::<Float64Type>().values().to_vec();
    let mut got: Vec<(String, f64)> = keys.iter().map(|k| k.to_string()).zip(values).collect();
    let mut want_attrs: Vec<(String, f64)> =
        want["attrs"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap())).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    want_attrs.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, want_attrs, "{at}");
    let sensor = col("sensor");
    let sensor = sensor.as_struct();
    assert_eq!(sensor.column(0).as_string::<i32>().value(row), want["model"].as_str().unwrap(), "{at}");
    let rev = sensor.column(1);
    let rev = (!rev.is_null(row)).then(|| i64::from(rev.as_primitive::<Int32Type>().value(row)));
    assert_eq!(rev, want["rev"].as_i64(), "{at}");
    let digest: String = col("digest").as_fixed_size_binary().value(row).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(digest, want["digest"].as_str().unwrap(), "{at}");
    assert_eq!(f64::from(col("ratio").as_primitive::<Float32Type>().value(row)), want["ratio"].as_f64().unwrap());
    assert_eq!(col("ok").as_boolean().value(row), want["ok"].as_bool().unwrap(), "{at}");
}

/// `run --value-format avro` against the real registry: typed columns that DuckDB reads, every offset
/// once and given back byte for byte (from the typed columns: only values not in Avro's canonical
/// encoding keep their bytes), and two misfits kept raw with their reasons: a value not
/// in the wire format, and one naming a schema ID the registry does not have (its 404 is not retried).
#[tokio::test(flavor = "multi_thread")]
async fn run_archives_registry_avro_values_into_typed_columns_exactly_once() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-run");
    create_topic(&topic, 1).await;
    let produced = produce(&topic);
    let misfits: [&[u8]; 2] = [b"not framed", &[0, 0, 0x0f, 0x42, 0x3f, 2]];
    produce_records(&brokers(), &topic, 1, 0..2, |i| Record { value: Some(misfits[i].to_vec()), ..generated(i, 1) })
        .await
        .unwrap();
    let in_kafka = read_from_kafka(&topic, 1);

    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 150, spool.path());
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    args.extend(["--value-format", "avro", "--schema-registry-url", &registry].map(String::from));
    assert_check_reaches(&args, &registry);
    let mut archiver = ArchiverProcess::spawn("registry-run", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    let log = archiver.log_text();
    assert!(log.contains("schema fetched from the Schema Registry"), "{log}");
    assert!(log.contains("has no schema 999999"), "the unknown ID is logged: {log}");

    assert_exactly_once(&dest, &topic, &in_kafka).await;
    assert_eq!(verify_deep(&dest, &topic).await.value_misfits, 2);
    let objects = fetch_objects(&dest, &topic).await;
    let row = duckdb_row(
        &objects,
        "count(value), sum(value.id), count(value_error), typeof(any_value(value.amount)), sum(len(value.tags)),
         count(*) FILTER (value.sensor.rev IS NULL AND value IS NOT NULL), count(*) FILTER (value_error LIKE '%magic byte%'),
         count(*) FILTER (value_error LIKE '%has no schema 999999%'), count(value_raw)",
    );
    let id = schema_id(&in_kafka[&0][0]);
    assert!(objects.iter().all(|(_, data)| schema_ids(data) == Some(id.to_string())), "each footer names schema {id}");
    let sum_ids: i64 = produced.iter().map(|p| p["id"].as_i64().unwrap()).sum();
    let tags: usize = produced.iter().map(|p| p["tags"].as_array().unwrap().len()).sum();
    let no_rev = produced.iter().filter(|p| p["rev"].is_null()).count();
    // fastavro writes a negative decimal of -2^(8n-1) in a byte more than it needs: such values keep
    // their bytes; every other value is given back from its columns.
    let padded = |u: i64| u < 0 && u.unsigned_abs().is_power_of_two() && u.unsigned_abs().trailing_zeros() % 8 == 7;
    let kept = 2 + produced.iter().filter(|p| padded(p["amount_unscaled"].as_i64().unwrap())).count();
    assert_eq!(row, format!("{RECORDS}|{sum_ids}|2|DECIMAL(12,2)|{tags}|{no_rev}|1|1|{kept}"));
}

/// The schema ID in a record's wire-format frame.
fn schema_id(record: &Record) -> u32 {
    u32::from_be_bytes(record.value.as_deref().expect("a value")[1..5].try_into().unwrap())
}

/// The schema IDs a Parquet file's footer names (`kafka.schema_ids`).
fn schema_ids(data: &bytes::Bytes) -> Option<String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let reader = SerializedFileReader::new(data.clone()).unwrap();
    let kv = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    kv.into_iter().find(|kv| kv.key == "kafka.schema_ids").and_then(|kv| kv.value)
}

/// Schema evolution without small files: a producer moves v1 -> v2 -> v3 (BACKWARD compatible, which
/// the registry checks) every 1,000 records, then to an incompatible v4. The files are cut by the roll
/// size (1,300 records), not by version: a file takes a newer version when its first value comes, the
/// rows before widened into it; only v4 rolls a file (reason `schema`, once). The first archiver is
/// killed (SIGKILL) after its first file and another starts under a new group across the change: every
/// offset is archived once and given back byte for byte, and what DuckDB reads of each file is what the
/// producer wrote, an older version's rows with the newer fields' defaults.
#[tokio::test(flavor = "multi_thread")]
async fn compatible_schema_versions_share_files_cut_by_size_and_an_incompatible_one_rolls_once() {
    const PER_VERSION: usize = 1000;
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-versions");
    create_topic(&topic, 1).await;
    let produced = produce_with("produce_versions.py", &topic, PER_VERSION);
    assert_eq!(produced.len(), 4 * PER_VERSION);
    let in_kafka = read_from_kafka(&topic, 1);
    let spool = tempfile::tempdir().unwrap();
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    let args = |group: &str| {
        let mut args = archiver_args(&dest, group, &topic, 1300, spool.path());
        args.extend(["--value-format", "avro", "--schema-registry-url", &registry].map(String::from));
        // Long enough for the files cut by size to fill first; the last one is cut by age.
        set_flag(args, "--roll-age", "8s")
    };
    let mut killed = ArchiverProcess::spawn("registry-versions-killed", &args(&unique("g")));
    wait_objects(store.as_ref(), &prefix, &topic, 1, &mut killed).await;
    killed.kill_hard();
    let mut archiver = ArchiverProcess::spawn("registry-versions", &args(&unique("g")));
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert_exactly_once(&dest, &topic, &in_kafka).await;

    let objects = fetch_objects(&dest, &topic).await;
    let ranges: Vec<(i64, i64)> = objects.iter().map(|(key, _)| (key.range.start(), key.range.end())).collect();
    assert_eq!(ranges, [(0, 1299), (1300, 2599), (2600, 2999), (3000, 3999)], "cut by size, and once by v4");
    let log = killed.log_text() + &archiver.log_text();
    let rolls = log.lines().filter(|l| l.contains("object uploaded") && l.contains("reason=\"schema\"")).count();
    assert_eq!(rolls, 1, "one roll for the incompatible version:\n{log}");
    let id = |version: usize| schema_id(&in_kafka[&0][(version - 1) * PER_VERSION]);
    let ids: Vec<Option<String>> = objects.iter().map(|(_, data)| schema_ids(data)).collect();
    let want = [format!("{},{}", id(1), id(2)), format!("{},{}", id(2), id(3)), id(3).to_string(), id(4).to_string()];
    assert_eq!(ids, want.clone().map(Some), "the footers name the versions each file holds");
    let mut claimed = Vec::new();
    for key in list_all(store.as_ref(), &prefix.claims_folder(&TopicPartition::new(&topic, 0).unwrap())).await.unwrap()
    {
        if let Ok(claim) = Claim::from_json(&key, &store.get(&key).await.unwrap()) {
            claimed.push((claim.first, claim.schema_ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")));
        }
    }
    claimed.sort();
    let starts = [0, 1300, 2600, 3000];
    assert_eq!(claimed, starts.into_iter().zip(want).collect::<Vec<_>>(), "and so do the claims");
    for (i, (object, (start, end))) in objects.iter().zip(ranges).take(3).enumerate() {
        let rows: Vec<&Value> =
            produced.iter().filter(|p| (start..=end).contains(&p["offset"].as_i64().unwrap())).collect();
        let sum = |field: &str| rows.iter().map(|p| p[field].as_i64().unwrap()).sum::<i64>();
        let score: f64 = rows.iter().map(|p| p["score"].as_f64().unwrap_or(0.0)).sum();
        // The first file holds v1 and v2 (no unit); the others v3, and v2 with unit's default.
        let (unit, in_m) = match i {
            0 => ("0", 0),
            _ => ("count(*) FILTER (value.unit = 'm')", rows.iter().filter(|p| p["version"] == 2).count()),
        };
        let select = format!(
            "count(value), sum(value.id), sum(value.count), sum(value.score), count(value_error), {unit}, \
             count(value_raw)"
        );
        let got = duckdb_row(std::slice::from_ref(object), &select);
        // Rows of a version older than the file's keep their bytes; the file's own are given back from
        // their columns.
        let newest = rows.iter().map(|p| p["version"].as_i64().unwrap()).max().unwrap();
        let older = rows.iter().filter(|p| p["version"].as_i64().unwrap() < newest).count();
        let want = format!("{}|{}|{}|{score:?}|0|{in_m}|{older}", rows.len(), sum("id"), sum("count"));
        assert_eq!(got, want, "offsets {start} to {end}");
    }
    let last =
        duckdb_row(&objects[3..], "count(value), min(value.id), typeof(any_value(value.id)), count(value_error)");
    assert_eq!(last, "1000|id-3000|VARCHAR|0");
}

/// While the registry answers 503 (a proxy in front of it), records that need a schema wait: no object
/// is written, the failures are logged and retried, and a stop still completes; once the registry
/// answers, everything is archived once.
#[tokio::test(flavor = "multi_thread")]
async fn archiving_waits_while_the_registry_is_down_and_loses_nothing() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-down");
    create_topic(&topic, 1).await;
    produce(&topic);
    let in_kafka = read_from_kafka(&topic, 1);
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    let (address, path) = registry.trim_start_matches("http://").split_once('/').unwrap();
    let proxy = S3Proxy::start(&format!("http://{address}")).await;
    proxy.set_rule(|_| Fault::Status(503, "ServiceUnavailable"));

    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 150, spool.path());
    let through_proxy = format!("{}/{path}", proxy.url);
    args.extend(
        ["--value-format", "avro", "--schema-registry-url", &through_proxy, "--keep-raw-value", "true"]
            .map(String::from),
    );
    // A stop does not wait for the registry: the waiting batch is dropped with its partitions.
    let mut stopped = ArchiverProcess::spawn("registry-down-stop", &args);
    wait_log(&mut stopped, "does not answer (HTTP 503").await;
    let started = std::time::Instant::now();
    assert!(stopped.terminate().success(), "{}", stopped.log_text());
    assert!(started.elapsed().as_secs() < 10, "the stop waited for the registry: {:?}", started.elapsed());
    let mut archiver = ArchiverProcess::spawn("registry-down", &args);
    wait_log(&mut archiver, "does not answer (HTTP 503").await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    archiver.assert_running();
    let written = list_all(store.as_ref(), &prefix.topic_folder(&topic)).await.unwrap();
    assert!(written.is_empty(), "nothing is written while the schema cannot be fetched: {written:?}");
    proxy.pass_all();
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    assert_exactly_once(&dest, &topic, &in_kafka).await;
    assert_eq!(verify_deep(&dest, &topic).await.value_misfits, 0, "every value decoded once the registry answered");
}

/// A registry that refuses the credentials, a URL where no registry API is, or an HTTPS registry whose
/// certificate is not trusted, stops `run` at start with a line that says so (not a stream of misfits).
#[tokio::test(flavor = "multi_thread")]
async fn a_registry_that_refuses_or_is_not_there_stops_start_up_saying_why() {
    let dest = TestDest::s3().await;
    let topic = unique("registry-refused");
    create_topic(&topic, 1).await;
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    let (address, path) = registry.trim_start_matches("http://").split_once('/').unwrap();
    let proxy = S3Proxy::start(&format!("http://{address}")).await;
    proxy.set_rule(|_| Fault::Status(401, "Unauthorized"));
    let spool = tempfile::tempdir().unwrap();
    let cases = [
        (format!("{}/{path}", proxy.url), "refused the request (HTTP 401)"),
        (format!("http://{address}"), "no Schema Registry API there"),
        // Without --schema-registry-ca, the system's roots do not trust the test CA.
        (env("KSA_TEST_SCHEMA_REGISTRY_HTTPS"), "cannot be reached over TLS (invalid peer certificate: UnknownIssuer)"),
    ];
    for (url, expected) in cases {
        let mut args = archiver_args(&dest, &unique("g"), &topic, 100, spool.path());
        args.extend(["--value-format", "avro", "--schema-registry-url", &url].map(String::from));
        let mut archiver = ArchiverProcess::spawn("registry-refused", &args);
        let status = archiver.wait_exit(std::time::Duration::from_secs(60)).await;
        let log = archiver.log_text();
        assert!(!status.success() && log.contains(expected), "{url}: expected {expected:?}:\n{log}");
    }
}

/// `run --value-format protobuf` against the real registry (over HTTPS, trusting the test CA) and
/// confluent-kafka's ProtobufSerializer: a
/// nested message that imports another registered file (a reference the archiver fetches) and the
/// well-known Timestamp and StringValue, moving from version 1 to 2 (an added field) half-way; the first
/// archiver is killed (SIGKILL) after its first object and another goes on under a new group. The
/// files are cut by size, not by version (no `schema` roll); DuckDB reads the typed columns (the enum as
/// its symbol, the Timestamp as a timestamp, the referenced message as a struct) with the producer's
/// sums; a value not in the wire format is a misfit; every offset is archived once and restored byte
/// for byte, though only the misfit and the version 1 values of the file that widened to version 2 keep
/// their bytes (the others are encoded back from their columns, as confluent-kafka's serializer wrote
/// them).
#[tokio::test(flavor = "multi_thread")]
async fn run_archives_registry_protobuf_values_with_references_across_two_versions_exactly_once() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-protobuf");
    let (produced, in_kafka) = produce_then_a_misfit("produce_protobuf.py", &topic, b"not framed").await;
    let first = in_kafka[&0][0].value.as_deref().unwrap();
    let registered = registry_get(&format!("/schemas/ids/{}", schema_id(&in_kafka[&0][0])));
    assert_eq!(registered["schemaType"], "PROTOBUF", "{registered}");
    assert_eq!(registered["references"][0]["name"], "ksa/money.proto", "a reference: {registered}");
    assert_eq!(first[5], 0, "message indexes [0], written as a single 0");

    let spool = tempfile::tempdir().unwrap();
    // Over HTTPS, the registry's certificate signed by the test CA.
    let (registry, ca) = (env("KSA_TEST_SCHEMA_REGISTRY_HTTPS"), env("KSA_TEST_CA"));
    let args = |group: &str| {
        let mut args = archiver_args(&dest, group, &topic, 150, spool.path());
        let registry_args =
            ["--value-format", "protobuf", "--schema-registry-url", &registry, "--schema-registry-ca", &ca];
        args.extend(registry_args.map(String::from));
        set_flag(args, "--roll-age", "5s")
    };
    assert_check_reaches(&args(&unique("g")), &registry);
    // Killed (SIGKILL) after its first object; another archiver under a new group goes on from the archive.
    let mut killed = ArchiverProcess::spawn("registry-protobuf-killed", &args(&unique("g")));
    wait_objects(store.as_ref(), &prefix, &topic, 1, &mut killed).await;
    killed.kill_hard();
    let mut archiver = ArchiverProcess::spawn("registry-protobuf", &args(&unique("g")));
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    let log = killed.log_text() + &archiver.log_text();
    assert!(!log.contains("reason=\"schema\""), "a compatible version does not roll a file:\n{log}");
    assert_exactly_once(&dest, &topic, &in_kafka).await;
    assert_eq!(verify_deep(&dest, &topic).await.value_misfits, 1);

    let objects = fetch_objects(&dest, &topic).await;
    let ranges: Vec<(i64, i64)> = objects.iter().map(|(key, _)| (key.range.start(), key.range.end())).collect();
    assert_eq!(ranges, [(0, 149), (150, 299), (300, 400)], "cut by size");
    let (v1, v2) = (schema_id(&in_kafka[&0][0]), schema_id(&in_kafka[&0][RECORDS - 1]));
    assert_ne!(v1, v2, "version 2 has an ID of its own");
    assert_eq!(schema_ids(&objects[1].1), Some(format!("{v1},{v2}")), "the middle file holds both versions");
    let row = duckdb_row(
        &objects,
        "count(value), sum(value.id), sum(len(value.lines)), sum(value.total.units), count(*) FILTER (value.status = 'PAID'),
         count(value.note), count(value.card), sum(value.priority), count(*) FILTER (value.channel <> ''),
         typeof(any_value(value.placed)), count(value_error), count(value_raw)",
    );
    let sum = |field: &str| produced.iter().map(|p| p[field].as_i64().unwrap_or(0)).sum::<i64>();
    let count = |keep: &dyn Fn(&Value) -> bool| produced.iter().filter(|p| keep(p)).count();
    let want = format!(
        "{RECORDS}|{}|{}|{}|{}|{}|{}|{}|{}|TIMESTAMP WITH TIME ZONE|1|{}",
        sum("id"),
        sum("lines"),
        sum("units"),
        count(&|p| p["status"] == 1),
        count(&|p| p["has_note"] == true),
        count(&|p| !p["card"].is_null()),
        sum("priority"),
        count(&|p| p["version"] == 2),
        1 + (150..RECORDS / 2).count(),
    );
    assert_eq!(row, want);
}

/// `run --value-format json-schema` against the real registry and confluent-kafka's JSONSerializer,
/// moving from version 1 to 2 (an added optional property) half-way: version 2 holds version 1, so the
/// file open at the change takes it and its rows so far are decoded again under it (no `schema` roll;
/// files cut by size). DuckDB reads the typed columns (the date-time as a timestamp, the $ref'd object
/// as a struct, the added property of version 2's rows) with the producer's sums; a value not in the
/// wire format is a misfit; every offset is archived once and restored byte for byte (JSON Schema
/// values keep their bytes).
#[tokio::test(flavor = "multi_thread")]
async fn run_archives_registry_json_schema_values_across_two_versions_exactly_once() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-json-schema");
    let (produced, in_kafka) = produce_then_a_misfit("produce_json_schema.py", &topic, b"{\"id\": 1}").await;
    let registered = registry_get(&format!("/schemas/ids/{}", schema_id(&in_kafka[&0][0])));
    assert_eq!(registered["schemaType"], "JSON", "{registered}");

    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 150, spool.path());
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    args.extend(["--value-format", "json-schema", "--schema-registry-url", &registry].map(String::from));
    let mut archiver = ArchiverProcess::spawn("registry-json-schema", &set_flag(args, "--roll-age", "5s"));
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    let log = archiver.log_text();
    assert!(!log.contains("reason=\"schema\""), "a compatible version does not roll a file:\n{log}");
    assert_exactly_once(&dest, &topic, &in_kafka).await;
    assert_eq!(verify_deep(&dest, &topic).await.value_misfits, 1);

    let objects = fetch_objects(&dest, &topic).await;
    let ranges: Vec<(i64, i64)> = objects.iter().map(|(key, _)| (key.range.start(), key.range.end())).collect();
    assert_eq!(ranges, [(0, 149), (150, 299), (300, 400)], "cut by size, not by version");
    let (v1, v2) = (schema_id(&in_kafka[&0][0]), schema_id(&in_kafka[&0][RECORDS - 1]));
    assert_eq!(schema_ids(&objects[1].1), Some(format!("{v1},{v2}")), "the middle file holds both versions");
    let row = duckdb_row(
        &objects,
        "count(value), sum(value.id), sum(len(value.lines)), sum(value.total.units), \
         count(*) FILTER (value.status = 'PAID'), count(value.note), typeof(any_value(value.placed)), \
         count(value.channel), count(value_error), count(value_raw)",
    );
    let sum = |field: &str| produced.iter().map(|p| p[field].as_i64().unwrap()).sum::<i64>();
    let count = |keep: &dyn Fn(&Value) -> bool| produced.iter().filter(|p| keep(p)).count();
    let want = format!(
        "{RECORDS}|{}|{}|{}|{}|{}|TIMESTAMP WITH TIME ZONE|{}|1|{}",
        sum("id"),
        sum("lines"),
        sum("units"),
        count(&|p| p["status"] == "PAID"),
        count(&|p| p["has_note"] == true),
        count(&|p| p["version"] == 2),
        RECORDS + 1,
    );
    assert_eq!(row, want);
}

/// `run --value-format registry`: one archiver for three topics of three serializers (Avro, Protobuf,
/// JSON Schema), each file decoded by its values' own schema type: DuckDB reads each topic's typed
/// columns with the producer's sums, and every offset is archived once and restored byte for byte.
#[tokio::test(flavor = "multi_thread")]
async fn run_with_the_registry_format_decodes_each_topic_by_its_values_schema_type() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let scripts = ["produce_avro.py", "produce_protobuf.py", "produce_json_schema.py"];
    let mut topics = Vec::new();
    for script in scripts {
        let topic = unique("registry-any");
        create_topic(&topic, 1).await;
        let produced = produce_with(script, &topic, RECORDS);
        topics.push((topic.clone(), produced, read_from_kafka(&topic, 1)));
    }
    let names: Vec<&str> = topics.iter().map(|(topic, _, _)| topic.as_str()).collect();
    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &names.join(","), 150, spool.path());
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    args.extend(["--value-format", "registry", "--schema-registry-url", &registry].map(String::from));
    let mut archiver = ArchiverProcess::spawn("registry-any", &args);
    for (topic, _, in_kafka) in &topics {
        wait_archived(store.as_ref(), &prefix, topic, &last_offsets(in_kafka), &mut [&mut archiver]).await;
    }
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    // `ddl` declares each topic's `value` from its subject's newest version, as the files hold it.
    let declared = [
        "struct<id:bigint,name:string,level:string,note:string,amount:decimal(12,2),at:timestamp,day:date,uid:string,\
         tags:array<string>,attrs:map<string,double>,sensor:struct<model:string,rev:int>,digest:binary,ratio:float,ok:boolean>",
        "struct<id:bigint,customer:string,status:string,lines:array<struct<sku:string,quantity:int>>,\
         tags:map<string,bigint>,placed:timestamp,note:string,total:struct<currency:string,units:bigint>,card:string,\
         voucher:binary,priority:int,channel:string>",
        // JSON Schema: the properties in the order the schema writes them (the $ref'd Money's too).
        "struct<id:bigint,customer:string,status:string,placed:timestamp,day:date,\
         total:struct<currency:string,units:bigint>,lines:array<struct<sku:string,quantity:bigint>>,\
         tags:map<string,bigint>,note:string,channel:string>",
    ];
    for (((topic, produced, in_kafka), script), declared) in topics.iter().zip(scripts).zip(declared) {
        assert_exactly_once(&dest, topic, in_kafka).await;
        let objects = fetch_objects(&dest, topic).await;
        let sum_ids: i64 = produced.iter().map(|p| p["id"].as_i64().unwrap()).sum();
        let row = duckdb_row(&objects, "count(value), sum(value.id), count(value_error), typeof(any_value(value))");
        assert!(row.starts_with(&format!("{RECORDS}|{sum_ids}|0|STRUCT(")), "{script}: {row}");
        let value = athena_value_column(&dest, topic);
        assert!(value.contains(declared), "{script}: {value}");
    }
}

/// The `value` column `ddl --engine athena` declares for `topic`'s archive from the registry's subject
/// `TOPIC-value`.
fn athena_value_column(dest: &TestDest, topic: &str) -> String {
    athena_column(dest, topic, &["--value-subject", &format!("{topic}-value")], "value")
}

/// The `column` `ddl --engine athena ARGS` declares for `topic`'s archive, through the registry.
fn athena_column(dest: &TestDest, topic: &str, args: &[&str], column: &str) -> String {
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    let archive = ["ddl", "--dest", &dest.url(), "--s3-endpoint", &s3_endpoint(), "--topic", topic];
    let ddl = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-s3-archiver"))
        .args(archive)
        .args(["--engine", "athena", "--partitions", "1", "--schema-registry-url", &registry])
        .args(args)
        .output()
        .expect("run ddl");
    let stdout = String::from_utf8_lossy(&ddl.stdout);
    assert!(ddl.status.success(), "ddl failed: {}", String::from_utf8_lossy(&ddl.stderr));
    let line = stdout.lines().find(|l| l.trim_start().starts_with(&format!("`{column}` ")));
    line.unwrap_or_else(|| panic!("no {column} in {stdout}")).trim().to_string()
}

/// `run --key-format avro --value-format avro`: keys written by confluent-kafka's AvroSerializer decode
/// into a typed `key` struct beside the typed value; a key not in the wire format is a key misfit (its
/// reason in `key_error`), archived all the same and never a roll; every key keeps its bytes in
/// `key_raw`, so every offset is archived once and restored byte for byte; `ddl --key-subject`
/// declares the key's struct.
#[tokio::test(flavor = "multi_thread")]
async fn run_archives_typed_keys_beside_typed_values_exactly_once() {
    let dest = TestDest::s3().await;
    let (store, prefix) = (dest.store().await, dest.prefix());
    let topic = unique("registry-keys");
    create_topic(&topic, 1).await;
    let produced = produce_with("produce_keys.py", &topic, RECORDS);
    let plain_key = |_| Record { key: Some(b"not framed".to_vec()), value: None, ..generated(0, 1) };
    produce_records(&brokers(), &topic, 1, 0..1, plain_key).await.unwrap();
    let in_kafka = read_from_kafka(&topic, 1);

    let spool = tempfile::tempdir().unwrap();
    let mut args = archiver_args(&dest, &unique("g"), &topic, 150, spool.path());
    let registry = env("KSA_TEST_SCHEMA_REGISTRY");
    args.extend(
        ["--key-format", "avro", "--value-format", "avro", "--schema-registry-url", &registry].map(String::from),
    );
    let mut archiver = ArchiverProcess::spawn("registry-keys", &args);
    wait_archived(store.as_ref(), &prefix, &topic, &last_offsets(&in_kafka), &mut [&mut archiver]).await;
    assert!(archiver.terminate().success(), "{}", archiver.log_text());
    let log = archiver.log_text();
    assert!(!log.contains("reason=\"schema\""), "a key never rolls a file:\n{log}");
    assert!(log.contains("records whose key does not fit the key schema"), "{log}");
    assert_exactly_once(&dest, &topic, &in_kafka).await;

    let objects = fetch_objects(&dest, &topic).await;
    let row = duckdb_row(
        &objects,
        "count(key), sum(key.shard), count(*) FILTER (key.region = 'US'), count(key_raw), count(key_error), \
         count(*) FILTER (key_error LIKE 'key: %magic byte%'), count(value), sum(value.id)",
    );
    let keyed: Vec<&Value> = produced.iter().filter(|p| !p["shard"].is_null()).collect();
    let shards: i64 = keyed.iter().map(|p| p["shard"].as_i64().unwrap()).sum();
    let us = keyed.iter().filter(|p| p["region"] == "US").count();
    let ids: i64 = produced.iter().map(|p| p["id"].as_i64().unwrap()).sum();
    assert_eq!(row, format!("{}|{shards}|{us}|{}|1|1|{RECORDS}|{ids}", keyed.len(), keyed.len() + 1));
    let key = athena_column(&dest, &topic, &["--key-subject", &format!("{topic}-key")], "key");
    assert_eq!(key, "`key` struct<customer:string,region:string,shard:int>,");
    assert!(athena_value_column(&dest, &topic).starts_with("`value` struct<id:bigint,"), "values as well");
}
