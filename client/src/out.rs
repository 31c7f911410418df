//! The client's standard output: what a command prints goes through `outln!` and `out!`, so a
//! reader that has gone away (`tau routine list | head -1`) ends the command quietly with status 0
//! (`cat` and `grep` are ended quietly by the pipe's signal), instead of the panic `println!`
//! gives.
//!
//! Invariant: the macros are the only way a command prints text to stdout (`clippy::print_stdout`
//! is denied in the crate); the writers that take stdout as an `io::Write` (the chat renderer, the
//! TUI's terminal, completions and the manual) return its errors, and `main` ends a broken pipe
//! among them the same quiet way ([`is_broken_pipe`]). Any other failure to write is reported on
//! stderr with status 1.

use std::fmt::Arguments;
use std::io::{self, ErrorKind, Write as _};
use std::process::exit;

/// Prints a line to stdout (see the module documentation).
macro_rules! outln {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Prints to stdout without a newline (see the module documentation).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// Writes `args` to stdout; a reader gone ends the process with success, another failure with
/// status 1 and one line on stderr.
pub fn write(args: Arguments<'_>) {
    if let Err(error) = io::stdout().lock().write_fmt(args) {
        if error.kind() == ErrorKind::BrokenPipe {
            exit(0);
        }
        eprintln!("tau: writing to stdout: {error}");
        exit(1);
    }
}

/// Whether `error` (or what caused it) is a write to a pipe whose reader has gone.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}
