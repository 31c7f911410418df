//! Every text the Telegram channel shows a person, in English and Turkish, registered with the
//! shared message table as a channel table ([`tau_api::i18n::ChannelMessage`]), so a missing
//! translation does not compile and placeholders are checked once at start.
//!
//! Invariant: a text with arguments is rendered here and HTML-escaped by the caller only where
//! it carries dynamic content (the templates themselves hold no markup but `<b>`/`<i>`/`<code>`).

use tau_api::i18n::{Args, ChannelMessage, I18nError, Messages};
use tau_api::lang::Lang;

/// The channel's message table.
pub const TELEGRAM_MESSAGES: &[ChannelMessage] = &[
    ChannelMessage {
        key: "telegram.paired",
        en: "Paired. This chat now talks to tau; send /help for the commands.",
        tr: "Eşleşildi. Bu sohbet artık tau ile konuşuyor; komutlar için /yardim yazın.",
    },
    ChannelMessage {
        key: "telegram.pair_refused",
        en: "That code is not valid. Run `tau telegram pair` on the hub's machine and send /start with the new code.",
        tr: "Bu kod geçerli değil. Hub makinesinde `tau telegram pair` çalıştırın ve yeni kodla /start gönderin.",
    },
    ChannelMessage {
        key: "telegram.not_paired",
        en: "This bot is not paired yet. Run `tau telegram pair` on the hub's machine and send /start with the code in a private chat.",
        tr: "Bu bot henüz eşleşmedi. Hub makinesinde `tau telegram pair` çalıştırın ve kodu özel sohbette /start ile gönderin.",
    },
    ChannelMessage {
        key: "telegram.help",
        en: "Send a message to talk to tau.\n/new — a new conversation\n/sessions — recent conversations\n/resume n — continue conversation n\n/status — the hub's state\n/help — this text",
        tr: "tau ile konuşmak için mesaj gönderin.\n/yeni — yeni sohbet\n/oturumlar — son sohbetler\n/devam n — n. sohbete devam\n/durum — hub'ın durumu\n/yardim — bu metin",
    },
    ChannelMessage {
        key: "telegram.new_session",
        en: "New conversation started.",
        tr: "Yeni sohbet başladı.",
    },
    ChannelMessage {
        key: "telegram.resumed",
        en: "Continuing: {title}",
        tr: "Devam ediliyor: {title}",
    },
    ChannelMessage {
        key: "telegram.no_sessions",
        en: "No earlier conversations.",
        tr: "Önceki sohbet yok.",
    },
    ChannelMessage {
        key: "telegram.resume_usage",
        en: "Usage: /resume n (a number from /sessions).",
        tr: "Kullanım: /devam n (/oturumlar listesinden bir sayı).",
    },
    ChannelMessage {
        key: "telegram.status",
        en: "Hub {version} ({profile}), up {uptime} s. Approvals waiting: {pending}. Conversation: {session}.",
        tr: "Hub {version} ({profile}), {uptime} sn'dir açık. Bekleyen onay: {pending}. Sohbet: {session}.",
    },
    ChannelMessage {
        key: "telegram.hub_unreachable",
        en: "The hub did not answer; try again in a moment.",
        tr: "Hub yanıt vermedi; birazdan yeniden deneyin.",
    },
    ChannelMessage {
        key: "telegram.working",
        en: "…",
        tr: "…",
    },
    ChannelMessage {
        key: "telegram.card_title",
        en: "Approval needed: {tool}",
        tr: "Onay gerekiyor: {tool}",
    },
    ChannelMessage {
        key: "telegram.card_expires",
        en: "Expires in {minutes} min; no answer means rejected.",
        tr: "{minutes} dk içinde sona erer; yanıt yoksa reddedilir.",
    },
    ChannelMessage {
        key: "telegram.card_truncated",
        en: "(truncated: {bytes} bytes, sha256 {digest})",
        tr: "(kısaltıldı: {bytes} bayt, sha256 {digest})",
    },
    ChannelMessage {
        key: "telegram.button_approve",
        en: "✅ Approve once",
        tr: "✅ Bir kez onayla",
    },
    ChannelMessage {
        key: "telegram.button_reject",
        en: "❌ Reject",
        tr: "❌ Reddet",
    },
    ChannelMessage {
        key: "telegram.outcome_approved",
        en: "✅ Approved",
        tr: "✅ Onaylandı",
    },
    ChannelMessage {
        key: "telegram.outcome_rejected",
        en: "❌ Rejected",
        tr: "❌ Reddedildi",
    },
    ChannelMessage {
        key: "telegram.outcome_timeout",
        en: "⌛ Timed out — rejected",
        tr: "⌛ Süre doldu — reddedildi",
    },
    ChannelMessage {
        key: "telegram.outcome_cancelled",
        en: "⏹ Cancelled — not run",
        tr: "⏹ İptal edildi — çalıştırılmadı",
    },
    ChannelMessage {
        key: "telegram.outcome_closed",
        en: "⌛ Expired — rejected",
        tr: "⌛ Süresi geçti — reddedildi",
    },
    ChannelMessage {
        key: "telegram.outcome_superseded",
        en: "♻️ Superseded after a restart — not approved",
        tr: "♻️ Yeniden başlatma sonrası geçersiz — onaylanmadı",
    },
    ChannelMessage {
        key: "telegram.tap_expired",
        en: "Expired — not approved. If it is still waiting, a fresh card was sent.",
        tr: "Süresi geçti — onaylanmadı. Hâlâ bekliyorsa yeni bir kart gönderildi.",
    },
    ChannelMessage {
        key: "telegram.tap_already",
        en: "Already decided: {outcome}",
        tr: "Zaten karar verildi: {outcome}",
    },
    ChannelMessage {
        key: "telegram.tap_not_allowed",
        en: "Not valid.",
        tr: "Geçersiz.",
    },
    ChannelMessage {
        key: "telegram.tap_hub_unreachable",
        en: "NOT approved: the hub did not answer.",
        tr: "ONAYLANMADI: hub yanıt vermedi.",
    },
    ChannelMessage {
        key: "telegram.turn_failed",
        en: "The turn could not start: {reason}",
        tr: "Tur başlatılamadı: {reason}",
    },
    ChannelMessage {
        key: "telegram.turn_notice",
        en: "({notice})",
        tr: "({notice})",
    },
];

/// The channel's texts in one language.
#[derive(Debug, Clone)]
pub struct Texts {
    messages: Messages,
    lang: Lang,
}

impl Texts {
    /// The built-in table plus the channel's, in `lang`.
    pub fn new(lang: Lang) -> Result<Self, I18nError> {
        let mut messages = Messages::builtin();
        messages.register_channel(TELEGRAM_MESSAGES)?;
        Ok(Self { messages, lang })
    }

    /// The text of `key` (the key itself if it were broken, which the start-up check rules out).
    pub fn get(&self, key: &str, args: &Args<'_>) -> String {
        self.messages.t_or_key(key, self.lang, args)
    }

    /// The text of `key` without arguments.
    pub fn plain(&self, key: &str) -> String {
        self.get(key, &[])
    }

    /// The clients' one presentation of events (`tau_client::present`), in the channel's
    /// language: a turn's stop reads here as it does in `tau chat` and `tau tui`.
    pub fn presenter(&self) -> tau_client::present::Presenter<'_> {
        tau_client::present::Presenter::new(&self.messages, self.lang)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_table_registers_in_every_language() {
        let tr = Texts::new(Lang::Tr).unwrap();
        assert_eq!(tr.plain("telegram.outcome_approved"), "✅ Onaylandı");
        let en = Texts::new(Lang::En).unwrap();
        assert_eq!(
            en.get("telegram.tap_already", &[("outcome", &"x")]),
            "Already decided: x"
        );
    }

    #[test]
    fn a_stop_reads_as_in_the_other_clients_in_the_channel_language() {
        let cancelled =
            tau_api::proto::v1::session_event::Kind::TurnEnded(tau_api::proto::v1::TurnEnded {
                stop_reason: "cancelled".into(),
                notice: "The turn was cancelled.".into(),
                ..Default::default()
            });
        let en = Texts::new(Lang::En).unwrap().presenter().live(&cancelled);
        assert_eq!(en.len(), 1);
        assert_eq!(en[0].text, "■ Cancelled.");
        let tr = Texts::new(Lang::Tr).unwrap().presenter().live(&cancelled);
        assert_eq!(tr[0].text, "■ İptal edildi.");
    }
}
