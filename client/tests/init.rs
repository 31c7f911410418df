//! `tau init` through the real binary: what it writes, what it never overwrites, how it picks the
//! provider and the language, and `--profile`.

use crate::support;

use std::path::Path;

use support::sandbox::{
    SECRET, Sandbox, config_of, mode, providers, repository_file, serve_once, write_own_files,
};
use tau_api::config::{BuiltinProvider, render_template};
use tau_api::lang::Lang;

#[test]
fn a_fresh_init_writes_every_file_from_the_shipped_templates() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        sandbox.read("home/tau.toml"),
        render_template(BuiltinProvider::Fake)
    );
    assert_eq!(
        sandbox.read("home/persona/persona.md"),
        repository_file("persona/persona.md")
    );
    assert_eq!(
        sandbox.read("home/persona/user.example.md"),
        repository_file("persona/user.example.md")
    );
    assert_eq!(
        sandbox.read("home/persona/user.md"),
        repository_file("persona/user.example.md")
    );
    let example = sandbox.read("home/.env.example");
    let full = repository_file(".env.example");
    assert!(full.starts_with(example.trim_end()), "{example}");
    assert!(full.contains("TAU_REMOTE_") && !example.contains("TAU_REMOTE_"));
    assert!(!sandbox.home().join(".env").exists());
    assert_eq!(mode(&sandbox.home()), 0o700);
    assert_eq!(mode(&sandbox.home().join("persona/user.md")), 0o600);
    // Without a terminal and without --language or --yes, English, and tau says why.
    assert!(
        run.stdout
            .contains("UI language: en (the default: stdin is not a terminal"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("provider: fake (no credentials found"));
    assert!(run.stdout.lines().any(|l| l.starts_with("next: ")));
    assert_eq!(config_of(&sandbox).ui.language, Lang::En);
}

#[test]
fn the_bedrock_rendering_is_the_repository_tau_toml() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init", "--provider", "bedrock", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        sandbox.read("home/tau.toml"),
        repository_file("deploy/tau.toml")
    );
    assert!(
        run.stdout
            .contains("provider: bedrock (chosen with --provider)")
    );
    assert!(
        run.stdout
            .contains("UI language: en (the default with --yes)")
    );
}

#[test]
fn the_provider_follows_the_credentials_in_the_environment() {
    let cases: &[(&[&str], &str)] = &[
        (&["ANTHROPIC_API_KEY"], "anthropic"),
        (&["AWS_PROFILE"], "bedrock"),
        (&["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"], "bedrock"),
        (&["AWS_BEARER_TOKEN_BEDROCK"], "bedrock"),
        (&["ANTHROPIC_API_KEY", "AWS_PROFILE"], "bedrock"),
        (&["AWS_ACCESS_KEY_ID"], "fake"),
    ];
    for (names, want) in cases {
        let mut sandbox = Sandbox::new();
        for name in *names {
            sandbox.var(name, SECRET);
        }
        let run = sandbox.run(&["init", "--yes"]);
        assert_eq!(run.code, 0, "{names:?}: {}", run.stderr);
        let config = config_of(&sandbox);
        assert!(
            providers(&config).iter().all(|p| p == want),
            "{names:?}: {:?}",
            providers(&config)
        );
        assert!(
            run.stdout.contains(&format!("provider: {want} (")),
            "{names:?}: {}",
            run.stdout
        );
        if *want != "fake" {
            assert!(
                run.stdout.contains("found in the environment"),
                "{}",
                run.stdout
            );
        }
        assert!(!run.stdout.contains(SECRET) && !run.stderr.contains(SECRET));
    }
}

#[test]
fn the_provider_follows_the_credentials_in_home_dotenv() {
    let sandbox = Sandbox::new();
    sandbox.write("home/.env", &format!("ANTHROPIC_API_KEY={SECRET}\n"));
    let run = sandbox.run(&["init", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        providers(&config_of(&sandbox))
            .iter()
            .all(|p| *p == "anthropic")
    );
    let env_file = sandbox.home().join(".env");
    assert!(
        run.stdout.contains(&format!(
            "provider: anthropic (ANTHROPIC_API_KEY found in {})",
            env_file.display()
        )),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(SECRET));
    // .env itself is left alone.
    assert_eq!(
        sandbox.read("home/.env"),
        format!("ANTHROPIC_API_KEY={SECRET}\n")
    );
}

#[test]
fn provider_flag_wins_over_credentials() {
    let mut sandbox = Sandbox::new();
    sandbox.var("AWS_PROFILE", "work");
    let run = sandbox.run(&["init", "--provider", "anthropic", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        sandbox.read("home/tau.toml"),
        render_template(BuiltinProvider::Anthropic)
    );
}

#[test]
fn existing_files_are_never_overwritten_without_force() {
    let sandbox = Sandbox::new();
    write_own_files(&sandbox);
    let run = sandbox.run(&["init", "--provider", "fake", "--language", "tr"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(sandbox.read("home/tau.toml"), "# mine\n");
    assert_eq!(sandbox.read("home/persona/persona.md"), "my persona\n");
    assert_eq!(sandbox.read("home/persona/user.example.md"), "my example\n");
    assert_eq!(sandbox.read("home/persona/user.md"), "me\n");
    assert_eq!(sandbox.read("home/.env.example"), "MINE=\n");
    assert_eq!(run.stdout.matches("kept ").count(), 5, "{}", run.stdout);
    assert!(run.stdout.contains("(exists; --force replaces it)"));
    assert!(run.stdout.contains("(exists; never overwritten)"));
    assert!(run.stdout.contains("tau.toml kept"));
}

#[test]
fn force_replaces_config_and_persona_but_never_user_md_or_env_example() {
    let sandbox = Sandbox::new();
    write_own_files(&sandbox);
    let run = sandbox.run(&["init", "--force", "--provider", "fake", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        sandbox.read("home/tau.toml"),
        render_template(BuiltinProvider::Fake)
    );
    assert_eq!(
        sandbox.read("home/persona/persona.md"),
        repository_file("persona/persona.md")
    );
    assert_eq!(
        sandbox.read("home/persona/user.example.md"),
        repository_file("persona/user.example.md")
    );
    assert_eq!(sandbox.read("home/persona/user.md"), "me\n");
    assert_eq!(sandbox.read("home/.env.example"), "MINE=\n");
    assert_eq!(run.stdout.matches("replaced ").count(), 3, "{}", run.stdout);
}

#[test]
fn profile_is_appended_to_dotenv_only_when_it_is_not_set_there() {
    let sandbox = Sandbox::new();
    sandbox.write("home/.env", "# mine\nTAU_LANG=tr");
    let run = sandbox.run(&["--profile", "travel", "init", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        sandbox.read("home/.env"),
        "# mine\nTAU_LANG=tr\nTAU_PROFILE=travel\n"
    );
    assert!(
        run.stdout.contains("added    TAU_PROFILE=travel to"),
        "{}",
        run.stdout
    );

    // The option may also follow the command; a second profile does not replace the first.
    let run = sandbox.run(&["init", "--yes", "--profile", "sport"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        sandbox.read("home/.env"),
        "# mine\nTAU_LANG=tr\nTAU_PROFILE=travel\n"
    );
    assert!(
        run.stdout.contains("sets TAU_PROFILE already"),
        "{}",
        run.stdout
    );
}

#[test]
fn profile_creates_a_private_dotenv() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init", "--yes", "--profile", "home"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(sandbox.read("home/.env"), "TAU_PROFILE=home\n");
    assert_eq!(mode(&sandbox.home().join(".env")), 0o600);
}

#[test]
fn language_flag_is_written_to_the_config() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init", "--language", "tr"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(config_of(&sandbox).ui.language, Lang::Tr);
    assert!(
        run.stdout
            .contains("UI language: tr (chosen with --language)")
    );
}

#[test]
fn home_flag_overrides_tau_home() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init", "--yes", "--home", "elsewhere"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let elsewhere = sandbox.root().join("elsewhere");
    assert!(elsewhere.join("tau.toml").is_file());
    assert!(elsewhere.join("persona/user.md").is_file());
    assert!(!Path::new(&sandbox.home()).exists());
}

#[test]
fn an_unknown_provider_is_refused_by_the_command_line() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["init", "--provider", "vllm", "--yes"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("vllm"), "{}", run.stderr);
    assert!(!sandbox.home().exists());
}

#[test]
fn init_for_ollama_picks_a_model_the_local_server_has() {
    let tags = r#"{"models":[{"name":"llama3.2:3b","model":"llama3.2:3b"},{"name":"qwen3:8b","model":"qwen3:8b"}]}"#;
    let (port, request) = serve_once(format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{tags}",
        tags.len()
    ));
    let mut sandbox = Sandbox::new();
    sandbox.var("OLLAMA_HOST", &format!("127.0.0.1:{port}"));
    let run = sandbox.run(&["init", "--provider", "ollama", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(request.join().unwrap().starts_with("GET /api/tags "));
    assert!(run.stdout.contains("has llama3.2:3b"), "{}", run.stdout);
    let config = config_of(&sandbox);
    let local = config.role("local").unwrap();
    assert_eq!(local.provider, "ollama");
    assert_eq!(local.model_id, "llama3.2:3b");
    assert_eq!(config.role("brain").unwrap().model_id, "qwen3:8b");
}

#[test]
fn init_for_ollama_without_a_server_keeps_the_template_and_says_what_to_pull() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut sandbox = Sandbox::new();
    sandbox.var("OLLAMA_HOST", &format!("127.0.0.1:{port}"));
    let run = sandbox.run(&["init", "--provider", "ollama", "--yes"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("`ollama pull qwen3:8b`"),
        "{}",
        run.stdout
    );
    assert_eq!(
        sandbox.read("home/tau.toml"),
        render_template(BuiltinProvider::Ollama)
    );
}
