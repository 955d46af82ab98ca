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

/// Runs blocking `work` without stalling the runtime's other tasks, and turns a panic in it into
/// an error the caller answers with.
///
/// On a multi-threaded runtime the work runs on the calling worker thread, which first hands its
/// queued tasks to another thread (`block_in_place`). Sending it to the blocking pool instead
/// would put two thread wake-ups on the call's path, there and back, each about 50 µs on small
/// VMs: a tenth of a recall at 10,000 memories. A current-thread runtime (tests) cannot give its
/// only thread away, so there the work goes to the blocking pool.
pub(crate) async fn off_the_runtime<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    if tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
        return tokio::task::block_in_place(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)))
            .map_err(|panic| {
                let message = panic.downcast_ref::<&str>().map(|text| (*text).to_owned()).or_else(|| panic.downcast_ref::<String>().cloned());
                format!("it panicked: {}", message.unwrap_or_default())
            });
    }
    tokio::task::spawn_blocking(work).await.map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_off_a_multi_threaded_runtime_runs_on_the_calling_thread_and_a_panic_is_answered() {
        // On a worker thread, as a tool call's task runs; nothing is awaited between the two reads.
        let (caller, ran_on) = tokio::spawn(async {
            let caller = std::thread::current().id();
            (caller, off_the_runtime(|| std::thread::current().id()).await.expect("the work returns"))
        })
        .await
        .expect("the task ends");
        assert_eq!(ran_on, caller, "no hand-over to another thread");
        let failure = tokio::spawn(off_the_runtime(|| -> () { panic!("the store is gone") })).await.expect("the task ends");
        assert!(failure.expect_err("a panic is an error").contains("the store is gone"));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn work_off_a_current_thread_runtime_goes_to_the_blocking_pool() {
        let caller = std::thread::current().id();
        let ran_on = off_the_runtime(|| std::thread::current().id()).await.expect("the work returns");
        assert_ne!(ran_on, caller, "the runtime's only thread is not blocked");
        let failure = off_the_runtime(|| -> () { panic!("the store is gone") }).await.expect_err("a panic is an error");
        assert!(failure.contains("panicked"), "{failure}");
    }
}
