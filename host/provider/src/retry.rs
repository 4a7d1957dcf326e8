//! Retry policy: bounded attempts on a deterministic exponential schedule.
//!
//! Retryable: 408, 409, 429, every 5xx (including Anthropic's 529
//! "overloaded"), connection failures before a response or in the middle of
//! a stream, and overload or server errors the provider reports inside a
//! stream. A `retry-after`
//! (seconds or an HTTP date) or `retry-after-ms` header replaces the
//! computed delay, capped at [`RetryPolicy::max_retry_after`] (the retry
//! message says so when the provider asked for more); no header value, however
//! large or malformed, can overflow a duration. The computed backoff is spread
//! downwards by up to [`RetryPolicy::jitter_percent`] at random, so clients
//! that failed together do not retry together; it never exceeds the
//! schedule (0 makes it exact).

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

/// How a provider call retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Total attempts, the first included (1 disables retries).
    pub max_attempts: u32,
    /// Delay before the first retry.
    pub initial_backoff: Duration,
    /// The delay doubles after every retry up to this bound.
    pub max_backoff: Duration,
    /// The most Latch waits when the provider sends `retry-after`.
    pub max_retry_after: Duration,
    /// Up to this share (percent) of a computed backoff is taken off at
    /// random; a provider's `retry-after` is honoured exactly.
    pub jitter_percent: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            jitter_percent: 25,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The computed delay before attempt `next_attempt` (2 for the first
    /// retry): `initial_backoff × 2^(next_attempt − 2)`, at most
    /// `max_backoff`.
    pub fn backoff(&self, next_attempt: u32) -> Duration {
        let exp = next_attempt.saturating_sub(2).min(30);
        self.initial_backoff
            .saturating_mul(1u32 << exp)
            .min(self.max_backoff)
    }

    /// The delay before `next_attempt`, honouring a provider's `retry-after`;
    /// a computed backoff gets its jitter.
    pub fn delay(&self, next_attempt: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(d) => d.min(self.max_retry_after),
            None => self.jittered(self.backoff(next_attempt), random_unit()),
        }
    }

    /// `base` less `unit × jitter_percent` of it (`unit` in `[0, 1)`).
    pub fn jittered(&self, base: Duration, unit: f64) -> Duration {
        let share = f64::from(self.jitter_percent.min(100)) / 100.0;
        base.mul_f64(1.0 - share * unit.clamp(0.0, 1.0))
    }
}

/// A random number in `[0, 1)` from the standard library's per-process
/// random hash keys (no extra dependency; quality is ample for jitter).
fn random_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// True for HTTP statuses worth retrying.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// The longest delay a provider's header is read as. A header asking for
/// more (`retry-after: 1e300`, a date centuries away, a number past `u64`)
/// is read as this, then capped by [`RetryPolicy::max_retry_after`]: no
/// value a provider sends can overflow a [`Duration`].
pub const PROVIDER_DELAY_CEILING: Duration = Duration::from_secs(86_400);

/// A delay a provider asked for in a response header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedDelay {
    /// The header as sent (`retry-after: 120`), for messages.
    pub header: String,
    /// The delay asked for, at most [`PROVIDER_DELAY_CEILING`].
    pub delay: Duration,
    /// True when the header asked for more than [`PROVIDER_DELAY_CEILING`].
    pub beyond_ceiling: bool,
}

impl RequestedDelay {
    /// What was asked, for people: `1.5 s`, or `more than a day`.
    pub fn describe(&self) -> String {
        if self.beyond_ceiling {
            "more than a day".to_string()
        } else {
            seconds(self.delay)
        }
    }
}

/// How long to wait before the next attempt, and what the retry message
/// adds when the provider's request was not honoured in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// The delay Latch waits.
    pub delay: Duration,
    /// Set when the provider asked for longer than Latch waits: names the
    /// header, what it asked and the cap.
    pub capped: Option<String>,
}

impl RetryPolicy {
    /// The wait before `next_attempt`: the provider's requested delay up to
    /// [`RetryPolicy::max_retry_after`] (saying so when it asked for more),
    /// else the jittered backoff.
    pub fn wait(&self, next_attempt: u32, requested: Option<&RequestedDelay>) -> Wait {
        let Some(r) = requested else {
            return Wait {
                delay: self.delay(next_attempt, None),
                capped: None,
            };
        };
        let delay = self.delay(next_attempt, Some(r.delay));
        let capped = (r.beyond_ceiling || r.delay > delay).then(|| {
            format!(
                "the provider asked to wait {} ({}); Latch waits at most {}",
                r.describe(),
                r.header,
                seconds(delay)
            )
        });
        Wait { delay, capped }
    }
}

/// `d` in seconds for messages: `60 s`, `0.25 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{} s", (s * 1000.0).round() / 1000.0)
    }
}

/// The provider's requested delay: `retry-after-ms` (milliseconds) or
/// `retry-after` (seconds, possibly fractional, or an HTTP date). Negative,
/// `NaN` and unreadable values are ignored (the computed backoff applies);
/// huge ones are read as [`PROVIDER_DELAY_CEILING`].
pub fn retry_after(headers: &HeaderMap) -> Option<RequestedDelay> {
    retry_after_at(headers, std::time::SystemTime::now())
}

/// [`retry_after`] with `now` for HTTP dates.
pub fn retry_after_at(headers: &HeaderMap, now: std::time::SystemTime) -> Option<RequestedDelay> {
    let read = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(v) = read("retry-after-ms")
        && let Some(r) = number_delay(v, 1_000.0)
    {
        return Some(r.named(format!("retry-after-ms: {v}")));
    }
    let v = read("retry-after")?;
    let delay = number_delay(v, 1.0).or_else(|| {
        let at = httpdate::parse_http_date(v).ok()?;
        let ahead = at.duration_since(now).unwrap_or(Duration::ZERO);
        Some(ceiled(ahead))
    })?;
    Some(delay.named(format!("retry-after: {v}")))
}

/// `value / per_second` seconds, when `value` is a non-negative number
/// (infinity included, read as beyond the ceiling).
fn number_delay(value: &str, per_second: f64) -> Option<RequestedDelay> {
    let n = value.parse::<f64>().ok()?;
    if n.is_nan() || n < 0.0 {
        return None;
    }
    let secs = n / per_second;
    let ceiling = PROVIDER_DELAY_CEILING.as_secs_f64();
    Some(if secs > ceiling {
        beyond()
    } else {
        // Finite and within the ceiling: cannot overflow.
        ceiled(Duration::from_secs_f64(secs))
    })
}

fn ceiled(d: Duration) -> RequestedDelay {
    if d > PROVIDER_DELAY_CEILING {
        beyond()
    } else {
        RequestedDelay {
            header: String::new(),
            delay: d,
            beyond_ceiling: false,
        }
    }
}

fn beyond() -> RequestedDelay {
    RequestedDelay {
        header: String::new(),
        delay: PROVIDER_DELAY_CEILING,
        beyond_ceiling: true,
    }
}

impl RequestedDelay {
    fn named(mut self, header: String) -> Self {
        self.header = header;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_doubles_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(500),
            max_retry_after: Duration::from_secs(2),
            jitter_percent: 0,
        };
        let got: Vec<u128> = (2..7).map(|a| p.backoff(a).as_millis()).collect();
        let exact: Vec<u128> = (2..7).map(|a| p.delay(a, None).as_millis()).collect();
        assert_eq!(exact, got, "without jitter the schedule is exact");
        assert_eq!(got, vec![100, 200, 400, 500, 500]);
        assert_eq!(
            p.delay(2, Some(Duration::from_secs(9))),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.delay(3, Some(Duration::from_millis(7))),
            Duration::from_millis(7)
        );
    }

    #[test]
    fn jitter_spreads_backoff_downwards_only() {
        let p = RetryPolicy {
            jitter_percent: 50,
            ..RetryPolicy::default()
        };
        let base = p.backoff(3);
        assert_eq!(p.jittered(base, 0.0), base);
        assert_eq!(p.jittered(base, 0.5), base.mul_f64(0.75));
        let delays: std::collections::BTreeSet<Duration> =
            (0..64).map(|_| p.delay(3, None)).collect();
        assert!(delays.len() > 1, "jitter must vary the delay: {delays:?}");
        assert!(
            delays.iter().all(|d| *d <= base && *d >= base / 2),
            "{delays:?} outside [{:?}, {base:?}]",
            base / 2
        );
        // retry-after is honoured exactly.
        assert_eq!(
            p.delay(3, Some(Duration::from_millis(70))),
            Duration::from_millis(70)
        );
    }

    #[test]
    fn retry_after_headers() {
        let asked = |h: &HeaderMap| retry_after(h).map(|r| (r.delay, r.beyond_ceiling));
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(asked(&h), Some((Duration::from_secs(2), false)));
        assert_eq!(retry_after(&h).unwrap().header, "retry-after: 2");
        h.insert("retry-after", "0.25".parse().unwrap());
        assert_eq!(asked(&h), Some((Duration::from_millis(250), false)));
        // A date in the past: retry now.
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(asked(&h), Some((Duration::ZERO, false)));
        h.insert("retry-after-ms", "40".parse().unwrap());
        assert_eq!(asked(&h), Some((Duration::from_millis(40), false)));
        assert_eq!(retry_after(&h).unwrap().header, "retry-after-ms: 40");
    }

    #[test]
    fn no_header_value_overflows_and_huge_ones_are_capped() {
        let one = |name: &str, value: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
            retry_after(&h)
        };
        let huge = [
            ("retry-after", "1e300"),
            ("retry-after", "18446744073709551616"),
            ("retry-after", "inf"),
            ("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT"),
            ("retry-after-ms", "1e20"),
            ("retry-after-ms", "1e300"),
            ("retry-after-ms", "86400001"),
        ];
        for (name, value) in huge {
            let r = one(name, value).unwrap_or_else(|| panic!("{name}: {value} ignored"));
            assert_eq!(
                (r.delay, r.beyond_ceiling),
                (PROVIDER_DELAY_CEILING, true),
                "{name}: {value}"
            );
            assert_eq!(r.header, format!("{name}: {value}"));
        }
        for (name, value) in [
            ("retry-after", "-5"),
            ("retry-after", "NaN"),
            ("retry-after", "soon"),
            ("retry-after-ms", "-1e300"),
        ] {
            assert_eq!(one(name, value), None, "{name}: {value}");
        }
        // A day ahead exactly is honoured as asked (then capped by the policy).
        let r = one("retry-after-ms", "86400000").unwrap();
        assert_eq!((r.delay, r.beyond_ceiling), (PROVIDER_DELAY_CEILING, false));
    }

    #[test]
    fn the_wait_says_when_the_provider_asked_for_more() {
        let p = RetryPolicy {
            max_retry_after: Duration::from_secs(60),
            jitter_percent: 0,
            ..RetryPolicy::default()
        };
        let asked = |secs: f64, beyond: bool| RequestedDelay {
            header: format!("retry-after: {secs}"),
            delay: Duration::from_secs_f64(secs),
            beyond_ceiling: beyond,
        };
        let w = p.wait(2, Some(&asked(5.0, false)));
        assert_eq!(
            w,
            Wait {
                delay: Duration::from_secs(5),
                capped: None
            }
        );
        let w = p.wait(2, Some(&asked(3600.0, false)));
        assert_eq!(w.delay, Duration::from_secs(60));
        assert_eq!(
            w.capped.as_deref(),
            Some("the provider asked to wait 3600 s (retry-after: 3600); Latch waits at most 60 s")
        );
        let w = p.wait(2, Some(&asked(86_400.0, true)));
        assert!(w.capped.unwrap().contains("more than a day"));
        assert_eq!(p.wait(2, None).delay, p.backoff(2));
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
