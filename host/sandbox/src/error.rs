//! [`SandboxError`]: why a sandbox cannot be set up, naming the mode it
//! cannot enforce and how to choose another. Never a silent downgrade.

use crate::mode::SandboxMode;

/// Why a command cannot run in the chosen sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel offers no Landlock, so the file-system rules of `mode`
    /// cannot be enforced.
    #[error(
        "sandbox mode `{mode}` cannot be enforced on this machine: {detail}. Commands are not \
         run without it. Use a kernel with Landlock (Linux 5.13 or later, with `landlock` in \
         the `lsm=` boot list), or choose `--sandbox full-access` (`[sandbox] mode = \
         \"full-access\"`) to run commands with your full rights, knowingly"
    )]
    LandlockUnavailable {
        /// The mode that was asked for.
        mode: SandboxMode,
        /// What the kernel said.
        detail: String,
    },
    /// Unprivileged user namespaces are not available, so the network
    /// cannot be cut off (or `.git` and `.latch` cannot be protected).
    #[error(
        "sandbox mode `{mode}` cannot be enforced on this machine: {what} needs an unprivileged \
         user namespace, and creating one failed ({detail}). Enable them (sysctl \
         `kernel.unprivileged_userns_clone=1` or `user.max_user_namespaces` above 0){hint}, or \
         choose `--sandbox full-access` to run commands with your full rights, knowingly"
    )]
    NamespacesUnavailable {
        /// The mode that was asked for.
        mode: SandboxMode,
        /// What needed the namespace.
        what: &'static str,
        /// What the kernel said.
        detail: String,
        /// Another way out, when there is one.
        hint: &'static str,
    },
    /// Preparing the sandbox failed (a path, a rule, the temp dir).
    #[error("could not prepare the `{mode}` sandbox: {what}: {source}")]
    Setup {
        /// The mode.
        mode: SandboxMode,
        /// What was being prepared.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl SandboxError {
    /// A stable name for the kind of failure.
    pub fn kind(&self) -> &'static str {
        match self {
            SandboxError::LandlockUnavailable { .. } => "landlock-unavailable",
            SandboxError::NamespacesUnavailable { .. } => "namespaces-unavailable",
            SandboxError::Setup { .. } => "setup",
        }
    }
}
