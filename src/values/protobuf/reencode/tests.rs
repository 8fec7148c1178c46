use super::Encoder;
use crate::values::protobuf::tests::{
    as_serializers_would_not_write, as_serializers_write, decode_all, encode, message, reencode, ALL,
};

/// Values as serializers write them come back to their very bytes.
#[test]
fn values_as_serializers_write_them_encode_back_to_their_very_bytes() {
    for (what, message, bytes) in as_serializers_write() {
        assert_eq!(reencode(&message, &bytes), bytes, "{what}");
    }
}

/// Bytes a serializer would write otherwise do not come back: the archive keeps theirs. Each is
/// decoded (it is a value of the message) and encodes to other bytes.
#[test]
fn bytes_serializers_would_write_otherwise_encode_to_other_bytes() {
    let all = message(ALL, &[0]);
    for (what, bytes) in as_serializers_would_not_write() {
        assert_ne!(reencode(&all, &bytes), bytes, "{what}");
    }
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
