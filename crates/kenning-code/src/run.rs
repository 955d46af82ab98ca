//! Running a detected tool: a fixed program and argument list (never a shell string), in the
//! repository, with a timeout that kills the whole process group, and output kept up to a cap.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kenning_core::interrupt::interrupted;

use crate::error::{Error, Result};

/// The most output kept from each stream; the end is kept, since summaries come last.
pub const OUTPUT_CAP: usize = 512 * 1024;

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

    /// The command as a person would type it (for reports; never executed as text).
    pub fn display(&self) -> String {
        let program = self.program.file_name().map_or_else(|| self.program.display().to_string(), |name| name.to_string_lossy().into_owned());
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

/// Runs `invocation` in `dir` with `timeout`, killing its process group when time is up or
/// the request is interrupted.
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
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|error| Error::Spawn { program: invocation.program.display().to_string(), message: error.to_string() })?;
    let truncated = Arc::new(Mutex::new(false));
    let reader = |stream: Option<Box<dyn Read + Send>>| {
        let truncated = truncated.clone();
        std::thread::spawn(move || {
            let mut kept: Vec<u8> = Vec::new();
            if let Some(mut stream) = stream {
                let mut buffer = [0u8; 8192];
                while let Ok(read) = stream.read(&mut buffer) {
                    if read == 0 {
                        break;
                    }
                    kept.extend_from_slice(&buffer[..read]);
                    if kept.len() > OUTPUT_CAP * 2 {
                        let cut = kept.len() - OUTPUT_CAP;
                        kept.drain(..cut);
                        *truncated.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
                    }
                }
            }
            if kept.len() > OUTPUT_CAP {
                let cut = kept.len() - OUTPUT_CAP;
                kept.drain(..cut);
                *truncated.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
            }
            String::from_utf8_lossy(&kept).into_owned()
        })
    };
    let stdout = reader(child.stdout.take().map(|stream| Box::new(stream) as Box<dyn Read + Send>));
    let stderr = reader(child.stderr.take().map(|stream| Box::new(stream) as Box<dyn Read + Send>));
    let mut timed_out = false;
    let mut interrupted_early = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) => {}
            Err(_) => break None,
        }
        let over = started.elapsed() >= timeout;
        if over || interrupted() {
            timed_out = over;
            interrupted_early = !over;
            kill_group(&mut child);
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    if interrupted_early {
        return Err(Error::Interrupted);
    }
    let truncated = *truncated.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok(Output { stdout, stderr, exit_code: status.and_then(|status| status.code()), timed_out, truncated, elapsed: started.elapsed() })
}

/// Kills the child and everything it started (cargo's test binaries, pytest's workers).
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the process group the child leads (it
        // was started with process_group(0)); it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}
