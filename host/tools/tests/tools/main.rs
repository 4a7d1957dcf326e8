//! The standard tools on real workspaces in temporary directories: file
//! tools, the shell and managed processes (also inside the sandbox), the
//! approval preview, and the schemas the model sees.
//! One test binary for all of them.

mod common;
mod files;
mod sandboxed;
mod schemas;
mod shell;
