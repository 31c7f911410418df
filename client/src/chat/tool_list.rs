//! The lines of `/tools`: each tool the hub lists (`ListTools`) with its tier, description, where
//! it comes from (an MCP server, a node), its effect (what an approval shows) when it has one of
//! its own, and why it is not offered when it is not (untiered, changed since pairing, its node not connected, …).
//!
//! Invariant: every text the hub sent is sanitized to one bounded line; a tool the hub lists is
//! never left out, so an untiered claim is seen (and marked as not offered) rather than hidden.

use tau_api::i18n::Args;
use tau_api::proto::v1 as pb;
use tau_api::tiers::tier_number;

use super::render;

/// How a tool's state reads: `None` for a tool offered as it is (`ready`).
fn state_note(translate: &dyn Fn(&str, &Args<'_>) -> String, state: &str) -> Option<String> {
    let key = match state {
        "" | "ready" => return None,
        "untiered" => "tools.state.untiered",
        "changed" => "tools.state.changed",
        "offline" => "tools.state.offline",
        "missing" => "tools.state.missing",
        "refused" => "tools.state.refused",
        other => return Some(render::one_line(other, 40)),
    };
    Some(translate(key, &[]))
}

/// The lines `/tools` prints for `tool` (without the list's indent): the tool's line, then its
/// effect on a line of its own when it has one.
pub(super) fn tool_lines(
    translate: &dyn Fn(&str, &Args<'_>) -> String,
    tool: &pb::ToolInfo,
) -> Vec<String> {
    let name = render::one_line(&tool.name, 60);
    let description = render::one_line(&tool.description, 100);
    let tier = tier_number(tool.tier);
    let mut line = match tier {
        Some(tier) => {
            let label = translate(&format!("tier.{tier}"), &[]);
            translate(
                "tools.line",
                &[
                    ("name", &name),
                    ("tier", &tier),
                    ("tier_label", &label),
                    ("description", &description),
                ],
            )
        }
        None => translate(
            "tools.line_untiered",
            &[("name", &name), ("description", &description)],
        ),
    };
    let offered = matches!(tool.state.as_str(), "" | "ready" | "offline");
    if tier == Some(2) && offered {
        line.push_str(&format!(" · {}", translate("tier.needs_approval", &[])));
    }
    if !tool.server.is_empty() {
        line.push_str(&format!(" · MCP {}", render::one_line(&tool.server, 30)));
    }
    if !tool.node.is_empty() {
        let node = render::one_line(&tool.node, 30);
        line.push_str(&format!(
            " · {}",
            translate("tools.node", &[("node", &node)])
        ));
    }
    if let Some(note) = state_note(translate, &tool.state) {
        line.push_str(&format!(" · {note}"));
    }
    let mut lines = vec![line];
    // A tool without an effect of its own reports its description, already on the line.
    if !tool.effect.trim().is_empty() && tool.effect.trim() != tool.description.trim() {
        let effect = render::one_line(&tool.effect, 200);
        lines.push(format!(
            "    {}",
            translate("tools.effect", &[("effect", &effect)])
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::lang::Lang;

    fn english(key: &str, args: &Args<'_>) -> String {
        tau_api::i18n::t(key, Lang::En, args).unwrap()
    }

    fn turkish(key: &str, args: &Args<'_>) -> String {
        tau_api::i18n::t(key, Lang::Tr, args).unwrap()
    }

    fn info(name: &str, tier: pb::Tier, node: &str, state: &str, effect: &str) -> pb::ToolInfo {
        pb::ToolInfo {
            name: name.into(),
            tier: tier as i32,
            description: "d".into(),
            effect: effect.into(),
            server: String::new(),
            state: state.into(),
            node: node.into(),
        }
    }

    #[test]
    fn node_tools_show_their_node_tier_effect_and_why_not_offered() {
        let ready = info("node__pi__current_time", pb::Tier::Read, "pi", "ready", "");
        assert_eq!(
            tool_lines(&english, &ready),
            ["node__pi__current_time · tier 0 (read) · d · node pi"]
        );
        let offline = info(
            "node__pi__demo_physical_action",
            pb::Tier::Physical,
            "pi",
            "offline",
            "Moves the demo actuator.",
        );
        assert_eq!(
            tool_lines(&english, &offline),
            [
                "node__pi__demo_physical_action · tier 2 (physical) · d · needs approval · node pi · its node is not connected: a call fails at once",
                "    effect: Moves the demo actuator.",
            ]
        );
        let untiered = info(
            "node__pi__camera",
            pb::Tier::Unspecified,
            "pi",
            "untiered",
            "",
        );
        assert_eq!(
            tool_lines(&english, &untiered),
            [
                "node__pi__camera · no tier · d · node pi · not offered: no tier in the hub's tau.toml"
            ]
        );
        let changed = info("node__pi__lamp", pb::Tier::Physical, "pi", "changed", "");
        let line = &tool_lines(&english, &changed)[0];
        assert!(!line.contains("needs approval"), "{line}");
        assert!(
            line.ends_with("not offered: changed since pairing (pair the node again)"),
            "{line}"
        );
        assert_eq!(
            tool_lines(&turkish, &untiered),
            [
                "node__pi__camera · kademesiz · d · düğüm pi · sunulmuyor: merkezin tau.toml dosyasında kademesi yok"
            ]
        );
    }

    #[test]
    fn local_and_mcp_tools_read_as_before_and_hub_text_stays_on_one_line() {
        let local = info("current_time", pb::Tier::Read, "", "ready", "d");
        assert_eq!(
            tool_lines(&english, &local),
            ["current_time · tier 0 (read) · d"]
        );
        let mut mcp = info("mcp__home__lamp", pb::Tier::Physical, "", "ready", "");
        mcp.server = "home".into();
        assert_eq!(
            tool_lines(&english, &mcp),
            ["mcp__home__lamp · tier 2 (physical) · d · needs approval · MCP home"]
        );
        let mut hostile = info("x\ny", pb::Tier::Read, "p\x1bi", "weird\nstate", "a\nb");
        hostile.description = "line\none".into();
        let lines = tool_lines(&english, &hostile);
        assert_eq!(lines.len(), 2);
        for line in lines {
            assert!(!line.contains('\n') && !line.contains('\x1b'), "{line:?}");
        }
    }
}
