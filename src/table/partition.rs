//! Which partition of a table a data file goes into. Tables are partitioned by the day or hour of the
//! record timestamp (Iceberg's `day`/`hour` transforms: whole days or hours since the Unix epoch), as
//! `--time-buckets` lays out the archive. A file belongs to one partition, and a query that prunes by
//! partition skips every file outside the ones it asks for; but a time bucket's file may hold a late
//! record from an earlier bucket. Such a file (and one whose records' times are not known) is in no
//! one partition: recording it under its bucket's would hide that record from a query for its own day.

use crate::archive::time_bucket::BucketWidth;

/// Where a file goes in a table partitioned by `width`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilePartition {
    /// In no one partition: the table is not partitioned, or the file's records span partitions or
    /// their times are not known.
    Unpartitioned,
    /// The partition of this many days or hours since the epoch.
    Time { width: BucketWidth, ordinal: i32 },
}

impl FilePartition {
    /// The days or hours since the epoch of its partition.
    pub fn ordinal(&self) -> Option<i32> {
        match self {
            FilePartition::Unpartitioned => None,
            FilePartition::Time { ordinal, .. } => Some(*ordinal),
        }
    }
}

/// The partition of a file whose records' timestamps run from `min` to `max` ms (none: unknown) in a
/// table partitioned by `width` (none: unpartitioned).
pub fn file_partition(width: Option<BucketWidth>, timestamps: Option<(i64, i64)>) -> FilePartition {
    let (Some(width), Some((min, max))) = (width, timestamps) else {
        return FilePartition::Unpartitioned;
    };
    let ordinal = |ms: i64| i32::try_from(ms.div_euclid(width.millis())).ok();
    match (ordinal(min), ordinal(max)) {
        (Some(first), Some(last)) if first == last => FilePartition::Time { width, ordinal: first },
        _ => FilePartition::Unpartitioned,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 24 * HOUR;

    #[test]
    fn a_file_within_one_day_or_hour_goes_into_its_partition() {
        let day = Some(BucketWidth::Day);
        assert_eq!(
            file_partition(day, Some((0, DAY - 1))),
            FilePartition::Time { width: BucketWidth::Day, ordinal: 0 }
        );
        let in_hour = file_partition(Some(BucketWidth::Hour), Some((5 * HOUR + 1, 5 * HOUR + 9)));
        assert_eq!(in_hour, FilePartition::Time { width: BucketWidth::Hour, ordinal: 5 });
        // 1969-12-31: day -1, as Iceberg's transform (floor, not truncation towards zero).
        assert_eq!(file_partition(day, Some((-5, -1))), FilePartition::Time { width: BucketWidth::Day, ordinal: -1 });
    }

    #[test]
    fn a_file_spanning_partitions_or_of_unknown_times_goes_in_unpartitioned() {
        let day = Some(BucketWidth::Day);
        assert_eq!(file_partition(day, Some((DAY - 1, DAY))), FilePartition::Unpartitioned, "a late record");
        assert_eq!(file_partition(day, None), FilePartition::Unpartitioned);
        assert_eq!(file_partition(None, Some((0, 1))), FilePartition::Unpartitioned);
        assert_eq!(
            file_partition(Some(BucketWidth::Hour), Some((i64::MAX - 1, i64::MAX))),
            FilePartition::Unpartitioned
        );
    }
}
