use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Fields, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::ParquetMetaDataReader;

use super::*;
use crate::archive::claim::Claim;
use crate::archive::partition::OffsetRange;
use crate::table::iceberg::spec::table_schema;
use crate::table::plan::Link;

/// The columns of a file whose typed values have these fields.
fn columns(value: Vec<Field>) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("offset", DataType::Int64, false),
        Field::new("value", DataType::Struct(Fields::from(value)), true),
    ]))
}

/// The durable link of an object of offsets `start..=end` with these columns (and no rows: only its
/// footer's schema matters here).
fn link(start: i64, end: i64, columns: &Arc<Schema>) -> DurableLink {
    let mut writer = ArrowWriter::try_new(Vec::new(), columns.clone(), None).unwrap();
    writer.write(&RecordBatch::new_empty(columns.clone())).unwrap();
    let bytes = bytes::Bytes::from(writer.into_inner().unwrap());
    let footer = ParquetMetaDataReader::new().parse_and_finish(&bytes).unwrap();
    let covers = OffsetRange::new(start, end).unwrap();
    DurableLink {
        link: Link { covers, object: Some(format!("o{start}")) },
        claim: Claim::for_test(start, start, end),
        object: Some((covers, bytes.len() as u64, (end - start + 1) as u64)),
        footer: Some(Arc::new(footer)),
    }
}

fn id() -> Field {
    Field::new("id", DataType::Int32, false)
}

/// The table's schema as its first file made it, with `id` and `name` in the values.
fn evolving() -> Evolving {
    let v1 = columns(vec![id(), Field::new("name", DataType::Utf8, true)]);
    let (schema, last) = table_schema(&with_partition(&v1), None, 0, 0).unwrap();
    Evolving::new(schema, last, 1)
}

fn starts(fitted: &[(DurableLink, ColumnStats)]) -> Vec<i64> {
    fitted.iter().map(|(d, _)| d.link.covers.start()).collect()
}

#[test]
fn files_the_schema_holds_all_go_in_and_an_added_column_evolves_it_once() {
    let v1 = columns(vec![id(), Field::new("name", DataType::Utf8, true)]);
    let v2 = columns(vec![id(), Field::new("name", DataType::Utf8, true), Field::new("coupon", DataType::Utf8, true)]);
    let mut e = evolving();
    let (to, fitted, refused) = e.fit(30, vec![link(0, 9, &v1), link(10, 19, &v2), link(20, 29, &v2)]);
    assert_eq!((to, starts(&fitted), refused.is_none()), (30, vec![0, 10, 20], true));
    let evolved = e.evolved().expect("coupon is new");
    assert!(evolved.schema.to_string().contains("\"coupon\""), "{}", evolved.schema);
    let mut unchanged = evolving();
    let (to, fitted, _) = unchanged.fit(10, vec![link(0, 9, &v1)]);
    assert_eq!((to, fitted.len()), (10, 1));
    assert!(unchanged.evolved().is_none(), "the same columns change nothing");
}

#[test]
fn a_file_whose_column_changed_type_cuts_the_run_at_its_chain_position() {
    let v1 = columns(vec![id(), Field::new("name", DataType::Utf8, true)]);
    let renumbered = columns(vec![id(), Field::new("name", DataType::Int64, true)]);
    let mut e = evolving();
    let links = vec![link(0, 9, &v1), link(10, 19, &v1), link(20, 29, &renumbered), link(30, 39, &v1)];
    let (to, fitted, refused) = e.fit(40, links);
    // The position moves to the refused file's start, not past it: the files after it wait too.
    assert_eq!((to, starts(&fitted)), (20, vec![0, 10]));
    let why = refused.expect("refused").to_string();
    assert!(why.contains("name"), "{why}");
    let (to, fitted, refused) = evolving().fit(40, vec![link(20, 29, &renumbered), link(30, 39, &v1)]);
    assert_eq!((to, fitted.len(), refused.is_some()), (20, 0, true), "the first file refused: nothing moves");
}
