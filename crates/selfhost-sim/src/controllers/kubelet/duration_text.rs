//! Durations as Go prints them, because kubelet messages (`back-off 1m20s restarting failed
//! container=…`) are read by people and matched by tools.

use std::time::Duration;

/// Go's `time.Duration.String()` (`10s`, `1m20s`, `5m0s`, `300ms`), as kubelet messages show it.
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".into();
    }
    let trim = |whole: u128, frac: u128, digits: usize| {
        let frac = format!("{frac:0digits$}");
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{frac}")
        }
    };
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim(nanos / 1_000, nanos % 1_000, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim(nanos / 1_000_000, nanos % 1_000_000, 6));
    }
    let secs = nanos / 1_000_000_000;
    let seconds = trim(secs % 60, nanos % 1_000_000_000, 9);
    match (secs / 3600, (secs / 60) % 60) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// Parses a duration as Go's `time.ParseDuration` reads flag values (`70s`, `1m10s`, `1.5s`,
/// `300ms`, `0`); `None` for anything else, and for negative durations.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest.is_empty() {
        return None;
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (whole, fraction) = match rest[..number_len].split_once('.') {
            Some((w, f)) => (w, f),
            None => (&rest[..number_len], ""),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut part = whole.checked_mul(unit)?;
        let mut scale = unit;
        for digit in fraction.chars() {
            scale /= 10;
            part += u128::from(digit.to_digit(10)?) * scale;
        }
        nanos = nanos.checked_add(part)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    let sub = u32::try_from(nanos % 1_000_000_000).ok()?;
    Some(Duration::new(secs, sub))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go_flags() {
        let cases = [
            ("0", Some(Duration::ZERO)),
            ("70s", Some(Duration::from_secs(70))),
            ("1m10s", Some(Duration::from_secs(70))),
            ("1.5s", Some(Duration::from_millis(1_500))),
            ("300ms", Some(Duration::from_millis(300))),
            ("1h", Some(Duration::from_secs(3_600))),
            ("", None),
            ("10", None),
            ("-5s", None),
            ("5x", None),
            ("s", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_go_duration(text), expected, "{text:?}");
        }
    }

    #[test]
    fn durations_print_like_go() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(15), "15ns"),
            (Duration::from_micros(10), "10µs"),
            (Duration::from_millis(10), "10ms"),
            (Duration::from_micros(1_500), "1.5ms"),
            (Duration::from_millis(1_500), "1.5s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3_725), "1h2m5s"),
        ];
        for (duration, text) in cases {
            assert_eq!(go_duration(duration), text, "{duration:?}");
        }
    }
}
