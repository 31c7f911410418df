//! An explicit, immutable-by-default view of environment variables.
//!
//! Every resolution in this crate (paths, `.env`, `tau.toml` defaults, profile/role/language) reads
//! variables through an [`Env`] value instead of `std::env`, so tests pass a map and never touch the
//! process environment (which is global and shared by parallel test threads).
//!
//! Invariants: an `Env` is a snapshot; nothing in tau mutates the process environment (`.env`
//! values are filled into an `Env` with [`Env::fill_from`], which remembers the file, and reach
//! only what tau passes that `Env` to). Its `Debug` output lists variable names only, never
//! values, so a secret cannot leak into a log.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A snapshot of environment variables, passed explicitly to every resolution function.
///
/// It remembers which variables a file (`.env`) filled in ([`Env::fill_from`], [`Env::origin`]),
/// so an error about a value can name where it came from.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
    /// The file each variable set by [`Env::fill_from`] came from.
    origins: BTreeMap<String, PathBuf>,
}

impl Env {
    /// An empty environment (nothing set).
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of the current process environment. Variables whose name or value is not valid
    /// UTF-8 are left out (tau reads none such).
    pub fn from_process() -> Self {
        std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }

    /// The raw value of `name`, if it is set (possibly to the empty string).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// The value of `name` if it is set to something other than the empty string. tau treats a
    /// variable set to `""` like an unset one when it resolves a setting.
    pub fn non_empty(&self, name: &str) -> Option<&str> {
        self.get(name).filter(|v| !v.is_empty())
    }

    /// Whether `name` is set at all (even to the empty string). `.env` never overrides such a
    /// variable.
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// Sets `name` to `value` in this snapshot (not in the process environment); it no longer
    /// counts as coming from a file.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        let name = name.into();
        self.origins.remove(&name);
        self.vars.insert(name, value.into());
    }

    /// The file that set `name` ([`Env::fill_from`]); `None` for a variable of the process
    /// environment or one set in code.
    pub fn origin(&self, name: &str) -> Option<&Path> {
        self.origins.get(name).map(PathBuf::as_path)
    }

    /// [`Env::fill`], remembering `origin` (the `.env` file) as where each variable it sets came
    /// from.
    pub fn fill_from<'a, I>(&mut self, pairs: I, origin: &Path) -> Vec<(String, String)>
    where
        I: IntoIterator<Item = &'a (String, String)>,
    {
        let set = self.fill(pairs);
        for (name, _) in &set {
            self.origins.insert(name.clone(), origin.to_path_buf());
        }
        set
    }

    /// Sets each pair whose name is not set yet and returns the pairs it actually set, in order.
    /// A variable that is already set is never overridden; for a name given twice the first wins.
    pub fn fill<'a, I>(&mut self, pairs: I) -> Vec<(String, String)>
    where
        I: IntoIterator<Item = &'a (String, String)>,
    {
        let mut set = Vec::new();
        for (name, value) in pairs {
            if !self.is_set(name) {
                self.vars.insert(name.clone(), value.clone());
                set.push((name.clone(), value.clone()));
            }
        }
        set
    }

    /// The user's home directory from `HOME`, when it is set to an absolute path.
    pub fn user_home(&self) -> Option<PathBuf> {
        self.non_empty("HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// The names of the variables that are set, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.keys().map(String::as_str)
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Env {
    fn from_iter<T: IntoIterator<Item = (K, V)>>(iter: T) -> Self {
        Self {
            vars: iter
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            origins: BTreeMap::new(),
        }
    }
}

impl fmt::Debug for Env {
    /// Names only: values may be secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Env")
            .field("names", &self.vars.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_never_overrides_and_reports_what_it_set() {
        let mut env: Env = [("A", "1"), ("EMPTY", "")].into_iter().collect();
        let pairs = vec![
            ("A".to_string(), "x".to_string()),
            ("EMPTY".to_string(), "y".to_string()),
            ("B".to_string(), "2".to_string()),
            ("B".to_string(), "3".to_string()),
        ];
        let set = env.fill(&pairs);
        assert_eq!(set, vec![("B".to_string(), "2".to_string())]);
        assert_eq!(env.get("A"), Some("1"));
        assert_eq!(env.get("EMPTY"), Some(""));
        assert_eq!(env.non_empty("EMPTY"), None);
        assert_eq!(env.get("B"), Some("2"));
    }

    #[test]
    fn fill_from_remembers_the_file_of_what_it_set() {
        let mut env: Env = [("A", "1")].into_iter().collect();
        let pairs = vec![
            ("A".to_string(), "x".to_string()),
            ("B".to_string(), "2".to_string()),
        ];
        env.fill_from(&pairs, Path::new("/h/.env"));
        assert_eq!(env.origin("A"), None, "not set by the file");
        assert_eq!(env.origin("B"), Some(Path::new("/h/.env")));
        env.set("B", "3");
        assert_eq!(env.origin("B"), None, "set in code now");
    }

    #[test]
    fn debug_shows_names_not_values() {
        let env: Env = [("ANTHROPIC_API_KEY", "sk-secret")].into_iter().collect();
        let shown = format!("{env:?}");
        assert!(shown.contains("ANTHROPIC_API_KEY"));
        assert!(!shown.contains("sk-secret"));
    }

    #[test]
    fn user_home_requires_an_absolute_path() {
        let env: Env = [("HOME", "relative/dir")].into_iter().collect();
        assert_eq!(env.user_home(), None);
        let env: Env = [("HOME", "/home/u")].into_iter().collect();
        assert_eq!(env.user_home(), Some(PathBuf::from("/home/u")));
    }
}
