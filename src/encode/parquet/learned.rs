//! What a partition's Parquet files taught about their columns, for its next file to follow.

use parquet::file::metadata::ParquetMetaData;

use super::dictionary::DictionaryColumns;
use super::incompressible::IncompressibleColumns;

/// One partition's lessons from its files' footers: the columns not worth compressing, and those a
/// dictionary does not pay for. Its next file follows them ([`super::ParquetEncoder::follow`]).
#[derive(Debug, Default)]
pub struct LearnedColumns {
    pub(super) incompressible: IncompressibleColumns,
    pub(super) dictionaries: DictionaryColumns,
}

impl LearnedColumns {
    /// Learns from the footer of the file just finished (which followed these lessons as they are now).
    pub fn learn(&mut self, footer: &ParquetMetaData) {
        self.incompressible.learn(footer);
        self.dictionaries.learn(footer);
    }
}
