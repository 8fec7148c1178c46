use std::sync::Arc;

use arrow_array::builder::{Int32Builder, StringBuilder};
use arrow_array::{
    ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, StructArray, TimestampMillisecondArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::ParquetMetaDataReader;
use parquet::file::properties::WriterProperties;

use super::*;
use crate::table::iceberg::spec::{field_id, table_schema};

/// A Parquet file of three row groups: offsets 0..4, then 4 (whose `value.price` is NaN: no bounds), then
/// 5..7 (whose `value.id` are all null), a typed value struct and a list.
fn footer() -> (ParquetMetaData, Value) {
    let value = Fields::from(vec![
        Field::new("id", DataType::Int32, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("price", DataType::Float64, true),
        Field::new("count", DataType::UInt32, true),
    ]);
    let tags = Field::new("tags", DataType::List(Arc::new(Field::new("item", DataType::Int64, true))), true);
    let schema = Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("timestamp", DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, Some("UTC".into())), true),
        Field::new("value", DataType::Struct(value.clone()), true),
        tags,
    ]));
    let batch = |offsets: std::ops::Range<i64>, ids: &[Option<i32>], names: &[Option<&str>], prices: &[f64]| {
        let n = offsets.clone().count();
        let mut id = Int32Builder::new();
        ids.iter().for_each(|v| id.append_option(*v));
        let mut name = StringBuilder::new();
        names.iter().for_each(|v| name.append_option(*v));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(id.finish()),
            Arc::new(name.finish()),
            Arc::new(Float64Array::from(prices.to_vec())),
            Arc::new(UInt32Array::from(vec![u32::MAX; n])),
        ];
        let tags =
            ListArray::from_iter_primitive::<arrow_array::types::Int64Type, _, _>((0..n).map(|_| Some([Some(1)])));
        RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from_iter_values(offsets.clone())),
                Arc::new(TimestampMillisecondArray::from_iter_values(offsets.map(|o| 1_000 + o)).with_timezone("UTC")),
                Arc::new(StructArray::new(value.clone(), columns, None)),
                Arc::new(tags),
            ],
        )
        .unwrap()
    };
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(4)).build();
    let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
    writer
        .write(&batch(
            0..4,
            &[Some(7), None, Some(-3), Some(9)],
            &[Some("b"), Some("a"), None, Some("c")],
            &[1.5, 2.0, f64::NAN, 0.5],
        ))
        .unwrap();
    writer.write(&batch(4..5, &[Some(2)], &[Some("m")], &[f64::NAN])).unwrap();
    writer.flush().unwrap();
    writer.write(&batch(5..7, &[None, None], &[Some("zz"), Some(&"z".repeat(40))], &[3.0, -1.0])).unwrap();
    let bytes = bytes::Bytes::from(writer.into_inner().unwrap());
    let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes).unwrap();
    assert_eq!(footer.num_row_groups(), 3);
    (footer, table_schema(&schema, None, 0, 0).unwrap().0)
}

fn of(stats: &[(i32, Vec<u8>, Vec<u8>)], id: i32) -> Option<(Vec<u8>, Vec<u8>)> {
    stats.iter().find(|(i, ..)| *i == id).map(|(_, l, h)| (l.clone(), h.clone()))
}

#[test]
fn bounds_span_every_row_group_in_icebergs_binary_form() {
    let (footer, schema) = footer();
    let stats = column_stats(&footer, &schema);
    let id = |path: &str| {
        let parts: Vec<String> = path.split('.').map(str::to_string).collect();
        field_of(&schema, &parts).unwrap().0
    };
    assert_eq!(of(&stats.bounds, id("offset")), Some((0i64.to_le_bytes().to_vec(), 6i64.to_le_bytes().to_vec())));
    let micros = |ms: i64| (ms * 1000).to_le_bytes().to_vec();
    assert_eq!(of(&stats.bounds, id("timestamp")), Some((micros(1_000), micros(1_006))), "ms as Iceberg's µs");
    let ids = Some(((-3i32).to_le_bytes().to_vec(), 9i32.to_le_bytes().to_vec()));
    assert_eq!(of(&stats.bounds, id("value.id")), ids, "a row group of nulls only leaves the bounds of the others");
    assert_eq!(stats.nulls.iter().find(|(i, _)| *i == id("value.id")), Some(&(id("value.id"), 3)));
    assert_eq!(stats.values.iter().find(|(i, _)| *i == id("value.id")), Some(&(id("value.id"), 7)));
    assert_eq!(of(&stats.bounds, id("value.name")), None, "its largest value is too long to be a bound");
    assert_eq!(of(&stats.bounds, id("value.count")), None, "unsigned: Parquet's order is not Iceberg's");
    let mut price = Column::default();
    price.take(&footer.row_groups()[0].columns()[4], "double");
    assert_eq!(price.bounds, Some((Bound::Float(0.5), Bound::Float(2.0))), "NaN left out");
    assert_eq!(of(&stats.bounds, id("value.price")), None, "a row group with values but no bounds: none known");
    assert!(field_id(&schema, "tags").is_some_and(|tags| stats.sizes.iter().all(|(i, _)| *i != tags + 1)));
    assert_eq!(stats.sizes.len(), 6, "every column but the list's element has a size");
}

#[test]
fn a_lower_string_bound_may_be_cut_short_an_upper_one_may_not() {
    let long = Bound::Bytes("ééééééééé".as_bytes().to_vec()); // 18 bytes
    assert_eq!(serialize(&long, "string", true), Some("éééééééé".as_bytes().to_vec()), "cut at a char boundary");
    assert_eq!(serialize(&long, "string", false), None);
    assert_eq!(serialize(&Bound::Int(1 << 40), "int", true), None, "out of an int's range");
    assert_eq!(
        serialize(&Bound::Int(7), "long", true),
        Some(7i64.to_le_bytes().to_vec()),
        "an int file in a long table"
    );
}
