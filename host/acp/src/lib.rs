//! Latch as an [Agent Client Protocol](https://agentclientprotocol.com)
//! agent: an editor (Zed, or any ACP client) starts `latch acp` and drives
//! durable Latch sessions over stdio with its own UI — sessions created and
//! loaded (replayed from the store), prompts, streamed answers, tool calls
//! with their files and diffs, and permission requests answered in the
//! editor.
//!
//! * [`wire`] — the protocol's JSON-RPC messages and types.
//! * [`channel`] — the shared writer and Latch's pending requests.
//! * [`prompt`] — an editor's content blocks as the user's message.
//! * [`updates`] — committed events as `session/update`s.
//! * [`server`] — the connection's loop and the [`Sessions`] port the
//!   binary implements.

pub mod channel;
pub mod prompt;
pub mod server;
pub mod updates;
pub mod wire;

pub use prompt::UserPrompt;
pub use server::{AgentInfo, Answer, Asker, Live, SessionError, Sessions, TurnEnd, serve};

/// The surface name ACP sessions' leases carry (`latch sessions` and a
/// refused second driver name it).
pub const ACP_SURFACE: &str = "acp";
