//! The service templates from `deploy/` (embedded with `include_str!`) and their rendering: the
//! systemd user unit and the launchd agent plist, filled with the absolute path of `taud`, TAU_HOME,
//! TAU_DATA_DIR and the log file, and TAU_ROLE when the installation names a role (a node's).
//!
//! Invariants: every value is escaped for its format (systemd quoting and `%` specifiers, XML
//! entities), so a path with spaces, quotes or `%` cannot change the unit's meaning; the rendered
//! text has no placeholder left.

use std::path::{Path, PathBuf};

use tau_api::config::NodeRole;

/// The systemd user unit template.
pub const SYSTEMD_TEMPLATE: &str = include_str!("../../../../deploy/taud.service");
/// The launchd agent template.
pub const LAUNCHD_TEMPLATE: &str = include_str!("../../../../deploy/dev.tau.taud.plist");
/// The systemd unit's name.
pub const SYSTEMD_UNIT: &str = "taud.service";
/// The launchd agent's label (also the plist's file stem).
pub const LAUNCHD_LABEL: &str = "dev.tau.taud";

/// What a template is filled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceValues {
    /// The absolute path of `taud`.
    pub taud: PathBuf,
    /// TAU_HOME.
    pub tau_home: PathBuf,
    /// TAU_DATA_DIR.
    pub data_dir: PathBuf,
    /// The user's home directory.
    pub user_home: PathBuf,
    /// Where launchd writes the agent's stdout and stderr.
    pub launchd_log: PathBuf,
    /// TAU_ROLE to set (a node's); `None`: none set, taud reads `[hub] role` (default hub).
    pub role: Option<NodeRole>,
}

/// `template` with the line holding `placeholder` replaced by `line`, or removed (with its line
/// end) when there is none.
fn fill_line(template: &str, placeholder: &str, line: Option<&str>) -> String {
    match line {
        Some(line) => template.replace(placeholder, line),
        None => template.replace(&format!("{placeholder}\n"), ""),
    }
}

/// One systemd word, double-quoted, with `\`, `"` and `%` escaped.
fn systemd_quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '\n' => out.push_str("\\n"),
            _ => out.push(c),
        }
    }
    out.push('"');
    out
}

fn text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// The systemd user unit for `values`.
pub fn render_systemd(values: &ServiceValues) -> String {
    let mut writable = vec![text(&values.data_dir), text(&values.tau_home)];
    writable.push(text(&values.user_home));
    writable.dedup();
    let read_write = writable
        .iter()
        .map(|p| systemd_quote(&format!("-{p}")))
        .collect::<Vec<_>>()
        .join(" ");
    let role = values
        .role
        .map(|role| format!("Environment={}", systemd_quote(&format!("TAU_ROLE={role}"))));
    fill_line(SYSTEMD_TEMPLATE, "{{ENV_TAU_ROLE}}", role.as_deref())
        .replace("{{TAUD}}", &systemd_quote(&text(&values.taud)))
        .replace(
            "{{ENV_TAU_HOME}}",
            &systemd_quote(&format!("TAU_HOME={}", text(&values.tau_home))),
        )
        .replace(
            "{{ENV_TAU_DATA_DIR}}",
            &systemd_quote(&format!("TAU_DATA_DIR={}", text(&values.data_dir))),
        )
        .replace("{{READ_WRITE_PATHS}}", &read_write)
}

fn xml_escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// The launchd agent plist for `values`.
pub fn render_launchd(values: &ServiceValues) -> String {
    let role = values.role.map(|role| {
        format!(
            "    <key>TAU_ROLE</key>\n    <string>{}</string>",
            xml_escape(role.as_str())
        )
    });
    fill_line(LAUNCHD_TEMPLATE, "{{TAU_ROLE}}", role.as_deref())
        .replace("{{TAUD}}", &xml_escape(&text(&values.taud)))
        .replace("{{TAU_HOME}}", &xml_escape(&text(&values.tau_home)))
        .replace("{{TAU_DATA_DIR}}", &xml_escape(&text(&values.data_dir)))
        .replace("{{LOG_FILE}}", &xml_escape(&text(&values.launchd_log)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tau_api::hub_files::exit;

    fn values(root: &str) -> ServiceValues {
        ServiceValues {
            taud: PathBuf::from(format!("{root}/bin/taud")),
            tau_home: PathBuf::from(format!("{root}/.tau")),
            data_dir: PathBuf::from(format!("{root}/.local/share/tau")),
            user_home: PathBuf::from(root),
            launchd_log: PathBuf::from(format!("{root}/.local/share/tau/logs/taud.launchd.log")),
            role: None,
        }
    }

    fn node(root: &str) -> ServiceValues {
        ServiceValues {
            role: Some(NodeRole::Node),
            ..values(root)
        }
    }

    fn line<'a>(unit: &'a str, key: &str) -> &'a str {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in the unit"))
    }

    #[test]
    fn systemd_unit_is_per_user_hardened_and_does_not_loop() {
        let unit = render_systemd(&values("/home/pi"));
        assert!(!unit.contains("{{"), "{unit}");
        assert_eq!(line(&unit, "ExecStart"), "\"/home/pi/bin/taud\"");
        assert_eq!(line(&unit, "Restart"), "on-failure");
        let prevent: Vec<u8> = line(&unit, "RestartPreventExitStatus")
            .split_whitespace()
            .map(|c| c.parse().unwrap())
            .collect();
        assert_eq!(prevent, [exit::ALREADY_RUNNING, exit::CONFIG]);
        for hardening in [
            "NoNewPrivileges=yes",
            "PrivateTmp=yes",
            "ProtectSystem=strict",
        ] {
            assert!(unit.lines().any(|l| l == hardening), "{hardening}");
        }
        assert_eq!(
            line(&unit, "ReadWritePaths"),
            "\"-/home/pi/.local/share/tau\" \"-/home/pi/.tau\" \"-/home/pi\""
        );
        assert!(
            !unit.lines().any(|l| l.starts_with("User=")),
            "a user unit names no user"
        );
        assert_eq!(line(&unit, "WantedBy"), "default.target");
        assert_eq!(line(&unit, "LimitNOFILE"), "8192");
        assert!(unit.contains("Environment=\"TAU_DATA_DIR=/home/pi/.local/share/tau\""));
    }

    #[test]
    fn systemd_values_are_quoted_and_specifiers_escaped() {
        let unit = render_systemd(&values("/home/a b/100%\"x"));
        assert_eq!(
            line(&unit, "ExecStart"),
            "\"/home/a b/100%%\\\"x/bin/taud\""
        );
    }

    #[test]
    fn launchd_plist_restarts_after_crashes_only_and_escapes_xml() {
        let plist = render_launchd(&values("/Users/me & <you>"));
        assert!(!plist.contains("{{"));
        assert!(plist.contains("<string>/Users/me &amp; &lt;you&gt;/bin/taud</string>"));
        assert!(plist.contains("<string>--launchd</string>"));
        assert!(plist.contains(&format!("<string>{LAUNCHD_LABEL}</string>")));
        let keep_alive = plist.split("<key>KeepAlive</key>").nth(1).unwrap();
        assert!(
            keep_alive
                .trim_start()
                .starts_with("<dict>\n    <key>SuccessfulExit</key>\n    <false/>"),
            "{keep_alive}"
        );
        assert!(plist.contains("<key>ThrottleInterval</key>"));
        for limits in ["SoftResourceLimits", "HardResourceLimits"] {
            let files = plist.split(&format!("<key>{limits}</key>")).nth(1).unwrap();
            assert!(
                files.trim_start().starts_with(
                    "<dict>\n    <key>NumberOfFiles</key>\n    <integer>8192</integer>"
                ),
                "{limits}: {files}"
            );
        }
        // XML comments may not contain "--".
        for comment in plist.split("<!--").skip(1) {
            let body = comment.split("-->").next().unwrap();
            assert!(!body.contains("--"), "{body}");
        }
    }

    #[test]
    fn a_node_unit_sets_tau_role_and_a_hub_unit_sets_none() {
        let hub = render_systemd(&values("/home/pi"));
        assert!(!hub.contains("{{"), "{hub}");
        assert!(
            !hub.lines().any(|l| l.starts_with("Environment=\"TAU_ROLE")),
            "{hub}"
        );
        let node = render_systemd(&node("/home/pi"));
        assert!(!node.contains("{{"), "{node}");
        let environment: Vec<&str> = node
            .lines()
            .filter_map(|l| l.strip_prefix("Environment="))
            .collect();
        assert_eq!(
            environment,
            [
                "\"TAU_HOME=/home/pi/.tau\"",
                "\"TAU_DATA_DIR=/home/pi/.local/share/tau\"",
                "\"TAU_ROLE=node\""
            ]
        );
        // Only the role differs.
        let without: Vec<&str> = node
            .lines()
            .filter(|l| *l != "Environment=\"TAU_ROLE=node\"")
            .collect();
        assert_eq!(without, hub.lines().collect::<Vec<_>>());
        let explicit_hub = render_systemd(&ServiceValues {
            role: Some(NodeRole::Hub),
            ..values("/home/pi")
        });
        assert!(
            explicit_hub
                .lines()
                .any(|l| l == "Environment=\"TAU_ROLE=hub\"")
        );
    }

    #[test]
    fn a_node_plist_sets_tau_role_in_its_environment() {
        let hub = render_launchd(&values("/Users/me"));
        assert!(!hub.contains("{{"), "{hub}");
        assert!(!hub.contains("<key>TAU_ROLE</key>"), "{hub}");
        let node = render_launchd(&node("/Users/me"));
        assert!(!node.contains("{{"), "{node}");
        let environment = node
            .split("<key>EnvironmentVariables</key>")
            .nth(1)
            .and_then(|rest| rest.split("</dict>").next())
            .unwrap();
        assert_eq!(
            environment.trim(),
            "<dict>\n    <key>TAU_HOME</key>\n    <string>/Users/me/.tau</string>\n    \
             <key>TAU_DATA_DIR</key>\n    <string>/Users/me/.local/share/tau</string>\n    \
             <key>TAU_ROLE</key>\n    <string>node</string>"
        );
        let without = node.replace("    <key>TAU_ROLE</key>\n    <string>node</string>\n", "");
        assert_eq!(without, hub);
    }
}
