//! Context sources: what later layers know about the present (live nodes, today's budget).
//!
//! Owns: the `ContextSource` trait, the merge of their partial overrides, and what the `## Now`
//! block shows for them. Invariants:
//! - sources run in order before every model call and later ones override earlier ones, key by key;
//! - a patch is a JSON object: unknown keys are ignored, `null` means "unknown", a missing key
//!   leaves the value as it was;
//! - a source that fails (or returns a value of the wrong type) is skipped for that call and
//!   logged once until it works again, never on every call;
//! - no lock is held while a source runs; values are made single-line before the model reads them.
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;

/// A partial override from one source, e.g. `{"nodes": ["mac", "arm"]}` or `{"budget": null}`.
pub type ContextPatch = serde_json::Map<String, Value>;

/// Why a source could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ContextSourceError {
    message: String,
}

impl ContextSourceError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// One provider of context for the `## Now` block. It runs before every model call, so it must
/// answer quickly from a cached value. Any `Fn() -> Result<ContextPatch, ContextSourceError>` is one.
pub trait ContextSource: Send + Sync {
    fn snapshot(&self) -> Result<ContextPatch, ContextSourceError>;

    /// A short name for the log.
    fn name(&self) -> &str {
        "context source"
    }
}

impl<F> ContextSource for F
where
    F: Fn() -> Result<ContextPatch, ContextSourceError> + Send + Sync,
{
    fn snapshot(&self) -> Result<ContextPatch, ContextSourceError> {
        self()
    }
}

/// The merged dynamic context; `None` = unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NowContext {
    /// Names of the live nodes; an empty list reads `none`.
    pub nodes: Option<Vec<String>>,
    /// Today's spend, as the budget layer words it.
    pub budget: Option<String>,
}

/// The known keys of one patch, checked before any is applied.
#[derive(Debug, Default)]
struct Update {
    nodes: Option<Option<Vec<String>>>,
    budget: Option<Option<String>>,
}

impl Update {
    fn parse(patch: &ContextPatch) -> Result<Self, String> {
        let mut update = Update::default();
        if let Some(value) = patch.get("nodes") {
            update.nodes = Some(match value {
                Value::Null => None,
                Value::Array(items) => Some(
                    items
                        .iter()
                        .map(|item| match item {
                            Value::String(name) => Ok(one_line(name)),
                            other => Err(format!("'nodes' holds a non-string item: {other}")),
                        })
                        .filter(|name| !matches!(name, Ok(name) if name.is_empty()))
                        .collect::<Result<_, _>>()?,
                ),
                other => {
                    return Err(format!(
                        "'nodes' must be a list of names or null, got {other}"
                    ));
                }
            });
        }
        if let Some(value) = patch.get("budget") {
            update.budget = Some(match value {
                Value::Null => None,
                Value::String(text) => Some(one_line(text)).filter(|text| !text.is_empty()),
                other => return Err(format!("'budget' must be text or null, got {other}")),
            });
        }
        Ok(update)
    }

    fn apply(self, context: &mut NowContext) {
        if let Some(nodes) = self.nodes {
            context.nodes = nodes;
        }
        if let Some(budget) = self.budget {
            context.budget = budget;
        }
    }
}

/// The ordered sources, with which of them is currently reported as failing.
pub(crate) struct ContextSources {
    sources: Vec<Arc<dyn ContextSource>>,
    failing: Mutex<Vec<bool>>,
}

impl ContextSources {
    pub(crate) fn new(sources: Vec<Arc<dyn ContextSource>>) -> Self {
        let failing = Mutex::new(vec![false; sources.len()]);
        Self { sources, failing }
    }

    pub(crate) fn len(&self) -> usize {
        self.sources.len()
    }

    /// Runs every source in order and merges what they return.
    pub(crate) fn merged(&self) -> NowContext {
        let mut context = NowContext::default();
        for (index, source) in self.sources.iter().enumerate() {
            let outcome = source
                .snapshot()
                .map_err(|err| err.to_string())
                .and_then(|patch| Update::parse(&patch));
            match outcome {
                Ok(update) => {
                    update.apply(&mut context);
                    self.mark(index, source.name(), None);
                }
                Err(reason) => self.mark(index, source.name(), Some(&reason)),
            }
        }
        context
    }

    /// Records whether a source worked and logs a change from working to failing once.
    fn mark(&self, index: usize, name: &str, failure: Option<&str>) {
        let newly_failing = {
            let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
            match failing.get_mut(index) {
                Some(flag) => {
                    let was = std::mem::replace(flag, failure.is_some());
                    failure.is_some() && !was
                }
                None => false,
            }
        };
        if let (true, Some(reason)) = (newly_failing, failure) {
            tracing::warn!(
                source = index,
                "{name} #{index} failed and is skipped until it works again: {reason}"
            );
        }
    }
}

impl std::fmt::Debug for ContextSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.sources.iter().map(|source| source.name()).collect();
        f.debug_struct("ContextSources")
            .field("sources", &names)
            .finish()
    }
}

/// A value as one line of the `## Now` block: control characters (newlines included) become
/// spaces, so a source cannot add headings or instructions to the system prompt.
pub(crate) fn one_line(value: &str) -> String {
    let spaced: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(value: Value) -> ContextPatch {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn source(value: Value) -> Arc<dyn ContextSource> {
        let map = patch(value);
        Arc::new(move || Ok(map.clone()))
    }

    #[test]
    fn no_sources_means_unknown() {
        assert_eq!(ContextSources::new(vec![]).merged(), NowContext::default());
    }

    #[test]
    fn later_sources_override_earlier_ones_key_by_key() {
        let sources = ContextSources::new(vec![
            source(json!({"nodes": ["mac"], "budget": "0 $"})),
            source(json!({"nodes": ["mac", "arm"]})),
        ]);
        assert_eq!(
            sources.merged(),
            NowContext {
                nodes: Some(vec!["mac".into(), "arm".into()]),
                budget: Some("0 $".into()),
            }
        );
    }

    #[test]
    fn null_means_unknown_and_unknown_keys_are_ignored() {
        let sources = ContextSources::new(vec![
            source(json!({"nodes": ["mac"], "budget": "1 $"})),
            source(json!({"budget": null, "weather": "rain", "nodes": ["pi"]})),
        ]);
        assert_eq!(
            sources.merged(),
            NowContext {
                nodes: Some(vec!["pi".into()]),
                budget: None,
            }
        );
    }

    #[test]
    fn a_failing_or_ill_typed_source_is_skipped_whole() {
        let sources = ContextSources::new(vec![
            source(json!({"nodes": ["mac"]})),
            Arc::new(|| Err(ContextSourceError::new("registry offline"))),
            source(json!({"nodes": "arm", "budget": "5 $"})),
            source(json!({"nodes": ["ok", 3]})),
        ]);
        assert_eq!(
            sources.merged(),
            NowContext {
                nodes: Some(vec!["mac".into()]),
                budget: None,
            }
        );
    }

    #[test]
    fn values_become_single_lines() {
        let sources = ContextSources::new(vec![source(
            json!({"nodes": ["mac\n## Now", "  ", "a\u{7}b"], "budget": "1 $\r\n- Profile: x"}),
        )]);
        assert_eq!(
            sources.merged(),
            NowContext {
                nodes: Some(vec!["mac ## Now".into(), "a b".into()]),
                budget: Some("1 $ - Profile: x".into()),
            }
        );
    }
}
