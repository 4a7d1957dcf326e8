//! Landlock: which ABI the kernel offers, and the ruleset fd for a set of
//! [`Rules`], built in the parent (opening paths allocates, which a forked
//! child must not do) and enforced in the child with one system call.

use crate::error::SandboxError;
use crate::mode::SandboxMode;
use crate::rules::Rules;
use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope,
};
use std::os::fd::OwnedFd;

/// Setting this variable to `0` makes Latch behave as on a kernel without
/// Landlock (for tests of the refusal); another number pretends that ABI.
pub const PRETEND_ABI_ENV: &str = "LATCH_SANDBOX_PRETEND_LANDLOCK_ABI";

/// The newest ABI whose file rights Latch uses: up to truncation. Network
/// rules (ABI 4) are not needed: the network is cut off by a namespace.
const USED: ABI = ABI::V3;

/// The first ABI that scopes abstract Unix sockets and signals to the
/// sandbox's own processes.
pub const SCOPED_ABI: u32 = 6;

/// The Landlock ABI version the kernel offers (0: none), or why it could
/// not be read.
pub fn abi_version() -> Result<u32, String> {
    if let Ok(v) = std::env::var(PRETEND_ABI_ENV) {
        return v
            .trim()
            .parse()
            .map_err(|_| format!("{PRETEND_ABI_ENV}={v} is not a number"));
    }
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) only returns the
    // ABI version; it reads and writes no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    if v < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS) => Err("the kernel was built without Landlock".into()),
            Some(libc::EOPNOTSUPP) => Err("Landlock is disabled at boot".into()),
            _ => Err(format!("Landlock is not usable: {e}")),
        };
    }
    Ok(v as u32)
}

fn abi_of(version: u32) -> ABI {
    match version {
        0 => ABI::Unsupported,
        1 => ABI::V1,
        2 => ABI::V2,
        _ => USED,
    }
}

/// Check that Landlock can enforce `mode`: the ABI in use, or the error
/// that names the mode.
pub fn require(mode: SandboxMode) -> Result<u32, SandboxError> {
    match abi_version() {
        Ok(0) => Err(SandboxError::LandlockUnavailable {
            mode,
            detail: "the kernel offers no Landlock ABI".into(),
        }),
        Ok(v) => Ok(v),
        Err(detail) => Err(SandboxError::LandlockUnavailable { mode, detail }),
    }
}

/// The rights a read rule grants under ABI `version` (for a rule added in
/// the child, after a mount the parent could not see).
pub(crate) fn read_access(version: u32) -> u64 {
    AccessFs::from_read(abi_of(version)).bits()
}

/// Build the ruleset of `rules` for ABI `version`: every file-system right
/// the ABI knows is handled, so anything not granted is refused.
pub fn ruleset(mode: SandboxMode, version: u32, rules: &Rules) -> Result<OwnedFd, SandboxError> {
    let abi = abi_of(version);
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let file = AccessFs::from_file(abi);
    let fail = |what: String, e: &dyn std::fmt::Display| SandboxError::Setup {
        mode,
        what,
        source: std::io::Error::other(e.to_string()),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(all)
        .map_err(|e| fail("the Landlock ruleset".into(), &e))?;
    if version >= SCOPED_ABI {
        // A command may not connect to abstract sockets nor signal
        // processes outside its own sandbox.
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(|e| fail("the Landlock scopes".into(), &e))?;
    }
    let mut created = ruleset
        .create()
        .map_err(|e| fail("the Landlock ruleset".into(), &e))?;
    let grants = rules
        .read
        .iter()
        .map(|p| (p, read))
        .chain(rules.write.iter().map(|p| (p, all)))
        .chain(rules.devices.iter().map(|p| (p, file & !AccessFs::Execute)));
    for (path, access) in grants {
        // Paths that vanished (a dangling link in `/`) grant nothing.
        let Ok(fd) = PathFd::new(path) else { continue };
        let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
        let access: BitFlags<AccessFs> = if is_dir { access } else { access & file };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| fail(format!("the rule for {}", path.display()), &e))?;
    }
    Option::<OwnedFd>::from(created).ok_or_else(|| SandboxError::LandlockUnavailable {
        mode,
        detail: "the kernel refused to create a Landlock ruleset".into(),
    })
}
