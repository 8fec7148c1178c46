use super::Encoder;
use crate::values::protobuf::tests::{decode_all, encode, message, ORDERS};
use crate::values::protobuf::ProtoMessage;

/// Every kind of field, in a message of its own.
const ALL: &str = r#"
syntax = "proto3";
package t;
import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message All {
  enum E { Z = 0; ONE = 1; NEG = -1; }
  message Sub { string s = 1; repeated sint64 xs = 2; }
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 f32 = 9; fixed64 f64 = 10; sfixed32 sf32 = 11; sfixed64 sf64 = 12;
  bool b = 13; string s = 14; bytes by = 15; E e = 16; Sub sub = 17;
  repeated double ds = 18; repeated E es = 19; repeated int32 unpacked = 20 [packed = false];
  repeated string ss = 21; map<int32, Sub> subs = 22; map<string, E> named = 23;
  google.protobuf.Duration dur = 24; google.protobuf.Timestamp ts = 25;
  google.protobuf.Int32Value wi = 26; google.protobuf.BoolValue wb = 27; google.protobuf.BytesValue wby = 28;
  optional int32 opt = 29;
  oneof o { Sub osub = 30; int64 oi = 31; }
  repeated google.protobuf.StringValue wss = 32;
  string long_text = 33;
}
"#;

/// `bytes` decoded by `message`, then encoded back from the columns.
fn reencode(message: &ProtoMessage, bytes: &[u8]) -> Vec<u8> {
    let rows = decode_all(message, &[Some(bytes)]);
    let mut out = Vec::new();
    Encoder::new(message, &rows).unwrap().encode(0, &mut out).unwrap();
    out
}

/// Values as serializers write them (fields by number, defaults left out, packed runs, map entries
/// with key and value), encoded by prost-reflect, come back to their very bytes: every field type,
/// negative numbers in ten bytes, a Timestamp before 1970, a Duration below zero, wrappers holding
/// their default, a set `optional` and oneof member holding theirs, a message longer than 127 bytes.
#[test]
fn values_as_serializers_write_them_encode_back_to_their_very_bytes() {
    let all = message(ALL, &[0]);
    let long = "x".repeat(300);
    let values = [
        "".to_string(),
        r#"d: 1.5 f: -2.25 i32: -7 i64: -9000000000 u32: 4000000000 u64: 18446744073709551615 s32: -3 s64: 5
           f32: 7 f64: 8 sf32: -9 sf64: -10 b: true s: "h\303\251" by: "\000\377" e: NEG
           sub { s: "in" xs: [-1, 0, 1, 1000000] } ds: [0, -0.5, 3] es: [Z, NEG, ONE]
           ss: ["", "a"] subs { key: -1 value { s: "m" } } subs { key: 2 value { } } named { key: "k" value: NEG }
           dur { seconds: -3 nanos: -500000000 } ts { seconds: -1 nanos: 999999000 }
           wi { value: 0 } wb { value: true } wby { } opt: 0 oi: 0 wss { value: "" } wss { value: "w" }"#
            .to_string(),
        format!(r#"osub {{ s: "{long}" }} long_text: "{long}" ts {{ seconds: 1700000000 }}"#),
        r#"e: ONE es: [] sub { } dur { nanos: 1000 }"#.to_string(),
    ];
    for text in &values {
        let bytes = encode(ALL, "t.All", text);
        assert_eq!(reencode(&all, &bytes), bytes, "{text}");
    }
    // prost-reflect packs a `[packed = false]` field (its `is_packed` misses the option), which protoc's
    // serializers do not: those items, one by one, by hand.
    let unpacked = [0xa0, 0x01, 1, 0xa0, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    assert_eq!(reencode(&all, &unpacked), unpacked, "an unpacked field's items, 1 and -1");
    let order = message(ORDERS, &[0]);
    let full = r#"id: -5 customer: "ada" status: PAID lines { sku: "a" quantity: 2 price: 1.5 } tags { key: "x" value: 7 }
        placed { seconds: 1700000000 nanos: 123456000 } note { value: "hi" } priority: -3 voucher: "\001\002"
        codes: [1, -2, 300] big: 18446744073709551615 small: 4000000000 tree { name: "root" children { name: "leaf" } }"#;
    let bytes = encode(ORDERS, "shop.Order", full);
    assert_eq!(reencode(&order, &bytes), bytes, "a message within itself is its bytes");
}

/// Bytes a serializer would write otherwise do not come back: the archive keeps theirs. Each is
/// decoded (it is a value of the message) and encodes to other bytes.
#[test]
fn bytes_serializers_would_write_otherwise_encode_to_other_bytes() {
    let all = message(ALL, &[0]);
    let cases: [(&str, &[u8]); 9] = [
        ("fields out of number order", &[0x18, 1, 0x08 | 1, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f]),
        ("a field without presence holding its default", &[0x18, 0]),
        ("a varint longer than it needs", &[0x18, 0x81, 0x00]),
        ("true as 2", &[0x68, 2]),
        ("a packed field's items one by one", &[0x91, 0x01, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]),
        ("an unpacked field's items packed", &[0xa2, 0x01, 2, 1, 2]),
        ("an unknown field", &[0x18, 1, 0xf8, 0x07, 1]),
        ("a map entry without its value", &[0xba, 0x01, 3, 0x0a, 1, b'k']),
        ("a Timestamp finer than a microsecond", &[0xca, 0x01, 2, 0x10, 1]),
    ];
    for (what, bytes) in cases {
        assert_ne!(reencode(&all, bytes), bytes, "{what}");
    }
    // A double of -0.0 is not its default: serializers write it, and so does the encoder.
    let negative_zero = [0x09, 0, 0, 0, 0, 0, 0, 0, 0x80];
    assert_eq!(reencode(&all, &negative_zero), negative_zero);
}

/// Rows of a batch encode each by its own columns, null rows skipped by the caller.
#[test]
fn each_row_of_a_batch_encodes_by_its_own_columns() {
    let all = message(ALL, &[0]);
    let texts = [r#"s: "a" ss: ["x"]"#, r#"i32: 1 subs { key: 1 value { s: "b" } }"#, r#"es: [ONE] ss: ["y", "z"]"#];
    let values: Vec<Vec<u8>> = texts.iter().map(|t| encode(ALL, "t.All", t)).collect();
    let mut rows: Vec<Option<&[u8]>> = values.iter().map(|v| Some(v.as_slice())).collect();
    rows.insert(1, None);
    let array = decode_all(&all, &rows);
    let encoder = Encoder::new(&all, &array).unwrap();
    for (row, want) in [0, 2, 3].into_iter().zip(&values) {
        let mut out = Vec::new();
        encoder.encode(row, &mut out).unwrap();
        assert_eq!(&out, want, "row {row}");
    }
}
