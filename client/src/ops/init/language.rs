//! The UI language of a new `tau.toml`: asking a person for it, and writing it into the template.
//!
//! Invariants: the question accepts a language code or its native name in any case, takes an empty
//! answer or the end of input as English, and asks at most [`ATTEMPTS`] times before falling back
//! to English (so a script that pipes nonsense cannot loop it). Writing the language changes only
//! the `language = "…"` line of the template, keeping its comment.

use std::io::{self, BufRead, Write};

use tau_api::lang::Lang;

/// How many answers are read before falling back to English.
const ATTEMPTS: usize = 3;

/// Asks for the UI language on `output` and reads answers from `input`.
pub fn ask(input: &mut dyn BufRead, output: &mut dyn Write) -> io::Result<Lang> {
    let options: Vec<String> = Lang::ALL
        .iter()
        .map(|lang| format!("{} = {}", lang.as_str(), lang.native_name()))
        .collect();
    for _ in 0..ATTEMPTS {
        write!(
            output,
            "UI language ({}) [{}]: ",
            options.join(", "),
            Lang::default()
        )?;
        output.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            writeln!(output)?;
            return Ok(Lang::default());
        }
        let answer = line.trim();
        if answer.is_empty() {
            return Ok(Lang::default());
        }
        let by_name = Lang::ALL
            .into_iter()
            .find(|lang| lang.native_name().to_lowercase() == answer.to_lowercase());
        if let Some(lang) = Lang::parse(answer).or(by_name) {
            return Ok(lang);
        }
        writeln!(output, "Please answer one of: {}.", Lang::codes())?;
    }
    writeln!(output, "Using {}.", Lang::default())?;
    Ok(Lang::default())
}

/// `template` with its first `language = "…"` line set to `lang` (the rest of the line kept).
pub fn with_language(template: &str, lang: Lang) -> String {
    const PREFIX: &str = "language = \"";
    let mut out = String::with_capacity(template.len());
    let mut done = false;
    for line in template.split_inclusive('\n') {
        if !done
            && let Some(after) = line.strip_prefix(PREFIX)
            && let Some(end) = after.find('"')
        {
            out.push_str(PREFIX);
            out.push_str(lang.as_str());
            out.push_str(&after[end..]);
            done = true;
        } else {
            out.push_str(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tau_api::config::{BuiltinProvider, Config, KnownNames, TEMPLATE, render_template};
    use tau_api::env::Env;

    fn answer(text: &str) -> (Lang, String) {
        let mut output = Vec::new();
        let lang = ask(&mut text.as_bytes(), &mut output).unwrap();
        (lang, String::from_utf8(output).unwrap())
    }

    #[test]
    fn answers() {
        assert_eq!(answer("tr\n").0, Lang::Tr);
        assert_eq!(answer(" TR \n").0, Lang::Tr);
        assert_eq!(answer("Türkçe\n").0, Lang::Tr);
        assert_eq!(answer("en\n").0, Lang::En);
        assert_eq!(answer("\n").0, Lang::En);
        assert_eq!(answer("").0, Lang::En);
        let (lang, shown) = answer("de\ntr\n");
        assert_eq!(lang, Lang::Tr);
        assert!(shown.contains("Please answer one of: en, tr."), "{shown}");
        assert!(shown.starts_with("UI language (en = English, tr = Türkçe) [en]: "));
    }

    #[test]
    fn gives_up_after_three_bad_answers() {
        let (lang, shown) = answer("de\nfr\nxx\ntr\n");
        assert_eq!(lang, Lang::En);
        assert_eq!(shown.matches("UI language").count(), 3);
        assert!(shown.ends_with("Using en.\n"), "{shown}");
    }

    #[test]
    fn writes_the_language_into_every_rendering() {
        for provider in BuiltinProvider::ALL {
            let base = render_template(provider);
            for lang in Lang::ALL {
                let text = with_language(&base, lang);
                let config = Config::from_toml_str(
                    &text,
                    Path::new("/t/tau.toml"),
                    &Env::new(),
                    &KnownNames::builtin(),
                )
                .unwrap();
                assert_eq!(config.ui.language, lang);
                let changed = text
                    .lines()
                    .zip(base.lines())
                    .filter(|(a, b)| a != b)
                    .count();
                assert_eq!(changed, usize::from(lang != Lang::En), "{provider} {lang}");
                assert_eq!(text.lines().count(), base.lines().count());
            }
        }
        assert_eq!(with_language(TEMPLATE, Lang::En), TEMPLATE);
    }
}
