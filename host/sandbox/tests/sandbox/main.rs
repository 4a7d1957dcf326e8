//! Real commands in each sandbox mode, on this machine's kernel: writes
//! outside the workspace fail with EACCES in `workspace-write`, nothing can
//! be written in `read-only`, a process spawned from a backgrounded shell
//! inherits the restriction, a loopback TCP connect fails unless the
//! network is allowed, all of `.git` and `.latch` stay read-only,
//! `full-access` behaves as an unsandboxed command, a missing Landlock is a
//! clear error, and the self-test refuses all its probes. Sockets,
//! signals and metadata writes are in [`sockets`].

use latch_sandbox::check::{self, ProbeOp};
use latch_sandbox::landlock::PRETEND_ABI_ENV;
use latch_sandbox::{Sandbox, SandboxMode, SandboxPolicy};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

mod helper;
mod isolation;
mod sockets;

struct Fixture {
    ws: tempfile::TempDir,
    outside: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("inside.txt"), "in\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("existing.txt"), "out\n").unwrap();
    Fixture { ws, outside }
}

fn sandbox(f: &Fixture, mode: SandboxMode, network: bool) -> Sandbox {
    let policy = SandboxPolicy {
        mode,
        network,
        ..SandboxPolicy::default()
    };
    Sandbox::new(policy, f.ws.path(), "test-session").expect("this machine enforces the mode")
}

/// `sh -c script` in the workspace under `sandbox`.
fn sh(sandbox: &Sandbox, dir: &Path, script: &str) -> Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).current_dir(dir);
    sandbox.command(cmd).unwrap().output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn workspace_write_writes_inside_and_refuses_outside_with_eacces() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    let out = f.outside.path().join("new.txt");
    let o = sh(
        &sb,
        f.ws.path(),
        &format!(
            "echo ok > made.txt && echo tmp > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo x > {}",
            out.display()
        ),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o)
    );
    assert!(
        f.ws.path().join("made.txt").exists(),
        "the workspace is writable"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "tmp\n",
        "the temp dir is writable"
    );
    assert!(!out.exists(), "nothing was written outside");
    // The errno itself, from a program that reports it.
    let existing = f.outside.path().join("existing.txt");
    let o = in_sandbox(
        &sb,
        probe_cmd(ProbeOp::Write, &existing.display().to_string()),
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&format!("PROBE-ERR {EACCES} ")),
        "{}",
        text(&o)
    );
    // Reads outside the workspace still work (system files, the toolchain).
    let o = sh(
        &sb,
        f.ws.path(),
        &format!("cat {}/existing.txt", f.outside.path().display()),
    );
    assert!(o.status.success(), "{}", text(&o));
}

const EACCES: i32 = 13;
const ENETUNREACH: i32 = 101;

/// Not a test of its own: the probe process other tests run inside the
/// sandbox (this test binary, re-run with `LATCH_TEST_PROBE="op target"`),
/// so no interpreter has to be installed. It prints `PROBE-OK` or
/// `PROBE-ERR <errno> <error>`.
#[test]
fn probe_entry() {
    if let Ok(spec) = std::env::var("LATCH_TEST_PROBE") {
        let (op, target) = spec.split_once(' ').unwrap();
        let result = match ProbeOp::parse(op) {
            Some(op) => check::probe(op, target),
            None => isolation::probe(op, target).unwrap_or_else(|| sockets::probe(op, target)),
        };
        match result {
            Ok(()) => {
                println!("PROBE-OK");
                std::process::exit(0)
            }
            Err(e) => {
                println!("PROBE-ERR {} {e}", e.raw_os_error().unwrap_or(-1));
                std::process::exit(1)
            }
        }
    }
}

fn probe_cmd(op: ProbeOp, target: &str) -> Command {
    named_probe(op.name(), target)
}

/// The probe process for an operation by name (those of [`ProbeOp`] and
/// those of [`sockets::probe`]).
fn named_probe(op: &str, target: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "probe_entry", "--nocapture", "--test-threads=1"])
        .env("LATCH_TEST_PROBE", format!("{op} {target}"));
    c
}

fn in_sandbox(sandbox: &Sandbox, cmd: Command) -> Output {
    sandbox.command(cmd).unwrap().output().unwrap()
}

#[test]
fn read_only_refuses_every_write_but_dev_null() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::ReadOnly, false);
    for script in [
        "echo x > inside.txt".to_string(),
        "touch new.txt".to_string(),
        "mkdir d".to_string(),
        "rm inside.txt".to_string(),
        "echo x > \"$TMPDIR/t\"".to_string(),
        format!("echo x > {}/new.txt", f.outside.path().display()),
    ] {
        let o = sh(&sb, f.ws.path(), &script);
        assert!(!o.status.success(), "{script}: {}", text(&o));
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.path().join("inside.txt")).unwrap(),
        "in\n"
    );
    let o = sh(
        &sb,
        f.ws.path(),
        "cat inside.txt && echo hidden 2>/dev/null >/dev/null",
    );
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_process_spawned_from_a_backgrounded_shell_inherits_the_restriction() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    let target = f.outside.path().join("from-background.txt");
    let o = sh(
        &sb,
        f.ws.path(),
        &format!(
            "( sh -c 'sleep 0.1; echo x > {t} || echo refused > bg-result.txt' 2> bg-error.txt & ); \
             sleep 0.5; cat bg-result.txt bg-error.txt",
            t = target.display()
        ),
    );
    assert!(!target.exists(), "the grandchild escaped: {}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("refused") && stdout.contains("Permission denied"),
        "{}",
        text(&o)
    );
}

/// A loopback connect from the sandbox to a listener of this process.
fn connect(sandbox: &Sandbox, port: u16) -> Output {
    in_sandbox(
        sandbox,
        probe_cmd(ProbeOp::Connect, &format!("127.0.0.1:{port}")),
    )
}

#[test]
fn loopback_tcp_fails_unless_the_network_is_allowed() {
    let f = fixture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let o = connect(&sandbox(&f, mode, false), port);
        assert!(!o.status.success(), "{mode}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(&format!("PROBE-ERR {ENETUNREACH} ")),
            "{mode}: {}",
            text(&o)
        );
    }
    let o = connect(&sandbox(&f, SandboxMode::WorkspaceWrite, true), port);
    assert!(o.status.success(), "network = true: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("PROBE-OK"),
        "{}",
        text(&o)
    );
}

#[test]
fn full_access_behaves_as_an_unsandboxed_command() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::FullAccess, false);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let target = f.outside.path().join("free.txt");
    let o = sh(&sb, f.ws.path(), &format!("echo x > {}", target.display()));
    assert!(o.status.success(), "{}", text(&o));
    assert!(target.exists());
    let o = connect(&sb, port);
    assert!(o.status.success(), "{}", text(&o));
    assert!(sb.temp_dir().is_none());
}

#[test]
fn all_of_git_and_latch_stay_read_only_and_git_cannot_be_moved() {
    let f = fixture();
    let w = f.ws.path();
    std::fs::create_dir_all(w.join(".git/objects")).unwrap();
    std::fs::create_dir_all(w.join(".git/hooks")).unwrap();
    std::fs::write(w.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(w.join(".latch")).unwrap();
    std::fs::write(w.join(".latch/config.toml"), "").unwrap();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    // `git commit` needs the model to ask (an escalation), like any write
    // outside the sandbox: every file of `.git` is read-only.
    for script in [
        "echo evil > .git/hooks/pre-commit",
        "echo '[core] hooksPath=/x' >> .git/config",
        "echo /elsewhere > .git/commondir",
        "echo blob > .git/objects/x",
        "echo index > .git/index",
        "mkdir .git/info",
        "echo '[sandbox]' >> .latch/config.toml",
        "mv .git .git-old",
        "rm -rf .git",
        "rm -rf .latch",
    ] {
        let o = sh(&sb, w, script);
        assert!(!o.status.success(), "{script}: {}", text(&o));
    }
    assert!(!w.join(".git/hooks/pre-commit").exists());
    assert!(!w.join(".git/commondir").exists() && !w.join(".git/index").exists());
    assert_eq!(
        std::fs::read_to_string(w.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(w.join(".latch/config.toml").exists() && w.join(".git").is_dir());
    // The work tree stays writable.
    let o = sh(&sb, w, "echo ok > tracked.txt");
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_git_file_and_the_repository_it_names_stay_read_only() {
    let f = fixture();
    let w = f.ws.path();
    // A linked worktree whose repository lies under another writable root.
    let main = tempfile::tempdir().unwrap();
    let git_dir = main.path().join(".git/worktrees/wt");
    std::fs::create_dir_all(&git_dir).unwrap();
    std::fs::write(git_dir.join("commondir"), "../..\n").unwrap();
    std::fs::write(main.path().join(".git/config"), "[core]\n").unwrap();
    std::fs::write(w.join(".git"), format!("gitdir: {}\n", git_dir.display())).unwrap();
    let policy = SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        writable_roots: vec![main.path().to_path_buf()],
        ..SandboxPolicy::default()
    };
    let sb = Sandbox::new(policy, w, "test-session").unwrap();
    for script in [
        "echo 'gitdir: /evil' > .git".to_string(),
        format!("echo /evil > {}/commondir", git_dir.display()),
        format!("echo '[core]' >> {}/.git/config", main.path().display()),
    ] {
        let o = sh(&sb, w, &script);
        assert!(!o.status.success(), "{script}: {}", text(&o));
    }
    // The rest of that root stays writable.
    let o = sh(&sb, w, &format!("echo ok > {}/file", main.path().display()));
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn secrets_under_home_cannot_be_read() {
    let f = fixture();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_ed25519"), "KEY").unwrap();
    std::fs::create_dir_all(home.path().join(".cargo")).unwrap();
    std::fs::write(home.path().join(".cargo/env"), "TOOLS").unwrap();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false).with_home(home.path());
    let h = home.path().display();
    let o = sh(&sb, f.ws.path(), &format!("cat {h}/.ssh/id_ed25519"));
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Permission denied"),
        "{}",
        text(&o)
    );
    let o = sh(&sb, f.ws.path(), &format!("cat {h}/.cargo/env"));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "TOOLS", "{}", text(&o));
}

#[test]
fn a_machine_without_landlock_is_a_clear_error_never_a_downgrade() {
    const NAME: &str = "a_machine_without_landlock_is_a_clear_error_never_a_downgrade";
    if std::env::var_os(PRETEND_ABI_ENV).is_none() {
        // Pretending is process-wide: re-run this test alone in a child
        // process with the variable set, so the other tests keep the real ABI.
        let o = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env(PRETEND_ABI_ENV, "0")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("REFUSED-AS-EXPECTED"),
            "{}",
            text(&o)
        );
        return;
    }
    let f = fixture();
    let policy = |mode| SandboxPolicy {
        mode,
        ..SandboxPolicy::default()
    };
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let err = Sandbox::new(policy(mode), f.ws.path(), "s").unwrap_err();
        assert_eq!(err.kind(), "landlock-unavailable");
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("`{mode}` cannot be enforced"))
                && msg.contains("--sandbox full-access"),
            "{msg}"
        );
    }
    assert!(
        Sandbox::new(policy(SandboxMode::FullAccess), f.ws.path(), "s").is_ok(),
        "full-access needs no Landlock"
    );
    println!("REFUSED-AS-EXPECTED");
}

#[test]
fn the_self_test_refuses_every_probe_the_terminal_and_survivors_among_them() {
    let f = fixture();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "KEY").unwrap();
    let results = check::self_test(f.ws.path(), Some(home.path()), &probe_cmd).unwrap();
    assert_eq!(results.len(), 7);
    assert!(results[3].what.contains("Unix socket"), "{results:?}");
    assert!(
        results[4].what.contains("TIOCSTI")
            && results[4].detail.contains("Operation not permitted"),
        "{results:?}"
    );
    assert!(
        results[5].what.contains("controlling terminal")
            && results[5].detail.contains("No such device or address"),
        "{results:?}"
    );
    assert!(
        results[6].what.contains("setsid") && results[6].detail == "stopped with its command",
        "{results:?}"
    );
    for r in &results {
        assert!(r.refused, "{r:?}");
    }
    let caps = check::capabilities();
    assert!(caps.landlock_abi.unwrap() >= 1 && caps.namespaces.is_ok());
}

#[test]
fn confined_commands_do_not_inherit_secret_looking_variables() {
    const NAME: &str = "confined_commands_do_not_inherit_secret_looking_variables";
    if std::env::var_os("LATCH_TEST_FOO_API_KEY").is_none() {
        // The variables must be in this process's own environment (what a
        // command inherits): re-run this test alone in a child with them.
        let o = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env("LATCH_TEST_FOO_API_KEY", "sk-parent")
            .env("LATCH_TEST_GITHUB_TOKEN", "ghp-parent")
            .env("LATCH_TEST_PLAIN", "visible")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("ENV-CHECKED"),
            "{}",
            text(&o)
        );
        return;
    }
    let f = fixture();
    let show = "env | grep '^LATCH_TEST_' | sort";
    let seen = |sb: &Sandbox, own: Option<(&str, &str)>| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(show).current_dir(f.ws.path());
        if let Some((k, v)) = own {
            cmd.env(k, v);
        }
        let o = sb.command(cmd).unwrap().output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        assert_eq!(
            seen(&sandbox(&f, mode, false), None),
            "LATCH_TEST_PLAIN=visible\n",
            "{mode} hides the secret-looking variables"
        );
    }
    let passing = Sandbox::new(
        SandboxPolicy {
            env_passthrough: vec!["LATCH_TEST_FOO_API_KEY".into()],
            ..SandboxPolicy::default()
        },
        f.ws.path(),
        "env-test",
    )
    .unwrap();
    assert_eq!(
        seen(&passing, None),
        "LATCH_TEST_FOO_API_KEY=sk-parent\nLATCH_TEST_PLAIN=visible\n",
        "a passed-through name stays"
    );
    assert_eq!(
        seen(
            &sandbox(&f, SandboxMode::WorkspaceWrite, false),
            Some(("LATCH_TEST_GITHUB_TOKEN", "set-on-the-command"))
        ),
        "LATCH_TEST_GITHUB_TOKEN=set-on-the-command\nLATCH_TEST_PLAIN=visible\n",
        "a variable set on the command itself stays"
    );
    assert_eq!(
        seen(&sandbox(&f, SandboxMode::FullAccess, true), None),
        "LATCH_TEST_FOO_API_KEY=sk-parent\nLATCH_TEST_GITHUB_TOKEN=ghp-parent\nLATCH_TEST_PLAIN=visible\n",
        "full-access changes nothing"
    );
    let _ = passing.remove_temp_dir();
    println!("ENV-CHECKED");
}

#[test]
fn an_adjusted_sibling_shares_the_temp_dir_and_removing_it_takes_everything() {
    let f = fixture();
    let session = format!("adjust-{}", std::process::id());
    let strict = Sandbox::new(SandboxPolicy::default(), f.ws.path(), &session).unwrap();
    let dir = strict.temp_dir().unwrap().to_path_buf();
    assert!(dir.is_dir());
    let o = sh(
        &strict,
        f.ws.path(),
        "mkdir -p \"$TMPDIR/a/b\" && echo x > \"$TMPDIR/a/b/f\"",
    );
    assert!(o.status.success(), "{}", text(&o));
    // The same session with full access (an MCP server's `sandbox =
    // "full-access"`) writes outside; without a change it is the same.
    let free = strict
        .adjusted(Some(SandboxMode::FullAccess), None)
        .unwrap();
    assert_eq!(free.mode(), SandboxMode::FullAccess);
    let out = f.outside.path().join("free.txt");
    let o = sh(&free, f.ws.path(), &format!("echo x > {}", out.display()));
    assert!(o.status.success() && out.exists(), "{}", text(&o));
    let same = strict.adjusted(None, Some(false)).unwrap();
    assert_eq!(same.policy(), strict.policy());
    let networked = strict.adjusted(None, Some(true)).unwrap();
    assert!(networked.policy().network);
    assert_eq!(networked.temp_dir(), Some(dir.as_path()));
    // The full-access sibling knows the temp dir too, and removes it all.
    assert!(free.remove_temp_dir().unwrap());
    assert!(!dir.exists());
    assert!(!strict.remove_temp_dir().unwrap(), "already gone");
}

#[test]
fn provider_keys_reach_no_command_in_any_mode_unless_passed_through() {
    const NAME: &str = "provider_keys_reach_no_command_in_any_mode_unless_passed_through";
    if std::env::var_os("ANTHROPIC_API_KEY").as_deref() != Some("sk-ant-parent".as_ref()) {
        let o = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
            .env("ANTHROPIC_API_KEY", "sk-ant-parent")
            .env("OPENAI_API_KEY", "sk-oai-parent")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("KEYS-CHECKED"),
            "{}",
            text(&o)
        );
        return;
    }
    let f = fixture();
    let seen = |sb: &Sandbox| {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg("env | grep -E '^(ANTHROPIC|OPENAI)_API_KEY' | sort")
            .current_dir(f.ws.path());
        let o = sb.command(cmd).unwrap().output().unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    for mode in SandboxMode::ALL {
        assert_eq!(seen(&sandbox(&f, mode, true)), "", "{mode}");
    }
    assert_eq!(seen(&Sandbox::full_access()), "", "an escalation");
    let named = Sandbox::new(
        SandboxPolicy {
            mode: SandboxMode::FullAccess,
            env_passthrough: vec!["OPENAI_API_KEY".into()],
            ..SandboxPolicy::default()
        },
        f.ws.path(),
        "keys",
    )
    .unwrap();
    assert_eq!(seen(&named), "OPENAI_API_KEY=sk-oai-parent\n");
    println!("KEYS-CHECKED");
}
