//! The terminal: entering full-screen mode and always leaving it (drop, panic, SIGTERM), and the
//! thread that reads keys.
//!
//! Invariants:
//! - Everything turned on at entry (raw mode, alternate screen, bracketed paste) is turned off
//!   exactly once, in reverse order, whether the TUI returns, fails, panics or gets SIGTERM; the
//!   once-flag lives in the guard (shared with the panic hook), not in a global.
//! - Keys typed before the screen was up are discarded (`tcflush`), so they answer nothing.
//! - The key reader sends into a bounded channel and stops when the receiver is gone.

use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{self, DisableBracketedPaste, EnableBracketedPaste, Event};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use tokio::sync::mpsc;

/// How many terminal events may wait for the UI.
const INPUT_QUEUE: usize = 256;

/// Full-screen mode, left when dropped.
pub struct TerminalGuard {
    restored: Arc<AtomicBool>,
}

impl TerminalGuard {
    /// Enters full-screen mode and installs the panic hook that leaves it.
    pub fn enter() -> io::Result<Self> {
        let restored = Arc::new(AtomicBool::new(false));
        let hook_flag = Arc::clone(&restored);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore_once(&hook_flag);
            previous(info);
        }));
        enable_raw_mode()?;
        let mut out = io::stdout();
        execute!(out, EnterAlternateScreen, EnableBracketedPaste)?;
        // Keys typed before the screen was up were meant for something else.
        let _ = nix::sys::termios::tcflush(io::stdin(), nix::sys::termios::FlushArg::TCIFLUSH);
        Ok(Self { restored })
    }

    /// A handle that restores the terminal (for the SIGTERM path).
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.restored)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_once(&self.restored);
    }
}

/// Leaves full-screen mode unless that was done already.
pub fn restore_once(restored: &AtomicBool) {
    if restored.swap(true, Ordering::SeqCst) {
        return;
    }
    leave(&mut io::stdout());
    let _ = disable_raw_mode();
}

/// Writes the sequence that undoes the modes entered (bracketed paste, alternate screen, hidden
/// cursor), in reverse order.
fn leave(out: &mut impl Write) {
    let _ = execute!(
        out,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = out.flush();
}

/// Starts the key reader; its events arrive on the returned channel until it is dropped.
pub fn read_keys() -> mpsc::Receiver<Event> {
    let (sender, receiver) = mpsc::channel(INPUT_QUEUE);
    std::thread::spawn(move || {
        while !sender.is_closed() {
            match event::poll(Duration::from_millis(100)) {
                Ok(true) => match event::read() {
                    Ok(event) => {
                        if sender.blocking_send(event).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                Ok(false) => {}
                Err(_) => return,
            }
        }
    });
    receiver
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaving_undoes_every_mode_in_reverse_order() {
        let mut out = Vec::new();
        leave(&mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\x1b[?2004l\x1b[?1049l\x1b[?25h"
        );
    }

    #[test]
    fn the_terminal_is_restored_once() {
        let restored = AtomicBool::new(true);
        // Already restored: nothing is written and raw mode is not touched again.
        restore_once(&restored);
        assert!(restored.load(Ordering::SeqCst));
    }
}
