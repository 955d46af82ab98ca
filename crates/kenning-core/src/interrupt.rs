//! Stopping work nobody waits for any more.
//!
//! A front end gives each request an [`Interrupt`] and runs the request's work inside
//! [`Interrupt::run`]; when the client cancels the request or its deadline passes, the front end
//! calls [`Interrupt::trigger`] from another thread. Long loops anywhere below (the search index's
//! scoring, the engine's stages of a recall) call [`interrupted`] and stop early. The current
//! interrupt is a thread-local so that the storage traits need no extra argument: work for one
//! request runs on one thread, or on threads it hands the interrupt to ([`current`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A flag shared between the thread doing a request's work and whoever may call it off.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicBool>);

thread_local! {
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Calls the work off: from now on [`interrupted`] is true on the thread running it.
    pub fn trigger(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_triggered(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Runs `work` on this thread with this interrupt as the current one, then restores the
    /// previous one (also when `work` panics).
    pub fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        struct Restore(Option<Interrupt>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let previous = self.0.take();
                CURRENT.with(|current| *current.borrow_mut() = previous);
            }
        }
        let previous = CURRENT.with(|current| current.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        work()
    }
}

/// Whether the work running on this thread has been called off. False outside
/// [`Interrupt::run`].
pub fn interrupted() -> bool {
    CURRENT.with(|current| current.borrow().as_ref().is_some_and(Interrupt::is_triggered))
}

/// The interrupt of the work running on this thread, for a thread that takes on part of that
/// work to [`Interrupt::run`] it under: the same request, called off together.
pub fn current() -> Option<Interrupt> {
    CURRENT.with(|current| current.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_running_work_sees_its_interrupt() {
        let interrupt = Interrupt::new();
        assert!(!interrupted());
        interrupt.run(|| {
            assert!(!interrupted());
            interrupt.trigger();
            assert!(interrupted());
        });
        assert!(!interrupted(), "the interrupt ends with the work it was given");
        let other = Interrupt::new();
        other.run(|| assert!(!interrupted()));
    }

    #[test]
    fn a_helper_thread_running_under_the_current_interrupt_sees_it_called_off() {
        let interrupt = Interrupt::new();
        interrupt.run(|| {
            let handed = current().expect("work under an interrupt has a current one");
            interrupt.trigger();
            let seen = std::thread::scope(|scope| scope.spawn(|| handed.run(interrupted)).join().unwrap());
            assert!(seen);
        });
        assert!(current().is_none());
    }
}
