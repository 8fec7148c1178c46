//! Decoding values into typed columns: records/s per core turning ~1 KiB Avro and Protobuf values
//! (binary, as a Schema Registry serializer writes them after its header) into Arrow columns: Avro in
//! one pass (checked as it is appended, its strings once the value is read), into buffers sized by the
//! batch before, as the service does. Run with `cargo bench --bench values` (`--bench decode_passes`
//! counts the same work in instructions); figures in docs/performance.md.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_s3_archiver::values::avro::binary::{append_record, struct_fields, Reader};
use kafka_s3_archiver::values::avro::parse_record;
use kafka_s3_archiver::values::column::{Room, Struct};
use kafka_s3_archiver::values::json::{decode as decode_json, value_column};
use kafka_s3_archiver::values::protobuf::decode::{append_message, Scratch};
use kafka_s3_archiver::values::protobuf::{arrow::struct_fields as proto_fields, schema::compile};

#[path = "data/avro_order.rs"]
mod avro_order;
#[path = "data/json_order.rs"]
mod json_order;
#[path = "data/proto_order.rs"]
mod proto_order;

use avro_order::{order, SCHEMA};
use json_order::json_order;
use proto_order::{proto_order, PROTO};

const RECORDS: usize = 10_000;

fn decode(c: &mut Criterion) {
    let fields = parse_record(SCHEMA).expect("schema");
    let values: Vec<Vec<u8>> = (0..RECORDS).map(order).collect();
    let bytes: usize = values.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("avro_to_arrow");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function(format!("{RECORDS} records of {} B", bytes / RECORDS), |b| {
        let mut room = Room::default();
        b.iter(|| {
            let mut value = Struct::new(struct_fields(&fields), &room);
            for v in &values {
                append_record(&fields, &mut Reader::unchecked(v), &mut value).expect("decodes");
                value.validate().expect("UTF-8");
            }
            room = value.room();
            value.finish().expect("valid arrays")
        })
    });
    group.finish();
}

fn decode_protobuf(c: &mut Criterion) {
    let file = compile(PROTO, &[]).expect("schema");
    let message = file.message(&[0]).expect("Order");
    let values: Vec<Vec<u8>> = (0..RECORDS).map(proto_order).collect();
    let bytes: usize = values.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("protobuf_to_arrow");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function(format!("{RECORDS} records of {} B", bytes / RECORDS), |b| {
        let (mut scratch, mut room) = (Scratch::default(), Room::default());
        b.iter(|| {
            let mut value = Struct::new(proto_fields(message), &room);
            for v in &values {
                append_message(message, v, &mut value, &mut scratch).expect("decodes");
            }
            room = value.room();
            value.finish().expect("valid arrays")
        })
    });
    group.finish();
}

/// The same orders as JSON, by the same schema (`--value-format json`): read once, into the columns.
fn decode_json_values(c: &mut Criterion) {
    let schema = kafka_s3_archiver::values::ValueSchema::from_avro(SCHEMA).expect("schema");
    let values: Vec<Vec<u8>> = (0..RECORDS).map(json_order).collect();
    let bytes: usize = values.iter().map(Vec::len).sum();
    let mut group = c.benchmark_group("json_to_arrow");
    group.throughput(Throughput::Elements(RECORDS as u64));
    group.bench_function(format!("{RECORDS} records of {} B", bytes / RECORDS), |b| {
        let mut room = Room::default();
        b.iter(|| {
            let mut value = value_column(&schema, &room);
            for v in &values {
                decode_json(&schema, v, &mut value).expect("fits");
            }
            room = value.room();
            value.finish().expect("valid arrays")
        })
    });
    group.finish();
}

criterion_group!(benches, decode, decode_protobuf, decode_json_values);
criterion_main!(benches);
