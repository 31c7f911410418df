//! Tests of the message table: the built-in tables' consistency, fallback, placeholders and
//! extension registration.

use super::*;

fn tables() -> [(Lang, &'static [(&'static str, &'static str)]); 2] {
    [(Lang::En, en::EN), (Lang::Tr, tr::TR)]
}

#[test]
fn every_lang_has_a_table() {
    // A new Lang must get a table here (the match in builtin_exact is exhaustive too).
    assert_eq!(tables().len(), Lang::ALL.len());
}

#[test]
fn builtin_tables_are_sorted_and_unique() {
    for (lang, table) in tables() {
        for pair in table.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{lang}: '{}' must come before '{}' (sorted, unique)",
                pair[0].0,
                pair[1].0
            );
        }
    }
}

#[test]
fn every_key_has_english_and_every_translation_matches_its_placeholders() {
    for (lang, table) in tables() {
        for (key, text) in table {
            let english = builtin_exact(key, Lang::En)
                .unwrap_or_else(|| panic!("{lang} key '{key}' has no English text"));
            assert!(
                !english.trim().is_empty(),
                "'{key}' has an empty English text"
            );
            assert!(!text.trim().is_empty(), "'{key}' has an empty {lang} text");
            check_same_placeholders(key, english, [(lang, *text)]).unwrap();
        }
    }
}

#[test]
fn turkish_covers_every_builtin_key() {
    let missing: Vec<_> = builtin_keys()
        .filter(|key| builtin_exact(key, Lang::Tr).is_none())
        .collect();
    assert!(missing.is_empty(), "no Turkish text for {missing:?}");
}

#[test]
fn keys_are_dotted_words() {
    for key in builtin_keys() {
        assert!(is_valid_key(key), "{key}");
        assert!(key.contains('.'), "{key} is not namespaced");
    }
}

#[test]
fn session_not_found_in_both_languages() {
    assert_eq!(
        t("session.not_found", Lang::Tr, &[("id", &"x")]).unwrap(),
        "Oturum bulunamadı: x."
    );
    assert_eq!(
        t("session.not_found", Lang::En, &[("id", &"x")]).unwrap(),
        "Session not found: x."
    );
}

#[test]
fn seed_texts_are_exact() {
    let compacted = t(
        "compact.done",
        Lang::En,
        &[
            ("n", &12),
            ("id", &"20260929-153012-3f9a"),
            ("old", &"20260928-101010-aaaa"),
        ],
    )
    .unwrap();
    assert_eq!(
        compacted,
        "Compacted 12 messages into a summary. New session 20260929-153012-3f9a; \
         the previous session 20260928-101010-aaaa is kept."
    );
    assert_eq!(
        t("approval.rejected", Lang::En, &[("tool", &"desk_lamp")]).unwrap(),
        "✗ desk_lamp: not approved"
    );
    assert_eq!(
        t("approval.title", Lang::En, &[("tier", &2)]).unwrap(),
        "⚠️  Approval needed (tier 2)"
    );
    assert_eq!(
        t("approval.question", Lang::En, &[]).unwrap(),
        "Approve? [y/N]"
    );
    assert_eq!(
        t(
            "session.context_mismatch",
            Lang::En,
            &[("id", &"20260929-153012-3f9a"), ("mode", &"sliding")]
        )
        .unwrap(),
        "Session 20260929-153012-3f9a was recorded with a different [agent] context setting; \
         set it back to sliding or start a new session."
    );
    let line = t(
        "sessions.line",
        Lang::En,
        &[
            ("n", &1),
            ("id", &"20260929-153012-3f9a"),
            ("date", &"29.09.2026 18:30"),
            ("channel", &"terminal"),
            ("title", &"Merhaba"),
            ("count", &4),
        ],
    )
    .unwrap();
    assert_eq!(
        line,
        "1. 20260929-153012-3f9a 29.09.2026 18:30 terminal Merhaba (4 messages)"
    );
}

#[test]
fn turkish_approval_prompt_reads_naturally() {
    assert_eq!(
        t("approval.title", Lang::Tr, &[("tier", &2)]).unwrap(),
        "⚠️  Onay gerekli (kademe 2)"
    );
    assert_eq!(
        t("approval.rejected", Lang::Tr, &[("tool", &"desk_lamp")]).unwrap(),
        "✗ desk_lamp: onaylanmadı"
    );
}

#[test]
fn unknown_key_is_an_error() {
    assert_eq!(
        t("no.such.key", Lang::En, &[]),
        Err(I18nError::UnknownKey("no.such.key".into()))
    );
    let messages = Messages::builtin();
    assert_eq!(
        messages.t("no.such.key", Lang::Tr, &[]),
        Err(I18nError::UnknownKey("no.such.key".into()))
    );
    assert_eq!(
        messages.t_or_key("no.such.key", Lang::Tr, &[]),
        "no.such.key"
    );
}

#[test]
fn missing_argument_is_an_error_naming_it() {
    let err = t("session.not_found", Lang::Tr, &[("session", &"x")]).unwrap_err();
    assert_eq!(
        err,
        I18nError::MissingArgument {
            key: "session.not_found".into(),
            lang: Lang::Tr,
            name: "id".into(),
        }
    );
    assert_eq!(
        err.to_string(),
        "message 'session.not_found' (tr) needs the argument 'id'"
    );
}

#[test]
fn extension_keys_fall_back_to_english() {
    let mut messages = Messages::builtin();
    messages
        .register("demo.hello", &[(Lang::En, "Hello, {name}!")])
        .unwrap();
    assert_eq!(
        messages
            .t("demo.hello", Lang::Tr, &[("name", &"Ada")])
            .unwrap(),
        "Hello, Ada!"
    );
    assert_eq!(
        messages.template("demo.hello", Lang::Tr).unwrap(),
        ("Hello, {name}!", Lang::En)
    );
    // The free function only knows the built-in table.
    assert!(matches!(
        t("demo.hello", Lang::En, &[]),
        Err(I18nError::UnknownKey(_))
    ));
}

#[test]
fn extension_keys_use_their_translation() {
    let mut messages = Messages::builtin();
    messages
        .register_all(&[
            ("demo.a", &[(Lang::En, "A {x}"), (Lang::Tr, "Â {x}")]),
            ("demo.b", &[(Lang::En, "B")]),
        ])
        .unwrap();
    assert_eq!(messages.t("demo.a", Lang::Tr, &[("x", &1)]).unwrap(), "Â 1");
    assert_eq!(messages.t("demo.a", Lang::En, &[("x", &1)]).unwrap(), "A 1");
    assert!(messages.contains("demo.b"));
    assert!(messages.contains("session.new"));
    assert!(!messages.contains("demo.c"));
    let keys: Vec<_> = messages.keys().collect();
    assert_eq!(keys.len(), builtin_keys().count() + 2);
    assert_eq!(keys.last(), Some(&"demo.b"));
}

#[test]
fn builtin_keys_cannot_be_replaced() {
    let mut messages = Messages::builtin();
    let err = messages
        .register("session.not_found", &[(Lang::En, "Gone: {id}")])
        .unwrap_err();
    assert_eq!(err, I18nError::BuiltinKey("session.not_found".into()));
    assert_eq!(
        messages
            .t("session.not_found", Lang::En, &[("id", &"x")])
            .unwrap(),
        "Session not found: x."
    );
}

#[test]
fn extension_keys_may_be_registered_again() {
    let mut messages = Messages::builtin();
    messages.register("demo.x", &[(Lang::En, "one")]).unwrap();
    messages.register("demo.x", &[(Lang::En, "two")]).unwrap();
    assert_eq!(messages.t("demo.x", Lang::En, &[]).unwrap(), "two");
}

#[test]
fn bad_registrations_are_refused_and_change_nothing() {
    let mut messages = Messages::builtin();
    assert_eq!(
        messages.register("demo.tr_only", &[(Lang::Tr, "yalnızca Türkçe")]),
        Err(I18nError::NoEnglish("demo.tr_only".into()))
    );
    assert_eq!(
        messages.register(
            "demo.mismatch",
            &[(Lang::En, "Hi {name}"), (Lang::Tr, "Selam {isim}")]
        ),
        Err(I18nError::PlaceholderMismatch {
            key: "demo.mismatch".into(),
            lang: Lang::Tr,
            english: vec!["name".into()],
            found: vec!["isim".into()],
        })
    );
    assert!(matches!(
        messages.register("demo.broken", &[(Lang::En, "Hi {name")]),
        Err(I18nError::BadTemplate { lang: Lang::En, .. })
    ));
    for key in ["", "demo..x", ".demo", "demo x", "demo/x", "démo.x"] {
        assert_eq!(
            messages.register(key, &[(Lang::En, "x")]),
            Err(I18nError::InvalidKey(key.into())),
            "{key:?}"
        );
    }
    // One bad entry keeps the whole batch out.
    let batch: &[(&str, &[(Lang, &str)])] = &[
        ("demo.good", &[(Lang::En, "fine")]),
        ("demo.bad", &[(Lang::Tr, "no English")]),
    ];
    assert!(messages.register_all(batch).is_err());
    assert!(!messages.contains("demo.good"));
    assert_eq!(messages.keys().count(), builtin_keys().count());
}

#[test]
fn braces_in_messages_and_arguments() {
    let mut messages = Messages::builtin();
    messages
        .register("demo.json", &[(Lang::En, "{{\"tool\": {tool}}}")])
        .unwrap();
    assert_eq!(
        messages
            .t("demo.json", Lang::En, &[("tool", &"{x}")])
            .unwrap(),
        "{\"tool\": {x}}"
    );
}

#[test]
fn messages_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Messages>();
    assert_send_sync::<I18nError>();
}

#[test]
fn a_channel_table_registers_every_language_or_nothing() {
    const TABLE: &[ChannelMessage] = &[
        ChannelMessage {
            key: "demo.linked",
            en: "Linked to {chat}.",
            tr: "{chat} ile bağlandı.",
        },
        ChannelMessage {
            key: "demo.bye",
            en: "Bye.",
            tr: "Hoşça kal.",
        },
    ];
    let mut messages = Messages::builtin();
    messages.register_channel(TABLE).unwrap();
    assert_eq!(
        messages
            .t("demo.linked", Lang::Tr, &[("chat", &"ev")])
            .unwrap(),
        "ev ile bağlandı."
    );
    assert_eq!(
        messages.template("demo.bye", Lang::Tr).unwrap(),
        ("Hoşça kal.", Lang::Tr)
    );

    // A translation with other placeholders refuses the whole table.
    let mut messages = Messages::builtin();
    let broken = [
        ChannelMessage {
            key: "demo.ok",
            en: "Fine.",
            tr: "Tamam.",
        },
        ChannelMessage {
            key: "demo.bad",
            en: "Linked to {chat}.",
            tr: "{sohbet} ile bağlandı.",
        },
    ];
    assert!(messages.register_channel(&broken).is_err());
    assert!(!messages.contains("demo.ok"));
    assert!(!messages.contains("demo.bad"));
}
