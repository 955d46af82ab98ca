//! Per-key rate limits: a token bucket per key and class of call.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The classes of calls that are limited separately, as the decision system's service sets them:
/// writes are dearer than reads, and calibration (which mines every outcome) dearest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitClass {
    /// Every call that writes: captures, updates, forgets, restores, decisions, signals, outcomes.
    Capture,
    /// Reads: recall, get, history, status, decision queries, resource reads.
    Query,
    /// Calibration, skills and decision context, which compute over a module's whole record.
    Calibration,
}

impl LimitClass {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitClass::Capture => "capture",
            LimitClass::Query => "queries",
            LimitClass::Calibration => "calibration",
        }
    }
}

/// Calls per minute allowed to one key, per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    pub capture: u32,
    pub queries: u32,
    pub calibration: u32,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits { capture: 100, queries: 300, calibration: 50 }
    }
}

impl RateLimits {
    pub fn per_minute(&self, class: LimitClass) -> u32 {
        match class {
            LimitClass::Capture => self.capture,
            LimitClass::Query => self.queries,
            LimitClass::Calibration => self.calibration,
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// One token bucket per key and class. A bucket holds a minute's allowance and refills
/// continuously, so a key may burst up to its limit and then proceeds at the limit's pace.
#[derive(Debug)]
pub struct RateLimiter {
    limits: RateLimits,
    buckets: Mutex<HashMap<(String, LimitClass), Bucket>>,
}

impl RateLimiter {
    pub fn new(limits: RateLimits) -> RateLimiter {
        RateLimiter { limits, buckets: Mutex::new(HashMap::new()) }
    }

    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// Takes one call from the key's bucket, or says how long until one is available.
    pub fn take(&self, key_id: &str, class: LimitClass, now: Instant) -> Result<(), Duration> {
        let per_minute = f64::from(self.limits.per_minute(class));
        if per_minute <= 0.0 {
            return Err(Duration::from_secs(60));
        }
        let per_second = per_minute / 60.0;
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let bucket = buckets.entry((key_id.to_owned(), class)).or_insert(Bucket { tokens: per_minute, updated: now });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(per_minute);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_may_burst_its_limit_then_waits_for_the_refill() {
        let limiter = RateLimiter::new(RateLimits { capture: 3, queries: 60, calibration: 1 });
        let start = Instant::now();
        for _ in 0..3 {
            limiter.take("a", LimitClass::Capture, start).unwrap();
        }
        let wait = limiter.take("a", LimitClass::Capture, start).unwrap_err();
        assert!((19.9..=20.1).contains(&wait.as_secs_f64()), "3/min refills one call every 20 s: {wait:?}");
        limiter.take("b", LimitClass::Capture, start).expect("another key has its own bucket");
        limiter.take("a", LimitClass::Query, start).expect("another class has its own bucket");
        limiter.take("a", LimitClass::Capture, start + Duration::from_secs(20)).expect("refilled");
        assert!(limiter.take("a", LimitClass::Capture, start + Duration::from_secs(20)).is_err());
    }
}
