//! Slash commands shared by every channel that takes typed input (`tau chat`, `tau tui`):
//! the canonical names, their help messages, and the parsing of a typed line.
//!
//! Invariants:
//! - [`SLASH_COMMANDS`] is the one list of commands; canonical names are English and are the only
//!   names any hint or help text shows.
//! - Aliases (Turkish names, `/exit`) resolve forever but never appear in hints.
//! - A typed name is matched by full Unicode case folding (Python's `str.casefold`), after
//!   canonical normalization, with one Turkish addition: the dot that folding leaves on a
//!   capital `İ` is dropped, so `/YARDIM`, `/yardım`, `/YARDİM` and `/Yardim` all resolve.
//!   The dotless `ı` stays distinct from `i` (as in Python), so aliases list both spellings.

use caseless::Caseless;
use unicode_normalization::UnicodeNormalization;

use crate::i18n::{I18nError, Messages};
use crate::lang::Lang;

/// One slash command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlashCommand {
    /// The canonical name, without the slash (`resume`).
    pub name: &'static str,
    /// How to call it, for help and usage errors (`/resume [n | id]`).
    pub usage: &'static str,
    /// The message key of its one-line help text.
    pub help_key: &'static str,
    /// Other names that resolve to it (Turkish, and `exit`); never shown in hints or help.
    pub aliases: &'static [&'static str],
}

/// Every slash command, in the order help and hints list them.
pub const SLASH_COMMANDS: &[SlashCommand] = &[
    SlashCommand {
        name: "help",
        usage: "/help",
        help_key: "command.help.help",
        aliases: &["yardım", "yardim"],
    },
    SlashCommand {
        name: "tools",
        usage: "/tools",
        help_key: "command.tools.help",
        aliases: &["araçlar", "araclar"],
    },
    SlashCommand {
        name: "sessions",
        usage: "/sessions",
        help_key: "command.sessions.help",
        aliases: &["oturumlar"],
    },
    SlashCommand {
        name: "resume",
        usage: "/resume [n | id]",
        help_key: "command.resume.help",
        aliases: &["devam"],
    },
    SlashCommand {
        name: "new",
        usage: "/new",
        help_key: "command.new.help",
        aliases: &["yeni"],
    },
    SlashCommand {
        name: "session",
        usage: "/session",
        help_key: "command.session.help",
        aliases: &["oturum"],
    },
    SlashCommand {
        name: "clear",
        usage: "/clear",
        help_key: "command.clear.help",
        aliases: &["temizle"],
    },
    SlashCommand {
        name: "status",
        usage: "/status",
        help_key: "command.status.help",
        aliases: &["durum"],
    },
    SlashCommand {
        name: "model",
        usage: "/model [role]",
        help_key: "command.model.help",
        aliases: &["rol"],
    },
    SlashCommand {
        name: "compact",
        usage: "/compact [focus]",
        help_key: "command.compact.help",
        aliases: &["özetle", "ozetle"],
    },
    SlashCommand {
        name: "lang",
        usage: "/lang [en | tr]",
        help_key: "command.lang.help",
        aliases: &["dil"],
    },
    SlashCommand {
        name: "quit",
        usage: "/quit",
        help_key: "command.quit.help",
        aliases: &["exit", "çık", "cik", "çıkış", "cikis"],
    },
];

/// Folds a command name for comparison: canonical decomposition, full Unicode case folding, the
/// combining dot above dropped after `i` (Turkish `İ`), then canonical composition.
pub fn fold_name(name: &str) -> String {
    let folded: String = name.nfd().default_case_fold().collect();
    let mut out = String::with_capacity(folded.len());
    let mut previous = None;
    for c in folded.chars() {
        if !(c == '\u{0307}' && previous == Some('i')) {
            out.push(c);
        }
        previous = Some(c);
    }
    out.nfc().collect()
}

/// Splits a typed line into a command name (without the slash) and its argument (trimmed), or
/// `None` when the line is not slash-shaped (`/` then a name). The name is not checked against
/// the command list: use it to tell a person which command was not understood.
pub fn split_command(input: &str) -> Option<(&str, &str)> {
    let rest = input.trim().strip_prefix('/')?;
    let (name, argument) = match rest.find(char::is_whitespace) {
        Some(at) => (rest.get(..at)?, rest.get(at..)?.trim()),
        None => (rest, ""),
    };
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some((name, argument))
}

/// The command with this canonical name or alias (matched by [`fold_name`]; no slash).
pub fn find_command(name: &str) -> Option<&'static SlashCommand> {
    let typed = fold_name(name);
    SLASH_COMMANDS.iter().find(|command| {
        std::iter::once(command.name)
            .chain(command.aliases.iter().copied())
            .any(|candidate| fold_name(candidate) == typed)
    })
}

/// Resolves a typed line to `(canonical name, argument)`: `resolve_command("/Devam 2")` is
/// `Some(("resume", "2"))`. `None` for plain text and for an unknown command such as `/x`.
pub fn resolve_command(input: &str) -> Option<(&'static str, &str)> {
    let (name, argument) = split_command(input)?;
    find_command(name).map(|command| (command.name, argument))
}

/// The canonical commands as a hint: `/help, /tools, /sessions, /resume, …, /lang`.
pub fn command_hint() -> String {
    SLASH_COMMANDS
        .iter()
        .map(|command| format!("/{}", command.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The help text: a title line, one line per command (usage padded to one column, then its help
/// in `lang`), and the footer line.
pub fn help_text(messages: &Messages, lang: Lang) -> Result<String, I18nError> {
    let width = SLASH_COMMANDS
        .iter()
        .map(|command| command.usage.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines = vec![messages.t("help.title", lang, &[])?];
    for command in SLASH_COMMANDS {
        let help = messages.t(command.help_key, lang, &[])?;
        lines.push(format!("  {:<width$}  {help}", command.usage));
    }
    lines.push(messages.t("help.footer", lang, &[])?);
    Ok(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::i18n::is_builtin;

    #[test]
    fn resolves_canonical_names_with_trimmed_arguments() {
        assert_eq!(resolve_command("/help"), Some(("help", "")));
        assert_eq!(resolve_command("  /resume   3  "), Some(("resume", "3")));
        assert_eq!(
            resolve_command("/compact the lamp plans"),
            Some(("compact", "the lamp plans"))
        );
        assert_eq!(resolve_command("/model\tfast"), Some(("model", "fast")));
    }

    #[test]
    fn resolves_turkish_aliases() {
        assert_eq!(resolve_command("/Devam 2"), Some(("resume", "2")));
        assert_eq!(resolve_command("/yardım"), Some(("help", "")));
        assert_eq!(resolve_command("/quit"), Some(("quit", "")));
        assert_eq!(resolve_command("/EXIT"), Some(("quit", "")));
        assert_eq!(resolve_command("/Çık"), Some(("quit", "")));
        assert_eq!(resolve_command("/yardim"), Some(("help", "")));
        assert_eq!(resolve_command("/araçlar"), Some(("tools", "")));
        assert_eq!(resolve_command("/araclar"), Some(("tools", "")));
        assert_eq!(resolve_command("/oturumlar"), Some(("sessions", "")));
        assert_eq!(resolve_command("/yeni"), Some(("new", "")));
        assert_eq!(resolve_command("/oturum"), Some(("session", "")));
        assert_eq!(resolve_command("/temizle"), Some(("clear", "")));
        assert_eq!(resolve_command("/durum"), Some(("status", "")));
        assert_eq!(resolve_command("/rol fast"), Some(("model", "fast")));
        assert_eq!(
            resolve_command("/özetle kısa tut"),
            Some(("compact", "kısa tut"))
        );
        assert_eq!(resolve_command("/ozetle"), Some(("compact", "")));
        assert_eq!(resolve_command("/dil tr"), Some(("lang", "tr")));
    }

    #[test]
    fn matching_folds_case_including_turkish_letters() {
        assert_eq!(resolve_command("/ARAÇLAR"), Some(("tools", "")));
        assert_eq!(resolve_command("/HELP"), Some(("help", "")));
        // Turkish capitals: YARDIM is the capital of yardım; İ is the capital of i.
        assert_eq!(resolve_command("/YARDIM"), Some(("help", "")));
        assert_eq!(resolve_command("/YARDİM"), Some(("help", "")));
        assert_eq!(resolve_command("/DİL en"), Some(("lang", "en")));
        assert_eq!(resolve_command("/ÖZETLE"), Some(("compact", "")));
        assert_eq!(resolve_command("/OturumLAR"), Some(("sessions", "")));
        // The argument keeps its case.
        assert_eq!(resolve_command("/DEVAM AbC"), Some(("resume", "AbC")));
    }

    #[test]
    fn matching_survives_decomposed_input() {
        // "araçlar" with c + COMBINING CEDILLA, and Ö as O + COMBINING DIAERESIS.
        assert_eq!(resolve_command("/arac\u{327}lar"), Some(("tools", "")));
        assert_eq!(resolve_command("/O\u{308}ZETLE"), Some(("compact", "")));
    }

    #[test]
    fn fold_name_follows_full_case_folding() {
        assert_eq!(fold_name("ARAÇLAR"), "araçlar");
        assert_eq!(fold_name("İ"), "i");
        assert_eq!(fold_name("ı"), "ı");
        assert_eq!(fold_name("Straße"), "strasse");
        assert_eq!(fold_name("ﬁle"), "file");
        assert_eq!(fold_name("\u{212A}"), "k"); // KELVIN SIGN
    }

    #[test]
    fn plain_text_and_unknown_commands_do_not_resolve() {
        assert_eq!(resolve_command("hello"), None);
        assert_eq!(resolve_command("what about /help"), None);
        assert_eq!(resolve_command("/x"), None);
        assert_eq!(resolve_command("/"), None);
        assert_eq!(resolve_command("/ help"), None);
        assert_eq!(resolve_command("//help"), None);
        assert_eq!(resolve_command("/usr/bin/help"), None);
        assert_eq!(resolve_command("/helpme"), None);
        assert_eq!(resolve_command(""), None);
    }

    #[test]
    fn split_command_names_what_was_typed() {
        assert_eq!(split_command("/Bogus arg "), Some(("Bogus", "arg")));
        assert_eq!(split_command("/x"), Some(("x", "")));
        assert_eq!(split_command("no slash"), None);
        assert_eq!(split_command("/"), None);
    }

    #[test]
    fn hint_lists_canonical_names_only() {
        assert_eq!(
            command_hint(),
            "/help, /tools, /sessions, /resume, /new, /session, /clear, /status, /model, /compact, /lang, /quit"
        );
        let hint = command_hint();
        let hint_names: Vec<&str> = hint
            .split(", ")
            .map(|name| name.trim_start_matches('/'))
            .collect();
        for command in SLASH_COMMANDS {
            for alias in command.aliases {
                assert!(!hint_names.contains(alias), "alias {alias} in the hint");
                assert!(!hint.contains(alias), "alias {alias} in the hint");
            }
        }
    }

    #[test]
    fn names_and_aliases_are_unique_after_folding() {
        let mut seen = std::collections::BTreeSet::new();
        for command in SLASH_COMMANDS {
            for name in std::iter::once(command.name).chain(command.aliases.iter().copied()) {
                assert!(seen.insert(fold_name(name)), "{name} is ambiguous");
                assert_eq!(find_command(name).map(|c| c.name), Some(command.name));
            }
            assert!(command.usage.starts_with(&format!("/{}", command.name)));
            assert!(
                is_builtin(command.help_key),
                "{} has no message",
                command.help_key
            );
        }
    }

    #[test]
    fn help_text_shows_every_command_and_no_alias() {
        let messages = Messages::builtin();
        for lang in Lang::ALL {
            let help = help_text(&messages, lang).unwrap();
            for command in SLASH_COMMANDS {
                assert!(help.contains(command.usage), "{lang}: {}", command.usage);
                for alias in command.aliases {
                    assert!(!help.contains(&format!("/{alias}")), "{lang}: /{alias}");
                }
            }
            assert_eq!(help.lines().count(), SLASH_COMMANDS.len() + 2);
        }
        let turkish = help_text(&messages, Lang::Tr).unwrap();
        assert!(turkish.starts_with("Komutlar:\n  /help "), "{turkish}");
        assert!(turkish.contains("Yeni bir oturum başlatır."));
    }
}
