//! `[component.ollama]` and `[component.openai]`: the settings tables of the two providers whose
//! endpoint is usually a server the user runs, checked when `tau.toml` loads.
//!
//! Invariant: these two tables accept only `base_url`, and it is an `http://` or `https://` URL;
//! any other `[component.<name>]` table is left to its component.

use toml::{Table, Value};

use super::error::{ConfigError, key_segment, render_value};
use super::reader::Section;

/// The components whose table is checked here.
pub const PROVIDER_TABLES: &[&str] = &["ollama", "openai"];

/// Checks `[component.<name>]` when `name` is one of [`PROVIDER_TABLES`].
pub(crate) fn check(doc: &Section<'_>, name: &str, table: &Table) -> Result<(), ConfigError> {
    if !PROVIDER_TABLES.contains(&name) {
        return Ok(());
    }
    for (key, value) in table {
        let dotted = format!("component.{name}.{}", key_segment(key));
        if key != "base_url" {
            return Err(ConfigError::UnknownKey {
                file: doc.file().to_path_buf(),
                key: dotted,
                value: render_value(value),
                expected: "base_url".to_string(),
            });
        }
        match value {
            Value::String(url) if url.starts_with("http://") || url.starts_with("https://") => {}
            other => {
                return Err(ConfigError::Invalid {
                    file: doc.file().to_path_buf(),
                    key: dotted,
                    value: render_value(other),
                    expected: "an http:// or https:// URL".to_string(),
                });
            }
        }
    }
    Ok(())
}

/// `[component.<name>] base_url` of a loaded config's component tables (already checked).
pub fn base_url<'a>(
    settings: &'a std::collections::BTreeMap<String, Table>,
    name: &str,
) -> Option<&'a str> {
    settings.get(name)?.get("base_url")?.as_str()
}
