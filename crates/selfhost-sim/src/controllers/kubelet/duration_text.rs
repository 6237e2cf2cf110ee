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

#[cfg(test)]
mod tests {
    use super::*;

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
