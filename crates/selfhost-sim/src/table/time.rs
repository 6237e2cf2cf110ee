//! Timestamps as Kubernetes writes them (RFC 3339) and ages as kubectl prints them.

/// Seconds since the Unix epoch of an RFC 3339 timestamp such as `2025-01-02T03:04:05Z`
/// (fractions and numeric offsets accepted), or `None` if it is not one.
pub fn parse_rfc3339(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || !matches!(bytes[10], b'T' | b't')
    {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = text.get(range)?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| digits.parse().ok())?
    };
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    if bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            let (h, m) = rest[1..].split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60)
        }
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// An elapsed time as kubectl's AGE column prints it: `45s`, `3m2s`, `15m`, `4h`, `2d3h`,
/// `30d`, `2y45d`. Slightly negative values (clock skew) read as `0s`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The age of a timestamp at `now`, or `<unknown>` when there is none.
pub fn age(timestamp: Option<&str>, now: i64) -> String {
    match timestamp.and_then(parse_rfc3339) {
        Some(then) => human_duration(now - then),
        None => "<unknown>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_to_epoch_seconds() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(parse_rfc3339("2025-06-20T12:34:56Z"), Some(1_750_422_896));
        assert_eq!(
            parse_rfc3339("2025-06-20T12:34:56.123456Z"),
            Some(1_750_422_896)
        );
        assert_eq!(
            parse_rfc3339("2025-06-20T14:34:56+02:00"),
            Some(1_750_422_896)
        );
        for bad in [
            "",
            "2025-06-20",
            "2025-13-01T00:00:00Z",
            "2025-06-20T12:34:56",
            "x025-06-20T12:34:56Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ages_read_like_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (5, "5s"),
            (119, "119s"),
            (182, "3m2s"),
            (300, "5m"),
            (900, "15m"),
            (179 * 60, "179m"),
            (4 * 3600, "4h"),
            (4 * 3600 + 60 * 5, "4h5m"),
            (30 * 3600, "30h"),
            (2 * 86_400, "2d"),
            (2 * 86_400 + 3 * 3600, "2d3h"),
            (30 * 86_400, "30d"),
            (800 * 86_400, "2y70d"),
            (3000 * 86_400, "8y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds}");
        }
        assert_eq!(age(None, 0), "<unknown>");
        assert_eq!(age(Some("1970-01-01T00:01:00Z"), 65), "5s");
    }
}
