//! The files `tau init` writes besides `tau.toml` (whose template lives in `tau_api::config`): the
//! shipped persona, the made-up user example and the `.env.example` list of variable names, all
//! embedded at build time from the repository, plus reading the names an `.env.example` lists.
//!
//! Invariants: the embedded persona files are the repository's `persona/` files byte for byte; the
//! `.env.example` template is the repository's `.env.example` without its final "L0 remote access"
//! section (tests keep all three in step).

/// The repository's `persona/persona.md`.
pub const PERSONA: &str = include_str!("../../../persona/persona.md");

/// The repository's `persona/user.example.md`.
pub const USER_EXAMPLE: &str = include_str!("../../../persona/user.example.md");

/// The repository's `.env.example`, with the "L0 remote access" section.
const ENV_EXAMPLE_FULL: &str = include_str!("../../../.env.example");

/// The comment line that opens the section `tau init` leaves out.
const REMOTE_SECTION_TITLE: &str = "# L0 remote access";

/// The `.env.example` `tau init` writes: the repository's file up to the rule line that opens the
/// "L0 remote access" section, ending with exactly one newline.
pub fn env_example() -> String {
    let lines: Vec<&str> = ENV_EXAMPLE_FULL.lines().collect();
    let mut end = lines
        .iter()
        .position(|line| line.starts_with(REMOTE_SECTION_TITLE))
        .unwrap_or(lines.len());
    // Leave out the rule line above the title and the blank lines before it.
    if end > 0 && end < lines.len() && lines[end - 1].starts_with("# ---") {
        end -= 1;
    }
    while end > 0 && lines[end - 1].trim().is_empty() {
        end -= 1;
    }
    let mut out = lines[..end].join("\n");
    out.push('\n');
    out
}

/// The variable names an `.env.example` lists: every line of the form `NAME=…`, also commented
/// out (`# NAME=…`) or exported (`export NAME=…`), where NAME is upper-case letters, digits and
/// `_`. Sorted, each once.
pub fn listed_names(text: &str) -> Vec<String> {
    let mut names: Vec<String> = text.lines().filter_map(assignment_name).collect();
    names.sort();
    names.dedup();
    names
}

fn assignment_name(line: &str) -> Option<String> {
    let line = line.trim_start();
    let line = line.strip_prefix('#').unwrap_or(line).trim_start();
    let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
    let (name, _) = line.split_once('=')?;
    let name = name.trim_end();
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    valid.then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn repository_file(path: &str) -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path))
            .unwrap()
    }

    #[test]
    fn env_example_is_the_repository_file_without_the_remote_section() {
        let full = repository_file(".env.example");
        let template = env_example();
        assert!(full.starts_with(template.trim_end()));
        assert!(template.ends_with("TAU_LANG=en\n"), "{template}");
        assert!(!template.contains("L0 remote access"));
        assert!(!template.contains("TAU_REMOTE_"));
        // What is left out is exactly the final section: its rule, title and remote names.
        let rest = &full[template.trim_end().len()..];
        assert!(rest.contains(REMOTE_SECTION_TITLE));
        assert!(
            listed_names(rest)
                .iter()
                .all(|n| n.starts_with("TAU_REMOTE_"))
        );
    }

    #[test]
    fn env_example_lists_what_tau_reads() {
        let names = listed_names(&env_example());
        for name in [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_PROFILE",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_REGION",
            "TAU_DATA_DIR",
            "TAU_PROFILE",
            "TAU_ROLE",
            "TAU_HUB_PORT",
            "TAU_LANG",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
        // TAU_HOME cannot be set in .env, so it is not offered there.
        assert!(!names.iter().any(|n| n == "TAU_HOME"));
    }

    #[test]
    fn listed_names_reads_assignments_only() {
        let text = "# Prose: set NAME=value here\n# FOO=\nexport BAR=1\n  # export BAZ = x\n\
                    lower=1\n9X=1\nFOO=again\n#\n=x\n";
        assert_eq!(listed_names(text), ["BAR", "BAZ", "FOO"]);
    }
}
