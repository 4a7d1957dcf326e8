//! The standard tools on real workspaces in temporary directories: file
//! tools (and links swapped under them), the shell and managed processes (also inside the sandbox), the
//! approval preview, the schemas the model sees, and Agent Skills
//! (discovery, the capped list, `load_skill` confinement).
//! One test binary for all of them.

mod common;
mod files;
mod links;
mod sandboxed;
mod schemas;
mod shell;
mod skills;
