//! Extension points other features fill: the sidebar's GROUP block and the
//! permission prompt.
//!
//! Agent groups and permission events live on other branches. Until they
//! are merged, a [`Surface`](crate::Surface) carries both as empty slots
//! that the binary fills through [`Surface::set_group`](crate::Surface::set_group)
//! and [`Surface::set_permission`](crate::Surface::set_permission): the GROUP
//! block from the groups reducer's presentation, the prompt from a
//! `PermissionRequested` event. Renderers draw whatever the slot holds and
//! nothing when it is empty.

/// The sidebar's GROUP block: lines a group reducer produced for display.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupView {
    /// The block's title, e.g. `GROUP team-a (3 members)`.
    pub title: String,
    /// One line per task, member or pending message.
    pub lines: Vec<String>,
}

/// A permission request waiting for the user's answer, shown as a modal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionPrompt {
    /// The tool asking, e.g. `shell` or `edit_file`.
    pub tool: String,
    /// What it wants to do: the command line, or the path it edits.
    pub subject: String,
    /// The command or unified diff to show in full.
    pub detail: Vec<String>,
    /// Why the policy asks (the rule that matched).
    pub reason: String,
}
