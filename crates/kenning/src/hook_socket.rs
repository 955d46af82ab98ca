//! The session's server answers the quick hooks: `kenning serve` on stdio (the process an agent
//! starts for a session) listens on a Unix socket, and `kenning hook` asks it before opening the
//! stores itself.
//!
//! A hook is a new process at every prompt and tool call. Opening the stores, reading their
//! search indexes and starting the engine is most of what it costs; the session's server has
//! all of that open already. So a hook that finds a server for the same configuration and
//! project sends it the event and prints the answer, and a hook that finds none (the server is
//! not up yet, was killed, runs another build, or the platform has no Unix sockets) answers in
//! process exactly as before. Either way the answer is the same: both run the same
//! [`kenning_hooks::Hooks`] over the same stores.
//!
//! Where the socket lives says which server it is: its name is a digest of the binary (path,
//! size, modification time), the merged configuration, the project and the user store's path,
//! so a hook only ever reaches a server that would answer as it would. It sits in a folder only
//! this user may enter (`$XDG_RUNTIME_DIR/kenning`, else `{data dir}/run`); a folder owned by
//! someone else or open to others is not used.
//!
//! Only the events that must be quick go through the socket: session-start, user-prompt,
//! post-tool and post-tool-failure. Stop, pre-compact and session-end read the transcript and
//! may take seconds; they stay in the hook's own process, where a slow one delays nobody else.

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kenning_engine::{DecisionService, MemoryService};
use kenning_hooks::{Budgets, HookEvent, HookInput, Hooks};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::Config;
use crate::project::Project;

/// The longest socket path every Unix accepts (`sun_path` is 104 bytes on macOS, 108 on Linux).
const MAX_SOCKET_PATH: usize = 100;
/// How long a hook waits for the server's answer before answering in process. The server's
/// work is a few milliseconds; this only bounds a server that is stuck.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the server waits for a request once a hook has connected.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The most a request may hold: the hook input, which the hook already cut at this size.
const MAX_REQUEST_BYTES: u64 = 16 * 1024 * 1024 + 4096;

/// Whether the session's server answers `event`.
pub fn answers(event: HookEvent) -> bool {
    matches!(event, HookEvent::SessionStart | HookEvent::UserPrompt | HookEvent::PostTool | HookEvent::PostToolFailure)
}

/// What a hook sends: the event, the budgets it was given and the input, its transcript path
/// already confined by the hook.
#[derive(Serialize, Deserialize)]
struct Request {
    event: String,
    budgets: [usize; 3],
    input: HookInput,
}

/// What the server answers: the hook's output (`None` when there is nothing to add), or why it
/// could not.
#[derive(Serialize, Deserialize)]
enum Reply {
    Output(Option<Value>),
    Failed(String),
}

/// The socket of the server for this configuration and project, when this user has a private
/// folder to keep it in.
pub fn endpoint(config: &Config, project: Option<&Project>) -> Option<PathBuf> {
    let folder = private_folder()?;
    let binary = std::env::current_exe().ok()?;
    let metadata = std::fs::metadata(&binary).ok()?;
    let mut identity = format!(
        "{}\n{}\n{}\n{}\n{config:?}\n{project:?}\n{:?}\n",
        env!("CARGO_PKG_VERSION"),
        binary.display(),
        metadata.len(),
        metadata.mtime_nsec() + metadata.mtime() * 1_000_000_000,
        config.user_db_path().ok()
    );
    if config.org.is_some() {
        // The organisation's connection also takes libpq's variables from the environment.
        let mut variables: Vec<(String, String)> = std::env::vars().filter(|(name, _)| name.starts_with("PG")).collect();
        variables.sort();
        identity.push_str(&format!("{variables:?}"));
    }
    // The first 64 bits of the digest: a name short enough for any socket path.
    let name = &crate::trust::digest(identity.as_bytes())[..16];
    let path = folder.join(format!("{name}.sock"));
    (path.as_os_str().len() <= MAX_SOCKET_PATH).then_some(path)
}

/// `$XDG_RUNTIME_DIR/kenning`, else `{data dir}/run`: created for this user alone if missing,
/// and refused when someone else owns it or may enter it.
fn private_folder() -> Option<PathBuf> {
    let folder = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from).filter(|dir| dir.is_absolute()) {
        Some(runtime) => runtime.join("kenning"),
        None => Config::data_dir().ok()?.join("run"),
    };
    if !folder.is_dir() {
        kenning_gateway::create_private_dir(&folder).ok()?;
    }
    let metadata = std::fs::symlink_metadata(&folder).ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let own = metadata.uid() == unsafe { libc::geteuid() };
    (metadata.is_dir() && own && metadata.permissions().mode() & 0o077 == 0).then_some(folder)
}

/// Asks the server at `socket` to answer `event`. `None` when no server answered, and the hook
/// answers in process; otherwise the server's output, or why it failed.
pub fn ask(socket: &Path, event: HookEvent, budgets: &Budgets, input: &HookInput) -> Option<Result<Option<Value>, String>> {
    let mut stream = UnixStream::connect(socket).ok()?;
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT)).ok()?;
    let request = Request {
        event: event.command_name().to_owned(),
        budgets: [budgets.session_start, budgets.user_prompt, budgets.post_tool],
        input: input.clone(),
    };
    serde_json::to_writer(&mut stream, &request).ok()?;
    stream.shutdown(std::net::Shutdown::Write).ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    match serde_json::from_str(&text).ok()? {
        Reply::Output(output) => Some(Ok(output)),
        Reply::Failed(reason) => Some(Err(reason)),
    }
}

/// The server's side: answers hooks on `socket` from a thread of its own for as long as the
/// returned guard lives, which then removes the socket.
pub struct Listener {
    socket: PathBuf,
    /// The socket file's inode: another server may have replaced it after this one's was
    /// removed by hand, and that one's must stay.
    inode: u64,
}

impl Listener {
    /// Starts answering on `socket`, unless a live server already does (two sessions in one
    /// project share the first one's) or the socket cannot be made; a stale socket left by a
    /// server that was killed is replaced.
    pub fn start(socket: PathBuf, memory: Arc<MemoryService>, decisions: Arc<DecisionService>, project: Option<String>) -> Option<Listener> {
        if UnixStream::connect(&socket).is_ok() {
            tracing::debug!(socket = %socket.display(), "another server answers hooks for this project");
            return None;
        }
        let _ = std::fs::remove_file(&socket);
        let listener = match UnixListener::bind(&socket) {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(socket = %socket.display(), %error, "hooks will open the stores themselves: the socket could not be made");
                return None;
            }
        };
        let inode = std::fs::metadata(&socket).ok()?.ino();
        let server = Arc::new(Server { memory, decisions, project });
        std::thread::Builder::new()
            .name("kenning-hooks".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    let server = server.clone();
                    // Each hook on a thread of its own: a stuck one must not hold the others.
                    let _ = std::thread::Builder::new().name("kenning-hook".into()).spawn(move || server.answer(stream));
                }
            })
            .ok()?;
        tracing::debug!(socket = %socket.display(), "answering hooks");
        Some(Listener { socket, inode })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if std::fs::metadata(&self.socket).is_ok_and(|metadata| metadata.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

struct Server {
    memory: Arc<MemoryService>,
    decisions: Arc<DecisionService>,
    project: Option<String>,
}

impl Server {
    fn answer(&self, mut stream: UnixStream) {
        if stream.set_read_timeout(Some(REQUEST_TIMEOUT)).and_then(|()| stream.set_write_timeout(Some(REQUEST_TIMEOUT))).is_err() {
            return;
        }
        let mut text = String::new();
        if (&mut stream).take(MAX_REQUEST_BYTES).read_to_string(&mut text).is_err() {
            return;
        }
        let reply = match serde_json::from_str::<Request>(&text) {
            Ok(request) => self.run(request),
            Err(error) => Reply::Failed(format!("the server could not read the hook's request: {error}")),
        };
        if let Ok(bytes) = serde_json::to_vec(&reply) {
            let _ = stream.write_all(&bytes);
        }
    }

    fn run(&self, request: Request) -> Reply {
        let Some(event) = HookEvent::parse(&request.event).filter(|event| answers(*event)) else {
            return Reply::Failed(format!("the server does not answer `{}` hooks", request.event));
        };
        let [session_start, user_prompt, post_tool] = request.budgets;
        let hooks = Hooks {
            project: self.project.clone(),
            memory: self.memory.clone(),
            decisions: self.decisions.clone(),
            budgets: Budgets { session_start, user_prompt, post_tool },
        };
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hooks.run(event, &request.input)));
        tracing::debug!(event = request.event, "answered a hook");
        match outcome {
            Ok(Ok(output)) => Reply::Output(output),
            Ok(Err(error)) => Reply::Failed(error.to_string()),
            Err(_) => Reply::Failed("the server panicked answering the hook".into()),
        }
    }
}
