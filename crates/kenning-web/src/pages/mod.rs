//! The pages and the actions behind their forms. Every page reads through the engine methods
//! the MCP tools call; every action checks the read-only switch and the form's CSRF token
//! before it calls one.

pub(crate) mod calibration;
pub(crate) mod decisions;
pub(crate) mod memories;
pub(crate) mod overview;
pub(crate) mod session;

use axum::http::Uri;
use kenning_core::interrupt::Interrupt;

use crate::error::Error;

/// How long a page's engine work may run, as long as a tool call's.
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs engine work on the blocking pool. When the browser goes away before the answer (the
/// request's future is dropped) or the deadline passes, the work is called off as an abandoned
/// or overdue tool call is.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, kenning_engine::Error> + Send + 'static,
) -> Result<T, Error> {
    struct CallOff(Interrupt);
    impl Drop for CallOff {
        fn drop(&mut self) {
            self.0.trigger();
        }
    }
    let interrupt = Interrupt::new();
    let _call_off = CallOff(interrupt.clone());
    let task = tokio::task::spawn_blocking(move || interrupt.run(work));
    match tokio::time::timeout(DEADLINE, task).await {
        Ok(joined) => joined.map_err(|error| Error::Task(error.to_string()))?.map_err(Error::from),
        Err(_) => Err(Error::Engine(kenning_engine::Error::Interrupted)),
    }
}

pub(crate) async fn not_found(uri: Uri) -> Error {
    Error::NotFound(uri.path().to_owned())
}

/// Refuses a write when the server or the signed-in key is read-only.
pub(crate) fn writable(viewer: &crate::guard::Viewer) -> Result<(), Error> {
    if viewer.read_only { Err(Error::ReadOnly) } else { Ok(()) }
}
