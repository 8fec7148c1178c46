//! Columns that do not compress (values already compressed or encrypted, random IDs) cost the codec's
//! CPU for nothing: zstd took a quarter of the Parquet encoder's time on random 1 KiB values and made
//! the file slightly larger. So a partition's files leave such a column uncompressed: a column that a file
//! compressed to more than [`NOT_WORTH`] of its size is written plain in the partition's next
//! [`PLAIN_FILES`] files, and then compressed again to see whether it still does not pay.

use std::collections::HashMap;

use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::ColumnPath;

/// A column whose compressed pages keep more than this share of their size is not worth compressing.
pub const NOT_WORTH: f64 = 0.95;
/// How many files a column found not worth compressing is written plain before it is tried again.
pub const PLAIN_FILES: u32 = 7;
/// Columns smaller than this in a file are not judged: too little to tell, or to matter.
pub const MIN_JUDGED_BYTES: i64 = 64 << 10;

/// One partition's columns not worth compressing, learned from its files' footers.
#[derive(Debug, Default)]
pub struct IncompressibleColumns {
    /// Per column found not worth compressing: how many more files write it plain.
    plain: HashMap<ColumnPath, u32>,
}

impl IncompressibleColumns {
    /// The columns the partition's next file writes uncompressed.
    pub fn plain(&self) -> impl Iterator<Item = &ColumnPath> {
        self.plain.keys()
    }

    /// Learns from the footer of the file just finished (written with [`Self::plain`] as it is now):
    /// each plain column has one file fewer to go, and each column the file compressed at a ratio
    /// over [`NOT_WORTH`] (and of at least [`MIN_JUDGED_BYTES`]) is plain from now on.
    pub fn learn(&mut self, footer: &ParquetMetaData) {
        self.plain.retain(|_, left| {
            *left -= 1;
            *left > 0
        });
        let mut sizes: HashMap<&ColumnPath, (i64, i64)> = HashMap::new();
        for column in footer.row_groups().iter().flat_map(|g| g.columns()) {
            if column.compression() != Compression::UNCOMPRESSED {
                let size = sizes.entry(column.column_path()).or_default();
                size.0 += column.compressed_size();
                size.1 += column.uncompressed_size();
            }
        }
        for (column, (compressed, uncompressed)) in sizes {
            if uncompressed >= MIN_JUDGED_BYTES && compressed as f64 > NOT_WORTH * uncompressed as f64 {
                self.plain.insert(column.clone(), PLAIN_FILES);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryArray, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::ZstdLevel;
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// The footer of a zstd file of two binary columns, `random` and `repeated`, of `rows` 1 KiB values,
    /// with `plain` columns uncompressed.
    fn footer(rows: usize, plain: &IncompressibleColumns) -> ParquetMetaData {
        let mut rng = fastrand::Rng::with_seed(3);
        let random: Vec<Vec<u8>> = (0..rows).map(|_| (0..1024).map(|_| rng.u8(..)).collect()).collect();
        let repeated = vec![b"the same text, again and again ".repeat(33); rows];
        let column = |values: &[Vec<u8>]| -> ArrayRef {
            Arc::new(BinaryArray::from_iter_values(values.iter().map(Vec::as_slice)))
        };
        let batch = RecordBatch::try_from_iter([("random", column(&random)), ("repeated", column(&repeated))]).unwrap();
        let mut props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_dictionary_enabled(false);
        for c in plain.plain() {
            props = props.set_column_compression(c.clone(), Compression::UNCOMPRESSED);
        }
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(props.build())).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(file)).unwrap()
    }

    fn random() -> ColumnPath {
        ColumnPath::from("random")
    }

    /// The compression of `name` in the file, and its compressed size over its uncompressed size.
    fn written(footer: &ParquetMetaData, name: &str) -> (Compression, f64) {
        let c = footer.row_group(0).columns().iter().find(|c| c.column_path().string() == name).unwrap();
        (c.compression(), c.compressed_size() as f64 / c.uncompressed_size() as f64)
    }

    #[test]
    fn a_column_that_did_not_compress_is_written_plain_then_tried_again() {
        let mut columns = IncompressibleColumns::default();
        let first = footer(200, &columns);
        let zstd = Compression::ZSTD(ZstdLevel::default());
        assert!(matches!(written(&first, "random"), (c, ratio) if c == zstd && ratio > NOT_WORTH));
        assert!(matches!(written(&first, "repeated"), (c, ratio) if c == zstd && ratio < 0.1));
        columns.learn(&first);
        for file in 1..=PLAIN_FILES {
            assert_eq!(columns.plain().collect::<Vec<_>>(), [&random()], "file {file} writes it plain");
            let next = footer(200, &columns);
            assert_eq!(written(&next, "random").0, Compression::UNCOMPRESSED);
            assert_eq!(written(&next, "repeated").0, zstd);
            columns.learn(&next);
        }
        assert_eq!(columns.plain().count(), 0, "after {PLAIN_FILES} plain files, compression is tried again");
        columns.learn(&footer(200, &columns));
        assert_eq!(columns.plain().collect::<Vec<_>>(), [&random()], "and found not worth it again");
    }

    #[test]
    fn small_columns_are_not_judged() {
        let mut columns = IncompressibleColumns::default();
        columns.learn(&footer(10, &columns));
        assert_eq!(columns.plain().count(), 0, "10 KiB of random bytes is too little to judge");
    }
}
