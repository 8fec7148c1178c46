//! Time buckets of the lake layout (`--time-buckets day|hour`): the UTC day or hour whose folder
//! (`dt=<YYYY-MM-DD>[/hour=<HH>]`) a data object goes into, and which bucket a partition's next record
//! belongs to.
//!
//! A file never spans two buckets, and a partition's buckets never go back in offset order: a record
//! whose time is in a later bucket than the open file's rolls the file; a record whose time is earlier
//! (a producer's clock behind, or a record that arrived late) stays in the open file, or goes into the
//! partition's current bucket when no file is open. So a partition adds at most one file per bucket
//! boundary it crosses, never ping-pongs at an edge, and once it has moved past a bucket it never
//! writes into that bucket's folder again. A bucket's folder therefore holds the records whose time
//! falls inside it, plus late records whose time is earlier; never a record whose time is later.

use std::fmt;

const MS_PER_HOUR: i64 = 3_600_000;
const MS_PER_DAY: i64 = 24 * MS_PER_HOUR;
/// 9999-12-31T23:59:59.999Z: the last instant a four-digit `dt=` folder can name.
const MAX_MS: i64 = 253_402_300_799_999;

/// How wide a bucket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketWidth {
    Day,
    Hour,
}

impl BucketWidth {
    pub fn millis(self) -> i64 {
        match self {
            BucketWidth::Day => MS_PER_DAY,
            BucketWidth::Hour => MS_PER_HOUR,
        }
    }
}

/// Which time puts a record into a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeSource {
    /// The record's Kafka timestamp (its arrival time when it has none).
    Record,
    /// When the archiver consumed it.
    Arrival,
}

impl fmt::Display for TimeSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeSource::Record => "record",
            TimeSource::Arrival => "arrival",
        })
    }
}

/// One UTC day or hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bucket {
    width: BucketWidth,
    /// Milliseconds since the Unix epoch, a multiple of the width.
    start_ms: i64,
}

impl Bucket {
    /// The bucket holding instant `ms` (clamped to 0000-01-01 .. 9999-12-31, the years a folder names).
    pub fn containing(width: BucketWidth, ms: i64) -> Self {
        let ms = ms.clamp(0, MAX_MS);
        Bucket { width, start_ms: ms - ms.rem_euclid(width.millis()) }
    }

    pub fn width(&self) -> BucketWidth {
        self.width
    }

    /// Its first instant, ms since the epoch.
    pub fn start_ms(&self) -> i64 {
        self.start_ms
    }

    /// The first instant after it.
    pub fn end_ms(&self) -> i64 {
        self.start_ms + self.width.millis()
    }

    /// The bucket right after it.
    pub fn next(&self) -> Self {
        Bucket { width: self.width, start_ms: self.end_ms() }
    }

    /// The bucket `n` after it.
    pub fn nth_after(&self, n: i64) -> Self {
        Bucket { width: self.width, start_ms: self.start_ms + n * self.width.millis() }
    }

    /// `YYYY-MM-DD`, its UTC date.
    pub fn date(&self) -> String {
        let (y, m, d) = civil_from_days(self.start_ms.div_euclid(MS_PER_DAY));
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// The hour of day, for hour buckets.
    pub fn hour(&self) -> Option<u32> {
        match self.width {
            BucketWidth::Hour => Some((self.start_ms.rem_euclid(MS_PER_DAY) / MS_PER_HOUR) as u32),
            BucketWidth::Day => None,
        }
    }

    /// Parses the folder names `dt=<YYYY-MM-DD>` and, for hours, `hour=<HH>`: exactly what `Display`
    /// writes, so anything else is not a bucket.
    pub fn parse(dt_dir: &str, hour_dir: Option<&str>) -> Option<Self> {
        let date = dt_dir.strip_prefix("dt=")?;
        let b = date.as_bytes();
        let digits = |r: std::ops::Range<usize>| -> Option<i64> {
            b.get(r.clone()).filter(|d| d.iter().all(u8::is_ascii_digit))?;
            date[r].parse().ok()
        };
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
        if !(1..=12).contains(&m) || d < 1 {
            return None;
        }
        let days = days_from_civil(y, m, d);
        if civil_from_days(days) != (y, m, d) {
            return None; // 2025-02-30 and the like
        }
        let day_ms = days * MS_PER_DAY;
        match hour_dir {
            None => Some(Bucket { width: BucketWidth::Day, start_ms: day_ms }),
            Some(dir) => {
                let h = dir.strip_prefix("hour=")?;
                if h.len() != 2 || !h.bytes().all(|c| c.is_ascii_digit()) {
                    return None;
                }
                let h: i64 = h.parse().ok().filter(|h| *h < 24)?;
                Some(Bucket { width: BucketWidth::Hour, start_ms: day_ms + h * MS_PER_HOUR })
            }
        }
    }
}

/// The folders below the topic's: `dt=<YYYY-MM-DD>` or `dt=<YYYY-MM-DD>/hour=<HH>` (no slash at the end).
impl fmt::Display for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dt={}", self.date())?;
        match self.hour() {
            Some(h) => write!(f, "/hour={h:02}"),
            None => Ok(()),
        }
    }
}

/// How records are put into buckets (`--time-buckets`, `--time-source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucketing {
    pub width: BucketWidth,
    pub source: TimeSource,
}

impl Bucketing {
    /// The time a record is bucketed by: by record time its timestamp, but never later than its arrival
    /// (a producer's clock ahead must not move the partition into a bucket that has not begun, where it
    /// would stay: buckets never go back); by arrival time, its arrival.
    pub fn record_time(&self, timestamp_ms: Option<i64>, arrival_ms: i64) -> i64 {
        match (self.source, timestamp_ms) {
            (TimeSource::Record, Some(ts)) => ts.min(arrival_ms),
            _ => arrival_ms,
        }
    }

    /// The bucket a record goes into, given where its partition is: never earlier than `floor_ms` (the
    /// start of the bucket of the partition's last file), so late records stay in the current bucket.
    pub fn bucket(&self, timestamp_ms: Option<i64>, arrival_ms: i64, floor_ms: Option<i64>) -> Bucket {
        let t = self.record_time(timestamp_ms, arrival_ms);
        Bucket::containing(self.width, floor_ms.map_or(t, |floor| t.max(floor)))
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (H. Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// 2026-11-30T00:00:00Z (`date -d 2026-11-30 +%s`).
    const NOV_30: i64 = 1_795_996_800_000;

    fn hour(ms: i64) -> Bucket {
        Bucket::containing(BucketWidth::Hour, ms)
    }

    #[test]
    fn folders_name_the_utc_date_and_hour() {
        assert_eq!(Bucket::containing(BucketWidth::Day, NOV_30 + 5).to_string(), "dt=2026-11-30");
        assert_eq!(hour(NOV_30 + 7 * MS_PER_HOUR + 59 * 60_000).to_string(), "dt=2026-11-30/hour=07");
        assert_eq!(hour(NOV_30 - 1).to_string(), "dt=2026-11-29/hour=23");
        assert_eq!(hour(0).to_string(), "dt=1970-01-01/hour=00");
        assert_eq!(Bucket::containing(BucketWidth::Day, 951_782_400_000).to_string(), "dt=2000-02-29");
        // Out of what a folder can name: clamped.
        assert_eq!(hour(-5).to_string(), "dt=1970-01-01/hour=00");
        assert_eq!(Bucket::containing(BucketWidth::Day, i64::MAX).to_string(), "dt=9999-12-31");
    }

    #[test]
    fn only_real_dates_and_hours_parse() {
        let day = Bucket::parse("dt=2026-11-30", None).unwrap();
        assert_eq!((day.start_ms(), day.end_ms()), (NOV_30, NOV_30 + MS_PER_DAY));
        assert_eq!(Bucket::parse("dt=2026-11-30", Some("hour=23")).unwrap().start_ms(), NOV_30 + 23 * MS_PER_HOUR);
        for (dt, h) in [
            ("dt=2026-02-29", None),
            ("dt=2026-13-01", None),
            ("dt=2026-00-10", None),
            ("dt=2026-11-31", None),
            ("dt=2026-1-30", None),
            ("dt=+026-11-30", None),
            ("dt=2026/11/30", None),
            ("date=2026-11-30", None),
            ("dt=2026-11-30", Some("hour=24")),
            ("dt=2026-11-30", Some("hour=7")),
            ("dt=2026-11-30", Some("hour=+7")),
            ("dt=2026-11-30", Some("h=07")),
        ] {
            assert_eq!(Bucket::parse(dt, h), None, "{dt} {h:?}");
        }
    }

    #[test]
    fn late_records_stay_in_the_partitions_bucket() {
        let by_record = Bucketing { width: BucketWidth::Hour, source: TimeSource::Record };
        let now = NOV_30 + 10 * MS_PER_HOUR;
        let at_nine = NOV_30 + 9 * MS_PER_HOUR + 5;
        assert_eq!(by_record.bucket(Some(at_nine), now, None), hour(at_nine));
        // The partition is in hour 10 already: a record stamped 09:xx stays there.
        assert_eq!(by_record.bucket(Some(at_nine), now, Some(now)), hour(now));
        // No timestamp: its arrival.
        assert_eq!(by_record.bucket(None, now, None), hour(now));
        // A producer clock an hour ahead: bucketed by its arrival.
        assert_eq!(by_record.bucket(Some(now + MS_PER_HOUR), now, None), hour(now));
        let by_arrival = Bucketing { width: BucketWidth::Day, source: TimeSource::Arrival };
        assert_eq!(by_arrival.bucket(Some(0), now, None), Bucket::containing(BucketWidth::Day, now));
    }

    /// Record times jittering around bucket edges: the buckets files go into never decrease, and each
    /// change of bucket is a move forward to the bucket of the record that caused it.
    #[test]
    fn jitter_at_an_edge_never_ping_pongs() {
        let b = Bucketing { width: BucketWidth::Hour, source: TimeSource::Record };
        let edge = NOV_30 + MS_PER_HOUR;
        let times = [edge - 3, edge + 1, edge - 2, edge + 2, edge - 1, edge + 3, edge - 10_000];
        let mut floor = None;
        let mut changes = 0;
        for t in times {
            let bucket = b.bucket(Some(t), edge + 60_000, floor);
            if floor.is_some_and(|f| f != bucket.start_ms()) {
                changes += 1;
            }
            assert!(floor.is_none_or(|f| bucket.start_ms() >= f));
            floor = Some(bucket.start_ms());
        }
        assert_eq!(changes, 1, "one move forward, at the first record past the edge");
    }

    proptest! {
        #[test]
        fn a_bucket_holds_its_instant_and_its_folder_round_trips(ms in 0i64..=MAX_MS, hourly in any::<bool>()) {
            let width = if hourly { BucketWidth::Hour } else { BucketWidth::Day };
            let bucket = Bucket::containing(width, ms);
            prop_assert!(bucket.start_ms() <= ms && ms < bucket.end_ms());
            let text = bucket.to_string();
            let mut dirs = text.split('/');
            let parsed = Bucket::parse(dirs.next().unwrap(), dirs.next());
            prop_assert_eq!(parsed, Some(bucket));
        }

        #[test]
        fn folder_order_is_time_order(a in 0i64..=MAX_MS, b in 0i64..=MAX_MS) {
            let (ba, bb) = (hour(a), hour(b));
            prop_assert_eq!(ba.start_ms().cmp(&bb.start_ms()), ba.to_string().cmp(&bb.to_string()));
        }
    }
}
