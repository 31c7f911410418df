//! The page's chrome, in the hub's language: the terminal's own messages (the approval card, the
//! tiers, the TUI's pane titles) from `tau_api::i18n`, plus the few texts only the page shows, in
//! the same table form ([`ChannelMessage`]: a missing translation does not compile).
//!
//! Invariants: the page gets templates (`{tool}` placeholders), never text a model wrote; every key
//! the page uses is here in every language; the table is built per request from static data.

use serde_json::{Map, Value};
use tau_api::i18n::{ChannelMessage, Messages};
use tau_api::lang::Lang;

/// The terminal's messages the page shows.
const SHARED: &[&str] = &[
    "approval.title",
    "approval.tool",
    "approval.arguments",
    "approval.effect",
    "approval.arming",
    "approval.button_approve",
    "approval.button_reject",
    "approval.approved",
    "approval.rejected",
    "approval.decided_elsewhere",
    "approval.expired",
    "approval.expired_by_restart",
    "approval.timed_out",
    "approval.bidi_warning",
    "tier.0",
    "tier.1",
    "tier.2",
    "tier.label",
    "tui.sessions",
    "tui.conversation",
    "tui.state.idle",
    "tui.state.running",
    "tui.state.awaiting_approval",
    "status.title",
];

/// The texts only the page shows.
pub const WEB_MESSAGES: &[ChannelMessage] = &[
    ChannelMessage {
        key: "web.new_session",
        en: "New session",
        tr: "Yeni oturum",
    },
    ChannelMessage {
        key: "web.send",
        en: "Send",
        tr: "Gönder",
    },
    ChannelMessage {
        key: "web.placeholder",
        en: "Message tau…",
        tr: "tau'ya yaz…",
    },
    ChannelMessage {
        key: "web.pending",
        en: "Pending approvals",
        tr: "Bekleyen onaylar",
    },
    ChannelMessage {
        key: "web.none_pending",
        en: "Nothing waits for you.",
        tr: "Bekleyen bir şey yok.",
    },
    ChannelMessage {
        key: "web.pairing",
        en: "Enrolling this browser…",
        tr: "Bu tarayıcı kaydediliyor…",
    },
    ChannelMessage {
        key: "web.not_enrolled",
        en: "This browser is not enrolled. Run `tau web pair` on the hub's machine and open the link it prints.",
        tr: "Bu tarayıcı kayıtlı değil. Hub'ın makinesinde `tau web pair` çalıştırın ve yazdığı bağlantıyı açın.",
    },
    ChannelMessage {
        key: "web.revoked",
        en: "This browser's access was revoked.",
        tr: "Bu tarayıcının erişimi kaldırıldı.",
    },
    ChannelMessage {
        key: "web.pair_failed",
        en: "Pairing failed: {reason}",
        tr: "Eşleştirme başarısız: {reason}",
    },
    ChannelMessage {
        key: "web.signed_in_as",
        en: "Signed in as {name}",
        tr: "{name} olarak giriş yapıldı",
    },
    ChannelMessage {
        key: "web.reconnecting",
        en: "Reconnecting…",
        tr: "Yeniden bağlanılıyor…",
    },
    ChannelMessage {
        key: "web.cancel",
        en: "Stop",
        tr: "Durdur",
    },
    ChannelMessage {
        key: "web.open",
        en: "Open",
        tr: "Aç",
    },
    ChannelMessage {
        key: "web.status",
        en: "Hub status",
        tr: "Hub durumu",
    },
    ChannelMessage {
        key: "web.no_sessions",
        en: "No sessions yet.",
        tr: "Henüz oturum yok.",
    },
    ChannelMessage {
        key: "web.routines",
        en: "Routines",
        tr: "Rutinler",
    },
    ChannelMessage {
        key: "web.no_routines",
        en: "No routines.",
        tr: "Rutin yok.",
    },
    ChannelMessage {
        key: "web.routines_off",
        en: "Routines are off: {reason}",
        tr: "Rutinler kapalı: {reason}",
    },
    ChannelMessage {
        key: "web.next_firing",
        en: "next: {time}",
        tr: "sonraki: {time}",
    },
    ChannelMessage {
        key: "web.last_firing",
        en: "last: {outcome}, {time}",
        tr: "son: {outcome}, {time}",
    },
    ChannelMessage {
        key: "web.never_fired",
        en: "not fired yet",
        tr: "henüz çalışmadı",
    },
    ChannelMessage {
        key: "web.paused",
        en: "paused",
        tr: "duraklatıldı",
    },
    ChannelMessage {
        key: "web.outcome.running",
        en: "running",
        tr: "çalışıyor",
    },
    ChannelMessage {
        key: "web.outcome.succeeded",
        en: "succeeded",
        tr: "başarılı",
    },
    ChannelMessage {
        key: "web.outcome.failed",
        en: "failed",
        tr: "başarısız",
    },
    ChannelMessage {
        key: "web.outcome.skipped",
        en: "skipped",
        tr: "atlandı",
    },
    ChannelMessage {
        key: "web.outcome.interrupted",
        en: "interrupted",
        tr: "yarıda kesildi",
    },
    ChannelMessage {
        key: "web.nodes",
        en: "Nodes",
        tr: "Düğümler",
    },
    ChannelMessage {
        key: "web.no_nodes",
        en: "No nodes paired.",
        tr: "Eşleşmiş düğüm yok.",
    },
    ChannelMessage {
        key: "web.node_live",
        en: "live",
        tr: "bağlı",
    },
    ChannelMessage {
        key: "web.node_away",
        en: "away",
        tr: "bağlı değil",
    },
];

/// Every text the page uses, as templates in `lang`.
pub fn table(lang: Lang) -> Map<String, Value> {
    let mut messages = Messages::builtin();
    if let Err(e) = messages.register_channel(WEB_MESSAGES) {
        tracing::error!("the web client's texts do not register: {e}");
    }
    let keys = SHARED
        .iter()
        .copied()
        .chain(WEB_MESSAGES.iter().map(|m| m.key));
    keys.filter_map(|key| {
        let (text, _) = messages.template(key, lang).ok()?;
        Some((key.to_owned(), Value::String(text.to_owned())))
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_has_a_text_in_every_language() {
        let mut messages = Messages::builtin();
        messages.register_channel(WEB_MESSAGES).unwrap();
        for lang in Lang::ALL {
            let table = table(lang);
            assert_eq!(table.len(), SHARED.len() + WEB_MESSAGES.len(), "{lang:?}");
        }
        assert_eq!(table(Lang::Tr)["approval.arming"], "(hazırlanıyor…)");
        assert_eq!(table(Lang::En)["approval.arming"], "(arming…)");
        assert_eq!(table(Lang::Tr)["web.routines"], "Rutinler");
        assert_eq!(table(Lang::En)["web.node_live"], "live");
    }

    #[test]
    fn every_firing_outcome_has_a_word() {
        // `FiringOutcome::as_str` of each outcome (the web room does not import `routine`).
        for outcome in ["running", "succeeded", "failed", "skipped", "interrupted"] {
            let key = format!("web.outcome.{outcome}");
            for lang in Lang::ALL {
                assert!(table(lang).contains_key(&key), "{key} in {lang:?}");
            }
        }
    }
}
