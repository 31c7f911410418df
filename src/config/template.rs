//! The shipped `tau.toml` template (the repository's own `tau.toml`, embedded at build time) and
//! its rendering for a chosen provider, used both for built-in defaults and by `tau init`.
//!
//! Invariants: the template is written for bedrock, so rendering for bedrock returns it unchanged;
//! rendering only rewrites `provider = "bedrock"` lines and the `model_id` lines whose id is in the
//! model table below, keeping every comment. Tests keep the template and the table in step.

use crate::env::Env;

use super::known::BuiltinProvider;

/// The shipped template: the repository's `deploy/tau.toml`, byte for byte. It lives under `deploy/`
/// rather than at the repository root so that running `tau` from a checkout does not pick it up as
/// TAU_HOME (the current directory counts when it holds a `tau.toml`).
pub const TEMPLATE: &str = include_str!("../../deploy/tau.toml");

/// The provider the template is written for.
const TEMPLATE_PROVIDER: BuiltinProvider = BuiltinProvider::Bedrock;

/// Each model of the template: its bedrock id, then the anthropic, fake, ollama and openai
/// equivalents.
const MODEL_IDS: &[(&str, &str, &str, &str, &str)] = &[
    (
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "claude-sonnet-4-5",
        "fake",
        "qwen3:8b",
        "gpt-4.1",
    ),
    (
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "claude-haiku-4-5",
        "fake",
        "qwen3:4b",
        "gpt-4.1-mini",
    ),
];

/// The provider the built-in defaults (and `tau init` without `--provider`) use, chosen by the
/// credentials present in `env`: bedrock if AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
/// AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK is set; else anthropic if ANTHROPIC_API_KEY is set;
/// else the offline fake model. Empty values count as unset.
pub fn default_provider(env: &Env) -> BuiltinProvider {
    let has = |name: &str| env.non_empty(name).is_some();
    if (has("AWS_ACCESS_KEY_ID") && has("AWS_SECRET_ACCESS_KEY"))
        || has("AWS_PROFILE")
        || has("AWS_BEARER_TOKEN_BEDROCK")
    {
        BuiltinProvider::Bedrock
    } else if has("ANTHROPIC_API_KEY") {
        BuiltinProvider::Anthropic
    } else {
        BuiltinProvider::Fake
    }
}

/// The template with every role on `provider` (and that provider's model ids), comments kept.
pub fn render_template(provider: BuiltinProvider) -> String {
    if provider == TEMPLATE_PROVIDER {
        return TEMPLATE.to_string();
    }
    let provider_line = format!("provider = \"{}\"", TEMPLATE_PROVIDER.as_str());
    let mut out = String::with_capacity(TEMPLATE.len());
    for line in TEMPLATE.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix(&provider_line) {
            out.push_str("provider = \"");
            out.push_str(provider.as_str());
            out.push('"');
            out.push_str(rest);
        } else if let Some((id, rest)) = model_id_line(line)
            && let Some(new_id) = model_for(id, provider)
        {
            out.push_str("model_id = \"");
            out.push_str(new_id);
            out.push('"');
            out.push_str(rest);
        } else {
            out.push_str(line);
        }
    }
    out
}

/// For a `model_id = "<id>"…` line: the id and what follows its closing quote.
fn model_id_line(line: &str) -> Option<(&str, &str)> {
    let after = line.strip_prefix("model_id = \"")?;
    let end = after.find('"')?;
    Some((&after[..end], &after[end + 1..]))
}

/// The id on `provider` of the template's bedrock model `bedrock_id`.
fn model_for(bedrock_id: &str, provider: BuiltinProvider) -> Option<&'static str> {
    let (b, a, f, o, oa) = MODEL_IDS.iter().find(|(b, ..)| *b == bedrock_id)?;
    Some(match provider {
        BuiltinProvider::Bedrock => b,
        BuiltinProvider::Anthropic => a,
        BuiltinProvider::Fake => f,
        BuiltinProvider::Ollama => o,
        BuiltinProvider::OpenAi => oa,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, KnownNames};
    use std::path::Path;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().copied().collect()
    }

    #[test]
    fn the_bedrock_rendering_is_the_template_unchanged() {
        assert_eq!(render_template(BuiltinProvider::Bedrock), TEMPLATE);
    }

    #[test]
    fn every_rendering_is_a_valid_config_on_that_provider() {
        for p in BuiltinProvider::ALL {
            let text = render_template(p);
            let cfg = Config::from_toml_str(
                &text,
                Path::new("/t/tau.toml"),
                &Env::new(),
                &KnownNames::builtin(),
            )
            .unwrap_or_else(|e| panic!("{p}: {e}"));
            let roles: Vec<&str> = cfg.models.roles.keys().map(String::as_str).collect();
            assert_eq!(roles, ["brain", "fast", "local"]);
            for (name, role) in &cfg.models.roles {
                assert_eq!(role.provider, p.as_str(), "{p} {name}");
                assert!(
                    MODEL_IDS
                        .iter()
                        .any(|m| model_for(m.0, p) == Some(role.model_id.as_str())),
                    "{p} {name}: {}",
                    role.model_id
                );
            }
            assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
        }
    }

    #[test]
    fn rendering_keeps_comments_and_leaves_no_template_ids() {
        let text = render_template(BuiltinProvider::Anthropic);
        assert_eq!(text.lines().count(), TEMPLATE.lines().count());
        let code: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .collect();
        assert!(
            !code
                .iter()
                .any(|l| l.contains("bedrock") || l.contains("us.anthropic")),
            "{code:?}"
        );
        assert!(text.contains("# The main conversation."));
        let fake = render_template(BuiltinProvider::Fake);
        assert!(fake.contains("provider = \"fake\"\nmodel_id = \"fake\"\n"));
    }

    #[test]
    fn provider_by_credentials() {
        use BuiltinProvider::*;
        let cases: &[(&[(&str, &str)], BuiltinProvider)] = &[
            (&[], Fake),
            (&[("AWS_ACCESS_KEY_ID", "a")], Fake),
            (
                &[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")],
                Bedrock,
            ),
            (&[("AWS_PROFILE", "p")], Bedrock),
            (&[("AWS_BEARER_TOKEN_BEDROCK", "t")], Bedrock),
            (&[("ANTHROPIC_API_KEY", "k")], Anthropic),
            (&[("ANTHROPIC_API_KEY", "k"), ("AWS_PROFILE", "p")], Bedrock),
            (&[("ANTHROPIC_API_KEY", ""), ("AWS_PROFILE", "")], Fake),
        ];
        for (vars, want) in cases {
            assert_eq!(default_provider(&env(vars)), *want, "{vars:?}");
        }
    }
}
