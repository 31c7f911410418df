//! `tau completions SHELL` and `tau man` through the real binary: a script for each of bash, zsh
//! and fish that knows the subcommands, and a manual page naming tau and its subcommands.

use crate::support;

use support::sandbox::Sandbox;

const SUBCOMMANDS: [&str; 5] = ["chat", "components", "doctor", "completions", "man"];

#[test]
fn completions_generate_for_bash_zsh_and_fish() {
    let sandbox = Sandbox::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef tau"),
        ("fish", "complete -c tau"),
    ] {
        let run = sandbox.run(&["completions", shell]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        assert!(run.stdout.contains(marker), "{shell}:\n{}", run.stdout);
        for sub in SUBCOMMANDS {
            assert!(run.stdout.contains(sub), "{shell} lacks {sub}");
        }
    }
    let run = sandbox.run(&["completions", "powershell-7"]);
    assert_ne!(run.code, 0);
}

#[test]
fn the_man_page_names_tau_and_its_subcommands() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["man"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page = run.stdout;
    assert!(page.contains(".TH tau"), "{page}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(
            page.contains(&format!("tau\\-{sub}")),
            "man lacks {sub}:\n{page}"
        );
    }
}
