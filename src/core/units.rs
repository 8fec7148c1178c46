//! Human-friendly sizes ("64MiB", "1.5GB", "4096") and durations ("30s", "5m", "250ms").

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
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
        let err = || UnitError::Size(raw.to_string());
        let s = raw.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" => 1_000,
            "kib" => 1 << 10,
            "m" | "mb" => 1_000_000,
            "mib" => 1 << 20,
            "g" | "gb" => 1_000_000_000,
            "gib" => 1 << 30,
            "t" | "tb" => 1_000_000_000_000,
            "tib" => 1 << 40,
            _ => return Err(err()),
        };
        if num.is_empty() {
            return Err(err());
        }
        let value: f64 = num.parse().map_err(|_| err())?;
        let bytes = value * multiplier as f64;
        if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
            return Err(err());
        }
        Ok(ByteSize(bytes.round() as u64))
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
