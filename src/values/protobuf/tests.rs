use std::sync::Arc;

use arrow_array::{Array, RecordBatch, StructArray};
use arrow_schema::{Field, Schema};
use base64::Engine;
use prost::Message;
use prost_reflect::DynamicMessage;

use super::arrow::struct_fields;
use super::decode::{append_message, DecodeError, Scratch};
use super::fit::holds;
use super::schema::compile;
use super::widen::widen_message;
use super::ProtoMessage;
use crate::values::column::{Room, Struct};

/// Whether a message decodes under `message` (checked as `append_message` checks it; nothing kept).
fn check(message: &ProtoMessage, bytes: &[u8]) -> Result<(), DecodeError> {
    append_message(message, bytes, &mut Struct::new(struct_fields(message), &Room::rows(1)), &mut Scratch::default())
}

pub(crate) const ORDERS: &str = r#"
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
  message Line { string sku = 1; int32 quantity = 2; double price = 3; }
  int64 id = 1;
  string customer = 2;
  Status status = 3;
  repeated Line lines = 4;
  map<string, int64> tags = 5;
  google.protobuf.Timestamp placed = 6;
  google.protobuf.StringValue note = 7;
  optional sint32 priority = 8;
  oneof payment { string card = 9; bytes voucher = 10; }
  repeated int32 codes = 11;
  uint64 big = 12;
  fixed32 small = 13;
  Node tree = 14;
}

message Node { string name = 1; repeated Node children = 2; }
"#;

/// Every kind of field, in a message of its own.
pub(crate) const ALL: &str = r#"
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

/// The pool protox compiles `text` into (to encode test values with prost-reflect).
fn pool(text: &str) -> prost_reflect::DescriptorPool {
    let mut files = protox::file::ChainFileResolver::new();
    files.add(InMemory(text.to_string()));
    files.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(files);
    compiler.open_file("test.proto").unwrap();
    compiler.descriptor_pool()
}

struct InMemory(String);

impl protox::file::FileResolver for InMemory {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match name {
            "test.proto" => protox::file::File::from_source(name, &self.0),
            _ => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// A value of message `name` of `text`, from protobuf's text format.
pub(crate) fn encode(text: &str, name: &str, value: &str) -> Vec<u8> {
    let descriptor = pool(text).get_message_by_name(name).unwrap();
    DynamicMessage::parse_text_format(descriptor, value).unwrap().encode_to_vec()
}

pub(crate) fn message(text: &str, indexes: &[i32]) -> ProtoMessage {
    compile(text, &[]).unwrap().message(indexes).unwrap().clone()
}

/// `values` (None: a null row) decoded by `message` into one struct column.
pub(crate) fn decode_all(message: &ProtoMessage, values: &[Option<&[u8]>]) -> StructArray {
    let mut b = Struct::new(struct_fields(message), &Room::rows(values.len()));
    let mut scratch = Scratch::default();
    for value in values {
        match value {
            Some(bytes) => append_message(message, bytes, &mut b, &mut scratch).unwrap(),
            None => b.push_null(),
        }
    }
    b.finish().unwrap()
}

/// `bytes` decoded by `message`, then encoded back from the columns.
pub(crate) fn reencode(message: &ProtoMessage, bytes: &[u8]) -> Vec<u8> {
    let rows = decode_all(message, &[Some(bytes)]);
    let mut out = Vec::new();
    super::reencode::Encoder::new(message, &rows).unwrap().encode(0, &mut out).unwrap();
    out
}

/// Values as serializers write them (fields by number, defaults left out, packed runs, map entries
/// with key and value), encoded by prost-reflect: every field type, negative numbers in ten bytes, a
/// Timestamp before 1970, a Duration below zero, wrappers holding their default, a set `optional` and
/// oneof member holding theirs, a message longer than 127 bytes, a message within itself. What each is,
/// its message, its bytes.
pub(crate) fn as_serializers_write() -> Vec<(String, ProtoMessage, Vec<u8>)> {
    let all = message(ALL, &[0]);
    let long = "x".repeat(300);
    let texts = [
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
    let mut values: Vec<_> =
        texts.into_iter().map(|text| (text.clone(), all.clone(), encode(ALL, "t.All", &text))).collect();
    // prost-reflect packs a `[packed = false]` field (its `is_packed` misses the option), which protoc's
    // serializers do not: those items, one by one, by hand.
    let unpacked = vec![0xa0, 0x01, 1, 0xa0, 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
    values.push(("an unpacked field's items, 1 and -1".into(), all.clone(), unpacked));
    // A double of -0.0 is not its default: serializers write it.
    values.push(("a double of -0.0".into(), all, vec![0x09, 0, 0, 0, 0, 0, 0, 0, 0x80]));
    let full = r#"id: -5 customer: "ada" status: PAID lines { sku: "a" quantity: 2 price: 1.5 } tags { key: "x" value: 7 }
        placed { seconds: 1700000000 nanos: 123456000 } note { value: "hi" } priority: -3 voucher: "\001\002"
        codes: [1, -2, 300] big: 18446744073709551615 small: 4000000000 tree { name: "root" children { name: "leaf" } }"#;
    values.push((
        "a message within itself is its bytes".into(),
        message(ORDERS, &[0]),
        encode(ORDERS, "shop.Order", full),
    ));
    values
}

/// Values of `ALL` that decode but that a serializer would write otherwise: what each is, its bytes.
pub(crate) fn as_serializers_would_not_write() -> Vec<(&'static str, Vec<u8>)> {
    let cases: [(&str, &[u8]); 27] = [
        ("fields out of number order", &[0x18, 1, 0x08 | 1, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f]),
        ("a field without presence holding its default", &[0x18, 0]),
        ("an int64 without presence holding its default", &[0x20, 0]),
        ("an enum without presence holding its default", &[0x80, 0x01, 0]),
        ("a float without presence holding zero", &[0x15, 0, 0, 0, 0]),
        ("a string without presence empty", &[0x72, 0]),
        ("a varint longer than it needs", &[0x18, 0x81, 0x00]),
        ("a tag longer than it needs", &[0x98, 0x00, 1]),
        ("a length longer than it needs", &[0x72, 0x81, 0x00, b'a']),
        ("an int32 below zero in five bytes", &[0x18, 0xff, 0xff, 0xff, 0xff, 0x0f]),
        ("a uint32 beyond 32 bits", &[0x28, 0x80, 0x80, 0x80, 0x80, 0x10]),
        ("true as 2", &[0x68, 2]),
        ("a singular field twice", &[0x18, 1, 0x18, 2]),
        ("a packed field's items one by one", &[0x91, 0x01, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]),
        ("a packed field in two runs", &[0x9a, 0x01, 1, 1, 0x9a, 0x01, 1, 0]),
        ("a packed field's empty run", &[0x9a, 0x01, 0]),
        ("a packed item longer than it needs", &[0x9a, 0x01, 2, 0x81, 0x00]),
        ("an unpacked field's items packed", &[0xa2, 0x01, 2, 1, 2]),
        ("an unknown field", &[0x18, 1, 0xf8, 0x07, 1]),
        ("a map entry without its value", &[0xba, 0x01, 3, 0x0a, 1, b'k']),
        ("a map entry's value before its key", &[0xba, 0x01, 5, 0x10, 1, 0x0a, 1, b'k']),
        ("a map entry with another field", &[0xba, 0x01, 7, 0x0a, 1, b'k', 0x10, 1, 0x18, 1]),
        ("a message's fields out of number order", &[0x8a, 0x01, 6, 0x12, 1, 2, 0x0a, 1, b'a']),
        ("a wrapper holding its default, written", &[0xd2, 0x01, 2, 0x08, 0]),
        ("a wrapped value longer than it needs", &[0xd2, 0x01, 3, 0x08, 0x81, 0x00]),
        ("a Timestamp finer than a microsecond", &[0xca, 0x01, 2, 0x10, 1]),
        ("a Timestamp's fields out of order", &[0xca, 0x01, 5, 0x10, 0xe8, 0x07, 0x08, 1]),
    ];
    cases.into_iter().map(|(what, bytes)| (what, bytes.to_vec())).collect()
}

/// Each row as a JSON line (null fields left out).
fn json(rows: &StructArray) -> Vec<String> {
    let (fields, columns, _) = rows.clone().into_parts();
    let fields: Vec<Field> = fields.iter().map(|f| f.as_ref().clone()).collect();
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let mut out = Vec::new();
    let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
    w.write(&batch).unwrap();
    w.finish().unwrap();
    drop(w);
    String::from_utf8(out).unwrap().lines().map(str::to_string).collect()
}

/// An order with every field set, in protobuf's text format.
const FULL: &str = r#"id: -5 customer: "ada" status: PAID
    lines { sku: "a" quantity: 2 price: 1.5 } lines { sku: "b" quantity: -1 }
    tags { key: "x" value: 7 } placed { seconds: 1700000000 nanos: 123456789 }
    note { value: "hi" } priority: -3 voucher: "\001\002" codes: [1, -2, 300] big: 18446744073709551615
    small: 4000000000 tree { name: "root" children { name: "leaf" } }"#;

#[test]
fn every_kind_of_field_decodes_into_its_column_and_absent_fields_take_proto3_defaults_or_null() {
    let order = message(ORDERS, &[0]);
    let full = encode(ORDERS, "shop.Order", FULL);
    let empty = encode(ORDERS, "shop.Order", "");
    let rows = decode_all(&order, &[Some(&full), Some(&empty), None]);
    assert_eq!(rows.null_count(), 1, "only the null row is null");
    let lines = json(&rows);
    assert_eq!(
        lines[0],
        r#"{"id":-5,"customer":"ada","status":"PAID","lines":[{"sku":"a","quantity":2,"price":1.5},{"sku":"b","quantity":-1,"price":0.0}],"tags":{"x":7},"placed":"2023-11-14T22:13:20.123456Z","note":"hi","priority":-3,"voucher":"0102","codes":[1,-2,300],"big":18446744073709551615,"small":4000000000,"tree":{"name":"root","children":["0a046c656166"]}}"#
    );
    assert_eq!(lines[1], r#"{"id":0,"customer":"","status":"NEW","lines":[],"tags":{},"codes":[],"big":0,"small":0}"#);
}

#[test]
fn fields_in_any_order_the_last_of_a_singular_one_and_unpacked_repeated_scalars_decode() {
    let order = message(ORDERS, &[0]);
    // customer (2) "b", id (1) 3, customer again "c", codes (11) unpacked 5 then packed [6, 7], and an
    // unknown field 99 (varint) skipped.
    let bytes = [
        0x12, 1, b'b', 0x08, 3, 0x12, 1, b'c', 0x58, 5, 0x5a, 2, 6, 7, 0x98, 0x06, 1, //
    ];
    let rows = decode_all(&order, &[Some(&bytes)]);
    assert_eq!(
        json(&rows)[0],
        r#"{"id":3,"customer":"c","status":"NEW","lines":[],"tags":{},"codes":[5,6,7],"big":0,"small":0}"#
    );
}

/// `bytes`' fields, the numbers last to first (those of one number kept together, in their order).
fn fields_reversed(mut bytes: &[u8]) -> Vec<u8> {
    use prost::encoding::{decode_key, decode_varint, WireType};
    let mut fields: Vec<(u32, &[u8])> = Vec::new();
    while !bytes.is_empty() {
        let start = bytes;
        let (number, wire) = decode_key(&mut bytes).unwrap();
        let len = match wire {
            WireType::Varint => decode_varint(&mut bytes).map(|_| 0).unwrap(),
            WireType::LengthDelimited => decode_varint(&mut bytes).unwrap() as usize,
            WireType::ThirtyTwoBit => 4,
            WireType::SixtyFourBit => 8,
            other => unreachable!("no {other:?} in these values"),
        };
        bytes = &bytes[len..];
        fields.push((number, &start[..start.len() - bytes.len()]));
    }
    fields.sort_by_key(|(number, _)| std::cmp::Reverse(*number));
    fields.into_iter().flat_map(|(_, field)| field.to_vec()).collect()
}

#[test]
fn a_message_decodes_alike_whether_its_fields_come_in_order_or_not() {
    let order = message(ORDERS, &[0]);
    let full = encode(ORDERS, "shop.Order", FULL);
    let reversed = fields_reversed(&full);
    assert_eq!((reversed.len(), reversed != full), (full.len(), true));
    assert_eq!(json(&decode_all(&order, &[Some(&full)])), json(&decode_all(&order, &[Some(&reversed)])));
    // tags (5) {"x": 1} then {"y": 2}, then id (1) 4: the same map read in order and not.
    let tags = [0x2a, 5, 0x0a, 1, b'x', 0x10, 1, 0x2a, 5, 0x0a, 1, b'y', 0x10, 2];
    let rows = decode_all(&order, &[Some(&[&[0x08, 4], &tags[..]].concat()), Some(&[&tags[..], &[0x08, 4]].concat())]);
    let lines = json(&rows);
    assert!(lines[0].contains(r#""tags":{"x":1,"y":2}"#) && lines[0].starts_with(r#"{"id":4,"#), "{}", lines[0]);
    assert_eq!(lines[0], lines[1]);
}

#[test]
fn a_value_that_does_not_decode_says_where_and_why() {
    let order = message(ORDERS, &[0]);
    let why = |bytes: &[u8]| check(&order, bytes).unwrap_err();
    assert!(why(&[0x12, 5, b'a']).contains("customer: ends after 3 bytes"), "{}", why(&[0x12, 5, b'a']));
    assert!(why(&[0x12, 1, 0xff]).contains("customer: a string that is not UTF-8"));
    assert!(why(&[0x18, 9]).contains("status: 9 is not a value of enum shop.Order.Status"));
    assert!(why(&[0x0d, 0, 0, 0, 0]).contains("id: wire type 5"), "a fixed32 where an int64 is declared");
    assert!(why(&[0x22, 2, 0x0a, 9]).contains("lines: sku: ends after"), "nested: {}", why(&[0x22, 2, 0x0a, 9]));
    assert!(why(&[0x07]).contains("a field number of 0"), "a tag of field 0 with wire type 7");
    assert!(why(&[0x80]).contains("ends inside a number"));
    // An unknown group is skipped to its end; one never closed is not.
    assert!(check(&order, &[0xa3, 0x06, 0x08, 1, 0xa4, 0x06]).is_ok(), "group 100 with a varint inside");
    assert!(why(&[0xa3, 0x06, 0x08, 1]).contains("ends inside a number"));
}

/// Messages `L0` … `L{depth}`, each but the last holding the next (`a = 1`) and an int (`b = 2`); and a
/// value of `L0` whose every level gives `a`, then `b` twice (in order up to the second `b`), `last`
/// innermost.
fn chain(depth: usize, last: &[u8]) -> (String, Vec<u8>) {
    let mut text = String::from("syntax = \"proto3\";\n");
    (0..depth).for_each(|k| text += &format!("message L{k} {{ L{} a = 1; int32 b = 2; }}\n", k + 1));
    text += &format!("message L{depth} {{ int32 b = 2; }}\n");
    let mut value = last.to_vec();
    for _ in 0..depth {
        let mut outer = vec![0x0a];
        prost::encoding::encode_varint(value.len() as u64, &mut outer);
        value = [outer, value, vec![0x10, 1, 0x10, 2]].concat();
    }
    (text, value)
}

#[test]
fn a_deep_chain_of_messages_out_of_order_is_read_once_per_level_not_twice() {
    // Were each level read in order, then again by where each field is, 2^40 reads of the innermost.
    let (text, value) = chain(40, &[0x10, 7]);
    let l0 = message(&text, &[0]);
    let rows = json(&decode_all(&l0, &[Some(&value)]));
    assert!(rows[0].starts_with(r#"{"a":{"a":{"a":"#) && rows[0].contains(r#""b":7}"#), "{}", rows[0]);
    assert!(rows[0].ends_with(r#""b":2}"#), "the last b wins: {}", rows[0]);
    // And one that ends inside a number at the bottom is refused as soon as that is found.
    let (text, value) = chain(40, &[0x10, 0x80]);
    let why = check(&message(&text, &[0]), &value).unwrap_err();
    assert!(why.ends_with("b: ends inside a number"), "{why}");
}

#[test]
fn a_schema_registered_as_a_base64_file_descriptor_and_one_with_references_compile_alike() {
    let text = compile(ORDERS, &[]).unwrap();
    let proto = pool(ORDERS).get_file_by_name("test.proto").unwrap().file_descriptor_proto().encode_to_vec();
    let b64 = base64::engine::general_purpose::STANDARD.encode(proto);
    let from_descriptor = compile(&b64, &[]).unwrap();
    for path in [&[0][..], &[0, 0], &[0, 1], &[1]] {
        let (a, b) = (from_descriptor.message(path), text.message(path));
        assert_eq!(a, b, "{path:?}: the same messages from the descriptor (confluent-kafka's form)");
    }

    let node = r#"syntax = "proto3"; package tree; message Node { string name = 1; repeated Node children = 2; }"#;
    let uses = r#"syntax = "proto3"; import "tree/node.proto"; message Forest { repeated tree.Node trees = 1; }"#;
    let forest = compile(uses, &[("tree/node.proto".into(), node.into())]).unwrap();
    let forest = forest.message(&[0]).unwrap();
    assert_eq!(forest.fields[0].name, "trees");
    assert!(matches!(&forest.fields[0].ty, super::Proto::Message(m) if m.name == "tree.Node"));
    let missing = compile(uses, &[]).unwrap_err().to_string();
    assert!(missing.contains("tree/node.proto"), "{missing}");
    assert!(compile("message {", &[]).is_err());
}

#[test]
fn message_indexes_find_nested_messages_and_a_recursive_one_is_opaque() {
    let file = compile(ORDERS, &[]).unwrap();
    assert_eq!(file.message(&[0]).unwrap().name, "shop.Order");
    assert_eq!(file.message(&[1]).unwrap().name, "shop.Node");
    // Order's nested types in declaration order: Line, then the map's entry type (TagsEntry).
    assert_eq!(file.message(&[0, 0]).unwrap().name, "shop.Order.Line");
    assert_eq!(file.message(&[0, 1]).unwrap().name, "shop.Order.TagsEntry");
    assert!(file.message(&[2]).unwrap_err().contains("no message at index [2]"));
    let node = file.message(&[1]).unwrap();
    assert_eq!(node.fields[1].ty, super::Proto::Opaque, "Node holds Nodes: their bytes");
    let super::Proto::Message(tree) = &file.message(&[0]).unwrap().fields[13].ty else { panic!("a message") };
    assert_eq!(tree.fields[1].ty, super::Proto::Opaque, "within Order too, a Node's Nodes");
}

const V1: &str = r#"syntax = "proto3"; message M { int64 id = 1; Inner inner = 2; repeated Inner many = 3; }
message Inner { string a = 1; }"#;
const V2: &str = r#"syntax = "proto3"; message M { int64 id = 1; Inner inner = 2; repeated Inner many = 3; string added = 4; }
message Inner { string a = 1; int32 b = 2; }"#;
const CHANGED: &str = r#"syntax = "proto3"; message M { string id = 1; }"#;

#[test]
fn a_version_is_held_when_all_its_fields_are_there_with_their_types() {
    let (v1, v2, changed) = (message(V1, &[0]), message(V2, &[0]), message(CHANGED, &[0]));
    assert_eq!(holds(&v2, &v1), Ok(()), "the newer holds the older");
    assert_eq!(holds(&v1, &v1), Ok(()));
    assert_eq!(holds(&v1, &v2).unwrap_err(), "M.inner: Inner: field 2 (b) is not in the file's");
    assert!(holds(&v2, &changed).unwrap_err().contains("the type changed"));
    let renamed = message(r#"syntax = "proto3"; message M { int64 key = 1; }"#, &[0]);
    assert_eq!(holds(&v1, &renamed), Ok(()), "by number, whatever the name");
}

#[test]
fn rows_of_an_older_version_widen_into_what_protobuf_reads_of_them_in_nested_and_repeated_messages() {
    let (v1, v2) = (message(V1, &[0]), message(V2, &[0]));
    let value = encode(V1, "M", r#"id: 1 inner { a: "x" } many { a: "y" } many { a: "z" }"#);
    let old = decode_all(&v1, &[Some(&value), None]);
    let widened = widen_message(&old, &v1, &v2).unwrap();
    assert_eq!(widened.data_type(), &arrow_schema::DataType::Struct(struct_fields(&v2)));
    assert_eq!(widened.null_count(), 1, "the null row stays null");
    // The added fields take proto3's defaults, as the same bytes decoded under v2 do.
    let under_v2 = decode_all(&v2, &[Some(&value), None]);
    assert_eq!(json(&widened)[0], json(&under_v2)[0]);
    assert_eq!(
        json(&widened)[0],
        r#"{"id":1,"inner":{"a":"x","b":0},"many":[{"a":"y","b":0},{"a":"z","b":0}],"added":""}"#
    );
}

#[test]
fn what_protobuf_would_merge_or_keep_the_last_of_is_a_misfit_and_a_map_entry_without_value_is_the_default() {
    let order = message(ORDERS, &[0]);
    let why = |bytes: &[u8]| check(&order, bytes).unwrap_err();
    // placed (6) twice: protobuf would merge the two Timestamps.
    assert!(why(&[0x32, 0, 0x32, 0]).contains("placed: a message field given twice"));
    // card (9) and voucher (10) of the oneof payment.
    assert!(why(&[0x4a, 1, b'c', 0x52, 1, 7]).contains("voucher: a second member of its oneof is set"));
    assert!(check(&order, &[0x4a, 1, b'c', 0x4a, 1, b'd']).is_ok(), "one member twice: the last wins");
    // tags (5) {"x": 1} twice.
    assert!(why(&[0x2a, 5, 0x0a, 1, b'x', 0x10, 1, 0x2a, 5, 0x0a, 1, b'x', 0x10, 2])
        .contains("tags: a map key given twice"));
    // An entry's key or value given twice: the last wins, and the earlier must decode too.
    assert!(why(&[0x2a, 8, 0x0a, 1, b'x', 0x12, 1, b'a', 0x10, 1]).contains("tags: wire type 2"));
    assert!(why(&[0x2a, 8, 0x0a, 1, 0xff, 0x0a, 1, b'x', 0x10, 1]).contains("tags: a string that is not UTF-8"));
    assert!(check(&order, &[0x2a, 7, 0x0a, 1, b'x', 0x10, 1, 0x10, 2]).is_ok());
    // A Timestamp whose seconds (1) are length-delimited.
    assert!(why(&[0x32, 2, 0x0a, 0]).contains("placed: field 1 of wire type 2, not a varint"));

    let nested = r#"syntax = "proto3"; message M { map<string, Inner> byName = 1; } message Inner { int32 n = 1; }"#;
    let m = message(nested, &[0]);
    // An entry with its key only: the value is an Inner with its defaults, not null.
    let rows = decode_all(&m, &[Some(&[0x0a, 3, 0x0a, 1, b'k'])]);
    assert_eq!(json(&rows)[0], r#"{"byName":{"k":{"n":0}}}"#);
}

#[test]
fn another_message_or_a_field_whose_presence_changed_is_not_another_version() {
    let m = message(V1, &[0]);
    let other = message(r#"syntax = "proto3"; message Other { int64 id = 1; }"#, &[0]);
    assert_eq!(holds(&m, &other).unwrap_err(), "Other is not M");
    let explicit = message(r#"syntax = "proto3"; message M { optional int64 id = 1; }"#, &[0]);
    assert!(holds(&m, &explicit).unwrap_err().contains("its kind changed"), "null and 0 would mix");
    assert!(holds(&explicit, &message(r#"syntax = "proto3"; message M { int64 id = 1; }"#, &[0])).is_err());
}
