//! One update in: who sent it decides whether anything reaches the hub.
//!
//! Invariants: before pairing, only `/start <code>` in a private chat is acted on; after it, a
//! message counts only from the owner's user id in the owner's chat (the chat pinned in
//! `tau.toml` may be a group: there, nobody else's message counts, and nobody pairs); any other
//! group is left; a tap goes to [`super::cards::handle_tap`], which checks it in full. Ignored
//! updates are logged at debug level with their ids only.

use std::sync::Arc;

use crate::bot_api::types::{Message, Update};
use crate::state::{self, OwnerBinding, PairingRefusal};

use super::{Shared, cards, commands, turn_relay};

pub(super) async fn handle(shared: &Arc<Shared>, update: Update) {
    if let Some(tap) = update.callback_query {
        cards::handle_tap(shared, tap).await;
    } else if let Some(message) = update.message {
        handle_message(shared, update.update_id, message).await;
    }
}

async fn handle_message(shared: &Arc<Shared>, update_id: i64, message: Message) {
    let Some(from) = message.from.as_ref() else {
        return;
    };
    let text = message.text.as_deref().unwrap_or("").trim();
    let owner = shared.owner();
    let private = message.chat.is_private();
    if !private && owner.is_none_or(|o| o.chat_id != message.chat.id) {
        tracing::debug!(
            chat = message.chat.id,
            user = from.id,
            "telegram: leaving a group chat"
        );
        if let Err(e) = shared.bot.leave_chat(message.chat.id).await {
            tracing::debug!(error = %e, "telegram: leaveChat failed");
        }
        return;
    }
    if private && let Some(code) = start_code(text) {
        pair(shared, &message, from.id, code).await;
        return;
    }
    let is_owner = owner.is_some_and(|o| o.is_owner(from.id, message.chat.id));
    if !is_owner {
        tracing::debug!(
            chat = message.chat.id,
            user = from.id,
            "telegram: ignored a message from someone who is not the owner"
        );
        if owner.is_none() && private {
            shared
                .send_plain(message.chat.id, &shared.texts.plain("telegram.not_paired"))
                .await;
        }
        return;
    }
    if text.is_empty() {
        return;
    }
    if commands::handle(shared, message.chat.id, text).await {
        return;
    }
    turn_relay::spawn_turn(shared, message.chat.id, update_id, text.to_owned());
}

/// The code of `/start <code>` (or `/start@bot <code>`); `Some("")` for a bare `/start`.
fn start_code(text: &str) -> Option<&str> {
    let (command, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let command = command.split('@').next().unwrap_or(command);
    (command == "/start").then(|| rest.trim())
}

async fn pair(shared: &Arc<Shared>, message: &Message, user_id: i64, code: &str) {
    let chat = message.chat.id;
    if shared.owner().is_some_and(|o| o.is_owner(user_id, chat)) && code.is_empty() {
        shared
            .send_plain(chat, &shared.texts.plain("telegram.help"))
            .await;
        return;
    }
    let now = jiff::Timestamp::now().as_second();
    let key = match state::redeem_pairing_code(&shared.paths, code, now) {
        Ok(Ok(())) => match shared.bind_owner(OwnerBinding::new(user_id, chat, now)) {
            Ok(()) => {
                tracing::info!(user = user_id, chat, "telegram: paired with the owner");
                "telegram.paired"
            }
            Err(e) => {
                tracing::error!(error = %e, "telegram: the owner binding could not be stored");
                "telegram.hub_unreachable"
            }
        },
        Ok(Err(refusal)) => {
            let why = match refusal {
                PairingRefusal::NoCode => "no code issued",
                PairingRefusal::Expired => "expired code",
                PairingRefusal::Wrong => "wrong code",
            };
            tracing::info!(user = user_id, chat, why, "telegram: pairing refused");
            if shared.owner().is_some() {
                // Paired already: a stranger learns nothing.
                return;
            }
            "telegram.pair_refused"
        }
        Err(e) => {
            tracing::error!(error = %e, "telegram: the pairing code could not be read");
            "telegram.pair_refused"
        }
    };
    shared.send_plain(chat, &shared.texts.plain(key)).await;
}

#[cfg(test)]
mod tests {
    use super::start_code;

    #[test]
    fn start_codes_are_read_with_or_without_the_bot_name() {
        assert_eq!(start_code("/start ABC"), Some("ABC"));
        assert_eq!(start_code("/start@tau_bot  ABC "), Some("ABC"));
        assert_eq!(start_code("/start"), Some(""));
        assert_eq!(start_code("/started ABC"), None);
        assert_eq!(start_code("hello"), None);
    }
}
