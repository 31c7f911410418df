//! What a process's resident memory is made of, from `/proc/PID/status` and `/proc/PID/smaps`,
//! shared by the benchmarks that report a `taud`'s RSS (`hub_idle`, `node_call`): its own
//! (anonymous) memory, the pages of its executable (file-backed: clean and shared, mapped by the
//! kernel in 64 KiB windows around the code that ran, so they follow the binary's layout more than
//! the work done), and those of the shared libraries it maps (libc, libm, the loader).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One reading, in KiB.
pub struct Resident {
    pub total: u64,
    pub anonymous: u64,
    pub executable: u64,
    pub libraries: u64,
    pub threads: u64,
}

impl Resident {
    /// Reads process `pid`, whose executable is `exe`; `None` when /proc cannot be read.
    pub fn of(pid: u32, exe: &Path) -> Option<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        let exe = exe.canonicalize().unwrap_or_else(|_| exe.to_owned());
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
        // Per mapping, its file pages are Rss less Anonymous (the executable's relocated pages,
        // copied on write, are the process's own memory and count as anonymous).
        let (mut executable, mut libraries) = (0, 0);
        let (mut path, mut rss) = (None::<PathBuf>, 0);
        let kib = |line: &str| -> u64 {
            line.split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0)
        };
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or_default();
            if first == "Rss:" {
                rss = kib(line);
            } else if first == "Anonymous:" {
                let file = rss.saturating_sub(kib(line));
                match &path {
                    Some(p) if *p == exe => executable += file,
                    Some(p) if p.is_absolute() => libraries += file,
                    _ => {}
                }
            } else if !first.ends_with(':') {
                // A mapping's header: "start-end perms offset dev inode [path]".
                path = line.split_whitespace().nth(5).map(PathBuf::from);
                rss = 0;
            }
        }
        Some(Self {
            total: field("VmRSS:"),
            anonymous: field("RssAnon:"),
            executable,
            libraries,
            threads: field("Threads:"),
        })
    }

    /// "12.3 MiB: 1.1 MiB anonymous, 9.0 MiB of the executable, 2.2 MiB of shared libraries, 2
    /// threads".
    pub fn line(&self) -> String {
        let mib = |kib: u64| kib as f64 / 1024.0;
        format!(
            "{:.1} MiB: {:.1} MiB anonymous, {:.1} MiB of the executable, {:.1} MiB of shared libraries, {} threads",
            mib(self.total),
            mib(self.anonymous),
            mib(self.executable),
            mib(self.libraries),
            self.threads
        )
    }
}

/// Which build `taud` is: its path, size and what `--version` says (a node-only build says so).
pub fn describe(taud: &Path) -> String {
    let size = std::fs::metadata(taud).map_or(0, |m| m.len());
    let version = Command::new(taud)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .unwrap_or_default();
    format!(
        "{} ({:.1} MiB): {}",
        taud.display(),
        size as f64 / (1024.0 * 1024.0),
        version.trim()
    )
}

/// The `taud` to run: `TAU_BENCH_TAUD` when set, else `built` (the one the benchmark was built
/// with).
pub fn taud_binary(built: &str) -> PathBuf {
    std::env::var_os("TAU_BENCH_TAUD").map_or_else(|| PathBuf::from(built), PathBuf::from)
}
