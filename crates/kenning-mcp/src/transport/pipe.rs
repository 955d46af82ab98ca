//! stdin and stdout read and written by the runtime's own threads when they are pipes or sockets.
//!
//! tokio's `Stdin` and `Stdout` do every read and write on its blocking pool, because a standard
//! stream may be a terminal or a file, which cannot be polled. Each message then crosses threads
//! twice more: the read's thread wakes a worker, and a worker wakes a pool thread to write the
//! answer. On these machines a wake-up costs about 50 µs, several times per call. An MCP client
//! spawns its server with a pipe or a socket pair on both ends (Node's `child_process` uses socket
//! pairs, Python's `subprocess` pipes), and both can be polled: [`Polled`] registers a duplicate of
//! the descriptor with the runtime, switched to non-blocking mode, and reads and writes it where
//! the transport runs. Anything else (a terminal, a regular file, `/dev/null`) is left to tokio's
//! streams.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A pipe or socket end read or written without blocking, through the runtime's reactor.
#[derive(Debug)]
pub struct Polled {
    /// A duplicate of the standard descriptor, so that dropping it leaves fd 0 or 1 open.
    file: AsyncFd<File>,
}

impl Polled {
    /// A polled duplicate of `fd` for reading, or `None` when it cannot be polled (see
    /// [`Polled::of`]).
    pub fn reader(fd: BorrowedFd<'_>) -> Option<Polled> {
        Polled::of(fd, Interest::READABLE)
    }

    /// A polled duplicate of `fd` for writing, or `None` when it cannot be polled.
    pub fn writer(fd: BorrowedFd<'_>) -> Option<Polled> {
        Polled::of(fd, Interest::WRITABLE)
    }

    /// `None` when `fd` is not a pipe or a socket, or cannot be duplicated, switched to
    /// non-blocking mode or registered; the caller then uses tokio's stream.
    fn of(fd: BorrowedFd<'_>, interest: Interest) -> Option<Polled> {
        let file = File::from(fd.try_clone_to_owned().ok()?);
        let kind = file.metadata().ok()?.file_type();
        if !(kind.is_fifo() || kind.is_socket()) {
            return None;
        }
        set_non_blocking(&file, true).ok()?;
        // SAFETY: `file` owns its descriptor, and nothing else closes or replaces it while the
        // `AsyncFd` holds `file`.
        match unsafe { AsyncFd::register_with_interest(file, interest) } {
            Ok(file) => Some(Polled { file }),
            Err(error) => {
                // Left as it was found: the process that started this one may share the pipe.
                let _ = set_non_blocking(&error.into_parts().0, false);
                None
            }
        }
    }
}

impl Drop for Polled {
    /// Puts the descriptor back in blocking mode: the mode belongs to the open pipe, which the
    /// process that started this one may go on using after this one has finished.
    fn drop(&mut self) {
        let _ = set_non_blocking(self.file.get_ref(), false);
    }
}

fn set_non_blocking(file: &File, on: bool) -> io::Result<()> {
    let fd = file.as_fd().as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file` for the duration of both calls, and
    // F_GETFL/F_SETFL read and set its status flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    let wanted = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
    // SAFETY: as above.
    if wanted != flags && unsafe { libc::fcntl(fd, libc::F_SETFL, wanted) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl AsyncRead for Polled {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.file.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match ready.try_io(|file| retry_interrupted(|| file.get_ref().read(unfilled))) {
                Ok(read) => {
                    let read = read?;
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Polled {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.file.poll_write_ready(cx))?;
            match ready.try_io(|file| retry_interrupted(|| file.get_ref().write(bytes))) {
                Ok(written) => return Poll::Ready(written),
                Err(_would_block) => continue,
            }
        }
    }

    /// Nothing is buffered: every write went to the descriptor.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn retry_interrupted<T>(mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}
