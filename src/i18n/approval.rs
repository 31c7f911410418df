//! The terminal approval prompt, assembled from the message table, and the reading of a typed
//! answer.
//!
//! Invariants: the prompt shows the tool, the arguments and the effect exactly as given (the
//! caller passes arguments already rendered as sorted JSON with control and bidirectional
//! characters escaped); only `y`, `yes`, `e` or `evet` approve, whatever the UI language, and
//! anything else (an empty line, end of input, any other word) rejects.

use super::{I18nError, Messages};
use crate::lang::Lang;

/// What a tier-2 approval prompt shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApprovalPrompt<'a> {
    /// The tool's name.
    pub tool: &'a str,
    /// The tool's tier (2 for every prompt today).
    pub tier: u8,
    /// The arguments, already rendered for display (sorted JSON, escaped).
    pub arguments: &'a str,
    /// The sentence saying what the tool does in the world.
    pub effect: &'a str,
}

/// The prompt as the terminal prints it, one line per piece, the question last:
///
/// ```text
/// ⚠️  Approval needed (tier 2)
///   Tool: demo_physical_action
///   Arguments: {"action": "turn on the desk lamp"}
///   Effect: Demo: simulates a physical action; no real device moves.
///   Approve? [y/N]
/// ```
pub fn format_approval_prompt(
    messages: &Messages,
    lang: Lang,
    prompt: &ApprovalPrompt<'_>,
) -> Result<String, I18nError> {
    let title = messages.t("approval.title", lang, &[("tier", &prompt.tier)])?;
    let tool = messages.t("approval.tool", lang, &[])?;
    let arguments = messages.t("approval.arguments", lang, &[])?;
    let effect = messages.t("approval.effect", lang, &[])?;
    let question = messages.t("approval.question", lang, &[])?;
    Ok(format!(
        "{title}\n  {tool} {}\n  {arguments} {}\n  {effect} {}\n  {question}",
        prompt.tool, prompt.arguments, prompt.effect
    ))
}

/// Whether a typed answer approves: `y`, `yes`, `e` or `evet` (any case, surrounding
/// whitespace ignored). Everything else rejects.
pub fn is_approval_answer(answer: &str) -> bool {
    let answer = answer.trim();
    ["y", "yes", "e", "evet"]
        .iter()
        .any(|word| answer.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: ApprovalPrompt<'static> = ApprovalPrompt {
        tool: "demo_physical_action",
        tier: 2,
        arguments: "{\"action\": \"turn on the desk lamp\"}",
        effect: "Demo: simulates a physical action; no real device moves.",
    };

    #[test]
    fn english_prompt_matches_the_documented_layout() {
        let prompt = format_approval_prompt(&Messages::builtin(), Lang::En, &DEMO).unwrap();
        assert_eq!(
            prompt,
            "⚠️  Approval needed (tier 2)\n\
             \x20 Tool: demo_physical_action\n\
             \x20 Arguments: {\"action\": \"turn on the desk lamp\"}\n\
             \x20 Effect: Demo: simulates a physical action; no real device moves.\n\
             \x20 Approve? [y/N]"
        );
    }

    #[test]
    fn turkish_prompt_translates_the_chrome_only() {
        let prompt = format_approval_prompt(&Messages::builtin(), Lang::Tr, &DEMO).unwrap();
        assert_eq!(
            prompt,
            "⚠️  Onay gerekli (kademe 2)\n\
             \x20 Araç: demo_physical_action\n\
             \x20 Argümanlar: {\"action\": \"turn on the desk lamp\"}\n\
             \x20 Etkisi: Demo: simulates a physical action; no real device moves.\n\
             \x20 Onaylıyor musunuz? [e/H]"
        );
    }

    #[test]
    fn only_explicit_yes_approves() {
        for yes in ["y", "Y", "yes", "YES", " e ", "E", "evet", "Evet\n"] {
            assert!(is_approval_answer(yes), "{yes:?}");
        }
        for no in [
            "", "n", "no", "hayır", "h", "yess", "ye", "ok", "1", "evet!", "y y", "\u{4}",
        ] {
            assert!(!is_approval_answer(no), "{no:?}");
        }
    }
}
