//! How engine errors reach an MCP client.
//!
//! A tool argument that is refused (a field with the wrong type or an invalid value) and a tool
//! that ran and failed (an unknown URN, a storage failure) both answer with a result marked
//! `isError: true` and a structured body the agent can read and act on: clients hand tool results
//! to the model and keep JSON-RPC errors from it, so only a result lets the model correct its own
//! call (SEP-1303, MCP 2025-11-25). A refused argument's body names the field, the problem, the
//! value received and a suggestion. Tool code and the [`Strict`](crate::params::Strict)
//! extractor report a refused argument as a -32602 [`invalid_params`] error, and
//! `KenningServer::call_tool` turns every such error of a listed tool into that result with
//! [`refused_argument`]; a request that is not a well-formed call (not JSON, not a request, an
//! unknown method or tool, `params` that do not fit `tools/call`) stays a JSON-RPC error.

use rmcp::ErrorData as McpError;
use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult};
use serde_json::{Value, json};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kenning_core::FieldError;
use kenning_core::interrupt::Interrupt;
use kenning_engine::Error as EngineError;

/// The error type of every tool function.
#[derive(Debug)]
pub enum ToolError {
    /// A tool result with `isError: true` and this structured content.
    Failed(Value),
    /// A JSON-RPC error response.
    Rpc(McpError),
}

impl From<FieldError> for ToolError {
    fn from(error: FieldError) -> Self {
        ToolError::Rpc(invalid_params(&error))
    }
}

impl From<McpError> for ToolError {
    fn from(error: McpError) -> Self {
        ToolError::Rpc(error)
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, McpError> {
        match self {
            ToolError::Failed(body) => Ok(CallToolResult::structured_error(body).into()),
            ToolError::Rpc(error) => Err(error),
        }
    }
}

/// The seed's invalid-params error: code -32602 with field, problem, received and suggestion.
/// Resources and prompts answer with it as it is; a tool call's becomes a result through
/// [`refused_argument`].
pub fn invalid_params(error: &FieldError) -> McpError {
    McpError::invalid_params(
        format!("invalid `{}`: {}", error.field, error.problem),
        Some(serde_json::to_value(error).expect("field errors serialise")),
    )
}

/// The `isError` result of a tool call whose arguments were refused with -32602: the error's
/// field, problem, received value and suggestion, under `"error": "invalid_argument"` with the
/// message that names the field, so that the text block the model reads names it too.
pub fn refused_argument(error: McpError) -> CallToolResult {
    let mut body = json!({
        "error": "invalid_argument",
        "message": error.message,
        "suggestion": "check the arguments against the tool's inputSchema",
    });
    if let (Some(Value::Object(fields)), Value::Object(target)) = (error.data, &mut body) {
        target.extend(fields);
    }
    CallToolResult::structured_error(body)
}

/// How much of a refused value an error quotes back.
const QUOTED_CHARS: usize = 200;

/// A refused value as an error quotes it: itself when short, else the start of its JSON text.
pub(crate) fn quoted(value: &Value) -> Value {
    let text = value.to_string();
    if text.chars().count() <= QUOTED_CHARS {
        value.clone()
    } else {
        Value::String(format!("{}…", text.chars().take(QUOTED_CHARS).collect::<String>()))
    }
}

impl From<EngineError> for ToolError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Invalid(field) => ToolError::Rpc(invalid_params(&field)),
            EngineError::NotFound { target } => ToolError::Failed(json!({
                "error": "not_found",
                "message": format!("no memory at {target}"),
                "urn": target,
                "suggestion": "check the URN, or call memory_recall to find the memory",
            })),
            EngineError::DecisionNotFound { id } => ToolError::Failed(json!({
                "error": "decision_not_found",
                "message": format!("no decision {id} in any configured domain"),
                "decision_id": id,
                "suggestion": "check the id; decision_query lists past decisions",
            })),
            EngineError::Busy { target } => ToolError::Failed(json!({
                "error": "busy",
                "message": format!("{target} kept changing under concurrent writers"),
                "urn": target,
                "suggestion": "retry the call",
            })),
            EngineError::Storage(message) => ToolError::Failed(json!({
                "error": "storage_failure",
                "message": message,
                "suggestion": "retry; if it persists, run `kenning status` and check the server's log on stderr",
            })),
            EngineError::Embedding(message) => ToolError::Failed(json!({
                "error": "embedding_failure",
                "message": message,
                "suggestion": "check the configured embedding model; `kenning status` shows it",
            })),
            EngineError::Interrupted => ToolError::Failed(json!({
                "error": "interrupted",
                "message": format!("the call was cancelled or ran past its {} s deadline, and its work stopped", REQUEST_DEADLINE.as_secs()),
                "suggestion": "narrow the request (a shorter query, filters, a smaller limit) and call again",
            })),
            EngineError::Unavailable(message) => ToolError::Failed(json!({
                "error": "domain_unavailable",
                "message": message,
                "suggestion": "nothing was written; retry when the database is back (`kenning status` shows each domain), or choose another domain explicitly",
            })),
            EngineError::Code { error, message, suggestion } => ToolError::Failed(json!({
                "error": error,
                "message": message,
                "suggestion": suggestion,
            })),
        }
    }
}

/// How long a tool call may work before it is called off.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(30);

/// The deadline of the tools that run the project's own tests, linter or type checker: past the
/// longest run they accept, so that a run is stopped by its own `timeout_seconds` (and answers
/// with what it saw) rather than cut off at [`REQUEST_DEADLINE`].
pub const RUN_DEADLINE: Duration = Duration::from_secs(kenning_engine::code::MAX_TIMEOUT.as_secs() + 30);

/// The deadline of a call to `tool`.
pub fn deadline_of(tool: &str) -> Duration {
    if crate::tools::test::RUNS_PROJECT_CODE.contains(&tool) { RUN_DEADLINE } else { REQUEST_DEADLINE }
}

tokio::task_local! {
    /// The interrupt of the tool call being served (see [`interruptible`]).
    static CALL_INTERRUPT: Interrupt;
}

/// Serves `call` under an [`Interrupt`] that fires when `cancelled` completes (the client sent
/// `notifications/cancelled`), when `deadline` passes (see [`deadline_of`]), or when the call
/// is dropped unanswered (the connection went away): engine work started by [`blocking`] inside
/// it then stops early instead of keeping a core busy for nobody.
pub async fn interruptible<T>(
    call: impl Future<Output = T>,
    cancelled: impl Future<Output = ()> + Send + 'static,
    deadline: Duration,
) -> T {
    let interrupt = Interrupt::new();
    let watcher = {
        let interrupt = interrupt.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = cancelled => {}
                () = tokio::time::sleep(deadline) => {}
            }
            interrupt.trigger();
        })
    };
    struct CallOff(Interrupt, tokio::task::JoinHandle<()>);
    impl Drop for CallOff {
        fn drop(&mut self) {
            self.0.trigger();
            self.1.abort();
        }
    }
    let _call_off = CallOff(interrupt.clone(), watcher);
    CALL_INTERRUPT.scope(interrupt, call).await
}

/// Runs engine work where it may block (see [`off_the_runtime`]): stores and embedders block,
/// tool futures must not. The work runs under the interrupt of the call it serves, if any.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, EngineError> + Send + 'static,
) -> Result<T, ToolError> {
    let interrupt = CALL_INTERRUPT.try_with(Interrupt::clone).unwrap_or_default();
    off_the_runtime(move || interrupt.run(work))
        .await
        .map_err(|failure| ToolError::Rpc(McpError::internal_error(format!("tool task failed: {failure}"), None)))?
        .map_err(ToolError::from)
}

/// Tool work running now, in place or on the blocking pool; see [`off_the_runtime`].
static WORK_RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Runs blocking `work` without stalling the runtime's other tasks, and turns a panic in it into
/// an error the caller answers with.
///
/// When no other tool work is running, as with an agent's calls over stdio, the work runs on the
/// calling worker thread, which first hands its queued tasks to another thread
/// (`block_in_place`). Sending it to the blocking pool instead puts two thread wake-ups on the
/// call's path, there and back, each about 50 µs on small VMs. Under concurrent calls (HTTP
/// clients) every hand-over of a worker costs a thread of its own and measured slower than the
/// pool (about 0.88 of the recalls a second with 16 clients), so there the work goes to the pool,
/// as it does on a current-thread runtime, which cannot give its only thread away.
pub(crate) async fn off_the_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    struct Running;
    impl Drop for Running {
        fn drop(&mut self) {
            WORK_RUNNING.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let alone = WORK_RUNNING.fetch_add(1, Ordering::Relaxed) == 0;
    let _running = Running;
    if alone && tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
        return tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))).map_err(|panic| {
            let message = panic.downcast_ref::<&str>().map(|text| (*text).to_owned()).or_else(|| panic.downcast_ref::<String>().cloned());
            format!("it panicked: {}", message.unwrap_or_default())
        });
    }
    tokio::task::spawn_blocking(work).await.map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::thread::ThreadId;

    use super::*;

    /// Runs `work` off the runtime from a task, as a tool call does; returns the thread the task
    /// ran on and the work's outcome. Nothing is awaited between the two.
    async fn from_a_task<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> (ThreadId, Result<T, String>) {
        tokio::spawn(async { (std::thread::current().id(), off_the_runtime(work).await) }).await.expect("the task ends")
    }

    /// One test, so that no other test's work runs beside the work it counts.
    #[test]
    fn work_runs_in_place_when_alone_on_a_multi_threaded_runtime_and_on_the_pool_otherwise() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("a runtime");
        runtime.block_on(async {
            let (caller, ran_on) = from_a_task(|| std::thread::current().id()).await;
            assert_eq!(ran_on, Ok(caller), "alone, the work is not handed to another thread");
            let (_, failure) = from_a_task(|| -> () { panic!("the store is gone") }).await;
            assert!(failure.expect_err("a panic is an error").contains("the store is gone"));

            let (started, release) = (mpsc::channel(), mpsc::channel::<()>());
            let (started_sender, release_receiver) = (started.0, release.1);
            let first = tokio::spawn(off_the_runtime(move || {
                started_sender.send(()).expect("the test waits");
                release_receiver.recv().expect("the test releases the work");
            }));
            started.1.recv().expect("the first work runs");
            let (caller, ran_on) = from_a_task(|| std::thread::current().id()).await;
            assert_ne!(ran_on, Ok(caller), "beside other work, the work goes to the blocking pool");
            release.0.send(()).expect("the first work waits");
            first.await.expect("the task ends").expect("the first work returns");
        });

        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
        runtime.block_on(async {
            let caller = std::thread::current().id();
            let ran_on = off_the_runtime(|| std::thread::current().id()).await;
            assert_ne!(ran_on, Ok(caller), "the runtime's only thread is not blocked");
            let failure = off_the_runtime(|| -> () { panic!("the store is gone") }).await;
            assert!(failure.expect_err("a panic is an error").contains("panicked"));
        });
    }
}
