//! The UI languages tau speaks in a channel's chrome. Shared by the config model (`[ui] language`,
//! TAU_LANG) and the message table.
//!
//! Invariant: the set is closed (English and Turkish); `as_str` and `parse` round-trip.

use std::fmt;

/// A UI language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Lang {
    /// English (`en`), the default.
    #[default]
    En,
    /// Turkish (`tr`).
    Tr,
}

impl Lang {
    /// Every language, in display order.
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Tr];

    /// The language for a code (`en`, `tr`; ASCII case ignored), or `None`.
    pub fn parse(code: &str) -> Option<Lang> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(code))
    }

    /// The language's code: `en` or `tr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Tr => "tr",
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_rejects_others() {
        for l in Lang::ALL {
            assert_eq!(Lang::parse(l.as_str()), Some(l));
        }
        assert_eq!(Lang::parse("TR"), Some(Lang::Tr));
        assert_eq!(Lang::parse("de"), None);
        assert_eq!(Lang::parse(""), None);
        assert_eq!(Lang::default(), Lang::En);
    }
}
