//! The small tables' keys and their errors: `[component.telegram]`, `[routines]`,
//! `[hub] idle_session_close` and a local model role's tuning.

use super::{KeepAlive, Temperature, err, load};

#[test]
fn the_telegram_table_reads_its_keys_and_defaults() {
    let c = load("[component.telegram]\napi_base = \"http://127.0.0.1:9/\"\nowner_user_id = 42\nowner_chat_id = 43\npoll_timeout_seconds = 2\n").unwrap();
    let t = super::TelegramConfig::from_table(c.component("telegram").unwrap());
    assert_eq!(t.api_base, "http://127.0.0.1:9");
    assert_eq!(t.owner_user_id, Some(42));
    assert_eq!(t.owner_chat_id, Some(43));
    assert_eq!(t.poll_timeout_seconds, 2);
    assert_eq!(
        t.approval_timeout_seconds,
        super::DEFAULT_APPROVAL_TIMEOUT_SECONDS
    );
}

#[test]
fn the_telegram_api_base_is_https_or_a_loopback_host() {
    let api_base = |base: &str| {
        load(&format!("[component.telegram]\napi_base = \"{base}\"\n"))
            .map(|c| super::TelegramConfig::from_table(c.component("telegram").unwrap()).api_base)
    };
    for base in [
        "https://api.telegram.org",
        "https://tg.example:8443/proxy",
        "http://127.0.0.1:8081",
        "http://127.0.0.2",
        "http://localhost:8081/",
        "http://LOCALHOST",
        "http://[::1]:8081",
        "http://user@127.0.0.1:8081",
    ] {
        assert!(api_base(base).is_ok(), "{base} is accepted");
    }
    for base in [
        "http://api.telegram.org",
        "http://192.168.1.10:8081",
        "http://[::2]:8081",
        "http://localhost.example.com",
        "http://127.0.0.1.example.com",
        "http://127.0.0.1@api.telegram.org",
        "http://localhost:80@api.telegram.org/",
        "http://",
        "ftp://127.0.0.1",
    ] {
        let e = api_base(base).expect_err(base).to_string();
        assert!(
            e.contains("component.telegram.api_base") && e.contains("expected an https:// URL"),
            "{base}: {e}"
        );
    }
}

#[test]
fn the_telegram_owner_ids_are_both_set_or_neither() {
    let ids = |text: &str| {
        load(&format!("[component.telegram]\n{text}")).map(|c| {
            let t = super::TelegramConfig::from_table(c.component("telegram").unwrap());
            (t.owner_user_id, t.owner_chat_id)
        })
    };
    assert_eq!(ids("").unwrap(), (None, None));
    assert_eq!(
        ids("owner_user_id = 7\nowner_chat_id = 7\n").unwrap(),
        (Some(7), Some(7))
    );
    for one in ["owner_user_id = 7\n", "owner_chat_id = 7\n"] {
        let e = ids(one).unwrap_err().to_string();
        assert!(
            e.contains("owner_user_id") && e.contains("owner_chat_id") && !e.contains('\n'),
            "{one}: {e}"
        );
    }
}

#[test]
fn the_routines_table_errors() {
    for (text, expected) in [
        (
            "[routines]\napproval_timeout = \"5s\"\n",
            r#"routines.approval_timeout = "5s": expected a duration from 10s to 1d: a whole number of seconds, or a number and a unit (s, m, h, d) such as "10m""#,
        ),
        (
            "[routines]\napproval_timeout = \"ten minutes\"\n",
            r#"routines.approval_timeout = "ten minutes": expected a duration from 10s to 1d: a whole number of seconds, or a number and a unit (s, m, h, d) such as "10m""#,
        ),
        (
            "[routines]\ntimeout = 5\n",
            "routines.timeout = 5: unknown key (expected approval_timeout)",
        ),
    ] {
        assert_eq!(
            err(text),
            format!("{}: {expected}", super::FILE),
            "for:\n{text}"
        );
    }
}

#[test]
fn the_routines_table_reads_its_approval_timeout() {
    assert_eq!(load("").unwrap().routines.approval_timeout_seconds, 600);
    for (text, seconds) in [
        ("approval_timeout = 90", 90),
        ("approval_timeout = \"90s\"", 90),
        ("approval_timeout = \"15m\"", 900),
        ("approval_timeout = \"2h\"", 7200),
        ("approval_timeout = \"1d\"", 86_400),
    ] {
        let config = load(&format!("[routines]\n{text}\n")).unwrap();
        assert_eq!(config.routines.approval_timeout_seconds, seconds, "{text}");
    }
    assert!(err("[routines]\napproval_timeout = \"99999999999999999999d\"\n").contains("1d"));
}

#[test]
fn idle_session_close_takes_seconds_or_a_duration() {
    for (text, seconds) in [
        ("idle_session_close = 45", 45),
        ("idle_session_close = \"90s\"", 90),
        ("idle_session_close = \"10m\"", 600),
        ("idle_session_close = \"1h\"", 3600),
        (
            "idle_session_close = \"7d\"",
            super::MAX_IDLE_SESSION_CLOSE_SECONDS,
        ),
    ] {
        let c = load(&format!("[hub]\n{text}\n")).unwrap();
        assert_eq!(c.hub.idle_session_close_seconds, seconds, "{text}");
    }
}

#[test]
fn a_local_role_reads_its_tuning() {
    let text = "[models.roles.local]\nprovider = \"ollama\"\nmodel_id = \"qwen3:8b\"\n\
                num_ctx = 32768\nkeep_alive = \"30m\"\ntemperature = 0.2\n\
                [models.roles.gpt]\nprovider = \"openai\"\nmodel_id = \"gpt-4.1\"\n\
                keep_alive = -1\ntemperature = 1\n";
    let c = load(text).unwrap();
    let local = &c.role("local").unwrap().tuning;
    assert_eq!(local.num_ctx, Some(32768));
    assert_eq!(local.keep_alive, Some(KeepAlive::Duration("30m".into())));
    assert_eq!(local.temperature.map(Temperature::get), Some(0.2));
    let gpt = &c.role("gpt").unwrap().tuning;
    assert_eq!(gpt.num_ctx, None);
    assert_eq!(gpt.keep_alive, Some(KeepAlive::Seconds(-1)));
    assert_eq!(gpt.temperature.map(Temperature::get), Some(1.0));
}
