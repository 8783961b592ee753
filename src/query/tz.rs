//! Time zones for `usage --tz`: UTC, fixed offsets and IANA names read from
//! the system zoneinfo (TZif files), without a date-time crate.
//!
//! A TZif file lists UTC transition instants and the offset in force after
//! each. Times after the last listed transition (2037 in "fat" files, much
//! earlier in "slim" ones) follow the file's footer, a POSIX TZ rule such as
//! `EST5EDT,M3.2.0,M11.1.0`, which is evaluated here too (`Mm.w.d` dates;
//! the rare Julian-day forms fall back to the last transition's offset).

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

#[derive(Debug, Clone, PartialEq, Default)]
pub enum Tz {
    #[default]
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
        /// After the last transition: the footer rule.
        tail: Option<Posix>,
    },
}

impl Tz {
    pub fn is_utc(&self) -> bool {
        *self == Tz::Utc
    }

    /// `--tz` if given (it must be valid), else `$TZ` when valid, else UTC.
    pub fn choose(given: Option<&str>) -> Result<Tz, TzError> {
        match given {
            Some(name) => Tz::parse(name),
            None => Ok(std::env::var("TZ")
                .ok()
                .and_then(|tz| Tz::parse(tz.trim_start_matches(':')).ok())
                .unwrap_or(Tz::Utc)),
        }
    }

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
                    tail.as_ref()
                        .map_or(offsets[after - 1], |rule| rule.offset_at(utc_secs))
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
        .and_then(|rule| parse_posix(&rule));
    Ok(Tz::Zone {
        name: name.to_owned(),
        transitions,
        offsets,
        initial,
        tail,
    })
}

/// The footer rule of a TZif file (POSIX TZ string), for instants after the
/// last listed transition.
#[derive(Debug, Clone, PartialEq)]
pub struct Posix {
    /// Standard offset, seconds east of UTC.
    std: i32,
    dst: Option<Dst>,
}

#[derive(Debug, Clone, PartialEq)]
struct Dst {
    offset: i32,
    /// (month, week 1–5 (5 = last), weekday 0 = Sunday, seconds after local midnight)
    start: (i64, i64, i64, i64),
    end: (i64, i64, i64, i64),
}

impl Posix {
    fn offset_at(&self, utc_secs: i64) -> i32 {
        let Some(dst) = &self.dst else {
            return self.std;
        };
        let local_day = (utc_secs + i64::from(self.std)).div_euclid(86_400);
        let (year, _, _) = civil_from_days(local_day);
        // Start is given in standard local time, end in daylight local time.
        let start = rule_day(year, dst.start) * 86_400 + dst.start.3 - i64::from(self.std);
        let end = rule_day(year, dst.end) * 86_400 + dst.end.3 - i64::from(dst.offset);
        let in_dst = if start < end {
            start <= utc_secs && utc_secs < end
        } else {
            !(end <= utc_secs && utc_secs < start)
        };
        if in_dst { dst.offset } else { self.std }
    }
}

/// Day number of `Mm.w.d` in `year`.
fn rule_day(year: i64, (month, week, weekday, _): (i64, i64, i64, i64)) -> i64 {
    let first = days_from_civil(year, month, 1);
    let first_weekday = (first + 4).rem_euclid(7); // 1970-01-01 was a Thursday (4)
    let mut day = first + (weekday - first_weekday).rem_euclid(7) + (week - 1) * 7;
    let next_month = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    while day >= next_month {
        day -= 7;
    }
    day
}

/// Parses `JST-9`, `<+0530>-5:30`, `EST5EDT,M3.2.0,M11.1.0`,
/// `CET-1CEST,M3.5.0,M10.5.0/3`. Rules in Julian-day forms are not
/// supported (`None`: the last transition's offset is used instead).
pub fn parse_posix(rule: &str) -> Option<Posix> {
    let (rest, std) = posix_name_offset(rule)?;
    let std = -std?;
    if rest.is_empty() {
        return Some(Posix { std, dst: None });
    }
    let (rest, dst_offset) = posix_name_offset(rest)?;
    let dst_offset = dst_offset.map_or(std + 3600, |west| -west);
    let mut parts = rest.strip_prefix(',')?.split(',');
    let start = posix_date(parts.next()?)?;
    let end = posix_date(parts.next()?)?;
    Some(Posix {
        std,
        dst: Some(Dst {
            offset: dst_offset,
            start,
            end,
        }),
    })
}

/// A zone name followed by an optional offset (west-positive seconds).
fn posix_name_offset(text: &str) -> Option<(&str, Option<i32>)> {
    let rest = if let Some(quoted) = text.strip_prefix('<') {
        &quoted[quoted.find('>')? + 1..]
    } else {
        let name_len = text
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(text.len());
        if name_len < 3 {
            return None;
        }
        &text[name_len..]
    };
    let len = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '+' | '-' | ':')))
        .unwrap_or(rest.len());
    if len == 0 {
        return Some((rest, None));
    }
    Some((&rest[len..], Some(posix_time(&rest[..len])?)))
}

/// `[+-]hh[:mm[:ss]]` in seconds.
fn posix_time(text: &str) -> Option<i32> {
    let (sign, digits) = match text.as_bytes().first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    let mut parts = digits.split(':').map(|p| p.parse::<i32>().ok());
    let hours = parts.next()??;
    let minutes = parts.next().map_or(Some(0), |p| p)?;
    let seconds = parts.next().map_or(Some(0), |p| p)?;
    Some(sign * (hours * 3600 + minutes * 60 + seconds))
}

/// `Mm.w.d[/time]`.
fn posix_date(text: &str) -> Option<(i64, i64, i64, i64)> {
    let (date, time) = match text.split_once('/') {
        Some((date, time)) => (date, i64::from(posix_time(time)?)),
        None => (text, 7200),
    };
    let mut fields = date
        .strip_prefix('M')?
        .split('.')
        .map(|f| f.parse::<i64>().ok());
    let month = fields.next()??;
    let week = fields.next()??;
    let weekday = fields.next()??;
    ((1..=12).contains(&month) && (1..=5).contains(&week) && (0..=6).contains(&weekday))
        .then_some((month, week, weekday, time))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_day;
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
        // Past the file's transitions (fat files stop in 2037): the footer rule.
        let far = parse_iso_ms("2045-07-01T03:00:00Z").unwrap() / 1000;
        assert_eq!(tz.offset_at(far), -4 * 3600);
        // 2026-03-08 02:00 is skipped; midnight still exists.
        let dst = parse_day("2026-03-08").unwrap();
        assert_eq!(
            tz.day_start_ms(dst),
            parse_iso_ms("2026-03-08T05:00:00Z").unwrap()
        );
    }

    #[test]
    fn posix_footers() {
        let at = |rule: &str, iso: &str| {
            parse_posix(rule)
                .unwrap()
                .offset_at(parse_iso_ms(iso).unwrap() / 1000)
        };
        assert_eq!(at("JST-9", "2030-01-01T00:00:00Z"), 9 * 3600);
        assert_eq!(at("<+0530>-5:30", "2030-01-01T00:00:00Z"), 5 * 3600 + 1800);
        let ny = "EST5EDT,M3.2.0,M11.1.0";
        assert_eq!(at(ny, "2040-01-15T12:00:00Z"), -5 * 3600);
        assert_eq!(at(ny, "2040-07-15T12:00:00Z"), -4 * 3600);
        // 2040-03-11 is the second Sunday of March: 02:00 EST = 07:00Z.
        assert_eq!(at(ny, "2040-03-11T06:59:59Z"), -5 * 3600);
        assert_eq!(at(ny, "2040-03-11T07:00:00Z"), -4 * 3600);
        // Southern hemisphere: DST across the new year.
        let sydney = "AEST-10AEDT,M10.1.0,M4.1.0/3";
        assert_eq!(at(sydney, "2040-01-15T00:00:00Z"), 11 * 3600);
        assert_eq!(at(sydney, "2040-07-15T00:00:00Z"), 10 * 3600);
        let berlin = "CET-1CEST,M3.5.0,M10.5.0/3";
        assert_eq!(at(berlin, "2040-08-01T00:00:00Z"), 2 * 3600);
        assert!(parse_posix("XX1").is_none());
    }
}
