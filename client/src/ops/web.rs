//! `tau web pair [--name NAME] [--json]`, `tau web devices [--json]` and `tau web revoke NAME`:
//! the owner's side of the web client's devices, asked of the running hub on its loopback control
//! port with the hub token (`POST /web/pair`, `GET /web/devices`, `POST /web/revoke`).
//!
//! Invariants: only 127.0.0.1 is contacted, each exchange within [`HUB_DEADLINE`] and at most
//! [`MAX_RESPONSE`] bytes; the token is sent in a header and never printed; the pairing link is
//! printed as the hub made it (its code in the fragment); text from the hub is printed through
//! `sanitize`, so a device name cannot move the terminal.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tau_api::installation::Installation;

use crate::cli::WebCommand;
use crate::context::Context;
use crate::environment;
use crate::http_get::{is_timeout, with_deadline};

/// How long one exchange with the hub may take.
const HUB_DEADLINE: Duration = Duration::from_secs(5);
/// The longest answer read.
const MAX_RESPONSE: usize = 256 * 1024;

/// Runs `tau web …`.
pub fn run(command: &WebCommand, ctx: &Context) -> anyhow::Result<ExitCode> {
    let env = environment::snapshot(ctx);
    let cwd = environment::current_dir()?;
    let installation = Installation::discover(env, &cwd)?;
    if installation.config.web.listen.is_none() {
        eprintln!(
            "tau: note: {} has no [web] listen; the hub does not serve the web client",
            installation.paths.config_file.display()
        );
    }
    match command {
        WebCommand::Pair { name, json } => {
            let body = match name {
                Some(name) => json!({"name": name}),
                None => json!({}),
            };
            let answer = call(&installation, "POST", "/web/pair", Some(&body))?;
            if *json {
                outln!("{answer}");
                return Ok(ExitCode::SUCCESS);
            }
            let minutes = answer["expires_in_s"].as_u64().unwrap_or(600) / 60;
            outln!(
                "Open this link within {minutes} minutes in the browser to enroll as {}:",
                sanitize(answer["name"].as_str().unwrap_or_default())
            );
            outln!();
            outln!(
                "    {}",
                sanitize(answer["url"].as_str().unwrap_or_default())
            );
            outln!();
            outln!("The link works once. `tau web revoke NAME` removes a browser.");
            Ok(ExitCode::SUCCESS)
        }
        WebCommand::Devices { json } => {
            let answer = call(&installation, "GET", "/web/devices", None)?;
            if *json {
                outln!("{}", answer["devices"]);
                return Ok(ExitCode::SUCCESS);
            }
            out!("{}", devices_table(&answer["devices"]));
            Ok(ExitCode::SUCCESS)
        }
        WebCommand::Revoke { name } => {
            let answer = call(
                &installation,
                "POST",
                "/web/revoke",
                Some(&json!({"name": name})),
            )?;
            outln!(
                "Revoked {}: its sessions and {} open stream(s) ended.",
                sanitize(answer["revoked"].as_str().unwrap_or_default()),
                answer["streams_ended"].as_u64().unwrap_or(0)
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Hub text on one terminal line: every control and hiding character written visibly
/// (`tau_client::sanitize`), newlines as `⏎`.
fn sanitize(text: &str) -> String {
    tau_client::sanitize::one_line(text, 4096)
}

/// The devices as lines: name, enrolled, last seen.
fn devices_table(devices: &Value) -> String {
    let Some(devices) = devices.as_array().filter(|d| !d.is_empty()) else {
        return "No browser is enrolled. `tau web pair` prints a link that enrolls one.\n"
            .to_owned();
    };
    let mut out = format!("{:<24} {:<22} {}\n", "NAME", "ENROLLED", "LAST SEEN");
    for device in devices {
        let field = |key: &str| sanitize(device[key].as_str().unwrap_or("-"));
        let short = |text: String| text.chars().take(20).collect::<String>();
        out.push_str(&format!(
            "{:<24} {:<22} {}\n",
            field("name"),
            short(field("enrolled_at")),
            short(field("last_seen_at"))
        ));
    }
    out
}

/// One call to the hub's control port with the token; the JSON answer of a 200, else the hub's
/// own error line.
fn call(
    installation: &Installation,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<Value> {
    let token_file = &installation.paths.hub.token_file;
    let token = tau_client::connect::token::read(token_file).map_err(anyhow::Error::msg)?;
    let port = installation.settings.hub_port;
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let raw = exchange(port, &request).with_context(|| format!("the hub on 127.0.0.1:{port}"))?;
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("the hub's answer is not HTTP");
    };
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let json: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    if status != 200 {
        let why = json["error"].as_str().unwrap_or("no reason given");
        if status == 404 && path.starts_with("/web/") && !why.contains("device") {
            bail!(
                "the hub does not serve the web client: set [web] listen in tau.toml and restart it"
            );
        }
        bail!("{}", sanitize(why));
    }
    Ok(json)
}

fn exchange(port: u16, request: &str) -> anyhow::Result<Vec<u8>> {
    let until = Instant::now() + HUB_DEADLINE;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = match TcpStream::connect_timeout(&addr, HUB_DEADLINE) {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            bail!("no hub is running (start it with `tau hub start`)")
        }
        Err(e) => return Err(e.into()),
    };
    with_deadline(&stream, until)?;
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        with_deadline(&stream, until)?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(response),
            Ok(n) => {
                response.extend_from_slice(&buf[..n]);
                if response.len() > MAX_RESPONSE {
                    bail!("the answer is too long");
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => bail!("no answer within {} s", HUB_DEADLINE.as_secs()),
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_print_as_a_table_and_names_cannot_move_the_terminal() {
        let devices = json!([
            {"name": "phone\u{1b}[2J", "enrolled_at": "2026-12-01T10:00:00.123Z", "last_seen_at": null},
        ]);
        let table = devices_table(&devices);
        assert!(table.starts_with("NAME"));
        assert!(table.contains("phone\\u{1b}[2J"), "{table}");
        assert!(!table.contains('\u{1b}'));
        assert!(table.contains("2026-12-01T10:00:00."));
        assert!(devices_table(&json!([])).contains("tau web pair"));
    }
}
