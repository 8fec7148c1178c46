//! A dictionary pays for a column of few distinct values (a status, a country, a customer of a
//! thousand) and costs for one of mostly distinct values (order IDs, SKUs, trace IDs): each value is
//! hashed and looked up, the dictionary is written beside the indices, and past 1 MiB Parquet gives it
//! up for the rest of the column chunk with the dictionary already written. 16,384 typed Avro orders
//! written with every dictionary took 2.4 times the bytes and 1.4 times the time they took with none.
//! Parquet's writers keep a dictionary for every column unless told; this measures, per partition,
//! which columns it pays for.
//!
//! A partition's files go in cycles: one file with a dictionary wherever Parquet makes one (the columns
//! it makes one for, of at least [`MIN_JUDGED_BYTES`], are measured), one file with none of those
//! columns in a dictionary (measured again), then [`CHOSEN_FILES`] files where a column keeps its
//! dictionary only if that made it at most [`WORTH`] of its size without one: its stored bytes, or its
//! encoded bytes before compression where the two files compressed it differently (a column found not
//! worth compressing in between, see [`super::incompressible`]).

use std::collections::{HashMap, HashSet};

use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::ColumnPath;

use super::incompressible::MIN_JUDGED_BYTES;

/// A column keeps its dictionary only if that makes it at most this share of its size without one
/// (writing it without is cheaper: no hashing, no lookups).
pub const WORTH: f64 = 0.9;
/// How many files follow the choices made before the columns are measured again.
pub const CHOSEN_FILES: u32 = 14;

/// Where a partition is in its cycle of measuring and choosing.
#[derive(Debug)]
enum Phase {
    /// The next file makes every dictionary Parquet would: they are measured.
    WithDictionaries,
    /// The next file makes none of the measured ones: they are measured without.
    Without(HashMap<ColumnPath, Size>),
    /// The next `left` files leave out the dictionaries found not worth keeping (`without`).
    Chosen { left: u32, without: HashSet<ColumnPath> },
}

/// One partition's columns written without a dictionary, learned from its files' footers.
#[derive(Debug)]
pub struct DictionaryColumns {
    phase: Phase,
}

impl Default for DictionaryColumns {
    fn default() -> Self {
        Self { phase: Phase::WithDictionaries }
    }
}

impl DictionaryColumns {
    /// The columns the partition's next file writes without a dictionary.
    pub fn without(&self) -> Box<dyn Iterator<Item = &ColumnPath> + '_> {
        match &self.phase {
            Phase::WithDictionaries => Box::new(std::iter::empty()),
            Phase::Without(with) => Box::new(with.keys()),
            Phase::Chosen { without, .. } => Box::new(without.iter()),
        }
    }

    /// Learns from the footer of the file just finished (written leaving out [`Self::without`] as it
    /// is now), and moves on in the cycle.
    pub fn learn(&mut self, footer: &ParquetMetaData) {
        self.phase = match std::mem::replace(&mut self.phase, Phase::WithDictionaries) {
            Phase::WithDictionaries => {
                let with = bytes_per_value(footer, |dictionary| dictionary);
                match with.is_empty() {
                    true => Phase::WithDictionaries,
                    false => Phase::Without(with),
                }
            }
            Phase::Without(with) => {
                let measured = bytes_per_value(footer, |dictionary| !dictionary);
                let without = with
                    .into_iter()
                    .filter(|(column, size)| measured.get(column).is_some_and(|plain| !size.pays_against(plain)))
                    .map(|(column, _)| column)
                    .collect();
                Phase::Chosen { left: CHOSEN_FILES, without }
            }
            Phase::Chosen { left, without } if left > 1 => Phase::Chosen { left: left - 1, without },
            Phase::Chosen { .. } => Phase::WithDictionaries,
        };
    }
}

/// A column's size in a file, per value.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Size {
    codec: Compression,
    stored: f64,
    encoded: f64,
}

impl Size {
    /// Whether this size, with a dictionary, is at most [`WORTH`] of `without`'s: stored bytes compared
    /// when both files used the same codec, encoded bytes (before compression) when they did not.
    fn pays_against(&self, without: &Size) -> bool {
        match self.codec == without.codec {
            true => self.stored <= WORTH * without.stored,
            false => self.encoded <= WORTH * without.encoded,
        }
    }
}

/// The size per value of each column of at least [`MIN_JUDGED_BYTES`] (before compression) whose
/// chunks had a dictionary or not as `wanted` says, over the file's row groups.
fn bytes_per_value(footer: &ParquetMetaData, wanted: impl Fn(bool) -> bool) -> HashMap<ColumnPath, Size> {
    let mut sizes: HashMap<&ColumnPath, (Compression, i64, i64, i64)> = HashMap::new();
    for column in footer.row_groups().iter().flat_map(|g| g.columns()) {
        if wanted(column.dictionary_page_offset().is_some()) {
            let size = sizes.entry(column.column_path()).or_insert((column.compression(), 0, 0, 0));
            size.1 += column.compressed_size();
            size.2 += column.uncompressed_size();
            size.3 += column.num_values();
        }
    }
    sizes
        .into_iter()
        .filter(|(_, (_, _, encoded, values))| *encoded >= MIN_JUDGED_BYTES && *values > 0)
        .map(|(column, (codec, stored, encoded, values))| {
            let per_value = |bytes: i64| bytes as f64 / values as f64;
            (column.clone(), Size { codec, stored: per_value(stored), encoded: per_value(encoded) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::ZstdLevel;
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// The footer of a zstd file of `rows` rows of three string columns: `distinct` (no two alike),
    /// `some` (1,000 values of ~100 bytes) and `few` (ten short ones), all at random, leaving out the
    /// dictionaries `columns` says.
    fn footer(rows: usize, columns: &DictionaryColumns) -> ParquetMetaData {
        let mut rng = fastrand::Rng::with_seed(5);
        let mut hex = |n: usize| (0..n).map(|_| format!("{:032x}", rng.u128(..))).collect::<String>();
        let distinct: Vec<String> = (0..rows).map(|_| format!("trace-{}", hex(1))).collect();
        let several: Vec<String> = (0..1000).map(|_| hex(3)).collect();
        let some: Vec<String> = (0..rows).map(|_| several[rng.usize(..several.len())].clone()).collect();
        let few: Vec<String> = (0..rows).map(|_| format!("status of the order: {}", rng.u8(..10))).collect();
        let column = |values: &[String]| -> ArrayRef { Arc::new(StringArray::from_iter_values(values)) };
        let batch = RecordBatch::try_from_iter([
            ("distinct", column(&distinct)),
            ("some", column(&some)),
            ("few", column(&few)),
        ])
        .unwrap();
        let mut props = WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default()));
        for c in columns.without() {
            props = props.set_column_dictionary_enabled(c.clone(), false);
        }
        let mut file = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut file, batch.schema(), Some(props.build())).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        ParquetMetaDataReader::new().parse_and_finish(&bytes::Bytes::from(file)).unwrap()
    }

    /// Whether each column of the file (`distinct`, `some`, `few`) has a dictionary.
    fn dictionaries(footer: &ParquetMetaData) -> (bool, bool, bool) {
        let has = |name: &str| {
            let c = footer.row_group(0).columns().iter().find(|c| c.column_path().string() == name).unwrap();
            c.dictionary_page_offset().is_some()
        };
        (has("distinct"), has("some"), has("few"))
    }

    #[test]
    fn a_dictionary_is_kept_only_where_it_pays_and_measured_again_after_a_while() {
        let mut columns = DictionaryColumns::default();
        let cycle = |columns: &mut DictionaryColumns| {
            let first = footer(20_000, columns);
            assert_eq!(dictionaries(&first), (true, true, true), "the first file of a cycle makes every dictionary");
            columns.learn(&first);
            // `few` in a dictionary took too little to be measured: it keeps it.
            let second = footer(20_000, columns);
            assert_eq!(dictionaries(&second), (false, false, true), "the second none of the measured");
            columns.learn(&second);
            for file in 1..=CHOSEN_FILES {
                let next = footer(20_000, columns);
                assert_eq!(dictionaries(&next), (false, true, true), "file {file}: none for the distinct values");
                columns.learn(&next);
            }
        };
        cycle(&mut columns);
        cycle(&mut columns);
    }

    #[test]
    fn small_columns_are_not_judged() {
        let mut columns = DictionaryColumns::default();
        columns.learn(&footer(100, &columns));
        assert_eq!(columns.without().count(), 0, "a few KiB are too little to judge");
        let large = footer(20_000, &columns);
        assert_eq!(dictionaries(&large), (true, true, true), "still measuring with every dictionary");
        columns.learn(&large);
        assert_eq!(dictionaries(&footer(20_000, &columns)), (false, false, true), "then without");
    }

    #[test]
    fn sizes_are_compared_stored_under_one_codec_and_encoded_under_two() {
        let zstd = Compression::ZSTD(ZstdLevel::default());
        let size = |codec, stored, encoded| Size { codec, stored, encoded };
        // Stored 2 against 10 under zstd: the dictionary pays, though its encoded bytes are more.
        assert!(size(zstd, 2.0, 12.0).pays_against(&size(zstd, 10.0, 10.0)));
        assert!(!size(zstd, 9.5, 3.0).pays_against(&size(zstd, 10.0, 10.0)));
        // The file without it was left uncompressed (found not worth compressing in between): its 10
        // stored bytes are not comparable with 2 compressed ones, its 10 encoded ones with 12 are.
        assert!(!size(zstd, 2.0, 12.0).pays_against(&size(Compression::UNCOMPRESSED, 10.0, 10.0)));
        assert!(size(zstd, 2.0, 5.0).pays_against(&size(Compression::UNCOMPRESSED, 10.0, 10.0)));
    }
}
