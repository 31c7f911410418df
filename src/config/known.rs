//! The names `tau.toml` may use for model providers and session backends, checked at load time
//! without building (or linking to) a single provider or store.
//!
//! Invariant: the built-in names are always known; code adds more explicitly (the daemon passes
//! the providers and backends it registered), never through global state.

use std::fmt;

/// Providers that are planned but not built in. Naming one in `tau.toml` is an "Unknown model
/// provider" error unless it was registered; `tau doctor` warns about these instead of failing.
pub const PLANNED_PROVIDERS: &[&str] = &[];

/// Built-in session store backends.
pub const BUILTIN_SESSION_BACKENDS: &[&str] = &["file", "sqlite"];

/// A built-in model provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuiltinProvider {
    /// Amazon Bedrock (Converse API).
    Bedrock,
    /// The Anthropic Messages API.
    Anthropic,
    /// The offline fake model (no credentials; tests and first runs).
    Fake,
    /// A local Ollama server over its native `/api/chat` (no credentials).
    Ollama,
    /// Any OpenAI-compatible Chat Completions endpoint (OPENAI_API_KEY when it needs one).
    OpenAi,
}

impl BuiltinProvider {
    /// Every built-in provider, in the order tau prefers them when credentials allow.
    pub const ALL: [BuiltinProvider; 5] = [
        BuiltinProvider::Bedrock,
        BuiltinProvider::Anthropic,
        BuiltinProvider::Fake,
        BuiltinProvider::Ollama,
        BuiltinProvider::OpenAi,
    ];

    /// The provider's name in `tau.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            BuiltinProvider::Bedrock => "bedrock",
            BuiltinProvider::Anthropic => "anthropic",
            BuiltinProvider::Fake => "fake",
            BuiltinProvider::Ollama => "ollama",
            BuiltinProvider::OpenAi => "openai",
        }
    }

    /// The built-in provider with this name (exact), or `None`.
    pub fn parse(name: &str) -> Option<BuiltinProvider> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl fmt::Display for BuiltinProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The provider and session backend names a config may use: the built-ins plus any registered by
/// code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownNames {
    providers: Vec<String>,
    session_backends: Vec<String>,
}

impl Default for KnownNames {
    fn default() -> Self {
        Self::builtin()
    }
}

impl KnownNames {
    /// Only the built-in names: providers bedrock, anthropic, fake; backends file, sqlite.
    pub fn builtin() -> Self {
        Self {
            providers: BuiltinProvider::ALL
                .iter()
                .map(|p| p.as_str().to_string())
                .collect(),
            session_backends: BUILTIN_SESSION_BACKENDS
                .iter()
                .map(|b| b.to_string())
                .collect(),
        }
    }

    /// Adds a provider name registered by code.
    #[must_use]
    pub fn with_provider(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.providers.contains(&name) {
            self.providers.push(name);
        }
        self
    }

    /// Adds a session backend name registered by code.
    #[must_use]
    pub fn with_session_backend(mut self, name: impl Into<String>) -> Self {
        let name = name.into();
        if !self.session_backends.contains(&name) {
            self.session_backends.push(name);
        }
        self
    }

    /// Known provider names: built-ins first, then registrations in order.
    pub fn providers(&self) -> &[String] {
        &self.providers
    }

    /// Known session backend names: built-ins first, then registrations in order.
    pub fn session_backends(&self) -> &[String] {
        &self.session_backends
    }

    /// Whether `name` is a known provider.
    pub fn has_provider(&self, name: &str) -> bool {
        self.providers.iter().any(|p| p == name)
    }

    /// Whether `name` is a known session backend.
    pub fn has_session_backend(&self, name: &str) -> bool {
        self.session_backends.iter().any(|b| b == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_extend_the_builtins_once() {
        let k = KnownNames::builtin()
            .with_provider("vllm")
            .with_provider("vllm")
            .with_provider("fake")
            .with_session_backend("cloud");
        assert_eq!(
            k.providers(),
            ["bedrock", "anthropic", "fake", "ollama", "openai", "vllm"]
        );
        assert_eq!(k.session_backends(), ["file", "sqlite", "cloud"]);
        assert!(k.has_provider("vllm") && !KnownNames::default().has_provider("vllm"));
        assert!(k.has_session_backend("cloud"));
    }

    #[test]
    fn builtin_provider_names_round_trip() {
        for p in BuiltinProvider::ALL {
            assert_eq!(BuiltinProvider::parse(p.as_str()), Some(p));
        }
        assert_eq!(BuiltinProvider::parse("vllm"), None);
        assert!(
            PLANNED_PROVIDERS
                .iter()
                .all(|p| BuiltinProvider::parse(p).is_none())
        );
    }
}
