//! `tau init`: sets up TAU_HOME from the shipped templates.
//!
//! It writes `tau.toml` (the shipped template on the provider the credentials allow, or
//! `--provider`, with the chosen UI language), `persona/persona.md`, `persona/user.example.md`,
//! `persona/user.md` (a copy of the example) and `.env.example`; with the global `--profile` it
//! appends `TAU_PROFILE` to `<home>/.env` when that file does not set it.
//!
//! Invariants (the rules a person relies on):
//! - `tau.toml`, `persona.md` and `user.example.md` are never replaced without `--force`;
//!   `user.md`, `.env.example` and `.env` are never replaced at all (`.env` is only appended to);
//! - a new file is created exclusively (never clobbering one that appeared meanwhile) and a replaced
//!   one is swapped in atomically; `.env` and `user.md` are private (0600), directories it creates
//!   are 0700;
//! - the UI language is asked only when `tau.toml` is written and neither `--language` nor `--yes`
//!   was given, and only on a terminal; otherwise it is `en`, and tau says so;
//! - secrets are never printed: credentials are named by variable, never shown.

mod files;
mod language;
mod ollama;

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use tau_api::config::{BuiltinProvider, Profile, default_provider, render_template};
use tau_api::dotenv::{self, Dotenv};
use tau_api::env::Env;
use tau_api::lang::Lang;
use tau_api::paths::{self, CONFIG_FILE_NAME, ENV_FILE_NAME};

use crate::cli::{InitArgs, LangArg, ProfileArg, ProviderArg};
use crate::context::Context;
use crate::environment;
use crate::ops::shipped_files;

use self::files::{Written, append_line, write_file};
use self::language::with_language;

/// How an existing file is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Replaced when `--force` is given.
    ReplaceWithForce,
    /// Never replaced.
    Never,
}

/// Runs `tau init`. `profile` is the global `--profile`.
pub fn run(
    args: &InitArgs,
    ctx: &Context,
    profile: Option<ProfileArg>,
) -> anyhow::Result<ExitCode> {
    let process_env = environment::snapshot(ctx);
    let cwd = environment::current_dir()?;
    let home = match &args.home {
        Some(dir) => cwd.join(dir),
        None => paths::resolve_home(&process_env, &cwd, process_env.user_home().as_deref())?,
    };
    let env_file = home.join(ENV_FILE_NAME);
    let dotenv = dotenv::load(&env_file)?;
    let mut env = process_env.clone();
    if let Some(file) = &dotenv {
        for problem in &file.problems {
            eprintln!("tau init: warning: {problem}");
        }
        env.fill(&file.pairs_to_set(&env));
    }

    files::create_private_dir(&home)?;
    let mut out = Vec::new();
    let config_action = write_config(args, &home, &process_env, &env, &env_file, &mut out)?;
    write_persona_files(args, &home, &mut out)?;

    if let Some(profile) = profile.map(profile_of) {
        out.push(add_profile(&env_file, dotenv.as_ref(), profile)?);
    }

    for line in &out {
        outln!("{line}");
    }
    match &config_action {
        Some((provider, why, lang, lang_why)) => {
            outln!("provider: {provider} ({why})");
            outln!("UI language: {lang} ({lang_why})");
        }
        None => outln!("tau.toml kept: its provider and language are unchanged"),
    }
    outln!("next: {}", next_step(&config_action, &home, &env_file));
    Ok(ExitCode::SUCCESS)
}

/// What `tau init` wrote into a new tau.toml: the provider and why, the UI language and why.
type ConfigChoice = (BuiltinProvider, String, Lang, &'static str);

/// Writes `<home>/tau.toml` unless it exists (and `--force` is not given). `process_env` is the
/// environment of `tau`, `env` the same with `<home>/.env` filled in.
fn write_config(
    args: &InitArgs,
    home: &Path,
    process_env: &Env,
    env: &Env,
    env_file: &Path,
    out: &mut Vec<Written>,
) -> anyhow::Result<Option<ConfigChoice>> {
    let config_file = home.join(CONFIG_FILE_NAME);
    if config_file.exists() && !args.force {
        out.push(Written::Kept {
            path: config_file,
            why: "exists; --force replaces it",
        });
        return Ok(None);
    }
    let (provider, why) = choose_provider(args.provider, process_env, env, env_file);
    let (lang, lang_why) = choose_language(args)?;
    let mut text = with_language(&render_template(provider), lang);
    let mut why = why;
    if provider == BuiltinProvider::Ollama {
        let (local, note) = ollama::with_local_models(&text, env);
        text = local;
        why = format!("{why}; {note}");
    }
    out.push(write_file(&config_file, &text, 0o644, args.force)?);
    Ok(Some((provider, why, lang, lang_why)))
}

/// Writes the persona files and `.env.example`, each by its [`Policy`].
fn write_persona_files(args: &InitArgs, home: &Path, out: &mut Vec<Written>) -> anyhow::Result<()> {
    let persona_dir = home.join("persona");
    files::create_private_dir(&persona_dir)?;
    let plan: [(PathBuf, String, u32, Policy); 4] = [
        (
            persona_dir.join("persona.md"),
            shipped_files::PERSONA.to_string(),
            0o644,
            Policy::ReplaceWithForce,
        ),
        (
            persona_dir.join("user.example.md"),
            shipped_files::USER_EXAMPLE.to_string(),
            0o644,
            Policy::ReplaceWithForce,
        ),
        (
            persona_dir.join("user.md"),
            shipped_files::USER_EXAMPLE.to_string(),
            0o600,
            Policy::Never,
        ),
        (
            home.join(".env.example"),
            shipped_files::env_example(),
            0o644,
            Policy::Never,
        ),
    ];
    for (path, text, mode, policy) in &plan {
        let replace = args.force && *policy == Policy::ReplaceWithForce;
        if path.exists() && !replace {
            out.push(Written::Kept {
                path: path.clone(),
                why: match policy {
                    Policy::ReplaceWithForce => "exists; --force replaces it",
                    Policy::Never => "exists; never overwritten",
                },
            });
            continue;
        }
        out.push(write_file(path, text, *mode, replace)?);
    }
    Ok(())
}

/// The provider for a new tau.toml and why it was chosen.
fn choose_provider(
    flag: Option<ProviderArg>,
    process_env: &Env,
    env: &Env,
    env_file: &Path,
) -> (BuiltinProvider, String) {
    if let Some(flag) = flag {
        let provider = match flag {
            ProviderArg::Bedrock => BuiltinProvider::Bedrock,
            ProviderArg::Anthropic => BuiltinProvider::Anthropic,
            ProviderArg::Fake => BuiltinProvider::Fake,
            ProviderArg::Ollama => BuiltinProvider::Ollama,
            ProviderArg::OpenAi => BuiltinProvider::OpenAi,
        };
        return (provider, "chosen with --provider".to_string());
    }
    let provider = default_provider(env);
    let found = match provider {
        BuiltinProvider::Bedrock => "AWS credentials found",
        BuiltinProvider::Anthropic => "ANTHROPIC_API_KEY found",
        // Never chosen by credentials alone: only with --provider.
        BuiltinProvider::Ollama | BuiltinProvider::OpenAi => "chosen",
        BuiltinProvider::Fake => {
            return (
                provider,
                "no credentials found: the offline fake model".to_string(),
            );
        }
    };
    let place = if default_provider(process_env) == provider {
        "in the environment".to_string()
    } else {
        format!("in {}", env_file.display())
    };
    (provider, format!("{found} {place}"))
}

/// The UI language for a new tau.toml and why.
fn choose_language(args: &InitArgs) -> anyhow::Result<(Lang, &'static str)> {
    if let Some(lang) = args.language {
        let lang = match lang {
            LangArg::En => Lang::En,
            LangArg::Tr => Lang::Tr,
        };
        return Ok((lang, "chosen with --language"));
    }
    if args.yes {
        return Ok((Lang::En, "the default with --yes"));
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok((
            Lang::En,
            "the default: stdin is not a terminal; --language chooses another",
        ));
    }
    let lang = language::ask(&mut stdin.lock(), &mut std::io::stdout())
        .context("asking the UI language")?;
    Ok((lang, "your answer"))
}

fn profile_of(arg: ProfileArg) -> Profile {
    match arg {
        ProfileArg::Home => Profile::Home,
        ProfileArg::Travel => Profile::Travel,
        ProfileArg::Sport => Profile::Sport,
    }
}

/// Appends `TAU_PROFILE=<profile>` to `.env` unless the file sets TAU_PROFILE already.
fn add_profile(
    env_file: &Path,
    dotenv: Option<&Dotenv>,
    profile: Profile,
) -> anyhow::Result<Written> {
    let already = dotenv.is_some_and(|file| file.vars.iter().any(|(n, _)| n == "TAU_PROFILE"));
    if already {
        return Ok(Written::Kept {
            path: env_file.to_path_buf(),
            why: "sets TAU_PROFILE already; left as it is",
        });
    }
    append_line(env_file, &format!("TAU_PROFILE={profile}"))?;
    Ok(Written::Appended {
        path: env_file.to_path_buf(),
        what: format!("TAU_PROFILE={profile}"),
    })
}

/// The one line telling the person what to do next.
fn next_step(config_action: &Option<ConfigChoice>, home: &Path, env_file: &Path) -> String {
    let user = home.join("persona").join("user.md");
    match config_action {
        Some((BuiltinProvider::Fake, ..)) => format!(
            "edit {} about yourself; for a real model put ANTHROPIC_API_KEY or AWS credentials in {} and set the roles' provider in {}; then run `tau doctor`",
            user.display(),
            env_file.display(),
            home.join(CONFIG_FILE_NAME).display()
        ),
        _ => format!(
            "edit {} about yourself, then run `tau doctor`",
            user.display()
        ),
    }
}
