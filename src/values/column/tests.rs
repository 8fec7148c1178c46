use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::Array;
use arrow_schema::{DataType, Field, Fields};

use super::*;

/// A struct of every kind of column: a nullable int, a string, a list of structs, a map, fixed bytes.
fn fields() -> Fields {
    let item = Fields::from(vec![Field::new("sku", DataType::Utf8, false), Field::new("qty", DataType::Int32, true)]);
    let entries =
        Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Int64, true)]);
    Fields::from(vec![
        Field::new("n", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("items", DataType::List(Arc::new(Field::new("item", DataType::Struct(item), true))), true),
        Field::new("m", DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false), true),
        Field::new("f", DataType::FixedSizeBinary(2), true),
        Field::new("b", DataType::Boolean, true),
    ])
}

/// Row `i` appended to `s`, all of it (`whole`) or stopping half way, as a value found bad would.
fn append(s: &mut Struct, i: i32, whole: bool) {
    let Column::Int32(n) = s.child(0) else { unreachable!() };
    n.push(i);
    let Column::Utf8(text) = s.child(1) else { unreachable!() };
    text.push(&format!("row {i}"));
    let Column::List(items) = s.child(2) else { unreachable!() };
    for k in 0..3 {
        let Column::Struct(item) = items.items() else { unreachable!() };
        let Column::Utf8(sku) = item.child(0) else { unreachable!() };
        sku.push(&format!("sku {i}.{k} ✓"));
        if !whole && k == 1 {
            return; // Part of an item, part of a list, part of a row.
        }
        let Column::Int32(qty) = item.child(1) else { unreachable!() };
        qty.push(k);
        item.close(true);
    }
    items.close(true);
    let Column::Map(m) = s.child(3) else { unreachable!() };
    let Column::Struct(entry) = m.items() else { unreachable!() };
    let Column::Utf8(key) = entry.child(0) else { unreachable!() };
    key.push("k");
    entry.child(1).push_null();
    entry.close(true);
    m.close(true);
    let Column::FixedSize(f) = s.child(4) else { unreachable!() };
    f.push(&[i as u8, 0]).unwrap();
    let Column::Boolean(b) = s.child(5) else { unreachable!() };
    b.push(i % 2 == 0);
    s.close(true);
}

#[test]
fn a_row_cut_back_part_way_leaves_the_arrays_as_if_it_was_never_appended() {
    let mut cut = Struct::new(fields(), &Room::default());
    let mut clean = Struct::new(fields(), &Room::default());
    for i in 0..4 {
        append(&mut clean, i, true);
        append(&mut cut, i, true);
        let rows = cut.rows();
        append(&mut cut, 100 + i, false);
        cut.truncate(rows);
        if i == 2 {
            clean.push_null();
            cut.push_null();
        }
    }
    let (cut, clean) = (cut.finish().unwrap(), clean.finish().unwrap());
    cut.to_data().validate_full().unwrap();
    assert_eq!(cut.to_data(), clean.to_data());
    assert_eq!((cut.len(), cut.null_count()), (5, 1));
    assert_eq!(cut.column(0).as_primitive::<Int32Type>().values(), &[0, 1, 2, 0, 3]);
    assert_eq!(cut.column(2).as_list::<i32>().value(4).len(), 3);
}

#[test]
fn a_null_row_has_a_null_in_every_child_and_types_are_kept() {
    let ty = DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, Some("+00:00".into()));
    let mut s = Struct::new(Fields::from(vec![Field::new("at", ty.clone(), true)]), &Room::rows(2));
    let Column::Int64(at) = s.child(0) else { unreachable!() };
    at.push(7);
    s.close(true);
    s.push_null();
    let rows = s.finish().unwrap();
    assert_eq!(rows.column(0).data_type(), &ty);
    assert!(rows.is_null(1) && rows.column(0).is_null(1));
    assert_eq!(rows.column(0).as_primitive::<arrow_array::types::TimestampMillisecondType>().value(0), 7);
}

#[test]
fn a_fixed_size_value_of_another_size_is_refused() {
    let Column::FixedSize(mut f) = Column::new(&DataType::FixedSizeBinary(4), &Room::rows(1)) else { unreachable!() };
    assert_eq!(f.push(&[1, 2]), Err("2 bytes where 4 are fixed".into()));
}

#[test]
fn a_struct_made_with_the_room_of_the_last_needs_no_more() {
    let mut last = Struct::new(fields(), &Room::default());
    (0..8).for_each(|i| append(&mut last, i, true));
    let room = last.room();
    // What the batch took and an eighth.
    assert_eq!((room.rows, room.children.len()), (9, 6));
    assert_eq!((room.children[1].rows, room.children[1].bytes), (9, "row 0".len() * 9));
    let items = &room.children[2].children[0];
    assert_eq!((items.rows, items.children[0].bytes), (27, "sku 0.0 ✓".len() * 27));
    // The next batch's values are a little longer ("row 10", "sku 10.0 ✓"): its buffers still do not grow.
    let mut next = Struct::new(fields(), &room);
    let capacities = |s: &mut Struct| {
        let Column::Utf8(Strings { bytes: text, .. }) = s.child(1) else { unreachable!() };
        let text = (text.values.capacity(), text.offsets.capacity());
        let Column::List(list) = s.child(2) else { unreachable!() };
        let Column::Struct(item) = list.items() else { unreachable!() };
        let Column::Utf8(Strings { bytes: sku, .. }) = item.child(0) else { unreachable!() };
        (text, sku.values.capacity(), sku.offsets.capacity())
    };
    let made = capacities(&mut next);
    let ((text, text_offsets), sku, sku_offsets) = made;
    assert!(text >= 45 && text_offsets >= 10 && sku >= 297 && sku_offsets >= 28, "made: {made:?}");
    (3..11).for_each(|i| append(&mut next, i, true));
    assert_eq!(capacities(&mut next), made);
}

#[test]
fn one_large_value_does_not_size_the_next_batch() {
    let mut last = Struct::new(Fields::from(vec![Field::new("s", DataType::Utf8, true)]), &Room::default());
    let Column::Utf8(text) = last.child(0) else { unreachable!() };
    text.push(&"x".repeat(20 << 20));
    last.close(true);
    let room = last.room();
    assert_eq!(room.children[0].bytes, MAX_ROOM_BYTES, "a batch's 4 MiB and an eighth, not 22.5 MiB");
}

#[test]
fn room_for_rows_alone_reserves_no_list_items_and_no_fixed_bytes() {
    let huge = Field::new("f", DataType::FixedSizeBinary(1 << 30), true);
    let list = Field::new("l", DataType::List(Arc::new(huge.clone())), true);
    let mut s = Struct::new(Fields::from(vec![huge, list]), &Room::rows(4096));
    let Column::FixedSize(f) = s.child(0) else { unreachable!() };
    assert_eq!(f.values.capacity(), 0, "no 4 TiB for values not read yet");
    let Column::List(l) = s.child(1) else { unreachable!() };
    assert_eq!((l.offsets.capacity() >= 4097, l.items.rows()), (true, 0));
    let Column::FixedSize(items) = l.items() else { unreachable!() };
    assert_eq!(items.values.capacity(), 0);
}

fn strings() -> Strings {
    let Column::Utf8(s) = Column::new(&DataType::Utf8, &Room::default()) else { unreachable!() };
    s
}

#[test]
fn strings_appended_unchecked_are_checked_at_once_and_cut_back_when_bad() {
    let mut s = strings();
    s.push("checked");
    s.push_unchecked("é and ".as_bytes());
    s.push_unchecked(b"ascii");
    assert_eq!(s.validate(), Ok(()));
    s.push_unchecked(b"bad \xff");
    assert!(s.validate().is_err(), "not UTF-8");
    s.truncate(3);
    assert_eq!(s.validate(), Ok(()));
    let array = Column::Utf8(s).finish().expect("strings");
    assert_eq!(array.as_string::<i32>().iter().flatten().collect::<Vec<_>>(), ["checked", "é and ", "ascii"]);
}

#[test]
fn bytes_appended_after_a_cut_are_checked_again() {
    let mut s = strings();
    s.push("é");
    s.truncate(0);
    s.push_unchecked(b"\xff\xff");
    assert!(s.validate().is_err(), "the bytes checked before the cut are gone");
}

#[test]
fn a_row_that_ends_inside_a_character_is_refused_though_the_bytes_are_utf8() {
    let mut s = strings();
    let e = "é".as_bytes();
    s.push_unchecked(&e[..1]);
    s.push_unchecked(&e[1..]);
    assert!(s.validate().is_err(), "rows of half a character each");
}

#[test]
fn finishing_checks_the_strings_not_checked_yet() {
    let mut s = strings();
    s.push("fine");
    s.push_unchecked(b"\xc3");
    assert!(Column::Utf8(s).finish().is_err(), "no string array of bytes that are not UTF-8");
}

#[test]
fn strings_checked_after_nulls_and_checked_strings_are_not_refused() {
    let mut column = Column::new(&DataType::Utf8, &Room::default());
    column.push_null();
    column.push_null();
    let Column::Utf8(s) = &mut column else { unreachable!() };
    s.push("x");
    s.push("y");
    s.push_unchecked("é".as_bytes());
    assert_eq!(s.validate(), Ok(()));
    let array = column.finish().expect("strings");
    assert_eq!(array.as_string::<i32>().iter().collect::<Vec<_>>(), [None, None, Some("x"), Some("y"), Some("é")]);
}

#[test]
fn a_struct_checks_the_strings_unchecked_at_any_depth() {
    // A bad byte in a list item's struct, then in a map's key: each found by the struct's check.
    for bad_in in [2, 3] {
        let mut s = Struct::new(fields(), &Room::default());
        append(&mut s, 0, true);
        assert_eq!(s.validate(), Ok(()));
        match s.child(bad_in) {
            Column::List(items) => {
                let Column::Struct(item) = items.items() else { unreachable!() };
                let Column::Utf8(sku) = item.child(0) else { unreachable!() };
                sku.push_unchecked(b"\xff");
            }
            Column::Map(m) => {
                let Column::Struct(entry) = m.items() else { unreachable!() };
                let Column::Utf8(key) = entry.child(0) else { unreachable!() };
                key.push_unchecked(b"\xff");
            }
            _ => unreachable!(),
        }
        assert!(s.validate().is_err(), "not UTF-8 in child {bad_in}");
    }
}

#[test]
fn a_byte_past_ascii_is_found_wherever_it_is() {
    for len in [1, 7, 8, 9, 16, 23] {
        for at in 0..len {
            let mut bytes = vec![b'a'; len];
            bytes[at] = 0x80;
            assert!(!ascii(&bytes), "{len} bytes, the {at}th not ASCII");
        }
        assert!(ascii(&vec![b'a'; len]));
    }
}
