//! What every value format's typed columns share (see `ValueColumns`): the three fields (`value`,
//! `value_raw`, `value_error`), a batch's rows as they were pushed (`Rows`: bytes kept for misfits and
//! for values their columns would not give back), and the file's value statistics.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{ArrowError, Field};

/// Building a batch's typed columns failed.
#[derive(Debug, thiserror::Error)]
pub enum ColumnsError {
    #[error("building Arrow arrays failed: {0}")]
    Arrow(#[from] ArrowError),
    #[error("typed values decoded to {decoded} rows for {records} records")]
    RowCount { decoded: usize, records: usize },
    #[error("a value that was checked did not decode: {0}")]
    Decode(String),
}

/// The raw bytes' column.
pub const VALUE_RAW: &str = "value_raw";
/// The misfit reason's column.
pub const VALUE_ERROR: &str = "value_error";

/// A typed file's three value columns: `value` (of the value format's type), `value_raw`, `value_error`.
pub(crate) fn typed_fields(value: Field) -> [Field; 3] {
    [
        value,
        Field::new(VALUE_RAW, arrow_schema::DataType::Binary, true),
        Field::new(VALUE_ERROR, arrow_schema::DataType::Utf8, true),
    ]
}

/// What one file's values came to, for its log line and counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueStats {
    /// Records whose value did not fit the schema (kept raw).
    pub misfits: u64,
    /// Object keys the schema does not declare (ignored).
    pub ignored_fields: u64,
    /// The first misfit's offset and reason.
    pub first_misfit: Option<(i64, String)>,
    /// The Schema Registry IDs of the schemas the values that fit were written with.
    pub schema_ids: std::collections::BTreeSet<u32>,
    /// The registry's schema the `value` column is of, when its rows encode back to the bytes they were
    /// decoded from (those that would not keep their bytes in `value_raw`).
    pub value_schema: Option<FooterSchema>,
}

/// The registry's schema a file's typed values are encoded back by (the rows without `value_raw`), as
/// its footer holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FooterSchema {
    /// The schema's ID and text.
    Avro { id: u32, text: Arc<str> },
    /// The schema's ID, its files (a base64 `FileDescriptorSet`), and the message's full name and indexes.
    Protobuf { id: u32, descriptors: Arc<str>, message: String, indexes: Vec<i32> },
}

impl ValueStats {
    /// Counts a value that does not fit (the file's first is remembered).
    pub(crate) fn misfit(&mut self, offset: i64, why: &str) {
        self.misfits += 1;
        self.first_misfit.get_or_insert_with(|| (offset, why.to_string()));
    }
}

/// One batch's values as they were pushed, for any value format: their bytes back to back, and per row
/// where its bytes are and why it does not fit, if it does not.
#[derive(Default)]
pub(crate) struct Rows {
    bytes: Vec<u8>,
    pub(crate) rows: Vec<Row>,
}

pub(crate) struct Row {
    /// Where the value's bytes are in `bytes`; none for a null value (a tombstone).
    span: Option<(usize, usize)>,
    /// Why the value does not fit, if it does not.
    pub(crate) misfit: Option<String>,
    /// Its bytes are kept though it fits (they would not be given back exactly from its columns).
    keep: bool,
}

impl Rows {
    /// A row; `keep`: its bytes are kept in `value_raw` even if it fits.
    pub(crate) fn push(&mut self, value: Option<&[u8]>, misfit: Option<String>, keep: bool) {
        let span = value.map(|v| {
            let start = self.bytes.len();
            self.bytes.extend_from_slice(v);
            (start, self.bytes.len())
        });
        self.rows.push(Row { span, misfit, keep });
    }

    pub(crate) fn value(&self, row: &Row) -> Option<&[u8]> {
        row.span.map(|(s, e)| &self.bytes[s..e])
    }

    /// Row `i`'s value, if it has one that fits.
    pub(crate) fn fitting(&self, i: usize) -> Option<&[u8]> {
        let row = &self.rows[i];
        self.value(row).filter(|_| row.misfit.is_none())
    }

    /// Row `i` keeps no bytes: its columns give them back.
    pub(crate) fn give_back(&mut self, i: usize) {
        self.rows[i].keep = false;
    }

    /// Whether row `i` keeps its bytes though it fits (so far).
    pub(crate) fn keeps(&self, i: usize) -> bool {
        self.rows[i].keep
    }

    /// Keeps every row's bytes (the columns will not give them back).
    pub(crate) fn keep_all(&mut self) {
        self.rows.iter_mut().for_each(|row| row.keep = true);
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The batch's `value_raw` (misfits' and kept rows' bytes, or every value's with `keep_raw`) and `value_error`
    /// columns; the batch is then empty.
    pub(crate) fn take_raw_and_error(&mut self, keep_raw: bool) -> [ArrayRef; 2] {
        let mut raw = BinaryBuilder::with_capacity(self.rows.len(), 0);
        let mut error = StringBuilder::new();
        for row in &self.rows {
            let keep = row.misfit.is_some() || row.keep || keep_raw;
            raw.append_option(self.value(row).filter(|_| keep));
            error.append_option(row.misfit.as_deref());
        }
        self.rows.clear();
        self.bytes.clear();
        [Arc::new(raw.finish()), Arc::new(error.finish())]
    }
}

/// A batch's `value_raw` with the bytes of every typed row it lacked (one whose bytes its columns were to
/// give back), each written whole, header included, by `encode` (row, out) under the version it was
/// decoded by, which gives them back exactly: for a file that widens to a newer version, whose columns
/// would not.
pub(crate) fn kept_bytes(
    typed: &arrow_array::StructArray,
    raw: &arrow_array::BinaryArray,
    mut encode: impl FnMut(usize, &mut Vec<u8>) -> Result<(), String>,
) -> Result<ArrayRef, String> {
    let mut kept = BinaryBuilder::with_capacity(raw.len(), 0);
    let mut bytes = Vec::new();
    for i in 0..raw.len() {
        if raw.is_valid(i) {
            kept.append_value(raw.value(i));
        } else if typed.is_valid(i) {
            bytes.clear();
            encode(i, &mut bytes)?;
            kept.append_value(&bytes);
        } else {
            kept.append_null();
        }
    }
    Ok(Arc::new(kept.finish()))
}
