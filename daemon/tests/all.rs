//! taud's integration tests, in one binary so the daemon is linked once: each module below was its
//! own binary and keeps its own `//!` saying what it covers. Three binaries stay apart because they
//! touch the whole process: `props.rs` counts every panic in its process, `process_wide.rs`
//! installs the crash hook and a scoped tracing subscriber, and `store_crash.rs` re-executes itself
//! and kills the child.

// Test code: a failed unwrap is a failed run, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

mod agent_loop;
mod agent_repair;
mod agent_round_writes;
mod agent_turns;
mod agent_window;
mod api_in_process;
mod api_process;
mod api_refusals;
mod approval_faults;
mod components_table;
mod context_compaction;
mod gate_direct;
mod gate_matrix;
mod host_connections;
mod host_process;
mod host_services;
mod host_telegram_channel;
mod hub_approval_store;
mod hub_approvals;
mod hub_busy;
mod hub_mcp;
mod hub_now_block;
mod hub_prompt_writes;
mod hub_restart_scan;
mod hub_routines;
mod hub_session_pages;
mod hub_sessions;
mod hub_sessions_repair;
mod hub_soak;
mod hub_spend;
mod hub_stop_events;
mod hub_summarize_memory;
mod hub_turn_durable;
mod hub_turns;
mod hub_window;
mod mcp_hub_process;
mod mcp_real_server;
mod mcp_servers;
mod node_changed;
mod node_link;
mod node_mcp;
mod node_process;
mod node_routines;
mod node_tool_listing;
mod otel_export;
mod provider_anthropic;
mod provider_bedrock;
mod provider_bedrock_skew;
mod provider_ollama;
mod provider_openai;
mod routine_engine;
mod routine_gate;
mod store_contract;
mod store_file_checkpoint;
mod store_file_journal;
mod store_file_layout;
mod store_file_pages;
mod store_file_reconcile;
mod store_sqlite_schema;
mod web_advisories;
mod web_chat;
mod web_guard;
mod web_hub_views;
mod web_pairing;
mod web_tls;
