//! Reading a person's answer to a tier-2 approval prompt on the terminal (`tau chat` on its stdin,
//! `tau ask --approve` on /dev/tty). The event that resolves a prompt elsewhere is recognised by
//! [`tau_client::feed::Item::resolves`].
//!
//! Invariants:
//! - Input typed before the prompt was shown never answers it: [`discard_typed_ahead`] flushes the
//!   terminal's pending input (`tcflush(TCIFLUSH)`) after the prompt is printed and before the
//!   answer is read.
//! - Only a complete line can approve, and only when it is `y`, `yes`, `e` or `evet` (the shared
//!   `is_approval_answer`). End of input, Ctrl-D (even after some text), a read error, a stop
//!   request and anything else reject: [`read_answer`] returns `None` for all of them.
//! - The wait can always be ended: the reader polls with a short timeout and checks its stop flag,
//!   so a prompt resolved elsewhere (or cancelled with Ctrl-C) never leaves a reader that would
//!   swallow the next line typed for the chat.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{FlushArg, tcflush};
use tokio::sync::oneshot;

/// How often the reader checks its stop flag.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The longest answer line kept; the rest of a longer line is read and dropped (it rejects anyway).
const MAX_ANSWER: usize = 1024;

/// Whether this process's stdin is a terminal (approvals can only be asked on one).
pub fn stdin_is_terminal() -> bool {
    io::stdin().is_terminal()
}

/// Discards everything typed on the terminal `fd` that has not been read yet.
pub fn discard_typed_ahead(fd: impl AsFd) -> nix::Result<()> {
    tcflush(fd, FlushArg::TCIFLUSH)
}

/// Reads one line from `fd` (a terminal in canonical mode, or a pipe in tests), waking every
/// [`POLL_INTERVAL`] to check `stop`. `Some(line)` only for a line ended by a newline; `None` on
/// end of input, on text ended by Ctrl-D instead of Enter, on an error, or when `stop` is set.
pub fn read_answer(fd: BorrowedFd<'_>, stop: &AtomicBool) -> Option<String> {
    let mut line: Vec<u8> = Vec::new();
    let mut buf = [0u8; 256];
    let timeout = PollTimeout::try_from(POLL_INTERVAL).unwrap_or(PollTimeout::NONE);
    loop {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, timeout) {
            Ok(0) | Err(Errno::EINTR) => continue,
            Ok(_) => {}
            Err(_) => return None,
        }
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        let read = match nix::unistd::read(fd, &mut buf) {
            Ok(read) => read,
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            Err(_) => return None,
        };
        let chunk = buf.get(..read)?;
        if chunk.is_empty() {
            return None;
        }
        if line.len() < MAX_ANSWER {
            line.extend_from_slice(chunk);
        }
        if chunk.ends_with(b"\n") {
            return Some(String::from_utf8_lossy(&line).into_owned());
        }
        if read < buf.len() {
            // A terminal in canonical mode hands over text without a newline only when Ctrl-D
            // ended it: that is not an answer.
            return None;
        }
    }
}

/// An answer being read from stdin on its own thread. Dropping it stops the reader.
pub struct PendingAnswer {
    stop: Arc<AtomicBool>,
    answer: oneshot::Receiver<Option<String>>,
}

impl PendingAnswer {
    /// Starts reading one answer line from stdin.
    pub fn start() -> io::Result<Self> {
        Self::spawn(None)
    }

    /// Starts reading one answer line from `input` (a terminal opened for the prompt).
    pub fn on(input: File) -> io::Result<Self> {
        Self::spawn(Some(input))
    }

    fn spawn(input: Option<File>) -> io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let (sender, answer) = oneshot::channel();
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("approval-answer".to_owned())
            .spawn(move || {
                let line = match &input {
                    Some(file) => read_answer(file.as_fd(), &flag),
                    None => read_answer(io::stdin().as_fd(), &flag),
                };
                let _ = sender.send(line);
            })?;
        Ok(Self { stop, answer })
    }

    /// The line read (`None`: no answer, which rejects).
    pub async fn line(&mut self) -> Option<String> {
        (&mut self.answer).await.ok().flatten()
    }
}

/// Shows `prompt` on the controlling terminal (/dev/tty), discards what was typed before it, and
/// starts reading the answer there.
pub fn ask_on_tty(prompt: &str) -> io::Result<PendingAnswer> {
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let mut writer = &tty;
    write!(writer, "{prompt} ")?;
    writer.flush()?;
    discard_typed_ahead(&tty).map_err(io::Error::from)?;
    PendingAnswer::on(tty)
}

impl Drop for PendingAnswer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::OwnedFd;
    use std::time::Instant;

    use super::*;

    fn pipe() -> (OwnedFd, std::fs::File) {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        (reader, std::fs::File::from(writer))
    }

    #[test]
    fn a_complete_line_is_an_answer() {
        let (reader, mut writer) = pipe();
        writer.write_all(b"evet\n").unwrap();
        let stop = AtomicBool::new(false);
        assert_eq!(
            read_answer(reader.as_fd(), &stop).as_deref(),
            Some("evet\n")
        );
    }

    #[test]
    fn end_of_input_and_text_without_newline_are_no_answer() {
        let (reader, writer) = pipe();
        drop(writer);
        let stop = AtomicBool::new(false);
        assert_eq!(read_answer(reader.as_fd(), &stop), None);

        let (reader, mut writer) = pipe();
        writer.write_all(b"y").unwrap();
        drop(writer);
        assert_eq!(read_answer(reader.as_fd(), &stop), None);
    }

    #[test]
    fn a_stop_request_ends_the_wait() {
        let (reader, _writer) = pipe();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let started = Instant::now();
        let handle = std::thread::spawn(move || read_answer(reader.as_fd(), &flag));
        stop.store(true, Ordering::SeqCst);
        assert_eq!(handle.join().unwrap(), None);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn an_overlong_line_is_kept_short_and_still_read_to_its_end() {
        let (reader, mut writer) = pipe();
        let mut long = vec![b'y'; 3000];
        long.push(b'\n');
        writer.write_all(&long).unwrap();
        let stop = AtomicBool::new(false);
        let line = read_answer(reader.as_fd(), &stop).unwrap();
        assert!(line.len() < 2000, "{}", line.len());
        assert!(!tau_api::i18n::is_approval_answer(&line));
    }

    #[test]
    fn input_typed_before_the_prompt_is_discarded_on_a_terminal() {
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut master = std::fs::File::from(pty.master);
        master.write_all(b"y\n").unwrap();
        // The line discipline hands the line over asynchronously: wait until it is readable.
        let mut fds = [PollFd::new(pty.slave.as_fd(), PollFlags::POLLIN)];
        assert_eq!(poll(&mut fds, PollTimeout::from(10_000u16)).unwrap(), 1);
        discard_typed_ahead(pty.slave.as_fd()).unwrap();
        master.write_all(b"n\n").unwrap();
        let stop = AtomicBool::new(false);
        assert_eq!(
            read_answer(pty.slave.as_fd(), &stop).as_deref(),
            Some("n\n")
        );
    }

    #[test]
    fn ctrl_d_after_some_text_on_a_terminal_is_no_answer() {
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut master = std::fs::File::from(pty.master);
        // `y` then Ctrl-D (VEOF): canonical mode hands over "y" without a newline.
        master.write_all(b"y\x04").unwrap();
        let stop = AtomicBool::new(false);
        assert_eq!(read_answer(pty.slave.as_fd(), &stop), None);
    }

    #[test]
    fn a_file_reader_answers_and_its_drop_stops_it() {
        let (reader, mut writer) = pipe();
        writer.write_all(b"y\n").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut answer = PendingAnswer::on(std::fs::File::from(reader)).unwrap();
        assert_eq!(runtime.block_on(answer.line()).as_deref(), Some("y\n"));
    }

    #[test]
    fn flushing_a_pipe_is_refused_not_a_panic() {
        let (reader, _writer) = pipe();
        assert!(discard_typed_ahead(reader.as_fd()).is_err());
    }
}
