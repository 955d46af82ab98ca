//! The client-side rate limit: a token bucket of requests per minute, per provider.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A bucket holding up to a minute's requests, refilled continuously. A caller takes a token
/// even when the bucket is empty (a reservation, so that waiting callers are served in turn) and
/// waits until the refill covers it.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    capacity: f64,
    per_second: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    pub(crate) fn new(per_minute: u32) -> TokenBucket {
        let capacity = f64::from(per_minute.max(1));
        TokenBucket { capacity, per_second: capacity / 60.0, state: Mutex::new(Bucket { tokens: capacity, updated: Instant::now() }) }
    }

    /// Takes a token, sleeping until it is there. When the wait would exceed `patience`, nothing
    /// is taken and the wait is returned instead: a request that would sit longer than its own
    /// timeout fails at once.
    pub(crate) fn acquire(&self, patience: Duration) -> Result<(), Duration> {
        let wait = {
            // A poisoned lock only means another caller panicked while holding two numbers;
            // they are still a usable estimate.
            let mut bucket = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = Instant::now();
            let refilled = bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * self.per_second;
            bucket.tokens = refilled.min(self.capacity);
            bucket.updated = now;
            let wait = if bucket.tokens >= 1.0 { Duration::ZERO } else { Duration::from_secs_f64((1.0 - bucket.tokens) / self.per_second) };
            if wait > patience {
                return Err(wait);
            }
            bucket.tokens -= 1.0;
            wait
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_serves_a_minute_of_requests_then_makes_callers_wait() {
        let bucket = TokenBucket::new(3);
        for _ in 0..3 {
            assert_eq!(bucket.acquire(Duration::ZERO), Ok(()));
        }
        let wait = bucket.acquire(Duration::from_secs(1)).unwrap_err();
        assert!(wait > Duration::from_secs(19) && wait <= Duration::from_secs(20), "one token of three a minute takes 20 s: {wait:?}");
    }

    #[test]
    fn a_wait_within_patience_is_slept_and_reserved() {
        // 600 a minute is one every 100 ms.
        let bucket = TokenBucket::new(600);
        for _ in 0..600 {
            bucket.acquire(Duration::ZERO).unwrap();
        }
        let started = Instant::now();
        bucket.acquire(Duration::from_secs(1)).unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        // The next caller queues behind the reservation.
        let wait = bucket.acquire(Duration::ZERO).unwrap_err();
        assert!(wait >= Duration::from_millis(50), "{wait:?}");
    }
}
