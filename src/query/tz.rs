//! Time zones for `usage --tz`: UTC, fixed offsets and IANA names read from
//! the system zoneinfo (TZif files), without a date-time crate.
//!
//! A TZif file lists UTC transition instants and the offset in force after
//! each. Times after the last listed transition use the footer's rule when it
//! has no daylight-saving part (e.g. `JST-9`), else the offset of the last
//! transition; Debian/Ubuntu ship "fat" files listing transitions up to 2037,
//! so this is exact for any date Pi has written.

use std::path::PathBuf;

use crate::time::{civil_from_days, days_from_civil};

#[derive(Debug, thiserror::Error)]
pub enum TzError {
    #[error(
        "unknown time zone `{0}`: use UTC, an offset like +02:00 or -0530, or an IANA name like Europe/Berlin"
    )]
    Unknown(String),
    #[error("cannot read time zone file {path}: {reason}")]
    Bad { path: PathBuf, reason: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tz {
    Utc,
    /// Seconds east of UTC.
    Fixed(i32),
    Zone {
        name: String,
        /// UTC seconds at which `offsets[i]` starts.
        transitions: Vec<i64>,
        offsets: Vec<i32>,
        /// Before the first transition.
        initial: i32,
        /// After the last transition, when the footer gives a fixed offset.
        tail: Option<i32>,
    },
}

impl Tz {
    pub fn parse(text: &str) -> Result<Tz, TzError> {
        let trimmed = text.trim();
        if trimmed.is_empty() || matches!(trimmed, "UTC" | "utc" | "Z" | "z" | "GMT" | "Etc/UTC") {
            return Ok(Tz::Utc);
        }
        if let Some(offset) = parse_fixed(trimmed) {
            return Ok(if offset == 0 {
                Tz::Utc
            } else {
                Tz::Fixed(offset)
            });
        }
        let valid = trimmed
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
            && trimmed
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-' | '+'));
        if !valid {
            return Err(TzError::Unknown(trimmed.to_owned()));
        }
        let dir = std::env::var_os("TZDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/share/zoneinfo"));
        let path = dir.join(trimmed);
        let bytes = std::fs::read(&path).map_err(|_| TzError::Unknown(trimmed.to_owned()))?;
        parse_tzif(trimmed, &bytes).map_err(|reason| TzError::Bad { path, reason })
    }

    /// Offset (seconds east of UTC) in force at `utc_secs`.
    pub fn offset_at(&self, utc_secs: i64) -> i32 {
        match self {
            Tz::Utc => 0,
            Tz::Fixed(offset) => *offset,
            Tz::Zone {
                transitions,
                offsets,
                initial,
                tail,
                ..
            } => {
                let after = transitions.partition_point(|t| *t <= utc_secs);
                if after == 0 {
                    *initial
                } else if after == transitions.len() {
                    tail.unwrap_or(offsets[after - 1])
                } else {
                    offsets[after - 1]
                }
            }
        }
    }

    /// Local civil date (days since 1970-01-01) of a UTC millisecond instant.
    pub fn local_day(&self, utc_ms: i64) -> i64 {
        let secs = utc_ms.div_euclid(1000);
        (secs + i64::from(self.offset_at(secs))).div_euclid(86_400)
    }

    /// UTC milliseconds of local midnight starting `day` (days since epoch).
    /// In a gap the first instant after it; in an overlap the earlier one.
    pub fn day_start_ms(&self, day: i64) -> i64 {
        let local = day * 86_400;
        let mut best = None;
        for probe in [local - 86_400, local, local + 86_400] {
            let guess = local - i64::from(self.offset_at(probe));
            if guess + i64::from(self.offset_at(guess)) == local {
                best = Some(best.map_or(guess, |b: i64| b.min(guess)));
            }
        }
        let secs = best.unwrap_or_else(|| {
            // Midnight does not exist (a DST gap): the day starts at the
            // transition, the first instant whose local day is `day`.
            let mut lo = local - 86_400 * 2;
            let mut hi = local + 86_400 * 2;
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if (mid + i64::from(self.offset_at(mid))).div_euclid(86_400) >= day {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            hi
        });
        secs * 1000
    }

    pub fn name(&self) -> String {
        match self {
            Tz::Utc => "UTC".to_owned(),
            Tz::Fixed(offset) => {
                let sign = if *offset < 0 { '-' } else { '+' };
                let abs = offset.unsigned_abs();
                format!("{sign}{:02}:{:02}", abs / 3600, abs / 60 % 60)
            }
            Tz::Zone { name, .. } => name.clone(),
        }
    }
}

/// `+02:00`, `-0530`, `+09`, `UTC+2` → seconds east of UTC.
fn parse_fixed(text: &str) -> Option<i32> {
    let text = text
        .strip_prefix("UTC")
        .or_else(|| text.strip_prefix("GMT"))
        .unwrap_or(text);
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let digits: String = rest.chars().filter(|c| *c != ':').collect();
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let (hours, minutes): (i32, i32) = match digits.len() {
        1 | 2 => (digits.parse().ok()?, 0),
        3 => (digits[..1].parse().ok()?, digits[1..].parse().ok()?),
        4 => (digits[..2].parse().ok()?, digits[2..].parse().ok()?),
        _ => return None,
    };
    if hours > 18 || minutes > 59 {
        return None;
    }
    Some(sign * (hours * 3600 + minutes * 60))
}

fn parse_tzif(name: &str, bytes: &[u8]) -> Result<Tz, String> {
    struct Header {
        isutcnt: usize,
        isstdcnt: usize,
        leapcnt: usize,
        timecnt: usize,
        typecnt: usize,
        charcnt: usize,
    }
    let header = |at: usize| -> Result<Header, String> {
        let b = bytes.get(at..at + 44).ok_or("truncated header")?;
        if &b[..4] != b"TZif" {
            return Err("not a TZif file".into());
        }
        let n = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
        Ok(Header {
            isutcnt: n(20),
            isstdcnt: n(24),
            leapcnt: n(28),
            timecnt: n(32),
            typecnt: n(36),
            charcnt: n(40),
        })
    };
    let v1 = header(0)?;
    let version = bytes.get(4).copied().unwrap_or(0);
    let (h, start, time_size) = if version >= b'2' {
        let skip = 44
            + v1.timecnt * 5
            + v1.typecnt * 6
            + v1.charcnt
            + v1.leapcnt * 8
            + v1.isstdcnt
            + v1.isutcnt;
        (header(skip)?, skip + 44, 8)
    } else {
        (v1, 44, 4)
    };
    let need = h.timecnt * (time_size + 1) + h.typecnt * 6;
    let data = bytes.get(start..start + need).ok_or("truncated data")?;
    if h.typecnt == 0 {
        return Err("no local time types".into());
    }
    let mut transitions = Vec::with_capacity(h.timecnt);
    for i in 0..h.timecnt {
        let at = i * time_size;
        let value = if time_size == 8 {
            i64::from_be_bytes(data[at..at + 8].try_into().map_err(|_| "bad time")?)
        } else {
            i64::from(i32::from_be_bytes(
                data[at..at + 4].try_into().map_err(|_| "bad time")?,
            ))
        };
        transitions.push(value);
    }
    let idx = &data[h.timecnt * time_size..h.timecnt * (time_size + 1)];
    let types = &data[h.timecnt * (time_size + 1)..];
    let offset_of = |t: usize| -> Result<i32, String> {
        let at = t * 6;
        let raw = types.get(at..at + 4).ok_or("bad type index")?;
        Ok(i32::from_be_bytes([raw[0], raw[1], raw[2], raw[3]]))
    };
    let mut offsets = Vec::with_capacity(h.timecnt);
    for &t in idx {
        offsets.push(offset_of(usize::from(t))?);
    }
    // RFC 8536: the first non-DST type (else type 0) applies before the
    // first transition.
    let initial = (0..h.typecnt)
        .find(|t| types.get(t * 6 + 4) == Some(&0))
        .map_or_else(|| offset_of(0), offset_of)?;
    let footer_start = start
        + need
        + h.charcnt
        + h.leapcnt * if time_size == 8 { 12 } else { 8 }
        + h.isstdcnt
        + h.isutcnt;
    let tail = bytes
        .get(footer_start..)
        .and_then(|rest| std::str::from_utf8(rest).ok())
        .and_then(|rest| rest.trim_matches('\n').lines().next().map(str::to_owned))
        .and_then(|rule| posix_fixed(&rule));
    Ok(Tz::Zone {
        name: name.to_owned(),
        transitions,
        offsets,
        initial,
        tail,
    })
}

/// A POSIX TZ rule without daylight saving (`JST-9`, `<+0530>-5:30`) as
/// seconds east of UTC; `None` for rules with DST.
fn posix_fixed(rule: &str) -> Option<i32> {
    let rest = if let Some(quoted) = rule.strip_prefix('<') {
        &quoted[quoted.find('>')? + 1..]
    } else {
        rule.trim_start_matches(|c: char| c.is_ascii_alphabetic())
    };
    if rest.is_empty() || rest.contains(|c: char| c.is_ascii_alphabetic() || c == ',' || c == '<') {
        return None;
    }
    let (sign, digits) = match rest.as_bytes()[0] {
        b'-' => (1, &rest[1..]),
        b'+' => (-1, &rest[1..]),
        _ => (-1, rest),
    };
    let mut parts = digits.split(':').map(|p| p.parse::<i32>().ok());
    let hours = parts.next()??;
    let minutes = parts.next().flatten().unwrap_or(0);
    let seconds = parts.next().flatten().unwrap_or(0);
    // POSIX offsets are west-positive.
    Some(sign * (hours * 3600 + minutes * 60 + seconds))
}

/// `YYYY-MM-DD` of a day number.
pub fn format_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-Www` (ISO 8601 week; weeks start on Monday, week 1 holds the
/// year's first Thursday).
pub fn format_iso_week(day: i64) -> String {
    let weekday = (day + 3).rem_euclid(7); // 0 = Monday (1970-01-01 was a Thursday)
    let thursday = day - weekday + 3;
    let (year, _, _) = civil_from_days(thursday);
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    format!("{year:04}-W{week:02}")
}

/// `YYYY-MM`.
pub fn format_month(day: i64) -> String {
    let (y, m, _) = civil_from_days(day);
    format!("{y:04}-{m:02}")
}

/// Parses `YYYY-MM-DD` or `YYYYMMDD` into a day number.
pub fn parse_day(text: &str) -> Option<i64> {
    let digits: String = text.trim().chars().filter(|c| *c != '-').collect();
    if digits.len() != 8 || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let year: i64 = digits[..4].parse().ok()?;
    let month: i64 = digits[4..6].parse().ok()?;
    let day: i64 = digits[6..].parse().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    Some(days_from_civil(year, month, day))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_iso_ms;

    #[test]
    fn fixed_offsets() {
        assert_eq!(Tz::parse("+02:00").unwrap(), Tz::Fixed(7200));
        assert_eq!(Tz::parse("-0530").unwrap(), Tz::Fixed(-(5 * 3600 + 1800)));
        assert_eq!(Tz::parse("+09").unwrap(), Tz::Fixed(9 * 3600));
        assert_eq!(Tz::parse("UTC").unwrap(), Tz::Utc);
        assert!(Tz::parse("../etc/passwd").is_err());
        assert!(Tz::parse("Nowhere/Atlantis").is_err());
    }

    #[test]
    fn iso_weeks_start_on_monday() {
        let day = |s: &str| parse_day(s).unwrap();
        assert_eq!(format_iso_week(day("2026-02-01")), "2026-W05"); // Sunday
        assert_eq!(format_iso_week(day("2026-02-02")), "2026-W06"); // Monday
        assert_eq!(format_iso_week(day("2021-01-03")), "2020-W53");
        assert_eq!(format_iso_week(day("2024-12-30")), "2025-W01");
    }

    #[test]
    fn new_york_from_system_zoneinfo() {
        let Ok(tz) = Tz::parse("America/New_York") else {
            return; // no tzdata on this machine
        };
        let winter = parse_iso_ms("2026-02-01T03:00:00Z").unwrap() / 1000;
        let summer = parse_iso_ms("2026-07-01T03:00:00Z").unwrap() / 1000;
        assert_eq!(tz.offset_at(winter), -5 * 3600);
        assert_eq!(tz.offset_at(summer), -4 * 3600);
        let day = parse_day("2026-02-01").unwrap();
        assert_eq!(
            tz.day_start_ms(day),
            parse_iso_ms("2026-02-01T05:00:00Z").unwrap()
        );
        // 2026-03-08 02:00 is skipped; midnight still exists.
        let dst = parse_day("2026-03-08").unwrap();
        assert_eq!(
            tz.day_start_ms(dst),
            parse_iso_ms("2026-03-08T05:00:00Z").unwrap()
        );
    }

    #[test]
    fn posix_footers() {
        assert_eq!(posix_fixed("JST-9"), Some(9 * 3600));
        assert_eq!(posix_fixed("<+0530>-5:30"), Some(5 * 3600 + 1800));
        assert_eq!(posix_fixed("EST5EDT,M3.2.0,M11.1.0"), None);
    }
}
