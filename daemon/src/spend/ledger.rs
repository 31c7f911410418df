//! The spend ledger: token usage and cost per day (Europe/Istanbul) and role, in memory and in
//! one small versioned JSON file of the data directory (`spend.json`).
//!
//! Invariants: the file carries [`LEDGER_VERSION`] and a newer one is never overwritten; it is
//! replaced atomically (a private temporary file, fsync, rename), 0600; at most [`MAX_DAYS`] days
//! are kept (the oldest go first); a write never replaces a newer state with an older one.
//!
//! Saving is off the turn path: one writer thread per file-backed ledger saves the latest state
//! at most once per [`SAVE_INTERVAL`] (a burst of model calls is one write), and never sooner
//! than [`SAVE_SETTLE`] after the change that woke it, and [`SpendLedger::flush`] or dropping
//! the last handle saves what is left before the thread ends. A crash loses at most the last
//! interval's and settle's tallies; the file always holds a whole state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::SpendError;

/// The version of `spend.json` this build writes.
pub const LEDGER_VERSION: u32 = 1;
/// Days kept in the ledger.
pub const MAX_DAYS: usize = 400;
/// The least time between two saves of the writer thread.
pub const SAVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a change waits before the writer saves it. A model call's tallies come just before its
/// turn writes its own records durably: saved at once, the ledger's syncs (the file's and its
/// directory's) would queue on the disk with the turn's, on every first turn after a quiet
/// second (each `tau ask`).
pub const SAVE_SETTLE: Duration = Duration::from_millis(200);

/// What one role used on one day.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Tally {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub model_calls: u64,
    /// US dollars, at the role's price when each call was made (0 without a price).
    pub cost_usd: f64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.model_calls = self.model_calls.saturating_add(other.model_calls);
        self.cost_usd += other.cost_usd;
    }
}

/// Days (`YYYY-MM-DD`) → ledger key (a role, or `<role>/fallback`) → tally.
pub type Days = BTreeMap<String, BTreeMap<String, Tally>>;

/// `spend.json` as stored.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
struct LedgerFile {
    version: u32,
    days: Days,
}

#[derive(Debug, Default)]
struct State {
    days: Days,
    /// Bumped on each change.
    generation: u64,
    /// Set when the last handle is dropped: the writer saves what is left and ends.
    closing: bool,
    /// Set while the writer waits for a change (not for its next save time): only then does a
    /// change wake it, so a burst of model calls costs the writer no wake-up each.
    writer_idle: bool,
}

/// What the handles and the writer thread share.
#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled on a change while the writer waits for one, and on closing.
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The ledger: shared tallies and the file they are saved to.
#[derive(Debug, Clone)]
pub struct SpendLedger {
    shared: Arc<Shared>,
    /// `None`: kept in memory only (tests, or a newer file that must not be overwritten).
    file: Option<Arc<LedgerFileWriter>>,
}

/// The file side of a ledger: its path, the generation on disk, and the writer thread (stopped
/// and joined when the last handle goes, after a final save).
#[derive(Debug)]
struct LedgerFileWriter {
    shared: Arc<Shared>,
    target: Arc<LedgerTarget>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct LedgerTarget {
    path: PathBuf,
    /// The generation on disk; held while writing so writes happen one at a time, in order.
    written: Mutex<u64>,
}

impl SpendLedger {
    /// A ledger kept in memory only.
    pub fn in_memory() -> Self {
        Self {
            shared: Arc::default(),
            file: None,
        }
    }

    /// The ledger saved at `path`: what it holds now (nothing when it does not exist yet). A file
    /// of a newer version is read but never written; an unreadable one is an error.
    pub fn open(path: &Path) -> Result<Self, SpendError> {
        Self::open_with_interval(path, SAVE_INTERVAL)
    }

    /// [`open`](Self::open), saving at most once per `interval` ([`SAVE_SETTLE`] after a change,
    /// or `interval` when shorter).
    pub fn open_with_interval(path: &Path, interval: Duration) -> Result<Self, SpendError> {
        Self::open_paced(path, interval, SAVE_SETTLE.min(interval))
    }

    /// [`open`](Self::open), saving at most once per `interval` and `settle` after a change.
    fn open_paced(path: &Path, interval: Duration, settle: Duration) -> Result<Self, SpendError> {
        let (days, writable) = match std::fs::read(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Days::new(), true),
            Err(e) => return Err(SpendError::io(path, &e)),
            Ok(bytes) => {
                let file: LedgerFile = serde_json::from_slice(&bytes)
                    .map_err(|e| SpendError::Format(format!("{}: {e}", path.display())))?;
                if file.version > LEDGER_VERSION {
                    tracing::warn!(
                        path = %path.display(),
                        version = file.version,
                        "the spend ledger was written by a newer tau; spend is counted in memory only"
                    );
                }
                (file.days, file.version <= LEDGER_VERSION)
            }
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                days,
                ..State::default()
            }),
            changed: Condvar::new(),
        });
        let file = if writable {
            let target = Arc::new(LedgerTarget {
                path: path.to_path_buf(),
                written: Mutex::new(0),
            });
            let thread = std::thread::Builder::new()
                .name("tau-spend-writer".into())
                .spawn({
                    let shared = Arc::clone(&shared);
                    let target = Arc::clone(&target);
                    move || write_loop(&shared, &target, interval, settle)
                })
                .map_err(|e| SpendError::io(path, &e))?;
            Some(Arc::new(LedgerFileWriter {
                shared: Arc::clone(&shared),
                target,
                thread: Mutex::new(Some(thread)),
            }))
        } else {
            None
        };
        Ok(Self { shared, file })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.shared.lock()
    }

    /// Adds `tally` to `key` on `day`; the writer thread saves it soon.
    pub fn add(&self, day: &str, key: &str, tally: &Tally) {
        let mut state = self.lock();
        state
            .days
            .entry(day.to_owned())
            .or_default()
            .entry(key.to_owned())
            .or_default()
            .add(tally);
        while state.days.len() > MAX_DAYS {
            state.days.pop_first();
        }
        state.generation += 1;
        let wake = state.writer_idle;
        drop(state);
        if wake {
            self.shared.changed.notify_all();
        }
    }

    /// Saves what is not saved yet, now, on the calling thread (a blocking write).
    pub fn flush(&self) -> Result<(), SpendError> {
        match &self.file {
            None => Ok(()),
            Some(writer) => {
                let (generation, days) = {
                    let state = self.lock();
                    (state.generation, state.days.clone())
                };
                writer.target.save(generation, days)
            }
        }
    }

    /// The tallies of `day`, by key.
    pub fn day(&self, day: &str) -> BTreeMap<String, Tally> {
        self.lock().days.get(day).cloned().unwrap_or_default()
    }

    /// Every day kept, oldest first.
    pub fn days(&self) -> Days {
        self.lock().days.clone()
    }
}

/// The writer thread: waits for a change, saves it `settle` later and at most once per
/// `interval`, and on closing saves what is left and returns.
fn write_loop(shared: &Shared, target: &LedgerTarget, interval: Duration, settle: Duration) {
    let mut seen = 0;
    let mut last_save: Option<Instant> = None;
    let mut state = shared.lock();
    loop {
        while state.generation == seen && !state.closing {
            state.writer_idle = true;
            state = shared
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.writer_idle = false;
        if state.generation == seen {
            return;
        }
        // An interval or settle too long for the clock saves at once rather than overflowing.
        let now = Instant::now();
        let settled = now.checked_add(settle).unwrap_or(now);
        let due = last_save
            .and_then(|at| at.checked_add(interval))
            .map_or(settled, |paced| paced.max(settled));
        while !state.closing {
            let Some(left) = due.checked_duration_since(Instant::now()) else {
                break;
            };
            state = shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let (generation, days) = (state.generation, state.days.clone());
        drop(state);
        if let Err(e) = target.save(generation, days) {
            tracing::warn!("the spend ledger could not be saved: {e}");
        }
        seen = generation;
        last_save = Some(Instant::now());
        state = shared.lock();
    }
}

impl Drop for LedgerFileWriter {
    fn drop(&mut self) {
        self.shared.lock().closing = true;
        self.shared.changed.notify_all();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::warn!("the spend ledger's writer thread panicked");
        }
    }
}

impl LedgerTarget {
    fn save(&self, generation: u64, days: Days) -> Result<(), SpendError> {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if *written >= generation {
            return Ok(());
        }
        let file = LedgerFile {
            version: LEDGER_VERSION,
            days,
        };
        let bytes =
            serde_json::to_vec_pretty(&file).map_err(|e| SpendError::Format(e.to_string()))?;
        write_atomically(&self.path, &bytes)?;
        *written = generation;
        Ok(())
    }
}

/// Replaces `path` with `bytes` durably (0600), making its directory first.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), SpendError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| SpendError::io(dir, &e))?;
    tau_api::durable_file::write_atomic(path, bytes).map_err(|e| SpendError::io(path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(input: u64, cost: f64) -> Tally {
        Tally {
            input_tokens: input,
            model_calls: 1,
            cost_usd: cost,
            ..Tally::default()
        }
    }

    #[test]
    fn tallies_add_up_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let ledger = SpendLedger::open(&path).unwrap();
        ledger.add("2026-12-01", "fast", &tally(10, 0.5));
        ledger.add("2026-12-01", "fast", &tally(5, 0.25));
        ledger.add("2026-12-02", "brain/fallback", &tally(7, 0.0));
        ledger.flush().unwrap();
        let again = SpendLedger::open(&path).unwrap();
        assert_eq!(again.days(), ledger.days());
        let fast = again.day("2026-12-01")["fast"];
        assert_eq!((fast.input_tokens, fast.model_calls), (15, 2));
        assert!((fast.cost_usd - 0.75).abs() < 1e-12);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!path.with_extension("json.tmp").exists());
    }

    #[test]
    fn the_fixture_of_version_1_reads() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spend-v1.json");
        let ledger = SpendLedger::open(&fixture).unwrap();
        let day = ledger.day("2026-12-01");
        assert_eq!(day["fast"].input_tokens, 120_000);
        assert_eq!(day["fast"].cache_read_tokens, 40_000);
        assert!((day["fast"].cost_usd - 0.12).abs() < 1e-12);
        assert_eq!(day["brain/fallback"].model_calls, 2);
    }

    #[test]
    fn a_newer_ledger_is_read_but_never_overwritten_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let newer = r#"{"version": 99, "days": {"2026-12-01": {"fast": {"input_tokens": 3}}}}"#;
        std::fs::write(&path, newer).unwrap();
        let ledger = SpendLedger::open(&path).unwrap();
        assert_eq!(ledger.day("2026-12-01")["fast"].input_tokens, 3);
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), newer);
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(
            SpendLedger::open(&path),
            Err(SpendError::Format(_))
        ));
    }

    fn stored_calls(path: &Path) -> u64 {
        let again = SpendLedger::open(path).unwrap();
        again
            .day("2026-12-01")
            .get("fast")
            .map_or(0, |t| t.model_calls)
    }

    /// Waits (at most 10 s) until the file at `path` holds `calls` model calls.
    fn wait_for_stored_calls(path: &Path, calls: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !path.exists() || stored_calls(path) != calls {
            assert!(Instant::now() < deadline, "{what} was never saved");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn saves_are_paced_and_what_is_left_is_saved_when_the_last_handle_goes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let ledger = SpendLedger::open_with_interval(&path, Duration::from_secs(3600)).unwrap();
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        // The first change is saved once it settled.
        wait_for_stored_calls(&path, 1, "the first change");
        // A burst within the interval is not written one call at a time.
        let clone = ledger.clone();
        for _ in 0..99 {
            clone.add("2026-12-01", "fast", &tally(1, 0.0));
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(stored_calls(&path), 1);
        drop(clone);
        assert_eq!(stored_calls(&path), 1, "a clone going saves nothing");
        // The last handle going saves the rest before it returns.
        drop(ledger);
        assert_eq!(stored_calls(&path), 100);
    }

    #[test]
    fn a_change_made_while_the_writer_waits_out_its_interval_is_saved_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let ledger = SpendLedger::open_with_interval(&path, Duration::from_millis(300)).unwrap();
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        wait_for_stored_calls(&path, 1, "the first change");
        // The writer now waits for its next save time; this change does not wake it, and is
        // saved when that time comes, with the handle still open.
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        wait_for_stored_calls(&path, 2, "the paced change");
        drop(ledger);
        assert_eq!(stored_calls(&path), 2);
    }

    #[test]
    fn a_change_is_saved_only_once_it_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let hour = Duration::from_secs(3600);
        let ledger = SpendLedger::open_paced(&path, hour, hour).unwrap();
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!path.exists(), "saved before the change settled");
        // The last handle going does not wait for the settle time.
        drop(ledger);
        assert_eq!(stored_calls(&path), 1);
        // With the default pacing a change is saved while the handle is open.
        let ledger = SpendLedger::open(&path).unwrap();
        ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        wait_for_stored_calls(&path, 2, "a settled change");
        drop(ledger);
    }

    #[test]
    fn flush_saves_now_and_an_untouched_ledger_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spend.json");
        let ledger = SpendLedger::open_with_interval(&path, Duration::from_secs(3600)).unwrap();
        ledger.flush().unwrap();
        drop(ledger);
        assert!(!path.exists());
        let ledger = SpendLedger::open_with_interval(&path, Duration::from_secs(3600)).unwrap();
        for _ in 0..5 {
            ledger.add("2026-12-01", "fast", &tally(1, 0.0));
        }
        ledger.flush().unwrap();
        assert_eq!(stored_calls(&path), 5);
    }

    #[test]
    fn only_the_newest_days_are_kept() {
        let ledger = SpendLedger::in_memory();
        for day in 0..(MAX_DAYS + 5) {
            ledger.add(&format!("d{day:05}"), "fast", &tally(1, 0.0));
        }
        let days = ledger.days();
        assert_eq!(days.len(), MAX_DAYS);
        assert!(days.contains_key(&format!("d{:05}", MAX_DAYS + 4)));
        assert!(!days.contains_key("d00000"));
    }
}
