//! The UI message table: every text a person reads in a channel's chrome (command help, notices,
//! the approval prompt, tier labels, `/status` and `/session` labels, the TUI's titles and key
//! hints), in every [`Lang`], so the terminal, the TUI and other channels never drift.
//!
//! What the model reads (system-prompt scaffolding, tool descriptions, the gate's refusal texts)
//! and errors raised before a configuration exists are fixed English and do not live here.
//!
//! Invariants:
//! - The built-in table is static and immutable (the `en` and `tr` modules); there is no global
//!   registry. Extensions add keys to their own [`Messages`] value with [`Messages::register`];
//!   a channel outside tau-api registers a table of [`ChannelMessage`]s, which cannot be written
//!   without a text for every language ([`Messages::register_channel`]).
//! - Every key has an English text; a language that lacks a key falls back to English.
//! - Every translation uses exactly the placeholders of its English text (checked by a test for
//!   the built-ins and by `register` for extensions), so a caller's arguments fit every language.
//! - A built-in key can never be replaced; an extension key may be registered again (the last
//!   registration wins), so an extension that reloads can re-register its texts.
//!
//! Keys are dotted (`session.not_found`); templates use named placeholders `{name}` and `{{`/`}}`
//! for literal braces. Arguments are passed as `&[("name", &value)]`:
//!
//! ```
//! use tau_api::i18n::t;
//! use tau_api::lang::Lang;
//!
//! let text = t("session.not_found", Lang::Tr, &[("id", &"x")]).unwrap();
//! assert_eq!(text, "Oturum bulunamadı: x.");
//! ```

pub mod approval;
mod en;
mod placeholders;
mod tr;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Display;

use crate::lang::Lang;

pub use approval::{ApprovalPrompt, format_approval_prompt, is_approval_answer};
pub use placeholders::TemplateError;
use placeholders::{RenderError, placeholders, render};

/// One message of a channel that lives outside tau-api, with its text in every language. A new
/// [`Lang`] adds a field here, so every channel's table fails to build until it is translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelMessage {
    /// The dotted key, e.g. `telegram.linked`; never a built-in key.
    pub key: &'static str,
    /// The English text.
    pub en: &'static str,
    /// The Turkish text, with exactly the placeholders of the English one.
    pub tr: &'static str,
}

/// Named arguments of a message: `&[("id", &session_id), ("count", &n)]`.
pub type Args<'a> = [(&'a str, &'a dyn Display)];

/// Why a message could not be produced or registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum I18nError {
    /// No built-in or registered message has this key.
    #[error("unknown message key '{0}'")]
    UnknownKey(String),
    /// The template names a placeholder the caller gave no argument for.
    #[error("message '{key}' ({lang}) needs the argument '{name}'")]
    MissingArgument {
        /// The message key.
        key: String,
        /// The language whose text was rendered.
        lang: Lang,
        /// The placeholder without an argument.
        name: String,
    },
    /// A text is not a valid template (unbalanced braces, a bad placeholder name).
    #[error("message '{key}' ({lang}) is not a valid template: {source}")]
    BadTemplate {
        /// The message key.
        key: String,
        /// The language of the bad text.
        lang: Lang,
        /// What is wrong with it.
        source: TemplateError,
    },
    /// An extension tried to register a key the built-in table already has.
    #[error("message key '{0}' is built in and cannot be replaced")]
    BuiltinKey(String),
    /// An extension registered a key without an English text.
    #[error("message '{0}' has no English text")]
    NoEnglish(String),
    /// A translation uses other placeholders than the English text.
    #[error(
        "message '{key}': the {lang} text uses placeholders {found:?}, the English text {english:?}"
    )]
    PlaceholderMismatch {
        /// The message key.
        key: String,
        /// The language of the mismatching text.
        lang: Lang,
        /// The placeholders of the English text.
        english: Vec<String>,
        /// The placeholders of the translation.
        found: Vec<String>,
    },
    /// A key that is not dotted words of ASCII letters, digits, `_` or `-`.
    #[error("invalid message key '{0}': use dotted words of ASCII letters, digits, '_' or '-'")]
    InvalidKey(String),
}

/// The built-in text of `key` in exactly `lang`, without fallback.
fn builtin_exact(key: &str, lang: Lang) -> Option<&'static str> {
    let table = match lang {
        Lang::En => en::EN,
        Lang::Tr => tr::TR,
    };
    table
        .binary_search_by(|(k, _)| (*k).cmp(key))
        .ok()
        .and_then(|at| table.get(at))
        .map(|(_, text)| *text)
}

/// Whether `key` is one of the built-in messages.
pub fn is_builtin(key: &str) -> bool {
    builtin_exact(key, Lang::En).is_some()
}

/// The keys of every built-in message, sorted.
pub fn builtin_keys() -> impl Iterator<Item = &'static str> {
    en::EN.iter().map(|(key, _)| *key)
}

/// Formats a built-in message: `t("session.not_found", Lang::Tr, &[("id", &"x")])`.
///
/// Falls back to English when `lang` lacks the key. Extension keys are only found through a
/// [`Messages`] value ([`Messages::t`]).
pub fn t(key: &str, lang: Lang, args: &Args<'_>) -> Result<String, I18nError> {
    let (text, text_lang) = builtin_exact(key, lang)
        .map(|text| (text, lang))
        .or_else(|| builtin_exact(key, Lang::En).map(|text| (text, Lang::En)))
        .ok_or_else(|| I18nError::UnknownKey(key.to_owned()))?;
    format_text(key, text_lang, text, args)
}

fn format_text(key: &str, lang: Lang, text: &str, args: &Args<'_>) -> Result<String, I18nError> {
    render(text, args).map_err(|err| match err {
        RenderError::MissingArgument(name) => I18nError::MissingArgument {
            key: key.to_owned(),
            lang,
            name,
        },
        RenderError::Template(source) => I18nError::BadTemplate {
            key: key.to_owned(),
            lang,
            source,
        },
    })
}

/// The message table a channel formats its chrome with: the built-in messages plus whatever
/// extensions registered. Build one with [`Messages::builtin`], register extension keys at
/// start-up, then share it read-only (it is `Send + Sync`).
#[derive(Debug, Clone, Default)]
pub struct Messages {
    /// Extension messages: key → language → text; every entry has an English text.
    extra: BTreeMap<String, BTreeMap<Lang, String>>,
}

impl Messages {
    /// The built-in messages and no extension keys.
    pub fn builtin() -> Messages {
        Messages::default()
    }

    /// Adds an extension message with its texts, e.g.
    /// `register("telegram.linked", &[(Lang::En, "Linked to {chat}."), (Lang::Tr, "{chat} ile bağlandı.")])`.
    ///
    /// Refused, with nothing changed: a built-in key ([`I18nError::BuiltinKey`]), a malformed key,
    /// no English text, a text that is not a valid template, or a translation whose placeholders
    /// differ from the English ones. Registering an extension key again replaces its texts. When a
    /// language is given twice, the last text counts.
    pub fn register(&mut self, key: &str, texts: &[(Lang, &str)]) -> Result<(), I18nError> {
        let entry = validate_entry(key, texts)?;
        self.extra.insert(key.to_owned(), entry);
        Ok(())
    }

    /// Registers several messages at once: either all of them or, on the first error, none.
    pub fn register_all(&mut self, entries: &[(&str, &[(Lang, &str)])]) -> Result<(), I18nError> {
        let mut checked = Vec::with_capacity(entries.len());
        for (key, texts) in entries {
            checked.push((*key, validate_entry(key, texts)?));
        }
        for (key, entry) in checked {
            self.extra.insert(key.to_owned(), entry);
        }
        Ok(())
    }

    /// Registers a channel's own messages, each with a text in every language. This is how a
    /// channel living outside tau-api (the TUI, Telegram) adds its keys: a [`ChannelMessage`]
    /// has one field per [`Lang`], so a table that lacks a language does not compile, and the
    /// placeholders of every translation are checked here as [`Messages::register`] does. Either
    /// all of the table is registered or, on the first error, none of it.
    pub fn register_channel(&mut self, table: &[ChannelMessage]) -> Result<(), I18nError> {
        let entries: Vec<(&str, [(Lang, &str); 2])> = table
            .iter()
            .map(|m| (m.key, [(Lang::En, m.en), (Lang::Tr, m.tr)]))
            .collect();
        let borrowed: Vec<(&str, &[(Lang, &str)])> = entries
            .iter()
            .map(|(key, texts)| (*key, texts.as_slice()))
            .collect();
        self.register_all(&borrowed)
    }

    /// Whether `key` is known (built in or registered).
    pub fn contains(&self, key: &str) -> bool {
        is_builtin(key) || self.extra.contains_key(key)
    }

    /// Every known key: the built-in ones, then the registered ones, each group sorted.
    pub fn keys<'a>(&'a self) -> impl Iterator<Item = &'a str> + 'a {
        builtin_keys()
            .map(|key| -> &'a str { key })
            .chain(self.extra.keys().map(String::as_str))
    }

    /// The raw template of `key` in `lang` (English when `lang` lacks it) and the language it is
    /// actually in.
    pub fn template(&self, key: &str, lang: Lang) -> Result<(&str, Lang), I18nError> {
        if let Some(text) = builtin_exact(key, lang) {
            return Ok((text, lang));
        }
        if let Some(text) = builtin_exact(key, Lang::En) {
            return Ok((text, Lang::En));
        }
        let texts = self
            .extra
            .get(key)
            .ok_or_else(|| I18nError::UnknownKey(key.to_owned()))?;
        texts
            .get(&lang)
            .map(|text| (text.as_str(), lang))
            .or_else(|| texts.get(&Lang::En).map(|text| (text.as_str(), Lang::En)))
            .ok_or_else(|| I18nError::NoEnglish(key.to_owned()))
    }

    /// Formats `key` in `lang` with named arguments; English when `lang` lacks the key.
    pub fn t(&self, key: &str, lang: Lang, args: &Args<'_>) -> Result<String, I18nError> {
        let (text, text_lang) = self.template(key, lang)?;
        format_text(key, text_lang, text, args)
    }

    /// Like [`Messages::t`] but never fails: on an error it returns the key itself, so a broken
    /// message shows up visibly (and greppably) instead of as an empty line. For rendering paths
    /// that have nowhere to report an error; prefer `t` elsewhere.
    pub fn t_or_key(&self, key: &str, lang: Lang, args: &Args<'_>) -> String {
        self.t(key, lang, args).unwrap_or_else(|_| key.to_owned())
    }
}

fn is_valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.split('.').all(|word| {
            !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        })
}

/// Checks one message's key and texts and returns them as stored.
fn validate_entry(key: &str, texts: &[(Lang, &str)]) -> Result<BTreeMap<Lang, String>, I18nError> {
    if !is_valid_key(key) {
        return Err(I18nError::InvalidKey(key.to_owned()));
    }
    if is_builtin(key) {
        return Err(I18nError::BuiltinKey(key.to_owned()));
    }
    let entry: BTreeMap<Lang, String> = texts
        .iter()
        .map(|(lang, text)| (*lang, (*text).to_owned()))
        .collect();
    let english = entry
        .get(&Lang::En)
        .ok_or_else(|| I18nError::NoEnglish(key.to_owned()))?;
    check_same_placeholders(key, english, entry.iter().map(|(l, t)| (*l, t.as_str())))?;
    Ok(entry)
}

/// Checks that every text parses and uses exactly the placeholders of `english`.
pub(crate) fn check_same_placeholders<'a>(
    key: &str,
    english: &str,
    texts: impl IntoIterator<Item = (Lang, &'a str)>,
) -> Result<(), I18nError> {
    let bad = |lang: Lang, source: TemplateError| I18nError::BadTemplate {
        key: key.to_owned(),
        lang,
        source,
    };
    let expected = placeholders(english).map_err(|source| bad(Lang::En, source))?;
    for (lang, text) in texts {
        let found = placeholders(text).map_err(|source| bad(lang, source))?;
        if found != expected {
            return Err(I18nError::PlaceholderMismatch {
                key: key.to_owned(),
                lang,
                english: expected.iter().map(|s| (*s).to_owned()).collect(),
                found: found.iter().map(|s| (*s).to_owned()).collect(),
            });
        }
    }
    Ok(())
}
