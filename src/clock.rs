//! The wall clock, read in one place. Decisions take the time as an argument (tested with any time);
//! the service and the commands read it here and pass it in.

use std::time::SystemTime;

/// Milliseconds since the Unix epoch, now.
pub fn wall_clock_ms() -> i64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
