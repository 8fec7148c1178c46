//! Avro orders of about 1 KiB, as a Schema Registry serializer writes them after its header: the
//! records the decode benchmark (benches/values.rs) and the throughput benchmark's Avro values
//! (examples/throughput) are made of.

/// The orders' Avro schema.
pub const SCHEMA: &str = r#"{"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "PAID", "SENT"]}},
    {"name": "note", "type": ["null", "string"]},
    {"name": "items", "type": {"type": "array", "items": {"type": "record", "name": "Item", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}, {"name": "price", "type": "double"}]}}},
    {"name": "attrs", "type": {"type": "map", "values": "string"}}
]}"#;

fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn string(out: &mut Vec<u8>, s: &str) {
    long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// Order `i`: about 1 KiB (ten items, five attributes, a long note).
pub fn order(i: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(1100);
    long(&mut out, i as i64);
    string(&mut out, &format!("customer-{}", i % 997));
    long(&mut out, 2);
    out.extend_from_slice(&((i % 30_000) as u16).to_be_bytes());
    long(&mut out, 1_767_261_600_000 + i as i64);
    long(&mut out, (i % 3) as i64);
    long(&mut out, 1);
    string(&mut out, &"a note about this order, ".repeat(16));
    long(&mut out, 10);
    for k in 0..10 {
        string(&mut out, &format!("sku-{:08}", i * 10 + k));
        long(&mut out, (k + 1) as i64);
        out.extend_from_slice(&(k as f64 * 1.25).to_le_bytes());
    }
    long(&mut out, 0);
    long(&mut out, 5);
    for k in 0..5 {
        string(&mut out, &format!("attribute-{k}"));
        string(&mut out, &format!("value of attribute {k} for order {i}"));
    }
    long(&mut out, 0);
    out
}
