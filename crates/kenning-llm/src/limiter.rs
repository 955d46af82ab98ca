//! The client-side rate limits: token buckets of requests, and of model tokens, per minute, per provider.

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

    /// Takes `amount` tokens (at most a minute's), sleeping until they are there. When the wait
    /// would exceed `patience`, nothing is taken and the wait is returned instead: a request
    /// that would sit longer than its own timeout fails at once.
    pub(crate) fn acquire(&self, amount: f64, patience: Duration) -> Result<(), Duration> {
        let amount = amount.clamp(0.0, self.capacity);
        let wait = {
            // A poisoned lock only means another caller panicked while holding two numbers;
            // they are still a usable estimate.
            let mut bucket = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = Instant::now();
            let refilled = bucket.tokens + now.duration_since(bucket.updated).as_secs_f64() * self.per_second;
            bucket.tokens = refilled.min(self.capacity);
            bucket.updated = now;
            let wait = if bucket.tokens >= amount { Duration::ZERO } else { Duration::from_secs_f64((amount - bucket.tokens) / self.per_second) };
            if wait > patience {
                return Err(wait);
            }
            bucket.tokens -= amount;
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
            assert_eq!(bucket.acquire(1.0, Duration::ZERO), Ok(()));
        }
        let wait = bucket.acquire(1.0, Duration::from_secs(1)).unwrap_err();
        assert!(wait > Duration::from_secs(19) && wait <= Duration::from_secs(20), "one token of three a minute takes 20 s: {wait:?}");
    }

    #[test]
    fn a_wait_within_patience_is_slept_and_reserved() {
        // 600 a minute is one every 100 ms.
        let bucket = TokenBucket::new(600);
        for _ in 0..600 {
            bucket.acquire(1.0, Duration::ZERO).unwrap();
        }
        let started = Instant::now();
        bucket.acquire(1.0, Duration::from_secs(1)).unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        // The next caller queues behind the reservation.
        let wait = bucket.acquire(1.0, Duration::ZERO).unwrap_err();
        assert!(wait >= Duration::from_millis(50), "{wait:?}");
    }
}
