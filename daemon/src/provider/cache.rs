//! Prompt caching: where cache breakpoints go and with which lifetime, from a role's `cache`
//! setting. Shared by the Anthropic (`cache_control`) and Bedrock (`cachePoint`) translations.
//!
//! Invariants: no `cache` setting means no breakpoints at all (cache points in the system prompt
//! or history are dropped); strategy `auto` caches only Claude models; lifetimes never increase
//! along the prefix order tools → system → messages (the providers reject that), so a later
//! breakpoint's lifetime is cut to the earlier one's.

use tau_api::config::{CacheConfig, CacheStrategy, CacheTtl};
use tracing::warn;

/// The breakpoints of one provider's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePlan {
    /// Whether any breakpoint is sent.
    pub enabled: bool,
    /// Lifetime of the breakpoint after the last tool (`None`: the provider's default, 5 minutes).
    pub tools_ttl: Option<CacheTtl>,
    /// Lifetime of the system prompt's breakpoints.
    pub system_ttl: Option<CacheTtl>,
    /// Lifetime of the breakpoint on the newest message.
    pub messages_ttl: Option<CacheTtl>,
}

impl CachePlan {
    /// No caching.
    pub const OFF: CachePlan = CachePlan {
        enabled: false,
        tools_ttl: None,
        system_ttl: None,
        messages_ttl: None,
    };

    /// The plan for `model_id` under a role's `cache` setting (`system_prompt_ttl` and
    /// `tools_ttl` default to `ttl`).
    pub fn new(cache: Option<&CacheConfig>, model_id: &str) -> Self {
        let Some(cache) = cache else {
            return Self::OFF;
        };
        let claude = model_id.to_ascii_lowercase().contains("claude");
        if cache.strategy == CacheStrategy::Auto && !claude {
            warn!(
                model_id,
                "prompt caching is off: strategy \"auto\" caches Claude models only"
            );
            return Self::OFF;
        }
        let tools_ttl = cache.tools_ttl.or(cache.ttl);
        let system_ttl = not_longer(cache.system_prompt_ttl.or(cache.ttl), tools_ttl);
        let messages_ttl = not_longer(cache.ttl, system_ttl);
        Self {
            enabled: true,
            tools_ttl,
            system_ttl,
            messages_ttl,
        }
    }
}

fn rank(ttl: Option<CacheTtl>) -> u8 {
    match ttl {
        Some(CacheTtl::OneHour) => 1,
        Some(CacheTtl::FiveMinutes) | None => 0,
    }
}

/// `ttl`, cut to `earlier` when it would be longer.
fn not_longer(ttl: Option<CacheTtl>, earlier: Option<CacheTtl>) -> Option<CacheTtl> {
    if rank(ttl) > rank(earlier) {
        earlier
    } else {
        ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_caches_claude_only_and_ttls_never_increase() {
        let cache = CacheConfig {
            strategy: CacheStrategy::Auto,
            ttl: Some(CacheTtl::OneHour),
            system_prompt_ttl: None,
            tools_ttl: None,
        };
        assert_eq!(
            CachePlan::new(Some(&cache), "amazon.nova-pro-v1:0"),
            CachePlan::OFF
        );
        assert_eq!(CachePlan::new(None, "claude-sonnet-4-5"), CachePlan::OFF);
        let plan = CachePlan::new(Some(&cache), "us.anthropic.claude-sonnet-4-5-v1:0");
        assert!(plan.enabled);
        assert_eq!(plan.tools_ttl, Some(CacheTtl::OneHour));
        assert_eq!(plan.messages_ttl, Some(CacheTtl::OneHour));

        let forced = CacheConfig {
            strategy: CacheStrategy::Anthropic,
            ttl: Some(CacheTtl::OneHour),
            system_prompt_ttl: Some(CacheTtl::OneHour),
            tools_ttl: Some(CacheTtl::FiveMinutes),
        };
        let plan = CachePlan::new(Some(&forced), "llama3");
        assert!(plan.enabled);
        assert_eq!(plan.system_ttl, Some(CacheTtl::FiveMinutes));
        assert_eq!(plan.messages_ttl, Some(CacheTtl::FiveMinutes));
    }
}
