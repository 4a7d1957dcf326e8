//! Latch's command sandbox and approval policy. No agent or UI code: the
//! tools confine every process they spawn with a [`Sandbox`], the agent
//! loop asks [`approval::decide`] before a tool call runs.
//!
//! * [`mode`] — [`SandboxMode`] (`read-only`, `workspace-write`,
//!   `full-access`) and [`ApprovalMode`] (`never`, `on-request`,
//!   `untrusted`, `edits`).
//! * [`rules`] — the policy as data: readable, writable and protected paths.
//! * [`env`] — the variables a confined command does not inherit (names
//!   that look secret, unless passed through).
//! * [`landlock`] — the kernel's Landlock ABI and the ruleset.
//! * `exec` — [`Sandbox`]: the keeper, namespaces, mounts and Landlock
//!   applied to a [`std::process::Command`] before it spawns.
//! * `keeper` — every command's keeper: its own session without a
//!   terminal, a PID namespace (or, under `full-access`, a child
//!   subreaper) killed whole when the command ends, is stopped
//!   ([`stop`]) or Latch exits.
//! * `confine` — what the init of a confined command's namespaces does
//!   before the command starts: mounts, Landlock, seccomp.
//! * [`approval`] — run, ask or deny.
//! * [`check`] — what the machine can enforce, and the self-test.
//! * [`helper`] — [`HelperJail`]: the stricter confinement of the programs
//!   Latch runs for its own bookkeeping (its git), never for the agent.
//!
//! Anything else that spawns a process for the agent (an MCP stdio server)
//! confines it the same way: `sandbox.command(std_command)?`, then, for
//! tokio (rmcp's `TokioChildProcess`), `tokio::process::Command::from(it)`;
//! the steps installed before `exec` travel with the command.
//!
//! * `seccomp` — the system-call filter: Unix sockets, io_uring, terminal
//!   injection (`TIOCSTI`, `TIOCLINUX`), and metadata writes under
//!   `read-only`.
//! * `supervise` — the parent's threads that check and perform each
//!   `connect` the filter hands over.
//!
//! Enforcement is by the kernel, never by parsing the command: Landlock
//! confines the file system (and, from ABI 6, abstract sockets and
//! signals), a fresh network namespace cuts off the network (unless
//! `[sandbox] network = true`), and a seccomp filter with a supervisor
//! keeps Unix-socket connects inside the workspace and the session temp
//! dir. A machine that cannot
//! enforce the chosen mode gets a [`SandboxError`] naming the mode and how
//! to choose another — never a silent downgrade.

#![warn(missing_docs)]

pub mod approval;
pub mod check;
mod confine;
pub mod env;
mod error;
mod exec;
pub mod helper;
mod keeper;
pub mod landlock;
pub mod mode;
pub mod rules;
mod seccomp;
mod supervise;

pub use approval::{Action, Verdict, decide};
pub use error::SandboxError;
pub use exec::{Sandbox, namespaces_available};
pub use helper::{HelperJail, JailError};
pub use keeper::stop;
pub use mode::{ApprovalMode, SandboxMode, UnknownMode};
pub use rules::SandboxPolicy;
