//! The model-server probes of `tau doctor`: for each role (and fallback) on `ollama` or `openai`,
//! whether its endpoint answers (`GET /api/tags`, `GET <base>/models`) within a short deadline and
//! lists the role's model, with how to get it when not (`ollama pull <model>`).
//!
//! Invariants: each endpoint is asked once however many roles use it; each probe ends by
//! [`MODEL_SERVER_DEADLINE`] (connect, send, read); only `http://` endpoints are contacted (a
//! local server, usually; this thin client has no TLS), an `https://` one is reported as not
//! probed; OPENAI_API_KEY goes only to the endpoint the hub would send it to, and is never shown;
//! a server that does not answer is a warning (it may start on demand), a server that answers
//! without the model is a failure.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use tau_api::config::{Config, component_base_url};
use tau_api::env::Env;
use tau_api::model_endpoints::{ollama_base_url, openai_base_url};

use super::report::{Check, Status};
use crate::http_get::{body_of, complete, is_timeout, no_answer, with_deadline};

/// How long one endpoint may take to answer.
pub const MODEL_SERVER_DEADLINE: Duration = Duration::from_secs(2);
/// The longest model list read.
const MAX_LIST: usize = 4 * 1024 * 1024;

/// What an endpoint said: the model names it lists, or why there is no list.
type Listing = Result<Vec<String>, String>;

/// One check line per role (and fallback) on a model server.
pub fn checks(config: &Config, env: &Env) -> Vec<Check> {
    let mut listings: BTreeMap<String, Listing> = BTreeMap::new();
    let mut out = Vec::new();
    for (name, role) in &config.models.roles {
        let targets = std::iter::once((format!("role {name}"), &role.provider, &role.model_id))
            .chain(
                role.fallback
                    .iter()
                    .map(|f| (format!("role {name} fallback"), &f.provider, &f.model_id)),
            );
        for (label, provider, model) in targets {
            let base = match provider.as_str() {
                "ollama" => ollama_base_url(
                    component_base_url(&config.component_settings, "ollama"),
                    env,
                ),
                "openai" => openai_base_url(
                    component_base_url(&config.component_settings, "openai"),
                    env,
                ),
                _ => continue,
            };
            let key = format!("{provider} {base}");
            let listing = listings
                .entry(key)
                .or_insert_with(|| list_models(provider, &base, env, MODEL_SERVER_DEADLINE));
            out.push(verdict(&label, provider, &base, model, listing));
        }
    }
    out
}

/// The check for `model` of `provider` at `base`, given what the endpoint listed.
fn verdict(label: &str, provider: &str, base: &str, model: &str, listing: &Listing) -> Check {
    let server = if provider == "ollama" {
        "Ollama"
    } else {
        "the OpenAI-compatible server"
    };
    match listing {
        Ok(models) if has_model(provider, models, model) => {
            Check::ok(label.to_owned(), format!("{server} at {base} has {model}"))
        }
        Ok(_) => {
            let fix = if provider == "ollama" {
                format!(
                    "run `ollama pull {model}`, or set the role's model_id to one `ollama list` shows"
                )
            } else {
                format!("set the role's model_id to one {base}/models lists")
            };
            Check::fail(
                label.to_owned(),
                format!("{server} at {base} has no model {model}"),
            )
            .fix(fix)
        }
        Err(why) if why.starts_with("https") => Check::new(
            label.to_owned(),
            Status::Ok,
            format!("{base}: not probed (https); the hub checks it on its first call"),
        ),
        Err(why) => {
            let fix = if provider == "ollama" {
                "start Ollama (`ollama serve`), or point [component.ollama] base_url or OLLAMA_HOST at it"
            } else {
                "start the server, or point [component.openai] base_url or OPENAI_BASE_URL at it"
            };
            Check::warn(label.to_owned(), format!("{server} at {base}: {why}")).fix(fix)
        }
    }
}

/// Whether `models` has `model` (Ollama names a model without a tag `<name>:latest`).
fn has_model(provider: &str, models: &[String], model: &str) -> bool {
    models.iter().any(|m| {
        m == model
            || (provider == "ollama" && !model.contains(':') && *m == format!("{model}:latest"))
    })
}

/// The model names `provider`'s endpoint at `base` lists.
pub fn list_models(provider: &str, base: &str, env: &Env, deadline: Duration) -> Listing {
    let Some(rest) = base.strip_prefix("http://") else {
        return Err("https: not probed".to_owned());
    };
    let (authority, prefix) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let (path, auth) = if provider == "ollama" {
        (format!("{prefix}/api/tags"), String::new())
    } else {
        let auth = env
            .non_empty("OPENAI_API_KEY")
            .map(|key| format!("Authorization: Bearer {key}\r\n"))
            .unwrap_or_default();
        (format!("{prefix}/models"), auth)
    };
    let body = get(authority, &path, &auth, deadline)?;
    let json: serde_json::Value =
        serde_json::from_slice(&body).map_err(|_| format!("GET {path} did not answer JSON"))?;
    // Ollama: {"models": [{"name": …}]}; OpenAI: {"data": [{"id": …}]}.
    let (list, field) = if provider == "ollama" {
        (json.get("models"), "name")
    } else {
        (json.get("data"), "id")
    };
    let list = list
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| format!("GET {path} did not list models"))?;
    Ok(list
        .iter()
        .filter_map(|m| m.get(field).and_then(serde_json::Value::as_str))
        .map(str::to_owned)
        .collect())
}

/// `GET <path>` from `authority` (`host:port`, port 80 when absent) within `deadline`.
fn get(authority: &str, path: &str, headers: &str, deadline: Duration) -> Result<Vec<u8>, String> {
    let until = Instant::now() + deadline;
    let with_port = if authority
        .rsplit(':')
        .next()
        .is_some_and(|p| p.parse::<u16>().is_ok())
        && !authority.ends_with(']')
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {authority}"))?;
    let mut stream = match TcpStream::connect_timeout(&addr, deadline) {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            return Err("nothing listens there".to_owned());
        }
        Err(e) if is_timeout(&e) => return Err(no_answer(deadline)),
        Err(e) => return Err(format!("cannot connect: {e}")),
    };
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json\r\n{headers}Connection: close\r\n\r\n"
    );
    with_deadline(&stream, until)
        .and_then(|()| stream.write_all(request.as_bytes()))
        .map_err(|e| {
            if is_timeout(&e) {
                no_answer(deadline)
            } else {
                format!("cannot send: {e}")
            }
        })?;
    let mut response = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        with_deadline(&stream, until).map_err(|_| no_answer(deadline))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                response.extend_from_slice(&buf[..n]);
                if response.len() > MAX_LIST {
                    return Err(format!("the answer to GET {path} is too long"));
                }
                if complete(&response) {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if is_timeout(&e) => return Err(no_answer(deadline)),
            Err(e) => return Err(format!("reading the answer: {e}")),
        }
    }
    body_of(&response, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    fn serve_once(answer: String) -> String {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 2048];
            let _ = stream.read(&mut buf);
            stream.write_all(answer.as_bytes()).unwrap();
        });
        format!("http://127.0.0.1:{port}")
    }

    fn ok_json(body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    }

    #[test]
    fn an_ollama_with_and_without_the_model() {
        let base = serve_once(ok_json(
            r#"{"models":[{"name":"qwen3:8b","model":"qwen3:8b","size":5200000000},{"name":"llama3.2:latest"}]}"#,
        ));
        let listing = list_models("ollama", &base, &Env::new(), MODEL_SERVER_DEADLINE);
        assert_eq!(
            listing.as_deref(),
            Ok(&["qwen3:8b".to_owned(), "llama3.2:latest".to_owned()][..])
        );
        let has = verdict("role local", "ollama", &base, "llama3.2", &listing);
        assert_eq!(has.status, Status::Ok);
        let missing = verdict("role local", "ollama", &base, "gemma3:4b", &listing);
        assert_eq!(missing.status, Status::Fail);
        assert!(
            missing
                .fix
                .as_deref()
                .unwrap()
                .contains("`ollama pull gemma3:4b`")
        );
    }

    #[test]
    fn an_openai_server_lists_its_models() {
        let base = serve_once(ok_json(
            r#"{"object":"list","data":[{"id":"gpt-4.1","object":"model"}]}"#,
        ));
        let base = format!("{base}/v1");
        let listing = list_models("openai", &base, &Env::new(), MODEL_SERVER_DEADLINE);
        assert_eq!(listing.as_deref(), Ok(&["gpt-4.1".to_owned()][..]));
    }

    #[test]
    fn silence_and_refusal_end_within_the_deadline_as_warnings() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let silent = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            std::thread::sleep(Duration::from_millis(600));
            drop(stream);
        });
        let base = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let listing = list_models("ollama", &base, &Env::new(), Duration::from_millis(200));
        assert!(started.elapsed() < Duration::from_millis(500));
        assert!(
            listing.as_ref().unwrap_err().contains("no answer"),
            "{listing:?}"
        );
        let check = verdict("role local", "ollama", &base, "m", &listing);
        assert_eq!(check.status, Status::Warn);
        assert!(check.fix.unwrap().contains("ollama serve"));
        silent.join().unwrap();

        let closed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let refused = list_models(
            "ollama",
            &format!("http://127.0.0.1:{port}"),
            &Env::new(),
            MODEL_SERVER_DEADLINE,
        );
        assert_eq!(refused, Err("nothing listens there".to_owned()));
        let https = list_models(
            "openai",
            "https://api.openai.com/v1",
            &Env::new(),
            MODEL_SERVER_DEADLINE,
        );
        let check = verdict(
            "role brain",
            "openai",
            "https://api.openai.com/v1",
            "gpt-4.1",
            &https,
        );
        assert_eq!(check.status, Status::Ok);
        assert!(check.message.contains("not probed"));
    }
}
