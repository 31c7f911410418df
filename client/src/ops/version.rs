//! `tau version`: the versions of `tau` and of the `taud` binary it would start.
//!
//! taud's version is asked from the binary itself (`taud --version`), so a stale daemon binary next
//! to a new client shows up here instead of being assumed. The answer is kept in
//! `<TAU_DATA_DIR>/cache/taud-version.json`, keyed by the binary's path, size, modification time
//! and inode: the next `tau version` reads it instead of starting taud, and any change to the
//! binary asks it again. A cache that cannot be read or written is only slower, never wrong.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use serde::Serialize;

use crate::cli::VersionArgs;
use crate::context::Context;
use crate::environment;

#[derive(Debug, Serialize)]
struct Versions {
    tau: &'static str,
    /// None when no taud binary was found or it did not answer.
    taud: Option<String>,
    taud_path: Option<PathBuf>,
}

/// Prints the versions; exit 0 even when taud is missing (that is information, not an error).
pub fn run(args: &VersionArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let taud_path = find_taud(ctx);
    let cache = cache_file(ctx);
    let taud = taud_path
        .as_ref()
        .and_then(|path| cached_taud_version(path, ctx, cache.as_deref()));
    let versions = Versions {
        tau: tau_api::VERSION,
        taud,
        taud_path,
    };
    if args.json {
        outln!("{}", serde_json::to_string(&versions)?);
    } else {
        outln!("tau  {}", versions.tau);
        match (&versions.taud, &versions.taud_path) {
            (Some(version), _) => outln!("taud {version}"),
            (None, Some(path)) => outln!("taud did not report a version ({})", path.display()),
            (None, None) => outln!("taud not found (next to tau or on PATH)"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The `taud` binary `tau` would start: next to this executable, else on PATH (the same lookup as
/// `tau hub run` and `tau chat`).
fn find_taud(ctx: &Context) -> Option<PathBuf> {
    let env = environment::snapshot(ctx);
    crate::hub_link::auto_start::find_taud(
        environment::exe_dir().as_deref(),
        env.get("PATH").map(std::ffi::OsStr::new),
    )
}

fn taud_version(path: &PathBuf, ctx: &Context) -> Option<String> {
    let mut command = Command::new(path);
    command
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    ctx.export_to(&mut command);
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    // clap prints "taud 0.1.0".
    text.split_whitespace().nth(1).map(str::to_owned)
}

/// The cache file, when the data directory exists (`tau version` creates no installation).
fn cache_file(ctx: &Context) -> Option<PathBuf> {
    let env = environment::snapshot(ctx);
    let cwd = environment::current_dir().ok()?;
    let paths = tau_api::paths::Paths::resolve(&env, &cwd, env.user_home().as_deref()).ok()?;
    paths
        .data_dir
        .is_dir()
        .then(|| paths.data_dir.join("cache").join(CACHE_FILE))
}

/// The cache's file name and format version.
const CACHE_FILE: &str = "taud-version.json";
const CACHE_VERSION: u32 = 1;

#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
struct CachedVersion {
    v: u32,
    /// The binary it was asked from: path, size, modification time (ns) and inode.
    binary: String,
    version: String,
}

/// What identifies one build of the binary at `path`; `None` when it cannot be read.
fn binary_key(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(format!(
        "{}|{}|{}.{}|{}",
        path.display(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ino()
    ))
}

/// The version of the binary at `path`: from `cache` when it names this very binary, else asked
/// (and kept in `cache` for the next time).
fn cached_taud_version(path: &PathBuf, ctx: &Context, cache: Option<&Path>) -> Option<String> {
    let key = binary_key(path);
    if let (Some(cache), Some(key)) = (cache, key.as_deref())
        && let Some(version) = read_cache(cache, key)
    {
        return Some(version);
    }
    let version = taud_version(path, ctx)?;
    if let (Some(cache), Some(binary)) = (cache, key) {
        write_cache(cache, binary, &version);
    }
    Some(version)
}

fn read_cache(cache: &Path, key: &str) -> Option<String> {
    let text = std::fs::read(cache).ok()?;
    let cached: CachedVersion = serde_json::from_slice(&text).ok()?;
    (cached.v == CACHE_VERSION && cached.binary == key).then_some(cached.version)
}

fn write_cache(cache: &Path, binary: String, version: &str) {
    let cached = CachedVersion {
        v: CACHE_VERSION,
        binary,
        version: version.to_owned(),
    };
    let Ok(bytes) = serde_json::to_vec(&cached) else {
        return;
    };
    if let Some(dir) = cache.parent() {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir);
    }
    // Only slower next time if it fails.
    let _ = tau_api::durable_file::write_atomic(cache, &bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_answers_only_for_the_same_binary() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("taud");
        std::fs::write(&binary, b"one build").unwrap();
        let cache = dir.path().join("cache").join(CACHE_FILE);
        let key = binary_key(&binary).unwrap();
        assert_eq!(read_cache(&cache, &key), None);
        write_cache(&cache, key.clone(), "0.1.0");
        assert_eq!(read_cache(&cache, &key).as_deref(), Some("0.1.0"));
        std::fs::write(&binary, b"another, longer build").unwrap();
        let changed = binary_key(&binary).unwrap();
        assert_ne!(changed, key);
        assert_eq!(
            read_cache(&cache, &changed),
            None,
            "a changed binary is asked again"
        );
        std::fs::write(&cache, b"{\"v\":9}").unwrap();
        assert_eq!(read_cache(&cache, &key), None);
    }
}
