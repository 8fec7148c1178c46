//! The decoder's rules and messages, and the columns it builds, held against arrow-json's reading of
//! the same JSON.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Decimal128Type, Int64Type, TimestampMillisecondType};
use arrow_array::{Array, ArrayRef};

use super::columns::JsonColumns;
use super::Fit;
use crate::values::{JsonValues, ValueColumns, ValueSchema};

fn schema() -> ValueSchema {
    ValueSchema::from_avro(
        r#"{"type":"record","name":"R","fields":[
          {"name":"n","type":"int"},
          {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
          {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
          {"name":"day","type":["null",{"type":"int","logicalType":"date"}]},
          {"name":"id","type":["null",{"type":"string","logicalType":"uuid"}]},
          {"name":"kind","type":["null",{"type":"enum","name":"K","symbols":["A","B"]}]},
          {"name":"items","type":["null",{"type":"array","items":{"type":"record","name":"I","fields":[
              {"name":"sku","type":"string"}]}}]},
          {"name":"attrs","type":["null",{"type":"map","values":"long"}]}
        ]}"#,
    )
    .unwrap()
}

fn check(json: &str) -> Result<Fit, String> {
    schema().check(json.as_bytes()).map_err(|m| m.to_string())
}

#[test]
fn values_that_fit_and_ignored_fields() {
    assert_eq!(check(r#"{"n":1,"amount":"12.5"}"#), Ok(Fit { ignored_fields: 0 }));
    let full = r#"{"n":-2,"amount":1234.56,"at":"2026-11-30T10:00:00Z","day":"2026-11-30",
        "id":"123e4567-e89b-12d3-a456-426614174000","kind":"B","items":[{"sku":"x","extra":1}],
        "attrs":{"a":1},"more":true}"#;
    assert_eq!(check(full), Ok(Fit { ignored_fields: 2 }));
    assert!(check(r#"{"n":1,"amount":0,"at":1795996800000,"day":20422}"#).is_ok());
}

#[test]
fn misfits_say_where_and_why() {
    assert_eq!(check("nope").unwrap_err().split(" (").next(), Some("value: not JSON"));
    assert_eq!(check("[1]").unwrap_err(), "value: not a JSON object (got an array)");
    assert_eq!(check(r#"{"amount":1}"#).unwrap_err(), "value.n: required, but null or missing");
    assert_eq!(check(r#"{"n":1.5,"amount":1}"#).unwrap_err(), "value.n: expected a 32-bit integer, got 1.5");
    assert_eq!(
        check(r#"{"n":3000000000,"amount":1}"#).unwrap_err(),
        "value.n: expected a 32-bit integer, got 3000000000"
    );
    assert!(check(r#"{"n":1,"amount":"12345.6"}"#).unwrap_err().starts_with("value.amount: expected a decimal(6, 2)"));
    assert!(check(r#"{"n":1,"amount":1,"at":"yesterday"}"#).unwrap_err().starts_with("value.at: expected a timestamp"));
    assert!(check(r#"{"n":1,"amount":1,"day":"30/11/2026"}"#).unwrap_err().starts_with("value.day:"));
    assert!(check(r#"{"n":1,"amount":1,"id":"not-a-uuid"}"#).unwrap_err().starts_with("value.id:"));
    assert_eq!(check(r#"{"n":1,"amount":1,"kind":"C"}"#).unwrap_err(), r#"value.kind: expected one of A, B, got "C""#);
    assert_eq!(
        check(r#"{"n":1,"amount":1,"items":[{"sku":"a"},{"sku":2}]}"#).unwrap_err(),
        "value.items[1].sku: expected a string, got 2"
    );
    assert_eq!(
        check(r#"{"n":1,"amount":1,"attrs":{"k":"v"}}"#).unwrap_err(),
        r#"value.attrs.k: expected a 64-bit integer, got "v""#
    );
}

const SCHEMA: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"id","type":"long"},
    {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
    {"name":"at","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
    {"name":"user","type":{"type":"record","name":"U","fields":[{"name":"name","type":"string"}]}},
    {"name":"tags","type":{"type":"array","items":"string"}}
]}"#;

fn columns(keep_raw: bool) -> JsonColumns {
    let schema = ValueSchema::from_avro(SCHEMA).unwrap();
    JsonColumns::new(Arc::new(JsonValues { declared: Some(schema), keep_raw }))
}

const GOOD: &str =
    r#"{"id":7,"amount":"12.34","at":"2026-11-30T10:00:00Z","user":{"name":"ann"},"tags":["a","b"],"x":1}"#;

#[test]
fn fitting_values_become_typed_columns_and_misfits_keep_their_bytes() {
    let mut c = columns(false);
    let broken = b"{\"id\":\"seven\"}";
    let not_json = [0xff, 0x00, b'{'];
    assert!(c.push(10, Some(GOOD.as_bytes()), true));
    assert!(c.push(11, Some(broken), true));
    assert!(c.push(12, None, true));
    assert!(c.push(13, Some(&not_json), true));
    let [value, raw, error] = c.take(&[10, 11, 12, 13]).unwrap();
    let value = value.as_struct();
    assert_eq!((value.len(), value.null_count()), (4, 3));
    assert_eq!(value.column_by_name("id").unwrap().as_primitive::<Int64Type>().value(0), 7);
    let amount = value.column_by_name("amount").unwrap().as_primitive::<Decimal128Type>();
    assert_eq!(amount.value(0), 1234);
    let at = value.column_by_name("at").unwrap().as_primitive::<TimestampMillisecondType>();
    assert_eq!(at.value(0), 1_796_032_800_000);
    let user = value.column_by_name("user").unwrap().as_struct();
    assert_eq!(user.column(0).as_string::<i32>().value(0), "ann");
    let raw = raw.as_binary::<i32>();
    assert!(raw.is_null(0) && raw.is_null(2), "a fitting value and a tombstone keep no bytes");
    assert_eq!((raw.value(1), raw.value(3)), (&broken[..], &not_json[..]));
    let error = error.as_string::<i32>();
    assert_eq!(error.value(1), "value.id: expected a 64-bit integer, got \"seven\"");
    assert!(error.value(3).starts_with("value: not JSON"));
    assert!(error.is_null(0) && error.is_null(2));
    assert_eq!(c.stats().misfits, 2);
    assert_eq!(c.stats().ignored_fields, 1);
    assert_eq!(c.stats().first_misfit.as_ref().map(|(o, _)| *o), Some(11));
}

#[test]
fn keep_raw_keeps_every_value_and_batches_start_afresh() {
    let mut c = columns(true);
    assert!(c.push(0, Some(GOOD.as_bytes()), true));
    let [_, raw, _] = c.take(&[0]).unwrap();
    assert_eq!(raw.as_binary::<i32>().value(0), GOOD.as_bytes());
    assert!(c.push(1, None, true));
    let [value, raw, error] = c.take(&[1]).unwrap();
    assert_eq!((value.len(), raw.len(), error.len()), (1, 1, 1));
    assert!(value.is_null(0) && raw.is_null(0));
}

/// Snippets of JSON for a field: of every kind, fitting some types and not others.
const SNIPPETS: [&str; 24] = [
    "null",
    "true",
    "0",
    "-5",
    "7.25",
    "1.5",
    "1e3",
    "3000000000",
    "9223372036854775807",
    "18446744073709551615",
    "1e400",
    "\"12\"",
    "\"1.234\"",
    "\"abc\"",
    "\"2026-11-30\"",
    "\"2026-11-30T10:00:00Z\"",
    "\"2026-11-30 10:00:00\"",
    "\"30/11/2026\"",
    "[]",
    "[1, 2]",
    "[1.5]",
    "{}",
    "{\"x\": true}",
    "\"123e4567-e89b-12d3-a456-426614174000\"",
];

const EVERY_TYPE: &str = r#"{"type":"record","name":"All","fields":[
    {"name":"a","type":["null","long"]},
    {"name":"b","type":["null","int"]},
    {"name":"c","type":["null","double"]},
    {"name":"d","type":["null",{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}]},
    {"name":"e","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
    {"name":"f","type":["null",{"type":"array","items":"int"}]},
    {"name":"g","type":["null",{"type":"record","name":"G","fields":[{"name":"x","type":"boolean"}]}]},
    {"name":"h","type":["null",{"type":"map","values":"long"}]},
    {"name":"i","type":["null",{"type":"int","logicalType":"date"}]},
    {"name":"j","type":["null",{"type":"enum","name":"J","symbols":["abc"]}]},
    {"name":"k","type":["null",{"type":"string","logicalType":"uuid"}]},
    {"name":"l","type":["null","float"]},
    {"name":"m","type":["null","string"]}
]}"#;

/// Decodes each JSON text by `schema` as `--value-format json` does: the `value` column, and each
/// row's misfit reason.
fn decoded(schema: &ValueSchema, texts: &[&str]) -> (ArrayRef, Vec<Option<String>>) {
    let json = Arc::new(JsonValues { declared: Some(schema.clone()), keep_raw: false });
    let mut c = JsonColumns::new(json);
    for (i, text) in texts.iter().enumerate() {
        assert!(c.push(i as i64, Some(text.as_bytes()), true));
    }
    let [value, _, error] = c.take(&[]).unwrap();
    let error = error.as_string::<i32>();
    (value, (0..error.len()).map(|i| error.is_valid(i).then(|| error.value(i).to_string())).collect())
}

/// arrow-json's reading of the same texts by the same schema (`None`: it refuses them).
fn arrow_json(schema: &ValueSchema, texts: &[&str]) -> Option<ArrayRef> {
    let field = Arc::new(crate::values::value_field(schema));
    let mut decoder = arrow_json::ReaderBuilder::new_with_field(field).build_decoder().unwrap();
    for text in texts {
        decoder.decode(text.as_bytes()).ok()?;
        decoder.decode(b"\n").ok()?;
    }
    Some(decoder.flush().ok()??.column(0).clone())
}

/// Every snippet in every field of every type, one at a time: a value the decoder takes, arrow-json
/// reads to the very same column (so the one-pass decoder is exact where the reader it replaced was),
/// and one arrow-json refuses, the decoder does not take.
#[test]
fn what_the_decoder_takes_arrow_json_reads_alike() {
    let schema = ValueSchema::from_avro(EVERY_TYPE).unwrap();
    let mut fits = 0;
    for field in schema.fields().iter().map(|f| f.name.clone()) {
        for snippet in SNIPPETS {
            let json = format!("{{\"{field}\": {snippet}}}");
            let (ours, misfits) = decoded(&schema, &[&json]);
            let theirs = arrow_json(&schema, &[&json]);
            if misfits[0].is_none() {
                fits += 1;
                let theirs = theirs.unwrap_or_else(|| panic!("{json} fits but arrow-json refuses it"));
                assert_eq!(ours.to_data(), theirs.to_data(), "{json}");
            }
        }
    }
    assert!(fits > 60, "most types take some snippets: {fits}");
}

/// Whole records of every kind at once, nested and with escapes, keys out of order and unknown keys
/// between them: the same column as arrow-json's.
#[test]
fn nested_values_decode_as_arrow_json_reads_them() {
    let schema = schema();
    let texts = [
        r#"{"attrs":{"a\u00e9":1,"b":-2},"n":3,"amount":"-0.5","items":[{"sku":"x\"y"},{"sku":"\ud83d\ude00","q":[1]}],
            "kind":"A","at":1795996800123,"day":20422,"id":"123e4567-e89b-12d3-a456-426614174000"}"#,
        r#"  {"n":-7,"amount":12.34,"at":"2026-11-30T10:00:00+02:00","items":[],"attrs":{},"z":{"deep":[{}]}}  "#,
        r#"{"n":0,"amount":0,"items":null,"attrs":null,"at":null,"day":"2026-01-31","kind":null}"#,
    ];
    let (ours, misfits) = decoded(&schema, &texts);
    assert_eq!(misfits, [None, None, None]);
    assert_eq!(ours.to_data(), arrow_json(&schema, &texts).unwrap().to_data());
}

/// A value found not to fit deep inside (the second item of a list of records) leaves nothing of
/// itself in the column: the next values' rows, lists and strings are theirs alone.
#[test]
fn a_misfit_part_way_leaves_no_trace() {
    let schema = schema();
    let good = r#"{"n":1,"amount":1,"items":[{"sku":"a"}],"attrs":{"k":5}}"#;
    let bad = r#"{"n":2,"amount":1,"attrs":{"j":6},"items":[{"sku":"b"},{"sku":3}]}"#;
    let (ours, misfits) = decoded(&schema, &[good, bad, good]);
    assert_eq!(misfits[1].as_deref(), Some("value.items[1].sku: expected a string, got 3"));
    let expected = arrow_json(&schema, &[good, "null", good]).unwrap();
    assert_eq!(ours.to_data(), expected.to_data());
}

/// A field given twice does not fit, whichever of its values would (JSON leaves it to each reader which
/// one counts); a map's key given twice is two entries, as arrow-json reads it.
#[test]
fn a_field_given_twice_does_not_fit() {
    let schema = schema();
    let twice = [r#"{"n":1,"items":[{"sku":"a"}],"amount":2,"n":5}"#, r#"{"n":"x","amount":1,"n":1}"#];
    let (_, misfits) = decoded(&schema, &twice);
    assert_eq!(
        misfits,
        [Some("value.n: given twice".to_string()), Some("value.n: expected a 32-bit integer, got \"x\"".into())]
    );
    let entries = r#"{"n":1,"amount":1,"attrs":{"k":1,"k":2}}"#;
    let (ours, misfits) = decoded(&schema, &[entries]);
    assert_eq!(misfits, [None]);
    assert_eq!(ours.to_data(), arrow_json(&schema, &[entries]).unwrap().to_data());
}

/// Text that is not JSON says so, even when a misfit comes before the place it breaks.
#[test]
fn not_json_wins_over_a_misfit_met_first() {
    assert!(check(r#"{"n":"x","amount":1,"#).unwrap_err().starts_with("value: not JSON ("));
    assert!(check(r#"{"n":1.5} {"#).unwrap_err().starts_with("value: not JSON ("));
    assert_eq!(
        check(r#"{"n":1,"amount":1,"zz":1e400}"#).unwrap_err(),
        "value: not JSON (a number out of a double's range at byte 23)"
    );
}

/// A decimal is read from the number's text, every digit of it (not through a double).
#[test]
fn decimals_keep_every_digit() {
    let schema = ValueSchema::from_avro(
        r#"{"type":"record","name":"D","fields":[
        {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":38,"scale":2}}]}"#,
    )
    .unwrap();
    let (ours, misfits) = decoded(&schema, &[r#"{"d":123456789012345678901234567890.12}"#]);
    assert_eq!(misfits, [None]);
    let d = ours.as_struct().column(0).as_primitive::<Decimal128Type>().value(0);
    assert_eq!(d, 12_345_678_901_234_567_890_123_456_789_012);
}

/// Strings are appended to their columns unchecked and checked once the value is read: bytes that
/// are not UTF-8 anywhere (a field's string, a map's key, a key no field has, an ignored value) make
/// the value not JSON, saying where, and leave nothing in the columns.
#[test]
fn bytes_that_are_not_utf8_are_not_json_wherever_they_are() {
    let schema = schema();
    let good = br#"{"n":1,"amount":1,"items":[{"sku":"a"}],"attrs":{"k":5}}"#.to_vec();
    // \u{1} stands for a byte that is never UTF-8.
    let bad = |text: &str| text.bytes().map(|b| if b == 1 { 0xff } else { b }).collect::<Vec<u8>>();
    for text in [
        "{\"n\":1,\"amount\":1,\"items\":[{\"sku\":\"a\u{1}\"}]}",
        "{\"n\":1,\"amount\":1,\"attrs\":{\"k\u{1}\":5}}",
        "{\"n\":1,\"amount\":1,\"x\u{1}\":5}",
        "{\"n\":1,\"amount\":1,\"x\":\"\u{1}\"}",
    ] {
        let bytes = bad(text);
        let why = schema.check(&bytes).unwrap_err().to_string();
        assert!(why.starts_with("value: not JSON (invalid UTF-8 at byte "), "{why}");
        let json = Arc::new(JsonValues { declared: Some(schema.clone()), keep_raw: false });
        let mut c = JsonColumns::new(json);
        assert!(c.push(0, Some(&good), true) && c.push(1, Some(&bytes), true) && c.push(2, Some(&good), true));
        let [value, _, _] = c.take(&[]).unwrap();
        let expected =
            arrow_json(&schema, &[std::str::from_utf8(&good).unwrap(), "null", std::str::from_utf8(&good).unwrap()]);
        assert_eq!(value.to_data(), expected.unwrap().to_data());
    }
}
