//! The wall clock, read in one place. Decisions take the time as an argument (tested with any time);
//! the service and the commands read it here and pass it in.

use std::time::SystemTime;

/// A time in milliseconds since the Unix epoch as RFC 3339, UTC, whole seconds.
pub fn rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_seconds(SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64))
        .to_string()
}

/// Milliseconds since the Unix epoch, now.
pub fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
