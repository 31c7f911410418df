//! A strict reader over one TOML table: it refuses keys the table does not have and turns every
//! type or range problem into a [`ConfigError`] naming the file and the dotted key.
//!
//! Invariant: a [`Section`] is only created after its keys were checked against the allowed list,
//! so the typed getters never see a key they were not asked for.

use std::path::Path;

use toml::{Table, Value};

use super::error::{ConfigError, join_or, key_segment, one_of_quoted, render_value};

/// One table of the config, with its dotted path for messages.
pub(crate) struct Section<'a> {
    file: &'a Path,
    path: String,
    table: &'a Table,
}

impl<'a> Section<'a> {
    /// Checks `table`'s keys against `allowed` and wraps it. `path` is the table's dotted key
    /// (`""` for the document root).
    pub(crate) fn new(
        file: &'a Path,
        path: String,
        table: &'a Table,
        allowed: &[&str],
    ) -> Result<Self, ConfigError> {
        let section = Self { file, path, table };
        if let Some((key, value)) = table.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            let names: Vec<String> = allowed.iter().map(|a| a.to_string()).collect();
            return Err(ConfigError::UnknownKey {
                file: file.to_path_buf(),
                key: section.key(key),
                value: render_value(value),
                expected: join_or(&names),
            });
        }
        Ok(section)
    }

    /// The file being read.
    pub(crate) fn file(&self) -> &'a Path {
        self.file
    }

    /// The dotted key of `name` in this table.
    pub(crate) fn key(&self, name: &str) -> String {
        if self.path.is_empty() {
            key_segment(name)
        } else {
            format!("{}.{}", self.path, key_segment(name))
        }
    }

    /// The raw value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&'a Value> {
        self.table.get(name)
    }

    /// An [`ConfigError::Invalid`] for `name` holding `value`.
    pub(crate) fn invalid(
        &self,
        name: &str,
        value: &Value,
        expected: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            file: self.file.to_path_buf(),
            key: self.key(name),
            value: render_value(value),
            expected: expected.into(),
        }
    }

    /// `name`'s value, or [`ConfigError::Missing`].
    pub(crate) fn require<T>(
        &self,
        name: &str,
        value: Option<T>,
        expected: &str,
    ) -> Result<T, ConfigError> {
        value.ok_or_else(|| ConfigError::Missing {
            file: self.file.to_path_buf(),
            key: self.key(name),
            expected: expected.to_string(),
        })
    }

    /// A non-empty string.
    pub(crate) fn string(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<&'a str>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
            Some(v) => Err(self.invalid(name, v, expected)),
        }
    }

    /// A string from a closed set of `(name, value)` options.
    pub(crate) fn choice<T: Copy>(
        &self,
        name: &str,
        options: &[(&str, T)],
    ) -> Result<Option<T>, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        if let Value::String(s) = v
            && let Some((_, t)) = options.iter().find(|(o, _)| o == s)
        {
            return Ok(Some(*t));
        }
        let names: Vec<&str> = options.iter().map(|(o, _)| *o).collect();
        Err(self.invalid(name, v, one_of_quoted(&names)))
    }

    /// An integer in `min..=max`.
    pub(crate) fn int(
        &self,
        name: &str,
        min: i64,
        max: i64,
        expected: &str,
    ) -> Result<Option<i64>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Integer(i)) if (min..=max).contains(i) => Ok(Some(*i)),
            Some(v) => Err(self.invalid(name, v, expected)),
        }
    }

    /// A positive integer that fits a `u32`.
    pub(crate) fn positive_u32(&self, name: &str) -> Result<Option<u32>, ConfigError> {
        let expected = format!("a whole number from 1 to {}", u32::MAX);
        let v = self.int(name, 1, i64::from(u32::MAX), &expected)?;
        Ok(v.and_then(|i| u32::try_from(i).ok()))
    }

    /// An array of non-empty strings.
    pub(crate) fn string_list(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let Value::Array(items) = v else {
            return Err(self.invalid(name, v, expected));
        };
        items
            .iter()
            .map(|item| match item {
                Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
                _ => Err(self.invalid(name, v, expected)),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The raw sub-table `name`.
    pub(crate) fn raw_table(
        &self,
        name: &str,
        expected: &str,
    ) -> Result<Option<&'a Table>, ConfigError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(t)),
            Some(v) => Err(self.invalid(name, v, expected)),
        }
    }

    /// The sub-table `name` as a checked [`Section`] with `allowed` keys.
    pub(crate) fn table(
        &self,
        name: &str,
        allowed: &[&str],
    ) -> Result<Option<Section<'a>>, ConfigError> {
        let expected = format!(
            "a table with keys {}",
            join_or(&allowed.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        );
        match self.raw_table(name, &expected)? {
            None => Ok(None),
            Some(t) => Section::new(self.file, self.key(name), t, allowed).map(Some),
        }
    }

    /// A section over a table nested below this one at `names` (e.g. `["roles", "brain"]`),
    /// obtained by the caller while iterating.
    pub(crate) fn child(
        &self,
        names: &[&str],
        table: &'a Table,
        allowed: &[&str],
    ) -> Result<Section<'a>, ConfigError> {
        let mut path = self.path.clone();
        for name in names {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&key_segment(name));
        }
        Section::new(self.file, path, table, allowed)
    }
}
