//! The decoder's verdict on whether a value's bytes are what `reencode` writes of its row
//! (`Scratch::canonical`): sure when it says so, and saying so of what serializers write.

use std::sync::{Arc, LazyLock};

use proptest::prelude::*;
use proptest::sample::Index;

use super::{append_message, Scratch};
use crate::values::column::{Room, Struct};
use crate::values::protobuf::arrow::struct_fields;
use crate::values::protobuf::tests::{as_serializers_would_not_write, as_serializers_write, message, reencode, ALL};
use crate::values::protobuf::{Kind, Proto, ProtoEnum, ProtoField, ProtoMessage};

/// Whether `bytes` decode under `message` as `reencode` writes their row; `None`: they do not decode.
fn canonical(message: &ProtoMessage, bytes: &[u8]) -> Option<bool> {
    let mut s = Struct::new(struct_fields(message), &Room::rows(1));
    let mut scratch = Scratch::default();
    append_message(message, bytes, &mut s, &mut scratch).ok().map(|()| scratch.canonical())
}

/// What serializers write is told canonical: those values are given back without their rows encoded.
#[test]
fn values_as_serializers_write_them_are_told_canonical() {
    for (what, message, bytes) in as_serializers_write() {
        assert_eq!(canonical(&message, &bytes), Some(true), "{what}");
    }
}

/// Bytes a serializer would write otherwise are not, each read after one that is (the verdict is the
/// message's own), nor are those of a message whose fields are declared out of number order or whose
/// enum field without presence has no number 0.
#[test]
fn bytes_serializers_would_write_otherwise_are_not() {
    let all = message(ALL, &[0]);
    let mut scratch = Scratch::default();
    let mut s = Struct::new(struct_fields(&all), &Room::rows(2));
    for (what, bytes) in as_serializers_would_not_write() {
        append_message(&all, &[0x18, 1], &mut s, &mut scratch).unwrap();
        assert!(scratch.canonical(), "{what}: the value before");
        append_message(&all, &bytes, &mut s, &mut scratch).unwrap();
        assert!(!scratch.canonical(), "{what}");
    }
    // Compiled messages declare their fields by number; one declared otherwise reads `b` then `a` in
    // one pass, in the order encoders do not write.
    let m = message(r#"syntax = "proto3"; message M { int32 a = 1; int32 b = 2; }"#, &[0]);
    let declared = ProtoMessage::new(m.name.clone(), m.fields.iter().rev().cloned().collect());
    assert_eq!(canonical(&declared, &[0x10, 2, 0x08, 1]), Some(false), "fields declared out of number order");
    assert_eq!(canonical(&m, &[0x08, 1, 0x10, 2]), Some(true));
    // An enum without presence and without a number 0 (proto3 requires one) reads as its lowest number
    // when absent, which its row would write.
    let e = Arc::new(ProtoEnum { name: "E".into(), values: vec![(1, "ONE".into())] });
    let field =
        ProtoField { name: "e".into(), number: 1, ty: Proto::Enum(e), kind: Kind::Single, oneof: None, packed: false };
    assert_eq!(canonical(&ProtoMessage::new("M".into(), vec![field]), &[]), Some(false), "an enum without 0");
}

/// The values of `as_serializers_write`, made once (each is compiled from its schema's text).
static SEEDS: LazyLock<Vec<(String, ProtoMessage, Vec<u8>)>> = LazyLock::new(as_serializers_write);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Bytes told canonical encode back to themselves, whatever they are: values as serializers write
    /// them with up to four bytes changed, added or taken away (those that still decode).
    #[test]
    fn bytes_told_canonical_encode_back_to_themselves(
        seed in any::<Index>(),
        edits in prop::collection::vec((0u8..3, any::<Index>(), any::<u8>()), 1..5),
    ) {
        let (_, message, bytes) = seed.get(&SEEDS);
        let mut bytes = bytes.clone();
        for (edit, at, byte) in edits {
            match edit {
                0 if !bytes.is_empty() => {
                    let i = at.index(bytes.len());
                    bytes[i] = byte;
                }
                1 => bytes.insert(at.index(bytes.len() + 1), byte),
                _ if !bytes.is_empty() => drop(bytes.remove(at.index(bytes.len()))),
                _ => {}
            }
        }
        if canonical(message, &bytes) == Some(true) {
            prop_assert_eq!(reencode(message, &bytes), bytes);
        }
    }
}
