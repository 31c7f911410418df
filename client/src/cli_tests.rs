//! Tests of the command-line definition (`crate::cli`): the deferred subcommands keep their
//! descriptions, parsing builds only the chosen one, and the full tree that completions and the
//! manual are generated from has every subcommand, under `help` too.

use clap::CommandFactory as _;

use crate::cli::Cli;

/// Every subcommand under `command` with its path (`tau hub start`), `help` left out.
fn subcommands<'a>(command: &'a clap::Command, path: &str) -> Vec<(String, &'a clap::Command)> {
    let mut out = Vec::new();
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let path = format!("{path} {}", sub.get_name());
        let below = subcommands(sub, &path);
        out.push((path, sub));
        out.extend(below);
    }
    out
}

/// Every subcommand's path and (about, long about).
fn abouts(command: &clap::Command) -> Vec<(String, String)> {
    subcommands(command, "tau")
        .into_iter()
        .map(|(path, sub)| {
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            let long = sub.get_long_about().map(ToString::to_string);
            (path, format!("{about} | {long:?}"))
        })
        .collect()
}

/// Every subcommand's path.
fn paths(command: &clap::Command) -> Vec<String> {
    subcommands(command, "tau")
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

#[test]
fn variants_keep_their_about() {
    let mut command = Cli::command();
    let before = abouts(&command);
    assert!(before.iter().any(|(path, _)| path == "tau hub start"));
    command.build();
    let after = abouts(&command);
    for entry in &before {
        assert!(after.contains(entry), "{entry:?} changed once built");
    }
    Cli::command().debug_assert();
}

#[test]
fn the_full_tree_has_every_subcommand_under_help_too() {
    let mut command = Cli::full_command();
    command.build();
    let all = paths(&command);
    let under_help = paths(command.find_subcommand("help").unwrap());
    assert!(all.iter().any(|p| p == "tau approvals decide"), "{all:?}");
    assert_eq!(all, under_help);
    // Nothing was added twice: the approvals' options are those of a plain build.
    let mut plain = Cli::command();
    plain.build();
    let ids = |c: &clap::Command| -> Vec<String> {
        let approvals = c.find_subcommand("approvals").unwrap();
        let mut ids: Vec<String> = approvals
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(&command), ids(&plain));
    command.debug_assert();
}

#[test]
fn parsing_builds_only_the_chosen_subcommand() {
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(["tau", "ask", "hello"]);
    assert!(matches.is_ok(), "{matches:?}");
    let has = |sub: &str, arg: &str| {
        command
            .find_subcommand(sub)
            .is_some_and(|s| s.get_arguments().any(|a| a.get_id() == arg))
    };
    assert!(has("ask", "text"));
    assert!(!has("chat", "resume"), "chat's options were built too");
}
