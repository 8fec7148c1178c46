use crate::values::column::{Room, Struct};
use serde_json::json;

use super::*;
use crate::values::avro::binary::{append_record, check, struct_fields, Reader};
use crate::values::avro::parse_record;
use crate::values::avro::resolve::encode as encode_json;

const SCHEMA: &str = r#"{"type":"record","name":"R","fields":[
    {"name":"b","type":"boolean"},
    {"name":"i","type":"int"},
    {"name":"l","type":"long"},
    {"name":"f","type":"float"},
    {"name":"d","type":"double"},
    {"name":"s","type":"string"},
    {"name":"y","type":"bytes"},
    {"name":"n","type":["null","string"]},
    {"name":"m","type":["long","null"]},
    {"name":"one","type":["int"]},
    {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
    {"name":"a","type":{"type":"array","items":{"type":"record","name":"P","fields":[{"name":"x","type":"int"}]}}},
    {"name":"mp","type":{"type":"map","values":["null","double"]}},
    {"name":"fx","type":{"type":"fixed","name":"F","size":3}},
    {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":30,"scale":2}},
    {"name":"dfx","type":{"type":"fixed","name":"G","size":20,"logicalType":"decimal","precision":30,"scale":0}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
    {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
    {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"tsu","type":{"type":"long","logicalType":"local-timestamp-micros"}},
    {"name":"u","type":{"type":"string","logicalType":"uuid"}},
    {"name":"empty","type":{"type":"record","name":"Z","fields":[]}}]}"#;

/// Values in Avro's canonical encoding (as `resolve::encode` writes defaults, one block per array).
fn values() -> Vec<Vec<u8>> {
    let record = Avro::Record(parse_record(SCHEMA).unwrap());
    let fixed20 = |last: char, pad: char| std::iter::repeat_n(pad, 19).chain([last]).collect::<String>();
    let rows = [
        json!({"b": true, "i": -3, "l": 1i64 << 40, "f": 1.5, "d": -0.25, "s": "héllo", "y": "\u{0}\u{ff}",
            "n": null, "m": 7, "one": 2, "e": "C", "a": [{"x": 1}, {"x": -300}], "mp": {"k": null, "j": 2.5},
            "fx": "abc", "dec": "\u{0}\u{80}", "dfx": fixed20('\u{05}', '\u{0}'), "day": 19000, "tm": 1000,
            "tu": 5, "ts": -1, "tsu": 1i64 << 50, "u": "123e4567-e89b-12d3-a456-426614174000", "empty": {}}),
        json!({"b": false, "i": 0, "l": -1, "f": 0.0, "d": 1e300, "s": "", "y": "", "n": "x", "m": null,
            "one": -1, "e": "A", "a": [], "mp": {}, "fx": "\u{ff}\u{0}\u{1}", "dec": "\u{ff}",
            "dfx": fixed20('\u{fe}', '\u{ff}'), "day": -1, "tm": 0, "tu": 0, "ts": 0, "tsu": -5,
            "u": "00000000-0000-0000-0000-000000000000", "empty": {}}),
    ];
    rows.iter()
        .map(|v| {
            let mut out = Vec::new();
            encode_json(&record, v, &mut out).unwrap();
            out
        })
        .collect()
}

#[test]
fn canonical_values_encode_back_to_their_very_bytes() {
    let fields = parse_record(SCHEMA).unwrap();
    let values = values();
    let mut b = Struct::new(struct_fields(&fields), &Room::rows(values.len()));
    for v in &values {
        let mut r = Reader::new(v);
        check(&Avro::Record(fields.clone()), &mut r).unwrap();
        assert!(r.at_end() && r.canonical(), "canonical input");
        append_record(&fields, &mut Reader::new(v), &mut b).unwrap();
    }
    let rows = b.finish().unwrap();
    for (i, v) in values.iter().enumerate() {
        let mut out = Vec::new();
        encode_record(&fields, &rows, i, &mut out).unwrap();
        assert_eq!(&out, v, "row {i}");
    }
}

#[test]
fn bytes_that_would_not_encode_back_are_not_canonical() {
    let canonical = |schema: &str, bytes: &[u8]| {
        let fields =
            parse_record(&format!(r#"{{"type":"record","name":"R","fields":[{{"name":"x","type":{schema}}}]}}"#))
                .unwrap();
        let mut r = Reader::new(bytes);
        check(&Avro::Record(fields), &mut r).unwrap();
        assert!(r.at_end());
        r.canonical()
    };
    assert!(canonical(r#""long""#, &[0x81, 0x01]), "128 zig-zagged: two bytes");
    assert!(!canonical(r#""long""#, &[0x82, 0x00]), "1 padded to two bytes");
    assert!(canonical(r#"{"type":"array","items":"int"}"#, &[4, 2, 4, 0]));
    assert!(!canonical(r#"{"type":"array","items":"int"}"#, &[2, 2, 2, 4, 0]), "two blocks");
    assert!(!canonical(r#"{"type":"array","items":"int"}"#, &[3, 4, 2, 4, 0]), "a block with its size");
    assert!(!canonical(r#"{"type":"map","values":"int"}"#, &[2, 2, b'a', 2, 2, 2, b'b', 4, 0]), "two blocks");
    let decimal = r#"{"type":"bytes","logicalType":"decimal","precision":9,"scale":0}"#;
    assert!(canonical(decimal, &[2, 0x7f]));
    assert!(!canonical(decimal, &[4, 0x00, 0x7f]), "a redundant sign byte");
    assert!(!canonical(decimal, &[4, 0xff, 0x80]), "a redundant sign byte");
    assert!(!canonical(decimal, &[0]), "zero in no bytes");
}
