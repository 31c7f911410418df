//! `tau doctor`'s routine checks: what a running hub reports of its routines (the `routines` key of
//! `GET /status`): how many there are, and a warning for each problem it names (routines off, or a
//! routine whose tool is no longer in the catalog).
//!
//! Invariants: read-only; the hub is asked only on 127.0.0.1; without a running hub there is no
//! check (the hub line already says it is not running).

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::report::Check;
use crate::hub_link::control_http as hub;

/// The routine checks, from the running hub on `port`.
pub fn checks(port: u16, token_file: &Path) -> Vec<Check> {
    let Ok(status) = hub::status_json(port, token_file, Duration::from_secs(1)) else {
        return Vec::new();
    };
    from_status(&status)
}

fn from_status(status: &Value) -> Vec<Check> {
    let routines = &status["routines"];
    if routines.is_null() {
        return Vec::new();
    }
    let warnings: Vec<&str> = routines["warnings"]
        .as_array()
        .map(|w| w.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = vec![Check::ok(
        "routines",
        format!(
            "{} routines ({} paused)",
            routines["count"].as_u64().unwrap_or(0),
            routines["paused"].as_u64().unwrap_or(0)
        ),
    )];
    out.extend(warnings.into_iter().map(|warning| {
        Check::warn("routines", warning.to_owned())
            .fix("see `tau routine list`; `tau routine rm NAME` removes one")
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_routine_whose_tool_is_gone_is_a_warning() {
        let status = json!({"routines": {"enabled": true, "count": 2, "paused": 1,
            "warnings": ["routine lamp-off calls mcp__home__lamp, which is no longer in the tool catalog; its firings fail (remove it or give it another tool)"]}});
        let checks = from_status(&status);
        assert_eq!(checks.len(), 2);
        let text: Vec<String> = checks.iter().map(|c| format!("{c:?}")).collect();
        assert!(text[0].contains("2 routines (1 paused)"), "{text:?}");
        assert!(text[1].contains("mcp__home__lamp"), "{text:?}");
        assert!(from_status(&json!({})).is_empty());
    }
}
