//! The standard tools on real workspaces in temporary directories: file
//! tools, the shell and managed processes, and the schemas the model sees.
//! One test binary for all of them.

mod common;
mod files;
mod schemas;
mod shell;
