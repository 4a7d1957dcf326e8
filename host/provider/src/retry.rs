//! Retry policy: bounded attempts on a deterministic exponential schedule.
//!
//! Retryable: 408, 409, 429, every 5xx (including Anthropic's 529
//! "overloaded"), connection failures before a response, and overload or
//! server errors the provider reports inside a stream. A `retry-after`
//! (seconds) or `retry-after-ms` header replaces the computed delay, capped
//! at [`RetryPolicy::max_retry_after`]. The computed backoff is spread
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

/// The provider's requested delay: `retry-after-ms` (milliseconds) or
/// `retry-after` (seconds, possibly fractional). HTTP-date values are not
/// interpreted; the computed backoff applies then.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| headers.get(name)?.to_str().ok().map(str::trim);
    if let Some(ms) = read("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let secs = read("retry-after")?.parse::<f64>().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
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
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", "0.25".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after-ms", "40".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(40)));
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
