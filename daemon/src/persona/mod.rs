//! The persona: tau's system prompt, rebuilt before every model call.
//!
//! Owns: loading `persona/persona.md` and `persona/user.md`, the merge of the context sources, and
//! the fixed prompt layout:
//!
//! ```text
//! <persona/persona.md>
//!
//! ## User
//! <persona/user.md, or: No user file (persona/user.md). Address the user formally.>
//!
//! ## Now
//! - Date and time: 29.09.2026 15:30, Tuesday (Europe/Istanbul)
//! - Profile: home
//! - Host role: hub
//! - Live nodes: unknown
//! - Budget today: unknown
//! ```
//!
//! Invariants:
//! - the prompt is three blocks: persona + `## User` (stable, ends with a newline), a cache point,
//!   then `## Now`; [`PersonaLoader::build_system_prompt`] is exactly
//!   [`SystemContentBlock::join`] of them, so the one-string form equals the layout above;
//! - a file is re-read only when its (mtime, size) changes, HTML comments never reach the model,
//!   and a file that breaks after a good read keeps its last good version (see `file`);
//! - a missing, empty or unreadable persona.md at construction is a [`PersonaError`] naming the
//!   path; a missing or empty user.md is the formal fallback line, never an error;
//! - the scaffolding (headings, labels, `unknown`) is English; what no layer knows reads `unknown`
//!   and an empty node list reads `none`;
//! - every method is synchronous and safe to call from many threads at once; locks are held only
//!   for a stat and a small read, never while a context source runs.
mod now_sources;
mod watched_file;

#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::tz::TimeZone;

pub use self::now_sources::{ContextPatch, ContextSource, ContextSourceError, NowContext};
use self::now_sources::{ContextSources, one_line};
use self::watched_file::{FirstReadError, Problem, WatchedFile};
use crate::clock;
pub use crate::clock::{Clock, SystemClock, TIME_ZONE};
use crate::message::{CachePoint, SystemContentBlock};

/// The shipped persona (the repository's `persona/persona.md`), for `tau init` and for a hub with
/// no persona directory.
pub const SHIPPED_PERSONA: &str = include_str!("../../../persona/persona.md");

/// The shipped, made-up user template (the repository's `persona/user.example.md`).
pub const SHIPPED_USER_EXAMPLE: &str = include_str!("../../../persona/user.example.md");

/// The persona file inside a persona directory.
pub const PERSONA_FILE: &str = "persona.md";

/// The user file inside a persona directory.
pub const USER_FILE: &str = "user.md";

/// The `## User` text when there is no (or an empty) user file.
pub const NO_USER_FILE: &str = "No user file (persona/user.md). Address the user formally.";

/// What a value no layer provides reads.
pub const UNKNOWN: &str = "unknown";

/// What an empty list of live nodes reads.
pub const NO_NODES: &str = "none";

/// persona.md could not be used when the loader was built.
#[derive(Debug, thiserror::Error)]
pub enum PersonaError {
    #[error("persona file {} does not exist (run `tau init` to write one)", .path.display())]
    Missing { path: PathBuf },
    #[error("persona file {} is empty (or holds only HTML comments)", .path.display())]
    Empty { path: PathBuf },
    #[error("persona file {} is not valid UTF-8", .path.display())]
    NotUtf8 { path: PathBuf },
    #[error("cannot read persona file {}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl PersonaError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            PersonaError::Missing { path }
            | PersonaError::Empty { path }
            | PersonaError::NotUtf8 { path }
            | PersonaError::Unreadable { path, .. } => path,
        }
    }

    fn from_first_read(path: PathBuf, err: FirstReadError) -> Self {
        match err.problem {
            Problem::Missing => PersonaError::Missing { path },
            Problem::Empty => PersonaError::Empty { path },
            Problem::NotUtf8 => PersonaError::NotUtf8 { path },
            Problem::Unreadable(kind) => PersonaError::Unreadable {
                path,
                source: err.source.unwrap_or_else(|| io::Error::from(kind)),
            },
        }
    }
}

/// Where the persona text comes from.
#[derive(Debug)]
enum PersonaText {
    File(WatchedFile),
    Shipped(Arc<str>),
}

/// Builds tau's system prompt from the persona files, the clock and the context sources.
/// Cheap to call before every model call; share it behind an `Arc`.
pub struct PersonaLoader {
    persona: PersonaText,
    user: Option<WatchedFile>,
    profile: String,
    host_role: String,
    context: ContextSources,
    clock: Arc<dyn Clock>,
    zone: TimeZone,
}

impl PersonaLoader {
    /// Reads `<persona_dir>/persona.md` (required) and `<persona_dir>/user.md` (optional).
    /// `profile` and `host_role` are shown in `## Now` (empty reads `unknown`); `sources` are
    /// merged in order; `clock` gives the current time.
    pub fn new(
        persona_dir: impl AsRef<Path>,
        profile: impl Into<String>,
        host_role: impl Into<String>,
        sources: Vec<Arc<dyn ContextSource>>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, PersonaError> {
        let dir = persona_dir.as_ref();
        let persona_path = dir.join(PERSONA_FILE);
        let persona = WatchedFile::required(persona_path.clone())
            .map_err(|err| PersonaError::from_first_read(persona_path, err))?;
        let user = WatchedFile::optional(dir.join(USER_FILE));
        Ok(Self::assemble(
            PersonaText::File(persona),
            Some(user),
            profile.into(),
            host_role.into(),
            sources,
            clock,
        ))
    }

    /// Checks that `<persona_dir>/persona.md` can be used (exists, readable UTF-8, not empty),
    /// as [`PersonaLoader::new`] would; for a start-up check before anything is served.
    pub fn check(persona_dir: impl AsRef<Path>) -> Result<(), PersonaError> {
        let persona_path = persona_dir.as_ref().join(PERSONA_FILE);
        WatchedFile::required(persona_path.clone())
            .map(drop)
            .map_err(|err| PersonaError::from_first_read(persona_path, err))
    }

    /// A loader on the shipped persona and no user file, for a hub that has no persona directory
    /// (built-in defaults: it must work offline with no files at all).
    pub fn shipped(
        profile: impl Into<String>,
        host_role: impl Into<String>,
        sources: Vec<Arc<dyn ContextSource>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let persona = PersonaText::Shipped(Arc::from(watched_file::clean(SHIPPED_PERSONA)));
        Self::assemble(
            persona,
            None,
            profile.into(),
            host_role.into(),
            sources,
            clock,
        )
    }

    fn assemble(
        persona: PersonaText,
        user: Option<WatchedFile>,
        profile: String,
        host_role: String,
        sources: Vec<Arc<dyn ContextSource>>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            persona,
            user,
            profile,
            host_role,
            context: ContextSources::new(sources),
            clock,
            zone: clock::istanbul(),
        }
    }

    /// The persona.md in use, or `None` for the shipped persona.
    pub fn persona_path(&self) -> Option<&Path> {
        match &self.persona {
            PersonaText::File(file) => Some(file.path()),
            PersonaText::Shipped(_) => None,
        }
    }

    /// The user.md watched, or `None` for the shipped persona.
    pub fn user_path(&self) -> Option<&Path> {
        self.user.as_ref().map(WatchedFile::path)
    }

    /// How many context sources are merged.
    pub fn context_source_count(&self) -> usize {
        self.context.len()
    }

    /// The system prompt as the model receives it: the stable text (persona + `## User`, ending
    /// with a newline), a cache point, then the `## Now` block.
    pub fn build_system_content(&self) -> Vec<SystemContentBlock> {
        vec![
            SystemContentBlock::Text(self.stable_text()),
            SystemContentBlock::CachePoint(CachePoint::default()),
            SystemContentBlock::Text(self.now_text()),
        ]
    }

    /// The same prompt as one string, for tests and logging.
    pub fn build_system_prompt(&self) -> String {
        SystemContentBlock::join(&self.build_system_content())
    }

    /// The merged context the `## Now` block shows right now (runs every source).
    pub fn now_context(&self) -> NowContext {
        self.context.merged()
    }

    /// `<persona>\n\n## User\n<user or fallback>\n`.
    fn stable_text(&self) -> String {
        let persona: Arc<str> = match &self.persona {
            PersonaText::File(file) => file.current().unwrap_or_else(|| Arc::from("")),
            PersonaText::Shipped(text) => Arc::clone(text),
        };
        let user = self.user.as_ref().and_then(WatchedFile::current);
        let user: &str = user.as_deref().unwrap_or(NO_USER_FILE);
        // Sized once (`concat`): `format!` would grow a persona of a few KiB through several copies.
        [&*persona, "\n\n## User\n", user, "\n"].concat()
    }

    /// The `## Now` block, without a trailing newline.
    fn now_text(&self) -> String {
        let context = self.context.merged();
        let date_time =
            clock::format_now(self.clock.now(), &self.zone).unwrap_or_else(|| UNKNOWN.to_owned());
        let nodes = match &context.nodes {
            None => UNKNOWN.to_owned(),
            Some(nodes) if nodes.is_empty() => NO_NODES.to_owned(),
            Some(nodes) => nodes.join(", "),
        };
        let budget = context.budget.unwrap_or_else(|| UNKNOWN.to_owned());
        format!(
            "## Now\n- Date and time: {date_time}\n- Profile: {}\n- Host role: {}\n- Live nodes: {nodes}\n- Budget today: {budget}",
            or_unknown(&self.profile),
            or_unknown(&self.host_role),
        )
    }
}

impl std::fmt::Debug for PersonaLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonaLoader")
            .field("persona", &self.persona)
            .field("user", &self.user)
            .field("profile", &self.profile)
            .field("host_role", &self.host_role)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

fn or_unknown(value: &str) -> String {
    let value = one_line(value);
    if value.is_empty() {
        UNKNOWN.to_owned()
    } else {
        value
    }
}

impl crate::agent::SystemPromptSource for PersonaLoader {
    /// The persona's three blocks, rebuilt before every model call (edits apply without a restart).
    fn system_content(&self) -> Vec<crate::message::SystemContentBlock> {
        self.build_system_content()
    }
}
