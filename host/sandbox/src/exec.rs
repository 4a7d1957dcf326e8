//! [`Sandbox`]: applies a [`SandboxPolicy`] to a [`Command`] before it
//! spawns. The process spawned is the command's keeper
//! ([`crate::keeper`]): a new session with no terminal, and in a confined
//! mode new user, mount and PID namespaces (and a network namespace when
//! the network is off) whose init confines itself ([`crate::confine`]:
//! mounts, `no_new_privs`, Landlock, seccomp) before it forks the command.
//!
//! In the parent it sets `TMPDIR` to the session's temp dir and drops the
//! variables whose names look secret from the command's environment
//! ([`crate::env`]). The temp dir lives until [`Sandbox::remove_temp_dir`].
//!
//! Namespaces, mounts, the Landlock domain and the seccomp filter are
//! inherited by every descendant and none can be left: a process spawned
//! from a backgrounded shell is as confined as the shell, and dies with
//! the command.

use crate::confine::Confinement;
use crate::env;
use crate::error::SandboxError;
use crate::keeper::{self, Plan, write_proc};
use crate::landlock;
use crate::mode::SandboxMode;
use crate::rules::{SandboxPolicy, hide, rules};
use crate::seccomp;
use crate::supervise::{self, SocketRules};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The sandbox every command of one session runs in. Cheap to share
/// (`Arc`); each [`Sandbox::apply`] builds a fresh ruleset.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    workspace: PathBuf,
    session: String,
    /// The session's temp dir (`/tmp/latch-SESSION`), created by a confined
    /// mode; its path is known in every mode so [`Sandbox::remove_temp_dir`]
    /// finds what a stricter sibling (see [`Sandbox::adjusted`]) created.
    temp_dir: Option<PathBuf>,
    home: Option<PathBuf>,
    /// Latch's own config directory ([`env::latch_config_dir`], as given
    /// and as its real path), hidden from every confined command.
    secrets: Vec<PathBuf>,
    abi: u32,
}

impl Sandbox {
    /// No sandbox: commands run with the user's full rights (today's
    /// behaviour, chosen explicitly), without the provider keys.
    pub fn full_access() -> Sandbox {
        Sandbox {
            policy: SandboxPolicy {
                mode: SandboxMode::FullAccess,
                network: true,
                ..SandboxPolicy::default()
            },
            workspace: PathBuf::new(),
            session: String::new(),
            temp_dir: None,
            home: None,
            secrets: Vec::new(),
            abi: 0,
        }
    }

    /// The sandbox of `session` in `workspace` under `policy`: checks that
    /// this machine can enforce it (never a silent downgrade) and creates
    /// the session's temp dir.
    pub fn new(
        policy: SandboxPolicy,
        workspace: &Path,
        session: &str,
    ) -> Result<Sandbox, SandboxError> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if policy.mode == SandboxMode::FullAccess {
            return Ok(Sandbox {
                policy,
                workspace: std::fs::canonicalize(workspace)
                    .unwrap_or_else(|_| workspace.to_path_buf()),
                session: session.to_string(),
                temp_dir: Some(session_temp_dir(session)),
                home,
                secrets: Vec::new(),
                abi: 0,
            });
        }
        let mode = policy.mode;
        let abi = landlock::require(mode)?;
        let workspace = std::fs::canonicalize(workspace).map_err(|source| SandboxError::Setup {
            mode,
            what: format!("the workspace {}", workspace.display()),
            source,
        })?;
        let temp_dir = session_temp_dir(session);
        create_private_dir(&temp_dir).map_err(|source| SandboxError::Setup {
            mode,
            what: format!("the session temp dir {}", temp_dir.display()),
            source,
        })?;
        let secrets = config_dirs(&workspace);
        let sandbox = Sandbox {
            policy,
            workspace,
            session: session.to_string(),
            temp_dir: Some(temp_dir),
            home,
            secrets,
            abi,
        };
        if sandbox.needs_namespaces() {
            namespaces_available().map_err(|detail| SandboxError::NamespacesUnavailable {
                mode,
                what: if sandbox.policy.network {
                    "giving each command its own PID namespace (killed whole when it ends)"
                } else {
                    "cutting off the network"
                },
                detail,
                hint: if sandbox.policy.network {
                    ""
                } else {
                    " or allow the network with `[sandbox] network = true`"
                },
            })?;
        }
        Ok(sandbox)
    }

    /// This session's sandbox with another `mode` and/or `network` setting
    /// (an MCP server's own `sandbox` and `network`); the same workspace,
    /// temp dir, home and passed-through variables. `None` keeps the
    /// session's setting.
    pub fn adjusted(
        &self,
        mode: Option<SandboxMode>,
        network: Option<bool>,
    ) -> Result<Sandbox, SandboxError> {
        let mut policy = self.policy.clone();
        policy.mode = mode.unwrap_or(policy.mode);
        policy.network = network.unwrap_or(policy.network);
        if policy == self.policy {
            return Ok(self.clone());
        }
        let mut sandbox = Sandbox::new(policy, &self.workspace, &self.session)?;
        sandbox.home = self.home.clone();
        Ok(sandbox)
    }

    /// Remove the session's temp dir and everything in it. Call it once
    /// nothing confined by this sandbox (or an [`adjusted`](Self::adjusted)
    /// sibling) still runs. True when there was a directory to remove.
    pub fn remove_temp_dir(&self) -> std::io::Result<bool> {
        let Some(dir) = &self.temp_dir else {
            return Ok(false);
        };
        match std::fs::remove_dir_all(dir) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Hide the secrets under `home` instead of `$HOME` (tests, and hosts
    /// that run for another user).
    pub fn with_home(mut self, home: impl Into<PathBuf>) -> Sandbox {
        self.home = Some(home.into());
        self
    }

    /// The policy.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The mode.
    pub fn mode(&self) -> SandboxMode {
        self.policy.mode
    }

    /// The session's temp dir (`TMPDIR` of every command); none under
    /// `full-access`.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp_dir
            .as_deref()
            .filter(|_| self.policy.mode != SandboxMode::FullAccess)
    }

    /// The Landlock ABI in use (0 under `full-access`).
    pub fn landlock_abi(&self) -> u32 {
        self.abi
    }

    /// The Unix sockets a command may connect to: under the workspace, the
    /// session temp dir and `[sandbox] allow_unix_sockets` (real paths).
    fn socket_rules(&self, temp_dir: &Path) -> SocketRules {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let mut allowed = vec![self.workspace.clone(), real(temp_dir)];
        allowed.extend(self.policy.allow_unix_sockets.iter().map(|p| real(p)));
        SocketRules {
            allowed,
            network: self.policy.network,
        }
    }

    fn needs_namespaces(&self) -> bool {
        self.policy.mode != SandboxMode::FullAccess
    }

    /// `cmd`, confined (the MCP client and every tool spawn through this).
    /// Under `full-access` only the provider keys are left out.
    pub fn command(&self, mut cmd: Command) -> Result<Command, SandboxError> {
        self.apply(&mut cmd)?;
        Ok(cmd)
    }

    /// Confine `cmd`: set `TMPDIR` to the session's temp dir, remove from
    /// its environment the variables of Latch's whose names look secret
    /// ([`crate::env`]; variables set on `cmd` itself and the policy's
    /// `env_passthrough` stay), and install the steps that run in the child
    /// before `exec` (its keeper, see [`crate::keeper`]). A failure of
    /// those steps makes the spawn fail with the kernel's error. Under
    /// `full-access` only the provider keys ([`env::PROVIDER_KEYS`]) not
    /// passed through are removed, and the command is still kept: its own
    /// session without a terminal, its leftovers killed when it ends.
    pub fn apply(&self, cmd: &mut Command) -> Result<(), SandboxError> {
        let mode = self.policy.mode;
        let setup = |what: &Path, source: std::io::Error| SandboxError::Setup {
            mode,
            what: what.display().to_string(),
            source,
        };
        let lifeline = keeper::lifeline().map_err(|e| setup(Path::new("the lifeline"), e))?;
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut plan = Plan {
            unshare: 0,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            confine: None,
            lifeline,
            terminal_filter: seccomp::terminal_program(),
            stop_signal: keeper::stop_signal(),
        };
        if mode == SandboxMode::FullAccess {
            let hidden = env::hidden_provider_keys(
                std::env::vars_os().map(|(name, _)| name),
                &self.policy.env_passthrough,
            );
            remove_unless_set(cmd, hidden);
            install(cmd, plan);
            return Ok(());
        }
        let temp_dir = self.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        let mut rules = rules(
            &self.policy,
            &self.workspace,
            &temp_dir,
            self.home.as_deref(),
        );
        hide(&mut rules, &self.secrets);
        // A secret inside a writable hierarchy stays reachable through its
        // rule: an empty mount goes over it instead.
        let masked = self
            .secrets
            .iter()
            .filter(|s| s.is_dir() && rules.write.iter().any(|w| s.starts_with(w)))
            .map(|s| c_path(s).map_err(|e| setup(s, e)))
            .collect::<Result<Vec<_>, _>>()?;
        let ruleset = landlock::ruleset(mode, self.abi, &rules)?;
        let mut protected = Vec::new();
        for path in &rules.protected {
            if !path.exists() && path.ends_with(".git/hooks") {
                // Protect the place git looks for hooks even when empty.
                std::fs::create_dir_all(path).map_err(|e| setup(path, e))?;
            }
            if path.exists() {
                protected.push((c_path(path).map_err(|e| setup(path, e))?, mount_flags(path)));
            }
        }
        let pinned = rules
            .pinned
            .iter()
            .map(|p| c_path(p).map_err(|e| setup(p, e)))
            .collect::<Result<Vec<_>, _>>()?;
        plan.unshare = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
        if !self.policy.network {
            plan.unshare |= libc::CLONE_NEWNET;
        }
        let channel = supervise::start(self.socket_rules(&temp_dir))
            .map_err(|e| setup(Path::new("the socket supervisor"), e))?;
        plan.confine = Some(Confinement::new(
            mode, self.abi, ruleset, pinned, protected, masked, channel,
        ));
        cmd.env("TMPDIR", &temp_dir);
        let hidden = env::hidden(
            std::env::vars_os().map(|(name, _)| name),
            &self.policy.env_passthrough,
        );
        remove_unless_set(cmd, hidden);
        install(cmd, plan);
        Ok(())
    }
}

/// Install `plan` as the step `cmd`'s child runs before `exec`.
fn install(cmd: &mut Command, plan: Plan) {
    // SAFETY: `Plan::enter` runs in the forked child before exec and makes
    // only async-signal-safe system calls (setsid, unshare, fork, mount,
    // prctl, landlock, seccomp, poll, waitpid, kill, close) on data prepared
    // in the parent; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || plan.enter());
    }
}

/// Remove `names` from what `cmd` inherits, except those set on `cmd`
/// itself.
fn remove_unless_set(cmd: &mut Command, names: Vec<std::ffi::OsString>) {
    for name in names {
        let set_here = cmd
            .get_envs()
            .any(|(set, value)| set == name.as_os_str() && value.is_some());
        if !set_here {
            cmd.env_remove(name);
        }
    }
}

fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

/// The flags of the mount holding `path` that an unprivileged read-only
/// remount must keep (the kernel refuses to clear locked ones).
fn mount_flags(path: &Path) -> libc::c_ulong {
    let Ok(c) = c_path(path) else { return 0 };
    // SAFETY: statvfs fills the zeroed struct we own from a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let f = st.f_flag;
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

/// Latch's config directory as given and as its real path, unless it
/// holds the workspace (hiding it would hide the workspace too).
fn config_dirs(workspace: &Path) -> Vec<PathBuf> {
    let Some(dir) = env::latch_config_dir() else {
        return Vec::new();
    };
    let dir = if dir.is_absolute() {
        dir
    } else {
        std::env::current_dir().unwrap_or_default().join(dir)
    };
    let mut dirs = vec![dir.clone()];
    if let Ok(real) = std::fs::canonicalize(&dir)
        && real != dir
    {
        dirs.push(real);
    }
    dirs.retain(|d| d.parent().is_some() && !workspace.starts_with(d));
    dirs
}

/// `/tmp/latch-SESSION` (characters other than ASCII letters and digits
/// become `-`).
fn session_temp_dir(session: &str) -> PathBuf {
    let safe: String = session
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    std::env::temp_dir().join(format!("latch-{safe}"))
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        }
        Err(e) => Err(e),
    }
}

/// Whether this process can create unprivileged user, network, mount and
/// PID namespaces (checked once by running `true` in them).
pub fn namespaces_available() -> Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            let uid_map = format!("{uid} {uid} 1\n").into_bytes();
            let gid_map = format!("{gid} {gid} 1\n").into_bytes();
            let mut cmd = Command::new("true");
            cmd.stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            // SAFETY: as in `Plan::enter`: only async-signal-safe calls on
            // buffers prepared here.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::unshare(
                        libc::CLONE_NEWUSER
                            | libc::CLONE_NEWNET
                            | libc::CLONE_NEWNS
                            | libc::CLONE_NEWPID,
                    ) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    write_proc(c"/proc/self/setgroups", b"deny")?;
                    write_proc(c"/proc/self/uid_map", &uid_map)?;
                    write_proc(c"/proc/self/gid_map", &gid_map)
                });
            }
            match cmd.status() {
                Ok(s) if s.success() => Ok(()),
                Ok(s) => Err(format!("a probe in a fresh namespace ended with {s}")),
                Err(e) => Err(e.to_string()),
            }
        })
        .clone()
}
