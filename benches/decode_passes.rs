//! The decode benchmark's work counted in instructions, not timed: this machine's timings vary by
//! ±30 % between sittings, callgrind's instruction counts do not. Decodes the 10,000 orders of
//! `benches/values.rs` (Avro or Protobuf, into columns sized by the pass before, as the service does)
//! a given number of times, or (`protobuf-back`) decodes them once and encodes each back from its
//! columns a given number of times, comparing it with its bytes, as a file does to tell which values
//! need not keep them; instructions per value are (the count at 3 passes − the count at 1) / 20,000:
//!
//! ```text
//! cargo bench --bench decode_passes --no-run    # prints the binary's path, BIN
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null BIN avro 1     # "I refs", then with 3
//! ```
//! Figures in docs/performance.md.

use kafka_s3_archiver::values::avro::binary::{append_record, struct_fields, Reader};
use kafka_s3_archiver::values::avro::parse_record;
use kafka_s3_archiver::values::column::{Room, Struct};
use kafka_s3_archiver::values::protobuf::decode::{append_message, Scratch};
use kafka_s3_archiver::values::protobuf::reencode::Encoder;
use kafka_s3_archiver::values::protobuf::{arrow::struct_fields as proto_fields, schema::compile};

#[path = "data/avro_order.rs"]
mod avro_order;
#[path = "data/proto_order.rs"]
mod proto_order;

const RECORDS: usize = 10_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (format, passes) = match args.as_slice() {
        [_, format, passes] => (format.as_str(), passes.parse().expect("a number of passes")),
        _ => panic!("usage: decode_passes avro|protobuf|protobuf-back PASSES"),
    };
    let mut room = Room::default();
    match format {
        "avro" => {
            let fields = parse_record(avro_order::SCHEMA).expect("schema");
            let values: Vec<Vec<u8>> = (0..RECORDS).map(avro_order::order).collect();
            for _ in 0..passes {
                let mut value = Struct::new(struct_fields(&fields), &room);
                for v in &values {
                    append_record(&fields, &mut Reader::unchecked(v), &mut value).expect("decodes");
                    value.validate().expect("UTF-8");
                }
                room = value.room();
                value.finish().expect("valid arrays");
            }
        }
        "protobuf" => {
            let file = compile(proto_order::PROTO, &[]).expect("schema");
            let message = file.message(&[0]).expect("Order");
            let values: Vec<Vec<u8>> = (0..RECORDS).map(proto_order::proto_order).collect();
            let mut scratch = Scratch::default();
            for _ in 0..passes {
                let mut value = Struct::new(proto_fields(message), &room);
                for v in &values {
                    append_message(message, v, &mut value, &mut scratch).expect("decodes");
                }
                room = value.room();
                value.finish().expect("valid arrays");
            }
        }
        "protobuf-back" => {
            let file = compile(proto_order::PROTO, &[]).expect("schema");
            let message = file.message(&[0]).expect("Order");
            let values: Vec<Vec<u8>> = (0..RECORDS).map(proto_order::proto_order).collect();
            let mut value = Struct::new(proto_fields(message), &room);
            for v in &values {
                append_message(message, v, &mut value, &mut Scratch::default()).expect("decodes");
            }
            let array = value.finish().expect("valid arrays");
            let mut bytes = Vec::new();
            for _ in 0..passes {
                let encoder = Encoder::new(message, &array).expect("the columns of the message");
                for (i, v) in values.iter().enumerate() {
                    bytes.clear();
                    encoder.encode(i, &mut bytes).expect("encodes");
                    assert_eq!(&bytes, v, "order {i} encodes back to its bytes");
                }
            }
        }
        other => panic!("{other}: avro, protobuf or protobuf-back"),
    }
}
