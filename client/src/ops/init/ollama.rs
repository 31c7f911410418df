//! `tau init --provider ollama`: when an Ollama answers (OLLAMA_HOST, else 127.0.0.1:11434, within
//! two seconds), every role the template put on a model that server does not have gets one it has.
//!
//! Invariants: only `model_id = "…"` lines naming one of the template's Ollama models are
//! rewritten, comments and every other line stay as they are; with no Ollama answering, or one
//! with no models, the text is unchanged and the note says what to pull.

use std::time::Duration;

use tau_api::env::Env;
use tau_api::model_endpoints::ollama_base_url;

use crate::ops::doctor::model_server::list_models;

/// How long the Ollama may take to list its models.
const DEADLINE: Duration = Duration::from_secs(2);
/// The models the rendered template names for Ollama.
const TEMPLATE_MODELS: &[&str] = &["qwen3:8b", "qwen3:4b"];

/// `text` with models the local Ollama has, and one line saying what was done.
pub fn with_local_models(text: &str, env: &Env) -> (String, String) {
    let base = ollama_base_url(None, env);
    let pull = TEMPLATE_MODELS
        .iter()
        .map(|m| format!("`ollama pull {m}`"))
        .collect::<Vec<_>>()
        .join(" and ");
    match list_models("ollama", &base, env, DEADLINE) {
        Err(why) => (
            text.to_owned(),
            format!("no Ollama answered at {base} ({why}); start it and run {pull}"),
        ),
        Ok(models) if models.is_empty() => (
            text.to_owned(),
            format!("the Ollama at {base} has no models; run {pull}"),
        ),
        Ok(models) => {
            let (text, chosen) = choose(text, &models);
            let note = match chosen {
                Some(model) => format!("the Ollama at {base} has {model}: the roles use it"),
                None => format!("the Ollama at {base} has the template's models"),
            };
            (text, note)
        }
    }
}

/// Rewrites the template's model lines whose model is not in `models` to the first of `models`.
fn choose(text: &str, models: &[String]) -> (String, Option<String>) {
    let Some(first) = models.first() else {
        return (text.to_owned(), None);
    };
    let mut chosen = None;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let missing = TEMPLATE_MODELS.iter().find(|m| {
            line.starts_with(&format!("model_id = \"{m}\"")) && !models.iter().any(|h| h == *m)
        });
        match missing {
            Some(m) => {
                out.push_str(&line.replacen(m, first, 1));
                chosen = Some(first.clone());
            }
            None => out.push_str(line),
        }
    }
    (out, chosen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::config::{BuiltinProvider, render_template};

    #[test]
    fn only_missing_template_models_are_replaced() {
        let text = render_template(BuiltinProvider::Ollama);
        let has = |names: &[&str]| names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>();
        let (same, chosen) = choose(&text, &has(&["qwen3:8b", "qwen3:4b"]));
        assert_eq!((same.as_str(), chosen), (text.as_str(), None));
        let (swapped, chosen) = choose(&text, &has(&["llama3.2:3b", "qwen3:8b"]));
        assert_eq!(chosen.as_deref(), Some("llama3.2:3b"));
        assert!(swapped.contains("model_id = \"qwen3:8b\""));
        assert!(swapped.contains("model_id = \"llama3.2:3b\""));
        assert!(
            !swapped
                .lines()
                .any(|l| l.starts_with("model_id = \"qwen3:4b\""))
        );
        assert_eq!(swapped.lines().count(), text.lines().count());
    }
}
