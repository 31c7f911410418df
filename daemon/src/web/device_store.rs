//! The enrolled browsers: `<TAU_DATA_DIR>/hub/web-devices.json`, one record per device (its name,
//! its public key, when it enrolled and when it last signed in).
//!
//! Invariants: the file is versioned (`"version": 1`); a reader ignores unknown keys and refuses a
//! version it does not know (the web client then does not start, and the file is left as it is);
//! it is replaced atomically, 0600 ([`tau_api::durable_file::write_atomic`]); names are unique
//! and at most [`MAX_DEVICES`] devices are enrolled; a public key is a P-256 point (SEC1,
//! uncompressed), checked before it is stored.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name under the hub directory.
pub const DEVICES_FILE: &str = "web-devices.json";
/// The format this build writes and reads.
pub const DEVICES_VERSION: u32 = 1;
/// The most devices enrolled at once.
pub const MAX_DEVICES: usize = 64;
/// The longest device name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// One enrolled browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// Random, hex; what the page names itself by when it asks for a challenge.
    pub id: String,
    /// The owner's name for it (`tau web revoke NAME`).
    pub name: String,
    /// The P-256 public key, SEC1 uncompressed, hex.
    pub public_key: String,
    /// RFC 3339, UTC.
    pub enrolled_at: String,
    /// RFC 3339, UTC; the last signed challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct DevicesFile {
    version: u32,
    #[serde(default)]
    devices: Vec<Device>,
}

/// The device file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum DeviceStoreError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}: not a web device file: {reason}", path.display())]
    Damaged { path: PathBuf, reason: String },
    #[error("{}: version {found} is newer than this taud reads ({DEVICES_VERSION})", path.display())]
    NewerVersion { path: PathBuf, found: u32 },
}

/// A name that cannot be used for a new device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("a device named {0:?} is already enrolled; revoke it first or choose another name")]
    Taken(String),
    #[error(
        "a device name is 1 to {MAX_NAME_CHARS} letters, digits, '-', '_' or '.'; {0:?} is not"
    )]
    Invalid(String),
    #[error("{MAX_DEVICES} devices are enrolled already; revoke one first")]
    Full,
}

/// The enrolled devices, as the file holds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Devices {
    devices: Vec<Device>,
}

impl Devices {
    /// Reads `path`; no file is no devices.
    pub fn load(path: &Path) -> Result<Self, DeviceStoreError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(DeviceStoreError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        Self::parse(&text).map_err(|e| match e {
            ParseError::Newer(found) => DeviceStoreError::NewerVersion {
                path: path.to_path_buf(),
                found,
            },
            ParseError::Damaged(reason) => DeviceStoreError::Damaged {
                path: path.to_path_buf(),
                reason,
            },
        })
    }

    fn parse(text: &str) -> Result<Self, ParseError> {
        let file: DevicesFile =
            serde_json::from_str(text).map_err(|e| ParseError::Damaged(e.to_string()))?;
        if file.version > DEVICES_VERSION {
            return Err(ParseError::Newer(file.version));
        }
        if file.version == 0 {
            return Err(ParseError::Damaged("version 0".to_owned()));
        }
        let mut devices = file.devices;
        devices.truncate(MAX_DEVICES);
        Ok(Self { devices })
    }

    /// The file's text.
    pub fn to_json(&self) -> String {
        let file = DevicesFile {
            version: DEVICES_VERSION,
            devices: self.devices.clone(),
        };
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Writes the file atomically (blocking: call it off the async executor).
    pub fn save(&self, path: &Path) -> Result<(), DeviceStoreError> {
        tau_api::durable_file::write_atomic(path, self.to_json().as_bytes()).map_err(|source| {
            DeviceStoreError::Io {
                path: path.to_path_buf(),
                source,
            }
        })
    }

    /// Every device, in enrolment order.
    pub fn all(&self) -> &[Device] {
        &self.devices
    }

    pub fn by_id(&self, id: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.id == id)
    }

    pub fn by_name(&self, name: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// Whether a new device could take `name`.
    pub fn check_new_name(&self, name: &str) -> Result<(), NameError> {
        check_name(name)?;
        if self.by_name(name).is_some() {
            return Err(NameError::Taken(name.to_owned()));
        }
        if self.devices.len() >= MAX_DEVICES {
            return Err(NameError::Full);
        }
        Ok(())
    }

    /// A free name `browser-N` for a device the owner did not name.
    pub fn free_name(&self) -> String {
        (1..=MAX_DEVICES + 1)
            .map(|n| format!("browser-{n}"))
            .find(|name| self.by_name(name).is_none())
            .unwrap_or_else(|| "browser".to_owned())
    }

    /// Adds a device (its name checked again).
    pub fn add(&mut self, device: Device) -> Result<(), NameError> {
        self.check_new_name(&device.name)?;
        self.devices.push(device);
        Ok(())
    }

    /// Removes the device named `name`; the removed one.
    pub fn remove(&mut self, name: &str) -> Option<Device> {
        let at = self.devices.iter().position(|d| d.name == name)?;
        Some(self.devices.remove(at))
    }

    /// Notes that `id` signed in at `at`.
    pub fn touch(&mut self, id: &str, at: &str) {
        if let Some(device) = self.devices.iter_mut().find(|d| d.id == id) {
            device.last_seen_at = Some(at.to_owned());
        }
    }
}

enum ParseError {
    Newer(u32),
    Damaged(String),
}

/// Checks a device name: 1 to [`MAX_NAME_CHARS`] of `[A-Za-z0-9._-]`.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(NameError::Invalid(name.chars().take(80).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = include_str!("fixtures/web-devices-v1.json");

    #[test]
    fn reads_the_version_1_fixture_and_writes_it_back() {
        let devices = Devices::parse(V1).ok().unwrap();
        assert_eq!(devices.all().len(), 2);
        let phone = devices.by_name("phone").unwrap();
        assert_eq!(phone.last_seen_at.as_deref(), Some("2026-12-01T10:00:00Z"));
        assert_eq!(devices.by_name("laptop").unwrap().last_seen_at, None);
        let again = Devices::parse(&devices.to_json()).ok().unwrap();
        assert_eq!(again, devices);
    }

    #[test]
    fn a_newer_version_is_refused() {
        let text = V1.replace("\"version\": 1", "\"version\": 2");
        assert!(matches!(Devices::parse(&text), Err(ParseError::Newer(2))));
        assert!(matches!(
            Devices::parse("{\"devices\": []}"),
            Err(ParseError::Damaged(_))
        ));
    }

    #[test]
    fn names_are_checked_and_unique() {
        let mut devices = Devices::parse(V1).ok().unwrap();
        assert_eq!(
            devices.check_new_name("phone"),
            Err(NameError::Taken("phone".into()))
        );
        assert!(matches!(
            devices.check_new_name("a b"),
            Err(NameError::Invalid(_))
        ));
        assert!(devices.check_new_name("").is_err());
        assert_eq!(devices.free_name(), "browser-1");
        assert!(devices.remove("phone").is_some());
        assert!(devices.remove("phone").is_none());
        assert!(devices.check_new_name("phone").is_ok());
    }
}
