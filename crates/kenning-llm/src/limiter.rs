//! The client-side rate limits: token buckets of requests, and of model tokens, per minute, per provider.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where a bucket reads the time and how it waits; tests hand in a clock they move themselves.
pub(crate) trait Clock: std::fmt::Debug + Send + Sync {
    fn now(&self) -> Instant;
    fn sleep(&self, wait: Duration);
}

/// The machine's monotonic clock.
#[derive(Debug, Default)]
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, wait: Duration) {
        std::thread::sleep(wait);
    }
}

/// A bucket holding up to a minute's requests, refilled continuously. A caller takes a token
/// even when the bucket is empty (a reservation, so that waiting callers are served in turn) and
/// waits until the refill covers it.
#[derive(Debug)]
pub(crate) struct TokenBucket<C: Clock = SystemClock> {
    capacity: f64,
    per_second: f64,
    state: Mutex<Bucket>,
    clock: C,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    pub(crate) fn new(per_minute: u32) -> TokenBucket {
        TokenBucket::with_clock(per_minute, SystemClock)
    }
}

impl<C: Clock> TokenBucket<C> {
    pub(crate) fn with_clock(per_minute: u32, clock: C) -> TokenBucket<C> {
        let capacity = f64::from(per_minute.max(1));
        let state = Mutex::new(Bucket { tokens: capacity, updated: clock.now() });
        TokenBucket { capacity, per_second: capacity / 60.0, state, clock }
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
            let now = self.clock.now();
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
            self.clock.sleep(wait);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock that moves only when a bucket sleeps on it.
    #[derive(Debug)]
    struct ManualClock {
        now: Mutex<Instant>,
    }

    impl ManualClock {
        fn new() -> ManualClock {
            ManualClock { now: Mutex::new(Instant::now()) }
        }
    }

    impl Clock for &ManualClock {
        fn now(&self) -> Instant {
            *self.now.lock().unwrap()
        }

        fn sleep(&self, wait: Duration) {
            *self.now.lock().unwrap() += wait;
        }
    }

    fn close_to(actual: Duration, expected: Duration) -> bool {
        actual.abs_diff(expected) < Duration::from_micros(1)
    }

    #[test]
    fn a_full_bucket_serves_a_minute_of_requests_then_makes_callers_wait() {
        let clock = ManualClock::new();
        let bucket = TokenBucket::with_clock(3, &clock);
        for _ in 0..3 {
            assert_eq!(bucket.acquire(1.0, Duration::ZERO), Ok(()));
        }
        let wait = bucket.acquire(1.0, Duration::from_secs(1)).unwrap_err();
        assert!(close_to(wait, Duration::from_secs(20)), "one token of three a minute takes 20 s: {wait:?}");
    }

    #[test]
    fn a_wait_within_patience_is_slept_and_reserved() {
        // 600 a minute is one every 100 ms.
        let clock = ManualClock::new();
        let bucket = TokenBucket::with_clock(600, &clock);
        for _ in 0..600 {
            bucket.acquire(1.0, Duration::ZERO).unwrap();
        }
        let started = (&clock).now();
        bucket.acquire(1.0, Duration::from_secs(1)).unwrap();
        let waited = (&clock).now() - started;
        assert!(close_to(waited, Duration::from_millis(100)), "{waited:?}");
        // The next caller queues behind the reservation: the refill of the 100 ms slept only
        // paid for the token reserved before it.
        let wait = bucket.acquire(1.0, Duration::ZERO).unwrap_err();
        assert!(close_to(wait, Duration::from_millis(100)), "{wait:?}");
    }
}
