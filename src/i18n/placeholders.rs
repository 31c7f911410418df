//! The template syntax of UI messages: literal text with named placeholders `{name}`, where
//! `{{` and `}}` stand for literal braces.
//!
//! Invariants: a placeholder name is an ASCII identifier (`[A-Za-z_][A-Za-z0-9_]*`); a lone `}`,
//! an unclosed `{` or a bad name is a [`TemplateError`], never silently printed; rendering writes
//! each argument with its `Display` and nothing else (no format specs).

use std::collections::BTreeSet;
use std::fmt::{self, Display, Write as _};

/// One piece of a parsed template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Piece<'a> {
    /// Text printed as is (escapes already resolved).
    Literal(&'a str),
    /// A `{name}` placeholder.
    Placeholder(&'a str),
}

/// Why a template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A `{` without its closing `}`.
    #[error("unclosed '{{' at byte {0}")]
    Unclosed(usize),
    /// A `}` that is neither `}}` nor the end of a placeholder.
    #[error("single '}}' at byte {0} (write '}}}}' for a literal brace)")]
    StrayClose(usize),
    /// A placeholder whose name is not an identifier.
    #[error("bad placeholder name '{0}'")]
    BadName(String),
}

/// Splits a template into pieces, in order.
pub(crate) fn pieces(template: &str) -> Pieces<'_> {
    Pieces {
        rest: template,
        offset: 0,
    }
}

/// Iterator over the pieces of a template; yields an error once and then stops.
pub(crate) struct Pieces<'a> {
    rest: &'a str,
    offset: usize,
}

impl<'a> Pieces<'a> {
    fn advance(&mut self, by: usize) {
        self.rest = self.rest.get(by..).unwrap_or("");
        self.offset += by;
    }

    fn fail(&mut self, error: TemplateError) -> Option<Result<Piece<'a>, TemplateError>> {
        self.rest = "";
        Some(Err(error))
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Result<Piece<'a>, TemplateError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.rest;
        let first = rest.chars().next()?;
        match first {
            '{' if rest.starts_with("{{") => {
                self.advance(2);
                Some(Ok(Piece::Literal("{")))
            }
            '}' if rest.starts_with("}}") => {
                self.advance(2);
                Some(Ok(Piece::Literal("}")))
            }
            '}' => {
                let at = self.offset;
                self.fail(TemplateError::StrayClose(at))
            }
            '{' => {
                let Some(end) = rest.find('}') else {
                    let at = self.offset;
                    return self.fail(TemplateError::Unclosed(at));
                };
                let name = rest.get(1..end).unwrap_or("");
                if !is_identifier(name) {
                    return self.fail(TemplateError::BadName(name.to_owned()));
                }
                self.advance(end + 1);
                Some(Ok(Piece::Placeholder(name)))
            }
            _ => {
                let end = rest.find(['{', '}']).unwrap_or(rest.len());
                let literal = rest.get(..end).unwrap_or(rest);
                self.advance(end);
                Some(Ok(Piece::Literal(literal)))
            }
        }
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The set of placeholder names a template uses.
pub(crate) fn placeholders(template: &str) -> Result<BTreeSet<&str>, TemplateError> {
    let mut names = BTreeSet::new();
    for piece in pieces(template) {
        if let Piece::Placeholder(name) = piece? {
            names.insert(name);
        }
    }
    Ok(names)
}

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RenderError {
    Template(TemplateError),
    MissingArgument(String),
}

/// Renders a template with named arguments. Arguments the template does not use are ignored.
pub(crate) fn render(template: &str, args: &[(&str, &dyn Display)]) -> Result<String, RenderError> {
    let mut out = String::with_capacity(template.len() + 16);
    for piece in pieces(template) {
        match piece.map_err(RenderError::Template)? {
            Piece::Literal(text) => out.push_str(text),
            Piece::Placeholder(name) => {
                let Some((_, value)) = args.iter().find(|(arg, _)| *arg == name) else {
                    return Err(RenderError::MissingArgument(name.to_owned()));
                };
                // Writing to a String cannot fail; a Display impl that reports an error is
                // treated as having written what it wrote.
                let _: fmt::Result = write!(out, "{value}");
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_named_placeholders_in_any_order() {
        let out = render("{b} then {a}, {a} again", &[("a", &1), ("b", &"two")]).unwrap();
        assert_eq!(out, "two then 1, 1 again");
    }

    #[test]
    fn double_braces_are_literal() {
        assert_eq!(render("{{x}} = {x}", &[("x", &5)]).unwrap(), "{x} = 5");
        assert_eq!(render("}}{{", &[]).unwrap(), "}{");
        assert!(placeholders("{{not_a_placeholder}}").unwrap().is_empty());
    }

    #[test]
    fn missing_argument_is_named() {
        assert_eq!(
            render("Hi {name}", &[("other", &1)]),
            Err(RenderError::MissingArgument("name".into()))
        );
    }

    #[test]
    fn extra_arguments_are_ignored() {
        assert_eq!(render("plain", &[("unused", &1)]).unwrap(), "plain");
    }

    #[test]
    fn malformed_templates_are_errors() {
        assert_eq!(placeholders("a {b"), Err(TemplateError::Unclosed(2)));
        assert_eq!(placeholders("a } b"), Err(TemplateError::StrayClose(2)));
        assert_eq!(
            placeholders("{1x}"),
            Err(TemplateError::BadName("1x".into()))
        );
        assert_eq!(
            placeholders("{}"),
            Err(TemplateError::BadName(String::new()))
        );
        assert_eq!(
            placeholders("{a b}"),
            Err(TemplateError::BadName("a b".into()))
        );
        assert!(render("{x:>4}", &[("x", &1)]).is_err());
    }

    #[test]
    fn non_ascii_text_survives() {
        let out = render(
            "⚠️  Onay gerekli (kademe {tier}) — ç ğ ı İ ö ş ü",
            &[("tier", &2)],
        )
        .unwrap();
        assert_eq!(out, "⚠️  Onay gerekli (kademe 2) — ç ğ ı İ ö ş ü");
        assert_eq!(
            placeholders("{a}ş{b_2}")
                .unwrap()
                .into_iter()
                .collect::<Vec<_>>(),
            vec!["a", "b_2"]
        );
    }
}
