//! The tools a session of an agent tree gets beside its agent and group
//! tools: [`SessionTools`] builds them for the root, for every spawned
//! child and for a child the user resumes, so a child has the same tools
//! (skills, MCP servers, standard tools) however it is opened and its
//! cached tool prefix holds across a resume.

use crate::agent::ToolSet;
use crate::agent::tools::StandardTools;
use latch_engine_sdk::types::ExtensionSource;
use latch_kernel::{SessionRecord, Store};
use latch_sandbox::SandboxMode;
use std::path::PathBuf;
use std::sync::Arc;

/// Builds a session's tools and the extension sources (the skill list)
/// every request of the session carries.
pub trait SessionTools: Send + Sync {
    /// The tools of `session`, whose commands (and MCP servers) run in a
    /// `sandbox` sandbox.
    fn build(
        &self,
        session: &SessionRecord,
        sandbox: SandboxMode,
    ) -> Result<(Box<dyn ToolSet>, Vec<ExtensionSource>), String>;
}

/// The standard tools only (no skills, no MCP servers): what a tree gets
/// when nothing configures more.
pub struct StandardOnly {
    store: Arc<Store>,
    workspace: PathBuf,
}

impl StandardOnly {
    /// The standard tools of sessions of `store` in `workspace`.
    pub fn new(store: Arc<Store>, workspace: PathBuf) -> StandardOnly {
        StandardOnly { store, workspace }
    }
}

impl SessionTools for StandardOnly {
    fn build(
        &self,
        session: &SessionRecord,
        _sandbox: SandboxMode,
    ) -> Result<(Box<dyn ToolSet>, Vec<ExtensionSource>), String> {
        let ctx =
            latch_tools::ToolContext::new(self.store.clone(), session.id.clone(), &self.workspace)
                .map_err(|e| e.to_string())?;
        Ok((Box::new(StandardTools::new(ctx)), Vec::new()))
    }
}
