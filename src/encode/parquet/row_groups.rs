//! What the row groups a file has written keep in memory until it is sealed, and how many shrinking
//! may give it.

use arrow_schema::{DataType, Fields};

/// The most row groups a file is given by shrinking (`ParquetEncoder::shrink`); a file that has them is
/// not shrunk again.
pub(in crate::encode) const MAX_SHRUNK_ROW_GROUPS: usize = 64;

/// What a written row group keeps in memory per column until its file is sealed (its footer entry, column
/// and offset index), as the budget counts it: a raw file's footer parsed back took ~490 bytes a column
/// chunk (8 columns, 3,913 bytes a row group); the indexes come on top.
pub(in crate::encode) const ROW_GROUP_METADATA_PER_COLUMN: u64 = 1024;

/// What one row group of `fields` keeps in memory until its file is sealed.
pub(super) fn row_group_metadata(fields: &Fields) -> u64 {
    leaf_columns(fields) * ROW_GROUP_METADATA_PER_COLUMN
}

/// The Parquet columns a row group of `fields` has: one per primitive, within structs, lists and maps.
fn leaf_columns(fields: &Fields) -> u64 {
    fields.iter().map(|f| leaves(f.data_type())).sum()
}

fn leaves(data_type: &DataType) -> u64 {
    match data_type {
        DataType::Struct(fields) => leaf_columns(fields),
        DataType::List(item)
        | DataType::LargeList(item)
        | DataType::FixedSizeList(item, _)
        | DataType::Map(item, _) => leaves(item.data_type()),
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::Field;

    use super::*;

    #[test]
    fn a_row_group_has_a_column_per_primitive_within_structs_lists_and_maps() {
        let item = Arc::new(Field::new("item", DataType::Int64, true));
        let entries =
            Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Int32, true)]);
        let fields = Fields::from(vec![
            Field::new("offset", DataType::Int64, false),
            Field::new("tags", DataType::List(item), true),
            Field::new("value", DataType::Struct(Fields::from(vec![Field::new("a", DataType::Utf8, true)])), true),
            Field::new(
                "map",
                DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false),
                true,
            ),
        ]);
        assert_eq!(leaf_columns(&fields), 5);
        assert_eq!(row_group_metadata(&fields), 5 * ROW_GROUP_METADATA_PER_COLUMN);
    }
}
