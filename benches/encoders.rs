//! The encoders' hot path: records/s per core turning records into a sealed file (Parquet and JSON
//! lines, each compression), for compressible values (JSON-like, as `generate` makes them) and for
//! incompressible ones (random bytes), and typed values (`--value-format json`, `avro`, `protobuf`)
//! against raw ones.
//! Run with `cargo bench --bench encoders` (it prints each file's size first); figures in
//! docs/performance.md.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use kafka_s3_archiver::archive::partition::{OffsetRange, TopicPartition};
use kafka_s3_archiver::archive::record::{Header, Record};
use kafka_s3_archiver::commands::demo::generate::generated;
use kafka_s3_archiver::encode::spool::{Spool, SpoolOptions, SpoolUsage};
use kafka_s3_archiver::encode::{Compression, FileEncoder, FileMeta, FileSpec, Finished, Format, LearnedColumns};
use kafka_s3_archiver::registry::{RegisteredSchema, SchemaCache};
use kafka_s3_archiver::values::protobuf::indexes;
use kafka_s3_archiver::values::wire::{frame, SchemaId};
use kafka_s3_archiver::values::{JsonValues, SchemaType, ValueFormat, ValueSchema};

#[path = "data/avro_order.rs"]
mod avro_order;
#[path = "data/proto_order.rs"]
mod proto_order;

use avro_order::{order, SCHEMA};
use proto_order::{proto_order, PROTO};

// The service's allocator (src/allocator.rs), so the encoders are measured as they run in the service.
kafka_s3_archiver::service_allocator!();

/// Records per encoded file.
const RECORDS: usize = 20_000;
const VALUE_BYTES: usize = 1024;

fn records(random: bool) -> Vec<Record> {
    let mut rng = fastrand::Rng::with_seed(7);
    (0..RECORDS)
        .map(|i| {
            let mut r = generated(i, VALUE_BYTES);
            r.offset = i as i64;
            if random {
                r.value = Some((0..VALUE_BYTES).map(|_| rng.u8(..)).collect());
            }
            r
        })
        .collect()
}

/// The schema of `generate`'s JSON values (a tenth of its values are binary: misfits).
const GENERATED_SCHEMA: &str = r#"{"type":"record","name":"Generated","fields":[
    {"name":"order","type":"long"},{"name":"amount","type":"long"},{"name":"note","type":"string"}]}"#;

/// One file, as a partition writes its next one: following what its last files taught about their
/// columns (`learned`: which to leave uncompressed, which to write without a dictionary), and learned
/// from in turn.
fn encode_next(
    spec: FileSpec,
    values: &ValueFormat,
    records: &[Record],
    spool: &SpoolOptions,
    learned: &mut LearnedColumns,
) -> u64 {
    let mut encoder = FileEncoder::new(spec, values, Spool::new(spool.clone())).expect("encoder");
    encoder.follow(learned);
    let finished = finish(encoder, records);
    if let Some(footer) = &finished.footer {
        learned.learn(footer);
    }
    finished.spool.len()
}

fn encode(spec: FileSpec, values: &ValueFormat, records: &[Record], spool: &SpoolOptions) -> u64 {
    let encoder = FileEncoder::new(spec, values, Spool::new(spool.clone())).expect("encoder");
    finish(encoder, records).spool.len()
}

fn finish(mut encoder: FileEncoder, records: &[Record]) -> Finished {
    for r in records {
        assert!(encoder.append(r, false).expect("append"));
    }
    let meta = FileMeta {
        tp: TopicPartition::new("bench", 0).expect("topic"),
        range: OffsetRange::new(0, records.len() as i64 - 1).expect("range"),
        records: records.len() as u64,
    };
    encoder.finish(&meta).expect("finish")
}

fn encoders(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("spool dir");
    // Everything stays in memory: the encoders are measured, not the disk.
    let spool =
        SpoolOptions { memory_threshold: 1 << 34, dir: dir.path().into(), usage: Arc::new(SpoolUsage::default()) };
    let specs = [
        (Format::Parquet, Compression::Zstd),
        (Format::Parquet, Compression::Snappy),
        (Format::Parquet, Compression::None),
        (Format::Jsonl, Compression::Zstd),
        (Format::Jsonl, Compression::Gzip),
        (Format::Jsonl, Compression::None),
    ];
    for (values, random) in [("compressible", false), ("random", true)] {
        let input = records(random);
        let mut group = c.benchmark_group(format!("encode-1KiB-{values}"));
        group.throughput(Throughput::Elements(RECORDS as u64));
        group.sample_size(10);
        for (format, compression) in specs {
            let spec = FileSpec::new(format, compression).expect("spec");
            let name = format!("{format}-{compression}");
            // File after file, as a partition writes them (from the second file on, a column found not
            // worth compressing is written plain, and compressed again every few files; the second file
            // also measures the columns of 64 KiB or more without their dictionaries).
            let mut learned = LearnedColumns::default();
            let first = encode_next(spec, &ValueFormat::Raw, &input, &spool, &mut learned);
            let next = encode_next(spec, &ValueFormat::Raw, &input, &spool, &mut learned);
            println!("encode-1KiB-{values}/{name}: a first file of {first} bytes, then {next}");
            group.bench_with_input(BenchmarkId::from_parameter(name), &input, |b, input| {
                b.iter_batched(
                    || (),
                    |()| encode_next(spec, &ValueFormat::Raw, input, &spool, &mut learned),
                    BatchSize::PerIteration,
                )
            });
        }
        group.finish();
    }
    typed(c, &spool);
    headers(c, &spool);
}

/// Parquet (zstd), compressible values, with each record's headers replaced: none, or three small
/// binary ones (a trace ID, a schema tag, a routing key, as real topics carry): what a header costs.
fn headers(c: &mut Criterion, spool: &SpoolOptions) {
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).expect("spec");
    let mut group = c.benchmark_group("encode-1KiB-headers");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.sample_size(10);
    let mut rng = fastrand::Rng::with_seed(11);
    for count in [0, 3] {
        let mut input = records(false);
        for r in &mut input {
            let names: [&[u8]; 3] = [b"traceparent", b"schema", b"route"];
            r.headers = names[..count]
                .iter()
                .map(|name| Header { key: name.to_vec(), value: Some((0..16).map(|_| rng.u8(..)).collect()) })
                .collect();
        }
        let name = format!("{count}-headers");
        println!("encode-1KiB-headers/{name}: a file of {} bytes", encode(spec, &ValueFormat::Raw, &input, spool));
        group.bench_with_input(BenchmarkId::from_parameter(name), &input, |b, input| {
            b.iter_batched(|| (), |()| encode(spec, &ValueFormat::Raw, input, spool), BatchSize::PerIteration)
        });
    }
    group.finish();
}

/// Parquet (zstd) with values raw, typed by a declared schema (keeping every value's bytes too, or
/// not), typed by a schema inferred from the file's first batch, and Avro and Protobuf orders of the
/// same size in the Schema Registry's wire format (`--value-format avro`, `protobuf`), file after file
/// as a partition writes them.
fn typed(c: &mut Criterion, spool: &SpoolOptions) {
    let input = records(false);
    let schema = ValueSchema::from_avro(GENERATED_SCHEMA).expect("schema");
    let json = |declared: Option<&ValueSchema>, keep_raw| {
        ValueFormat::Json(Arc::new(JsonValues { declared: declared.cloned(), keep_raw }))
    };
    let spec = FileSpec::new(Format::Parquet, Compression::Zstd).expect("spec");
    let mut group = c.benchmark_group("encode-1KiB-values");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.sample_size(10);
    let (orders, avro) = avro_orders(&input);
    let (proto_orders, protobuf) = protobuf_orders(&input);
    let runs = [
        ("raw", ValueFormat::Raw, &input),
        ("json", json(Some(&schema), false), &input),
        ("json-keep-raw", json(Some(&schema), true), &input),
        ("json-inferred", json(None, false), &input),
        ("avro", avro, &orders),
        ("protobuf", protobuf, &proto_orders),
    ];
    for (name, values, input) in runs {
        let mut learned = LearnedColumns::default();
        let sizes: Vec<u64> = (0..3).map(|_| encode_next(spec, &values, input, spool, &mut learned)).collect();
        println!("encode-1KiB-values/{name}: the first three files of {sizes:?} bytes (the dictionaries measured)");
        group.bench_with_input(BenchmarkId::from_parameter(name), input, |b, input| {
            b.iter_batched(|| (), |()| encode_next(spec, &values, input, spool, &mut learned), BatchSize::PerIteration)
        });
    }
    group.finish();
}

/// `records` with Avro orders of about 1 KiB as values (benches/data/avro_order.rs), framed with the
/// ID of their schema, and the value format that decodes them.
fn avro_orders(records: &[Record]) -> (Vec<Record>, ValueFormat) {
    registered_orders(records, SchemaType::Avro, SCHEMA, order)
}

/// The same orders in Protobuf (benches/data/proto_order.rs), framed as Confluent's serializer does (the
/// schema ID, then the message indexes of the schema's first message).
fn protobuf_orders(records: &[Record]) -> (Vec<Record>, ValueFormat) {
    let first_message = indexes::header(&[0]);
    registered_orders(records, SchemaType::Protobuf, PROTO, |i| [&first_message[..], &proto_order(i)].concat())
}

/// `records` with `value(i)` as values, framed with the ID of `schema`, and the value format that
/// decodes them.
fn registered_orders(
    records: &[Record],
    ty: SchemaType,
    schema: &str,
    value: impl Fn(usize) -> Vec<u8>,
) -> (Vec<Record>, ValueFormat) {
    let schemas = SchemaCache::default();
    let registered = RegisteredSchema { schema_type: ty.to_string(), schema: schema.into(), references: Vec::new() };
    schemas.insert(SchemaId(1), Ok(registered));
    let orders = records
        .iter()
        .enumerate()
        .map(|(i, r)| Record { value: Some(frame(SchemaId(1), &value(i))), ..r.clone() })
        .collect();
    (orders, ValueFormat::registered(Some(ty), Arc::new(schemas), false))
}

criterion_group!(benches, encoders);
criterion_main!(benches);
