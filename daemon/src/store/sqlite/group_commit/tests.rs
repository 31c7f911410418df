use super::*;

use std::path::Path;
use std::sync::Arc;
use std::thread;

/// A write path over a fresh WAL database with one table `t (k INTEGER PRIMARY KEY, v TEXT)`.
fn writer_on(dir: &Path) -> GroupCommit {
    let conn = Connection::open(dir.join("t.db")).unwrap();
    let _: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .unwrap();
    conn.pragma_update(None, "synchronous", "FULL").unwrap();
    conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    GroupCommit::new(conn)
}

fn insert(conn: &Connection, k: i64) -> Result<(), SessionError> {
    conn.execute("INSERT INTO t (k, v) VALUES (?1, 'x')", [k])?;
    Ok(())
}

/// The keys committed, as another connection sees them.
fn committed(dir: &Path) -> Vec<i64> {
    let conn = Connection::open(dir.join("t.db")).unwrap();
    let mut stmt = conn.prepare("SELECT k FROM t ORDER BY k").unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Waits until `n` jobs are staged (another thread's write reached its wait).
/// Writes row `k` from a thread of its own.
fn insert_on_thread(
    writer: &Arc<GroupCommit>,
    k: i64,
) -> thread::JoinHandle<Result<(), SessionError>> {
    let writer = Arc::clone(writer);
    thread::spawn(move || writer.write(|conn| insert(conn, k)))
}

fn wait_staged(writer: &GroupCommit, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while writer.staged() != n {
        assert!(Instant::now() < deadline, "never saw {n} staged jobs");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_lone_write_commits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer_on(dir.path());
    for k in 0..3 {
        writer.write(|conn| insert(conn, k)).unwrap();
        assert_eq!(committed(dir.path()).len() as i64, k + 1);
    }
    assert_eq!(writer.commits(), 3);
    assert_eq!(writer.staged(), 0);
}

#[test]
fn a_failing_job_in_a_batch_does_not_undo_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(writer_on(dir.path()));
    let held = writer.hold_commits();
    let first = insert_on_thread(&writer, 1);
    wait_staged(&writer, 1);
    // Writes its own row, then fails: its row goes, the first job's stays staged.
    let failed = writer.write(|conn| {
        insert(conn, 2)?;
        insert(conn, 1)
    });
    assert!(
        matches!(failed, Err(SessionError::Database(_))),
        "{failed:?}"
    );
    assert_eq!(writer.staged(), 1);
    assert!(committed(dir.path()).is_empty(), "nothing committed yet");
    let third = insert_on_thread(&writer, 3);
    wait_staged(&writer, 2);
    // The last arrival leaves: one commit for both staged jobs.
    drop(held);
    first.join().unwrap().unwrap();
    third.join().unwrap().unwrap();
    assert_eq!(committed(dir.path()), [1, 3]);
    assert_eq!(writer.commits(), 1, "one commit for the whole batch");
}

#[test]
fn a_panicking_last_job_still_commits_the_batch_and_the_writer_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(writer_on(dir.path()));
    let held = writer.hold_commits();
    let first = insert_on_thread(&writer, 1);
    wait_staged(&writer, 1);
    // The pretend arrival goes away without committing: the panicking job is the last arrival.
    std::mem::forget(held);
    writer.arriving.fetch_sub(1, Ordering::SeqCst);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        writer.write(|conn| -> Result<(), SessionError> {
            insert(conn, 2)?;
            panic!("a job that panics");
        })
    }));
    assert!(caught.is_err(), "the panic reaches its own caller");
    first.join().unwrap().unwrap();
    assert_eq!(committed(dir.path()), [1]);
    assert_eq!(writer.commits(), 1);
    writer.write(|conn| insert(conn, 3)).unwrap();
    assert_eq!(committed(dir.path()), [1, 3]);
}

#[test]
fn a_full_batch_commits_without_waiting_for_more() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(writer_on(dir.path()));
    // Someone is always "arriving": only the batch limit can commit.
    let _held = writer.hold_commits();
    let threads: Vec<_> = (0..MAX_BATCH as i64)
        .map(|k| {
            let writer = Arc::clone(&writer);
            thread::spawn(move || writer.write(|conn| insert(conn, k)))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap().unwrap();
    }
    assert_eq!(committed(dir.path()).len(), MAX_BATCH);
    assert_eq!(writer.commits(), 1);
}

#[test]
fn a_job_that_fails_alone_leaves_no_transaction_open() {
    let dir = tempfile::tempdir().unwrap();
    let writer = writer_on(dir.path());
    writer.write(|conn| insert(conn, 1)).unwrap();
    assert!(writer.write(|conn| insert(conn, 1)).is_err());
    // Another connection can take the write lock at once: nothing was left holding it.
    let other = Connection::open(dir.path().join("t.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE; ROLLBACK").unwrap();
    assert_eq!(writer.commits(), 1);
}

#[test]
fn many_threads_writing_at_once_each_see_their_own_writes() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(writer_on(dir.path()));
    let threads: Vec<_> = (0..8i64)
        .map(|t| {
            let writer = Arc::clone(&writer);
            let dir = dir.path().to_path_buf();
            thread::spawn(move || {
                for i in 0..25 {
                    let k = t * 1000 + i;
                    writer.write(|conn| insert(conn, k)).unwrap();
                    // Returned means committed: another connection sees it.
                    assert!(committed(&dir).contains(&k), "{k} not visible");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(committed(dir.path()).len(), 200);
    assert!(writer.commits() <= 200);
}
