use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder, MapBuilder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};

use super::*;

/// `rows` rows from `first` of nested typed columns: a number, a string, a list of strings, a map.
fn batch(first: i64, rows: i64) -> RecordBatch {
    let (mut id, mut name) = (Int64Builder::new(), StringBuilder::new());
    let mut tags = ListBuilder::new(StringBuilder::new());
    let mut attrs = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    for i in first..first + rows {
        id.append_value(i);
        if i % 7 == 0 {
            name.append_null();
        } else {
            name.append_value(format!("name {}", i % 13));
        }
        for t in 0..i % 4 {
            tags.values().append_value(format!("tag {t} of {i}"));
        }
        tags.append(i % 5 != 0);
        for k in 0..i % 3 {
            attrs.keys().append_value(format!("key {k}"));
            attrs.values().append_value(i * k);
        }
        attrs.append(true).unwrap();
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(id.finish())),
        ("name", Arc::new(name.finish())),
        ("tags", Arc::new(tags.finish())),
        ("attrs", Arc::new(attrs.finish())),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

fn props(max_rows: usize, max_bytes: Option<usize>) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(max_rows))
        .set_max_row_group_bytes(max_bytes)
        .build()
}

/// Each batch written, then the file; with `check` the sizes and rows measured after each batch, as
/// `ArrowWriter` says them.
fn written(batches: &[RecordBatch], props: WriterProperties, threads: usize) -> (Vec<u8>, Vec<[usize; 4]>) {
    let schema = batches[0].schema();
    let mut ours = ColumnsWriter::with_threads(Vec::new(), schema.clone(), props.clone(), threads).unwrap();
    let mut arrow = ArrowWriter::try_new(Vec::new(), schema, Some(props)).unwrap();
    let mut sizes = Vec::new();
    for b in batches {
        ours.write(b).unwrap();
        arrow.write(b).unwrap();
        let measure = |rows, memory, size, groups| [rows, memory, size, groups];
        let [a, o] = [
            measure(
                arrow.in_progress_rows(),
                arrow.memory_size(),
                arrow.in_progress_size(),
                arrow.flushed_row_groups().len(),
            ),
            measure(
                ours.in_progress_rows(),
                ours.memory_size(),
                ours.in_progress_size(),
                ours.flushed_row_groups().len(),
            ),
        ];
        assert_eq!(o, a, "rows, memory, size and row groups after a batch, as ArrowWriter's");
        sizes.push(o);
    }
    ours.append_key_value_metadata(KeyValue::new("k".into(), "v".to_string()));
    arrow.append_key_value_metadata(KeyValue::new("k".into(), "v".to_string()));
    let bytes = ours.into_inner().unwrap();
    assert_eq!(bytes, arrow.into_inner().unwrap(), "the very bytes ArrowWriter writes");
    (bytes, sizes)
}

#[test]
fn writes_the_bytes_arrow_writer_writes_on_any_number_of_threads() {
    let batches: Vec<RecordBatch> = (0..6).map(|b| batch(b * 1_000, 500 + b * 100)).collect();
    for threads in [1, 2, 3, 8] {
        // One row group, then row groups cut by rows mid-batch, then by bytes.
        let (_, one) = written(&batches, props(1 << 20, None), threads);
        assert_eq!(one.last().unwrap()[3], 0, "all in the row group in progress");
        let (_, by_rows) = written(&batches, props(700, None), threads);
        assert!(by_rows.last().unwrap()[3] >= 5, "{by_rows:?}");
        let (_, by_bytes) = written(&batches, props(1 << 20, Some(16 << 10)), threads);
        assert!(by_bytes.last().unwrap()[3] >= 2, "{by_bytes:?}");
    }
}

#[test]
fn results_come_in_the_order_of_their_items_whichever_thread_did_each() {
    let items: Vec<u64> = (0..1_000).collect();
    let squares = in_parallel(items, 4, |i| {
        if i % 97 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        i * i
    });
    assert_eq!(squares, (0..1_000).map(|i| i * i).collect::<Vec<u64>>());
    assert_eq!(in_parallel(Vec::<u8>::new(), 4, |i| i), Vec::<u8>::new());
}
