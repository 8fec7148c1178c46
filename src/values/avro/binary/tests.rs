use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int32Type, Int64Type, TimestampMillisecondType};
use arrow_array::{Array, StructArray};

use super::*;
use crate::values::avro::parse_record;
use crate::values::column::Room;

/// Avro's binary encoding, for building test values.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn long(mut self, v: i64) -> Self {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        loop {
            let byte = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                self.0.push(byte);
                return self;
            }
            self.0.push(byte | 0x80);
        }
    }
    fn bytes(self, b: &[u8]) -> Self {
        let mut s = self.long(b.len() as i64);
        s.0.extend_from_slice(b);
        s
    }
    fn str(self, s: &str) -> Self {
        self.bytes(s.as_bytes())
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
}

const SCHEMA: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "price", "type": "double"},
    {"name": "ratio", "type": "float"},
    {"name": "name", "type": "string"},
    {"name": "blob", "type": "bytes"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "alt", "type": ["string", "null"]},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "user", "type": {"type": "record", "name": "User", "fields": [
        {"name": "name", "type": "string"}, {"name": "age", "type": ["null", "int"]}]}},
    {"name": "buyer", "type": ["null", "User"]},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "big", "type": {"type": "fixed", "name": "F", "size": 3, "logicalType": "decimal", "precision": 6, "scale": 0}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "tod", "type": {"type": "long", "logicalType": "time-micros"}},
    {"name": "uid", "type": {"type": "string", "logicalType": "uuid"}},
    {"name": "digest", "type": {"type": "fixed", "name": "D", "size": 2}}
]}"#;

const UUID: &str = "123e4567-e89b-12d3-a456-426614174000";

/// Order `i`, encoded; arrays and maps in two blocks, the second with a byte size (a negative count).
fn order(i: i64) -> Vec<u8> {
    let e = Enc::default().long(i).long(i * 2).raw(&[1]).raw(&1.5f64.to_le_bytes()).raw(&0.25f32.to_le_bytes());
    let e = e.str("widget").bytes(&[0, 159, 255]);
    let e = if i % 2 == 0 { e.long(1).str("gift") } else { e.long(0) }; // note: null first
    let e = e.long(1); // alt: null second, so branch 1 is null
    let e = e.long(1); // PAID
    let e = e.long(1).str("a").long(-1).long(2).str("b").long(0); // tags: [a], then [b] with its size
    let e = e.long(2).str("x").long(i).str("y").long(-i).long(0);
    let e = e.str("ann").long(1).long(30); // user
    let e = if i % 2 == 0 { e.long(0) } else { e.long(1).str("bob").long(0) }; // buyer
    let e = e.bytes(&[0xff, 0x85]); // amount: -123 unscaled, -1.23
    let e = e.raw(&[0x00, 0x01, 0x00]); // big: 256
    let e = e.long(1_767_261_600_000).long(20_454).long(3_600_000_000).str(UUID).raw(&[0xab, 0xcd]);
    e.0
}

fn decode_rows(values: &[Vec<u8>]) -> StructArray {
    let Avro::Record(fields) = Avro::Record(parse_record(SCHEMA).unwrap()) else { unreachable!() };
    let mut b = Struct::new(struct_fields(&fields), &Room::rows(values.len()));
    for v in values {
        check(&Avro::Record(fields.clone()), &mut Reader::new(v)).unwrap();
        let mut r = Reader::new(v);
        append_record(&fields, &mut r, &mut b).unwrap();
        assert!(r.at_end(), "every byte read");
    }
    b.finish().unwrap()
}

#[test]
fn every_type_decodes_into_its_column() {
    let rows = decode_rows(&[order(0), order(1)]);
    let col = |name: &str| rows.column_by_name(name).unwrap().clone();
    assert_eq!(col("id").as_primitive::<Int64Type>().values(), &[0, 1]);
    assert_eq!(col("qty").as_primitive::<Int32Type>().values(), &[0, 2]);
    assert!(col("ok").as_boolean().value(1));
    assert_eq!(col("name").as_string::<i32>().value(0), "widget");
    assert_eq!(col("blob").as_binary::<i32>().value(0), &[0, 159, 255]);
    let note = col("note");
    assert_eq!((note.as_string::<i32>().value(0), note.is_null(1)), ("gift", true));
    assert!(col("alt").is_null(0), "null as the second branch");
    assert_eq!(col("status").as_string::<i32>().value(0), "PAID");
    let tags = col("tags");
    let tags = tags.as_list::<i32>().value(0);
    assert_eq!(tags.as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["a", "b"], "two blocks");
    let attrs = col("attrs");
    let attrs = attrs.as_map().value(1);
    assert_eq!(attrs.column(1).as_primitive::<Int64Type>().values(), &[1, -1]);
    let user = col("user");
    assert_eq!(user.as_struct().column(1).as_primitive::<Int32Type>().value(0), 30);
    let buyer = col("buyer");
    assert!(buyer.is_null(0) && buyer.is_valid(1));
    assert_eq!(buyer.as_struct().column(0).as_string::<i32>().value(1), "bob");
    assert_eq!(col("amount").as_primitive::<Decimal128Type>().value(0), -123);
    assert_eq!(col("big").as_primitive::<Decimal128Type>().value(0), 256);
    assert_eq!(col("at").as_primitive::<TimestampMillisecondType>().value(0), 1_767_261_600_000);
    assert_eq!(col("uid").as_string::<i32>().value(1), UUID);
    assert_eq!(col("digest").as_fixed_size_binary().value(0), &[0xab, 0xcd]);
    assert_eq!(col("at").data_type(), &DataType::Timestamp(ArrowUnit::Millisecond, Some("+00:00".into())));
}

#[test]
fn a_value_that_does_not_decode_says_where_and_why() {
    let fields = parse_record(SCHEMA).unwrap();
    let schema = Avro::Record(fields);
    let good = order(0);
    let err = |bytes: &[u8]| check(&schema, &mut Reader::new(bytes)).unwrap_err();
    assert!(err(&good[..good.len() - 1]).contains("digest: ends after"), "{}", err(&good[..good.len() - 1]));
    assert!(err(&[]).starts_with("id: ends inside a number"));
    let bad_bool = Enc::default().long(1).long(1).raw(&[2]).0;
    assert_eq!(err(&bad_bool), "ok: a boolean byte 2");
    let head = Enc::default().long(1).long(1).raw(&[1]).raw(&[0; 12]);
    assert!(err(&head.str("x").bytes(&[]).long(5).0).contains("note: union branch 5 of 2"));
    let not_utf8 = Enc::default().long(1).long(1).raw(&[1]).raw(&[0; 12]).bytes(&[0xff, 0xfe]).0;
    assert!(err(&not_utf8).starts_with("name: a string that is not UTF-8"));
    let negative = Enc::default().long(1).long(1).raw(&[1]).raw(&[0; 12]).long(-3).0;
    assert!(err(&negative).contains("a negative length (-3)"));
    assert!(err(&[0xff; 11]).contains("beyond 64 bits"));
    assert!(err(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).contains("beyond 64 bits"));
    let huge_block = Enc::default().long(1).long(1).raw(&[1]).raw(&[0; 12]).str("n").bytes(&[]).long(0).long(1);
    let huge_block = huge_block.long(0).long(1 << 40).0;
    assert!(err(&huge_block).contains("tags: a block of 1099511627776 items, more than the 0 bytes left"));
    let int_overflow = Enc::default().long(1).long(1 << 40).0;
    assert!(err(&int_overflow).contains("out of range for an int"));
}

#[test]
fn decimals_keep_their_sign_and_their_precision() {
    assert_eq!(decimal(&[0xff, 0x85], 10), Ok(-123));
    assert_eq!(decimal(&[0x00, 0x80], 10), Ok(128));
    assert_eq!(decimal(&[0x80], 10), Ok(-128));
    assert_eq!(decimal(&[0xff, 0xff, 0xff], 10), Ok(-1));
    assert_eq!(decimal(&[], 10), Ok(0));
    assert!(decimal(&[0x27, 0x10], 4).unwrap_err().contains("more than 4 digits"), "10000 has 5");
    let mut wide = vec![0u8; 17];
    wide[0] = 1;
    assert!(decimal(&wide, 38).unwrap_err().contains("does not fit 128 bits"));
    let mut wide = vec![0xffu8; 17];
    wide[0] = 0;
    assert!(decimal(&wide, 38).unwrap_err().contains("does not fit 128 bits"), "2^128 - 1 is not -1");
    let mut wide = vec![0u8; 17];
    wide[0] = 0xff;
    assert!(decimal(&wide, 38).unwrap_err().contains("does not fit 128 bits"), "-2^128 is not 0");
    assert_eq!(decimal(&[0x00, 0xff], 10), Ok(255), "a pad byte that carries the sign stays");
    let mut padded = vec![0xffu8; 20];
    padded[19] = 0x85;
    assert_eq!(decimal(&padded, 38), Ok(-123), "sign-extension bytes beyond 16 are fine");
}

#[test]
fn a_null_row_gives_every_child_a_null_and_the_array_stays_valid() {
    let fields = parse_record(SCHEMA).unwrap();
    let mut b = Struct::new(struct_fields(&fields), &Room::rows(2));
    append_record(&fields, &mut Reader::new(&order(3)), &mut b).unwrap();
    b.push_null();
    let rows = b.finish().unwrap();
    assert_eq!((rows.len(), rows.null_count()), (2, 1));
    assert!(rows.is_null(1) && rows.column_by_name("id").unwrap().is_null(1));
    rows.to_data().validate_full().unwrap();
}

/// Items that take no bytes (empty records) are bounded in the whole value: arrays of them nested in an
/// array of many would otherwise let a small value stand for billions of rows.
#[test]
fn items_of_no_width_are_bounded_in_all_not_per_array() {
    let schema = r#"{"type":"record","name":"R","fields":[{"name":"xs","type":{"type":"array","items":
        {"type":"array","items":{"type":"record","name":"E","fields":[]}}}}]}"#;
    let record = Avro::Record(parse_record(schema).unwrap());
    // 3 inner arrays of MAX_EMPTY_ITEMS / 2 empty records each.
    let mut value = Enc::default().long(3);
    for _ in 0..3 {
        value = value.long((MAX_EMPTY_ITEMS / 2) as i64).long(0);
    }
    let value = value.long(0).0;
    let err = check(&record, &mut Reader::new(&value)).unwrap_err();
    assert!(err.contains(&format!("more than {MAX_EMPTY_ITEMS} items that take no bytes")), "{err}");
    let fine = Enc::default().long(1).long((MAX_EMPTY_ITEMS / 2) as i64).long(0).long(0).0;
    check(&record, &mut Reader::new(&fine)).unwrap();
}
