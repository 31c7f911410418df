//! The fake model's demo rules: what it answers offline, in English or Turkish.
//!
//! Invariants: it only calls tools that the request offers; after a tool result it reports what
//! happened (a refusal is reported as not approved, never as done); replies stream in several deltas.

use std::sync::Arc;

use serde_json::json;

use super::reply::FakeReply;
use crate::message::{ContentBlock, Message, Role, ToolResultContent, ToolResultStatus};
use crate::model::ModelRequest;
use crate::tool::builtin::{CurrentTime, DemoPhysicalAction};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    En,
    Tr,
}

/// The demo reply to `request`.
pub(crate) fn demo_reply(request: &ModelRequest) -> FakeReply {
    let lang = detect_language(last_user_text(&request.messages).unwrap_or_default());
    match request.messages.last() {
        Some(last) if last.role == Role::User && last.tool_results().next().is_some() => {
            after_tools(&request.messages, last, lang)
        }
        _ => answer(request, lang),
    }
}

fn answer(request: &ModelRequest, lang: Lang) -> FakeReply {
    let text = last_user_text(&request.messages).unwrap_or_default();
    let offers = |name: &str| request.tools.iter().any(|spec| spec.name == name);
    if let Some(reply) = named_tool_call(request, text) {
        return reply;
    }
    let words = words(text);
    if asks_to_switch(&words, text) {
        if offers(DemoPhysicalAction::NAME) {
            let action: String = text.trim().chars().take(200).collect();
            return FakeReply::tool_call(DemoPhysicalAction::NAME, json!({ "action": action }));
        }
        return say(match lang {
            Lang::En => "I cannot switch anything here: the demo action tool is not available.",
            Lang::Tr => "Burada hiçbir şeyi açıp kapatamam: demo eylem aracı kullanılamıyor.",
        });
    }
    if asks_the_time(&words) {
        if offers(CurrentTime::NAME) {
            return FakeReply::tool_call(CurrentTime::NAME, json!({}));
        }
        return say(match lang {
            Lang::En => "I cannot tell the time here: the clock tool is not available.",
            Lang::Tr => "Burada saati söyleyemem: saat aracı kullanılamıyor.",
        });
    }
    let snippet: String = text.trim().chars().take(80).collect();
    say(&match lang {
        Lang::En => format!(
            "Hello! I am tau's offline demo model: I can tell the time and pretend to switch \
             things on or off. You said: \"{snippet}\""
        ),
        Lang::Tr => format!(
            "Merhaba! Ben tau'nun çevrimdışı demo modeliyim: saati söyleyebilir, bir şeyi açıp \
             kapatıyormuş gibi yapabilirim. Şunu yazdınız: \"{snippet}\""
        ),
    })
}

fn after_tools(messages: &[Arc<Message>], results: &Message, lang: Lang) -> FakeReply {
    let calls: Vec<(String, String)> = messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
        .map(|m| {
            m.tool_uses()
                .map(|u| (u.tool_use_id.clone(), u.name.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut sentences = Vec::new();
    for result in results.tool_results() {
        let tool = calls
            .iter()
            .find(|(id, _)| *id == result.tool_use_id)
            .map_or("?", |(_, name)| name.as_str());
        let text: String = result
            .content
            .iter()
            .map(ToolResultContent::as_text)
            .collect::<Vec<_>>()
            .join(" ");
        sentences.push(describe(tool, result.status, &text, lang));
    }
    say(&sentences.join(" "))
}

fn describe(tool: &str, status: ToolResultStatus, text: &str, lang: Lang) -> String {
    if text.starts_with("The user did not approve this action") {
        return match lang {
            Lang::En => "Understood, I did not do it: the action was not approved.".to_owned(),
            Lang::Tr => "Anlaşıldı, yapmadım: işlem onaylanmadı.".to_owned(),
        };
    }
    if status == ToolResultStatus::Error {
        return match lang {
            Lang::En => format!("That did not work: {text}"),
            Lang::Tr => format!("Olmadı: {text}"),
        };
    }
    match (tool, lang) {
        (CurrentTime::NAME, Lang::En) => {
            format!("It is {}.", text.split(';').next().unwrap_or(text))
        }
        (CurrentTime::NAME, Lang::Tr) => {
            format!("Şu an {}.", text.split(';').next().unwrap_or(text))
        }
        (_, Lang::En) => format!("Done. {text}"),
        (_, Lang::Tr) => format!("Tamam, yaptım. {text}"),
    }
}

/// A call of a tool the user names exactly (any offered tool but the two built-ins, which have
/// their own phrases), with the first JSON object of the text as its arguments (`{}` without
/// one): "call mcp__home__lamp {"state": "on"}". It lets the offline demo exercise the tools of an
/// installation, MCP tools included, under the gate like any model would.
fn named_tool_call(request: &ModelRequest, text: &str) -> Option<FakeReply> {
    let named = text
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | ',' | ':' | '{'))
        .find_map(|word| {
            request.tools.iter().find(|spec| {
                spec.name == word
                    && spec.name != CurrentTime::NAME
                    && spec.name != DemoPhysicalAction::NAME
            })
        })?;
    let arguments = match (text.find('{'), text.rfind('}')) {
        (Some(start), Some(end)) if start < end => {
            serde_json::from_str::<serde_json::Value>(&text[start..=end])
                .ok()
                .filter(serde_json::Value::is_object)
                .unwrap_or_else(|| json!({}))
        }
        _ => json!({}),
    };
    Some(FakeReply::tool_call(named.name.clone(), arguments))
}

/// A text reply streamed in chunks of a few words.
fn say(text: &str) -> FakeReply {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    FakeReply::deltas(words.chunks(3).map(|chunk| chunk.concat()))
}

fn last_user_text(messages: &[Arc<Message>]) -> Option<&str> {
    messages.iter().rev().find_map(|m| {
        if m.role != Role::User {
            return None;
        }
        m.content.iter().find_map(|block| match block {
            ContentBlock::Text(text) => Some(text.as_str()),
            _ => None,
        })
    })
}

/// The words of `text`, lowercased both the usual and the Turkish way (I → ı), so "TIME" and
/// "IŞIĞI" both match.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let usual = word.to_lowercase();
        let turkish = turkish_lowercase(word);
        if turkish != usual {
            words.push(turkish);
        }
        words.push(usual);
    }
    words
}

fn turkish_lowercase(word: &str) -> String {
    word.chars()
        .flat_map(|c| match c {
            'I' => vec!['ı'],
            'İ' => vec!['i'],
            c => c.to_lowercase().collect(),
        })
        .collect()
}

fn detect_language(text: &str) -> Lang {
    const TURKISH_WORDS: [&str; 9] = [
        "saat",
        "merhaba",
        "selam",
        "aç",
        "kapat",
        "lütfen",
        "nedir",
        "kaç",
        "nasılsın",
    ];
    let turkish_letters = text.chars().any(|c| "çğıöşüÇĞİÖŞÜ".contains(c));
    let turkish_word = words(text)
        .iter()
        .any(|w| TURKISH_WORDS.iter().any(|t| w.starts_with(t)));
    if turkish_letters || turkish_word {
        Lang::Tr
    } else {
        Lang::En
    }
}

fn asks_to_switch(words: &[String], text: &str) -> bool {
    let lower = text.to_lowercase();
    lower.contains("turn on")
        || lower.contains("turn off")
        || words.iter().any(|w| {
            w == "switch"
                || w == "aç"
                || w.starts_with("açar")
                || w.starts_with("açın")
                || w.starts_with("kapat")
        })
}

fn asks_the_time(words: &[String]) -> bool {
    words.iter().any(|w| w == "time" || w.starts_with("saat"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_and_intents() {
        assert_eq!(detect_language("What time is it?"), Lang::En);
        assert_eq!(detect_language("Saat kaç?"), Lang::Tr);
        assert_eq!(detect_language("Işığı aç"), Lang::Tr);
        assert!(asks_the_time(&words("what TIME is it")));
        assert!(!asks_the_time(&words("sometimes")));
        assert!(asks_the_time(&words("Saat kaç")));
        assert!(asks_to_switch(
            &words("Please turn on the lamp"),
            "Please turn on the lamp"
        ));
        assert!(asks_to_switch(&words("lambayı kapat"), "lambayı kapat"));
        assert!(asks_to_switch(&words("ışığı aç"), "ışığı aç"));
        assert!(!asks_to_switch(&words("hello there"), "hello there"));
    }

    fn spec(name: &str) -> crate::tool::ToolSpec {
        serde_json::from_value(json!({
            "name": name,
            "description": "A tool.",
            "inputSchema": {"json": {"type": "object"}},
        }))
        .unwrap()
    }

    fn request(text: &str, tools: &[&str]) -> ModelRequest {
        ModelRequest {
            system: Vec::new(),
            messages: vec![Message::user_text(text)]
                .into_iter()
                .map(Arc::new)
                .collect(),
            tools: tools.iter().map(|name| spec(name)).collect(),
        }
    }

    #[test]
    fn a_tool_named_exactly_is_called_with_the_json_of_the_text() {
        let offered = [
            "mcp__home__lamp",
            "mcp__home__lamp_state",
            DemoPhysicalAction::NAME,
        ];
        let reply = demo_reply(&request(
            r#"please call mcp__home__lamp {"state": "on"} now"#,
            &offered,
        ));
        assert_eq!(
            reply,
            FakeReply::tool_call("mcp__home__lamp", json!({"state": "on"}))
        );
        let reply = demo_reply(&request("use `mcp__home__lamp_state`", &offered));
        assert_eq!(
            reply,
            FakeReply::tool_call("mcp__home__lamp_state", json!({}))
        );
        // Not offered, or only a prefix of a name: no call.
        let reply = demo_reply(&request("call mcp__home__fan", &offered));
        assert!(!reply.calls_a_tool(), "{reply:?}");
        let reply = demo_reply(&request("call mcp__home", &offered));
        assert!(!reply.calls_a_tool(), "{reply:?}");
        // Bad JSON: the call goes ahead with no arguments.
        let reply = demo_reply(&request("mcp__home__lamp {state: on}", &offered));
        assert_eq!(reply, FakeReply::tool_call("mcp__home__lamp", json!({})));
    }
}
