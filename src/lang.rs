//! The UI language of a channel's chrome (`[ui] language`, `TAU_LANG`, `tau --lang`, `/lang`).
//!
//! Invariants: the set of languages is closed ([`Lang::ALL`]); every language has a lowercase
//! code that [`Lang::parse`] reads back (case-insensitively) and that serde writes and reads;
//! English is the default and the fallback of the message table.

use std::fmt;
use std::str::FromStr;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A language tau's chrome is available in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Lang {
    /// English (`en`), the default and the fallback for a message a language lacks.
    #[default]
    En,
    /// Turkish (`tr`).
    Tr,
}

/// Every supported language, in the order they are offered to a person.
pub const LANGUAGES: &[Lang] = &Lang::ALL;

impl Lang {
    /// Every supported language, in the order they are offered to a person.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Tr];

    /// Reads a language code (`en`, `TR`, ` tr `): surrounding whitespace is ignored and case does
    /// not matter. Anything else is `None`.
    pub fn parse(code: &str) -> Option<Lang> {
        let code = code.trim();
        Lang::ALL
            .iter()
            .copied()
            .find(|lang| lang.as_str().eq_ignore_ascii_case(code))
    }

    /// The lowercase code (`en`, `tr`), as written in `tau.toml` and `TAU_LANG`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Tr => "tr",
        }
    }

    /// The language's name in itself (`English`, `Türkçe`), for menus and `/lang`.
    pub const fn native_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Tr => "Türkçe",
        }
    }

    /// The codes of every language joined for a hint or an error: `en, tr`.
    pub fn codes() -> String {
        Lang::ALL
            .iter()
            .map(|lang| lang.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A language code that is not one of [`Lang::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language '{0}': expected one of {codes}", codes = Lang::codes())]
pub struct UnknownLang(pub String);

impl FromStr for Lang {
    type Err = UnknownLang;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Lang::parse(s).ok_or_else(|| UnknownLang(s.to_owned()))
    }
}

impl Serialize for Lang {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Lang {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LangVisitor;

        impl Visitor<'_> for LangVisitor {
            type Value = Lang;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a language code, one of {}", Lang::codes())
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Lang, E> {
                Lang::parse(v).ok_or_else(|| E::custom(UnknownLang(v.to_owned())))
            }
        }

        deserializer.deserialize_str(LangVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_is_case_insensitive_and_trims() {
        assert_eq!(Lang::parse("en"), Some(Lang::En));
        assert_eq!(Lang::parse("TR"), Some(Lang::Tr));
        assert_eq!(Lang::parse(" Tr\n"), Some(Lang::Tr));
        assert_eq!(Lang::parse("de"), None);
        assert_eq!(Lang::parse(""), None);
        assert_eq!(Lang::parse("english"), None);
    }

    #[test]
    fn every_code_round_trips() {
        for lang in Lang::ALL {
            assert_eq!(Lang::parse(lang.as_str()), Some(lang));
            assert_eq!(lang.to_string(), lang.as_str());
            assert_eq!(lang.as_str().parse::<Lang>(), Ok(lang));
        }
        assert_eq!(LANGUAGES, Lang::ALL);
        assert_eq!(Lang::codes(), "en, tr");
        assert_eq!(Lang::default(), Lang::En);
    }

    #[test]
    fn from_str_names_the_bad_code() {
        let err = "fr".parse::<Lang>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown language 'fr': expected one of en, tr"
        );
    }

    #[test]
    fn serde_uses_lowercase_codes() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Ui {
            language: Lang,
        }
        let ui: Ui = toml::from_str("language = \"tr\"").unwrap();
        assert_eq!(ui.language, Lang::Tr);
        let upper: Ui = toml::from_str("language = \"EN\"").unwrap();
        assert_eq!(upper.language, Lang::En);
        assert_eq!(serde_json::to_string(&Lang::Tr).unwrap(), "\"tr\"");
        let err = toml::from_str::<Ui>("language = \"de\"").unwrap_err();
        assert!(err.to_string().contains("unknown language 'de'"), "{err}");
        assert!(toml::from_str::<Ui>("language = 3").is_err());
    }
}
