//! Tests of the command-line definition (`crate::cli`): the deferred subcommands keep their
//! descriptions, parsing builds only the chosen one, and the full tree that completions and the
//! manual are generated from has every subcommand, under `help` too.

use clap::CommandFactory as _;

use crate::cli::Cli;

/// Every subcommand's path and (about, long about), as registered before any is built.
fn abouts(command: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let path = format!("{path} {}", sub.get_name());
        let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
        let long = sub.get_long_about().map(ToString::to_string);
        out.push((path.clone(), format!("{about} | {long:?}")));
        abouts(sub, &path, out);
    }
}

#[test]
fn variants_keep_their_about() {
    let mut command = Cli::command();
    let mut before = Vec::new();
    abouts(&command, "tau", &mut before);
    assert!(before.iter().any(|(path, _)| path == "tau hub start"));
    command.build();
    let mut after = Vec::new();
    abouts(&command, "tau", &mut after);
    for entry in &before {
        assert!(after.contains(entry), "{entry:?} changed once built");
    }
    Cli::command().debug_assert();
}

/// Every subcommand's path under `command`, `help` left out.
fn paths(command: &clap::Command, path: &str, out: &mut Vec<String>) {
    for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
        let path = format!("{path} {}", sub.get_name());
        out.push(path.clone());
        paths(sub, &path, out);
    }
}

#[test]
fn the_full_tree_has_every_subcommand_under_help_too() {
    let mut command = Cli::full_command();
    command.build();
    let (mut all, mut under_help) = (Vec::new(), Vec::new());
    paths(&command, "tau", &mut all);
    let help = command.find_subcommand("help").unwrap();
    paths(help, "tau", &mut under_help);
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
