//! The orders of `avro_order.rs` as Protobuf messages, as a Schema Registry serializer writes them after
//! its header (and message indexes): fields by number, a field that holds its default left out. The
//! decode benchmarks' Protobuf values.

/// The orders' Protobuf schema.
pub const PROTO: &str = r#"syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; SENT = 2; }
  message Item { string sku = 1; int32 qty = 2; double price = 3; }
  int64 id = 1; string customer = 2; int64 cents = 3; google.protobuf.Timestamp at = 4; Status status = 5;
  optional string note = 6; repeated Item items = 7; map<string, string> attrs = 8;
}"#;

/// A protobuf field's tag.
fn tag(out: &mut Vec<u8>, number: u64, wire: u64) {
    varint(out, (number << 3) | wire);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint field, left out when it holds its default (0).
fn varint_field(out: &mut Vec<u8>, number: u64, v: u64) {
    if v != 0 {
        tag(out, number, 0);
        varint(out, v);
    }
}

/// A length-delimited field.
fn len_field(out: &mut Vec<u8>, number: u64, bytes: &[u8]) {
    tag(out, number, 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Order `i` in protobuf: the same values as the Avro one.
pub fn proto_order(i: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(1200);
    varint_field(&mut out, 1, i as u64);
    len_field(&mut out, 2, format!("customer-{}", i % 997).as_bytes());
    varint_field(&mut out, 3, (i % 30_000) as u64);
    let mut at = Vec::new();
    varint_field(&mut at, 1, 1_767_261_600 + i as u64);
    len_field(&mut out, 4, &at);
    varint_field(&mut out, 5, (i % 3) as u64);
    len_field(&mut out, 6, "a note about this order, ".repeat(16).as_bytes());
    for k in 0..10 {
        let mut item = Vec::new();
        len_field(&mut item, 1, format!("sku-{:08}", i * 10 + k).as_bytes());
        varint_field(&mut item, 2, (k + 1) as u64);
        if k > 0 {
            tag(&mut item, 3, 1);
            item.extend_from_slice(&(k as f64 * 1.25).to_le_bytes());
        }
        len_field(&mut out, 7, &item);
    }
    for k in 0..5 {
        let mut entry = Vec::new();
        len_field(&mut entry, 1, format!("attribute-{k}").as_bytes());
        len_field(&mut entry, 2, format!("value of attribute {k} for order {i}").as_bytes());
        len_field(&mut out, 8, &entry);
    }
    out
}
