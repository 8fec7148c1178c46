//! Human-friendly sizes ("64MiB", "1.5GB", "4096"; parsed by `parse-size`) and durations ("30s", "5m",
//! "250ms"; parsed by `humantime`), as settings take and show them.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("size {0:?} is not valid: write a number with an optional unit, e.g. 4096, 512KiB, 64MiB, 1GB")]
    Size(String),
    #[error("duration {0:?} is not valid: write a number with a unit, e.g. 250ms, 30s, 5m, 1h")]
    Duration(String),
}

/// A byte count parsed from text: binary units (KiB, MiB, GiB, TiB) and decimal ones (KB, MB, GB, TB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = UnitError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        parse_size::parse_size(raw.trim()).map(ByteSize).map_err(|_| UnitError::Size(raw.to_string()))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
        for (name, size) in UNITS {
            if self.0 >= size && self.0.is_multiple_of(size) {
                return write!(f, "{}{}", self.0 / size, name);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Number(n) => Ok(ByteSize(n)),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A duration parsed from text with a unit ("30s", "1m 30s", "250ms").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct HumanDuration(pub Duration);

impl FromStr for HumanDuration {
    type Err = UnitError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        humantime::parse_duration(raw.trim()).map(HumanDuration).map_err(|_| UnitError::Duration(raw.to_string()))
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        let cases = [
            ("4096", 4096),
            ("0", 0),
            ("512KiB", 512 * 1024),
            ("64MiB", 64 << 20),
            ("64 mib", 64 << 20),
            ("1GB", 1_000_000_000),
            ("1.5GiB", 3 << 29),
            ("10b", 10),
        ];
        for (text, want) in cases {
            assert_eq!(text.parse::<ByteSize>(), Ok(ByteSize(want)), "{text}");
        }
        for bad in ["", "MiB", "-1", "1.2.3MiB", "12 parsecs", "1e999GiB"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_display_in_the_largest_exact_unit() {
        assert_eq!(ByteSize(64 << 20).to_string(), "64MiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        assert_eq!(ByteSize(1536).to_string(), "1536B");
    }

    #[test]
    fn parses_durations() {
        assert_eq!("30s".parse::<HumanDuration>(), Ok(HumanDuration(Duration::from_secs(30))));
        assert_eq!("1m 30s".parse::<HumanDuration>(), Ok(HumanDuration(Duration::from_secs(90))));
        assert_eq!("250ms".parse::<HumanDuration>(), Ok(HumanDuration(Duration::from_millis(250))));
        for bad in ["", "30", "thirty seconds", "-5s"] {
            assert!(bad.parse::<HumanDuration>().is_err(), "{bad}");
        }
    }
}
