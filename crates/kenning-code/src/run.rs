//! Running a detected tool: a fixed program and argument list (never a shell string), in the
//! repository, with a timeout, and output kept up to a cap.
//!
//! A run ends when it says it ends. The tool starts a session of its own (and so a process group
//! of its own, both named by its process id). When it exits, and when time is up or the request
//! is interrupted, every process still in that session or group is killed: a test that leaves a
//! server or a `sleep` behind neither outlives the run nor keeps it waiting. Its output is read
//! until both pipes close or, once the tool is gone and its session killed, for a short grace at
//! most: a daemon that left the session on purpose and still holds the pipes is no reason to
//! wait, so the pipes are closed on it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kenning_core::interrupt::interrupted;

use crate::error::{Error, Result};

/// The most output kept from each stream; the end is kept, since summaries come last.
pub const OUTPUT_CAP: usize = 512 * 1024;
/// How long output is still read once the tool is gone and what it left behind is killed: long
/// enough for the killed processes to close their ends of the pipes.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// How often the tool is checked on while its output is read.
const TICK: Duration = Duration::from_millis(20);

/// A command to run: the program and its arguments, each one argv element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Invocation {
    pub fn new(program: impl Into<PathBuf>, args: &[&str]) -> Invocation {
        Invocation { program: program.into(), args: args.iter().map(|arg| (*arg).to_owned()).collect() }
    }

    pub fn arg(mut self, arg: impl Into<String>) -> Invocation {
        self.args.push(arg.into());
        self
    }

    /// The command as a person in the repository at `root` would type it (for reports; never
    /// executed as text). The program is shown as it was run: a name looked up on PATH
    /// (`cargo`), a path inside the repository relative to it (its own `.venv/bin/python`), any
    /// other path in full.
    pub fn display(&self, root: &Path) -> String {
        let program = self.program.strip_prefix(root).unwrap_or(&self.program).display().to_string();
        std::iter::once(program).chain(self.args.iter().cloned()).collect::<Vec<_>>().join(" ")
    }
}

/// What a finished (or stopped) command left.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    /// `None` when it was killed (timeout, interrupt) or ended by a signal.
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub truncated: bool,
    pub elapsed: Duration,
}

/// Runs `invocation` in `dir` with `timeout`; see the module's documentation for how it ends.
pub fn run(dir: &Path, invocation: &Invocation, timeout: Duration) -> Result<Output> {
    let started = Instant::now();
    let mut command = Command::new(&invocation.program);
    command
        .args(&invocation.args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("CARGO_TERM_COLOR", "never")
        .env("NO_COLOR", "1")
        .env("FORCE_COLOR", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("CI", "true");
    session::start_own(&mut command);
    let mut child = command
        .spawn()
        .map_err(|error| Error::Spawn { program: invocation.program.display().to_string(), message: error.to_string() })?;
    let mut output = session::Collector::new(child.stdout.take(), child.stderr.take());
    let mut timed_out = false;
    loop {
        output.read_for(TICK);
        if session::exited(&mut child) {
            break;
        }
        let over = started.elapsed() >= timeout;
        if over {
            timed_out = true;
            break;
        }
        if interrupted() {
            session::kill(&mut child);
            let _ = child.wait();
            return Err(Error::Interrupted);
        }
    }
    // Whatever the tool left running goes with it, before it is reaped: until then its process
    // id, which names the session and the group, cannot be given to another process.
    session::kill(&mut child);
    let status = child.wait().ok();
    output.drain(DRAIN_GRACE);
    let (stdout, stderr, truncated) = output.finish();
    let exit_code = if timed_out { None } else { status.and_then(|status| status.code()) };
    Ok(Output { stdout, stderr, exit_code, timed_out, truncated, elapsed: started.elapsed() })
}

/// One stream's kept output: its last [`OUTPUT_CAP`] bytes.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Kept {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        // Cut only once twice the cap is held, not on every read, so that a chatty run costs linear time.
        if self.bytes.len() > OUTPUT_CAP * 2 {
            self.cut();
        }
    }

    fn cut(&mut self) {
        if self.bytes.len() > OUTPUT_CAP {
            let cut = self.bytes.len() - OUTPUT_CAP;
            self.bytes.drain(..cut);
            self.truncated = true;
        }
    }

    fn finish(mut self) -> (String, bool) {
        self.cut();
        (String::from_utf8_lossy(&self.bytes).into_owned(), self.truncated)
    }
}

#[cfg(unix)]
mod session {
    use std::fs::File;
    use std::io::Read;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, ChildStderr, ChildStdout, Command};
    use std::time::{Duration, Instant};

    use super::{Kept, TICK};

    /// Makes the command start a new session, whose id (and its process group's) is its pid.
    pub(super) fn start_own(command: &mut Command) {
        // SAFETY: the closure runs in the forked child before exec and calls only setsid(2),
        // which is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| if libc::setsid() == -1 { Err(std::io::Error::last_os_error()) } else { Ok(()) });
        }
    }

    /// Whether the child has exited, without reaping it: its pid stays its own, and so the name
    /// of its session and group, until [`kill`] has run.
    pub(super) fn exited(child: &mut Child) -> bool {
        // SAFETY: waitid(2) writes only into the siginfo_t it is handed; WNOWAIT leaves the child
        // to be reaped by `Child::wait`.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let result = unsafe { libc::waitid(libc::P_PID, child.id(), &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT) };
        // SAFETY: si_pid is set by waitid when a child was found, and left zero otherwise.
        result == -1 || unsafe { info.si_pid() } != 0
    }

    /// Kills every process of the child's session and process group, the child among them.
    pub(super) fn kill(child: &mut Child) {
        let Ok(leader) = i32::try_from(child.id()) else { return };
        // SAFETY: kill(2) with a negative pid signals the process group the child leads; it
        // touches no memory.
        unsafe {
            libc::kill(-leader, libc::SIGKILL);
        }
        let _ = child.kill();
        // A process that moved to a group of its own stays in the session; a kill in flight may
        // race a fork, so the session is swept until it is empty (a few rounds at most).
        for _ in 0..8 {
            let members = members(leader);
            if members.is_empty() {
                break;
            }
            for pid in members {
                // SAFETY: as above, for one process of the session.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
        }
    }

    /// The live processes (zombies left out) of the session or group `leader` names, from /proc.
    #[cfg(target_os = "linux")]
    fn members(leader: i32) -> Vec<i32> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else { continue };
            if pid == leader {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // `pid (comm) state ppid pgrp session …`; the command name may hold spaces and parentheses.
            let Some((_, fields)) = stat.rsplit_once(')') else { continue };
            let fields: Vec<&str> = fields.split_whitespace().collect();
            let (Some(state), Some(group), Some(session)) = (fields.first(), fields.get(2), fields.get(3)) else { continue };
            let named = |field: &str| field.parse::<i32>().is_ok_and(|id| id == leader);
            if *state != "Z" && (named(group) || named(session)) {
                found.push(pid);
            }
        }
        found
    }

    /// Without /proc, the group kill is all there is.
    #[cfg(not(target_os = "linux"))]
    fn members(_leader: i32) -> Vec<i32> {
        Vec::new()
    }

    /// Reads both pipes of a child as they fill, from one thread, so that reading can stop at
    /// any moment (and the pipes be closed) rather than wait for writers that never finish.
    pub(super) struct Collector {
        streams: [(Option<File>, Kept); 2],
    }

    impl Collector {
        pub(super) fn new(stdout: Option<ChildStdout>, stderr: Option<ChildStderr>) -> Collector {
            let open = |fd: Option<OwnedFd>| fd.map(File::from);
            Collector { streams: [(open(stdout.map(OwnedFd::from)), Kept::default()), (open(stderr.map(OwnedFd::from)), Kept::default())] }
        }

        /// Reads what arrives within `wait` (returning as soon as something did).
        pub(super) fn read_for(&mut self, wait: Duration) {
            let mut fds: Vec<libc::pollfd> =
                self.streams.iter().filter_map(|(pipe, _)| pipe.as_ref()).map(|pipe| libc::pollfd { fd: pipe.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
            if fds.is_empty() {
                std::thread::sleep(wait);
                return;
            }
            let millis = libc::c_int::try_from(wait.as_millis()).unwrap_or(libc::c_int::MAX);
            // SAFETY: poll(2) reads and writes only the array it is handed, of the length given.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
            if ready <= 0 {
                return;
            }
            let mut buffer = [0u8; 64 * 1024];
            for (pipe, kept) in &mut self.streams {
                let Some(file) = pipe else { continue };
                if !fds.iter().any(|fd| fd.fd == file.as_raw_fd() && fd.revents != 0) {
                    continue;
                }
                // The pipe is readable, so one read does not block: data, or 0 at its end.
                match file.read(&mut buffer) {
                    Ok(0) => *pipe = None,
                    Ok(read) => kept.push(&buffer[..read]),
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => *pipe = None,
                }
            }
        }

        /// Reads until both pipes close or `grace` has passed; then closes them.
        pub(super) fn drain(&mut self, grace: Duration) {
            let until = Instant::now() + grace;
            while self.streams.iter().any(|(pipe, _)| pipe.is_some()) {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                self.read_for(left.min(TICK));
            }
            for (pipe, _) in &mut self.streams {
                *pipe = None;
            }
        }

        /// Standard output, standard error, and whether either lost its start to the cap.
        pub(super) fn finish(self) -> (String, String, bool) {
            let [(_, stdout), (_, stderr)] = self.streams;
            let ((stdout, cut_out), (stderr, cut_err)) = (stdout.finish(), stderr.finish());
            (stdout, stderr, cut_out || cut_err)
        }
    }
}

#[cfg(not(unix))]
mod session {
    use std::io::Read;
    use std::process::{Child, ChildStderr, ChildStdout, Command};
    use std::thread::JoinHandle;
    use std::time::Duration;

    use super::Kept;

    pub(super) fn start_own(_command: &mut Command) {}

    /// Whether the child has exited (reaping it: `Child::wait` then gives the status kept).
    pub(super) fn exited(child: &mut Child) -> bool {
        !matches!(child.try_wait(), Ok(None))
    }

    pub(super) fn kill(child: &mut Child) {
        let _ = child.kill();
    }

    /// Reads each pipe on a thread of its own until it closes.
    pub(super) struct Collector {
        readers: Vec<JoinHandle<Kept>>,
    }

    impl Collector {
        pub(super) fn new(stdout: Option<ChildStdout>, stderr: Option<ChildStderr>) -> Collector {
            let reader = |stream: Option<Box<dyn Read + Send>>| {
                std::thread::spawn(move || {
                    let mut kept = Kept::default();
                    let mut buffer = [0u8; 64 * 1024];
                    if let Some(mut stream) = stream {
                        while let Ok(read) = stream.read(&mut buffer) {
                            if read == 0 {
                                break;
                            }
                            kept.push(&buffer[..read]);
                        }
                    }
                    kept
                })
            };
            let stdout = reader(stdout.map(|stream| Box::new(stream) as Box<dyn Read + Send>));
            let stderr = reader(stderr.map(|stream| Box::new(stream) as Box<dyn Read + Send>));
            Collector { readers: vec![stdout, stderr] }
        }

        pub(super) fn read_for(&mut self, wait: Duration) {
            std::thread::sleep(wait);
        }

        pub(super) fn drain(&mut self, _grace: Duration) {}

        pub(super) fn finish(self) -> (String, String, bool) {
            let mut streams = self.readers.into_iter().map(|reader| reader.join().unwrap_or_default().finish());
            let (stdout, cut_out) = streams.next().unwrap_or_default();
            let (stderr, cut_err) = streams.next().unwrap_or_default();
            (stdout, stderr, cut_out || cut_err)
        }
    }
}
