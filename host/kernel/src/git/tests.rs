use super::*;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn door() -> (tempfile::TempDir, Git) {
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    git(&ws, &["config", "core.fsmonitor", "touch /nonexistent/x"]);
    git(&ws, &["config", "user.name", "from the repository"]);
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    let repo = Repository::discover(&ws).unwrap();
    let g = Git::open(&repo, &ws, &dir.path().join("store")).unwrap();
    (dir, g)
}

#[test]
fn latch_git_sees_its_own_config_and_never_the_repository_s() {
    let (_dir, g) = door();
    let out = g
        .output(&g.repository().index(), &["config", "--list"], None)
        .unwrap();
    let config = String::from_utf8_lossy(&out.stdout);
    assert!(!config.contains("from the repository"), "{config}");
    assert!(!config.contains("touch"), "{config}");
    assert!(config.contains("core.fsmonitor=false"), "{config}");
    assert!(config.contains("core.hookspath=/dev/null"), "{config}");
    for (key, value) in PROGRAM_KEYS {
        let line = format!("{}={value}", key.to_ascii_lowercase());
        assert!(config.contains(&line), "{line} in {config}");
    }
}

#[test]
fn latch_git_writes_only_under_the_snapshot_directory() {
    let (dir, g) = door();
    let outside = dir.path().join("outside-index");
    let out = g.run(&outside, &["add", "-A"], None).unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(!outside.exists());
    let inside = g.snapshot_dir().join("index-test");
    let out = g.run(&inside, &["add", "-A"], None).unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(inside.exists());
    // The repository's own index and objects are read, never written.
    assert!(!g.repository().index().exists());
}

/// A repository whose config sets every program-running key to a program
/// that leaves a marker named after the key inside Latch's snapshot
/// directory (the one place a program run by Latch's git could write), and
/// whose `.gitattributes` gives the `.txt` files that config's diff driver.
/// Two commits: `a.txt` changes between them.
struct Armed {
    dir: tempfile::TempDir,
    git: Git,
    ws: PathBuf,
}

impl Armed {
    fn new() -> Armed {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let commit = [
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
        ];
        git(&ws, &["init", "-q"]);
        std::fs::write(ws.join("a.txt"), "a v1\n").unwrap();
        std::fs::write(ws.join(".gitattributes"), "*.txt diff=evil\n").unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &[&commit[..], &["-qm", "one"]].concat());
        std::fs::write(ws.join("a.txt"), "a v2\n").unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &[&commit[..], &["-qm", "two"]].concat());
        let repo = Repository::discover(&ws).unwrap();
        let git_ = Git::open(&repo, &ws, &base.join("store")).unwrap();
        let armed = Armed { dir, git: git_, ws };
        let askpass = armed.script("askpass");
        let set = |key: &str, value: String| git(&armed.ws, &["config", key, &value]);
        set(
            "diff.evil.textconv",
            format!("{}; cat", armed.program("textconv")),
        );
        set("diff.evil.command", armed.program("diff-command"));
        set("diff.external", armed.program("external"));
        set("core.pager", armed.program("pager"));
        set("pager.diff", armed.program("pager-diff"));
        set("core.editor", armed.program("editor"));
        set("sequence.editor", armed.program("sequence-editor"));
        set("credential.helper", format!("!{}", armed.program("helper")));
        set("core.askPass", askpass.display().to_string());
        set("core.sshCommand", armed.program("ssh"));
        armed
    }

    fn marker(&self, key: &str) -> PathBuf {
        self.git.snapshot_dir().join(format!("pwned-{key}"))
    }

    /// A shell command that leaves the marker of `key`.
    fn program(&self, key: &str) -> String {
        format!("touch {}", self.marker(key).display())
    }

    /// An executable script that leaves the marker of `key` (for keys git
    /// runs without a shell).
    fn script(&self, key: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(key);
        std::fs::write(&path, format!("#!/bin/sh\n{}\necho x\n", self.program(key))).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Run `args` through Latch's git, whatever its exit status.
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Output {
        let index = self.git.snapshot_dir().join("index-firing");
        self.git.run(&index, args, input).unwrap()
    }

    /// None of `keys`' programs ran.
    fn assert_never_ran(&self, keys: &[&str], out: &Output) {
        for key in keys {
            assert!(
                !self.marker(key).exists(),
                "Latch's git ran the repository's {key}: {out:?}"
            );
        }
    }
}

// The git commands below are the ones that fire each key, although Latch's
// bookkeeping runs none of them: should it ever, the key still runs nothing.

#[test]
fn a_textconv_driver_never_runs_even_for_a_textconv_read() {
    let a = Armed::new();
    let out = a.run(&["cat-file", "--textconv", "HEAD:a.txt"], None);
    // Latch's own repository has no HEAD: name the commit by its id.
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&a.ws)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let spec = format!("{}:a.txt", head.trim());
    let by_id = a.run(&["cat-file", "--textconv", &spec], None);
    assert!(by_id.status.success(), "{by_id:?}");
    assert_eq!(by_id.stdout, b"a v2\n");
    a.assert_never_ran(&["textconv"], &out);
    a.assert_never_ran(&["textconv"], &by_id);
}

#[test]
fn diff_external_a_diff_command_and_textconv_never_run_even_for_a_diff() {
    let a = Armed::new();
    // Files of the work tree are handed to the programs as they are (no
    // temporary copy, which the jail would refuse before any program ran).
    std::fs::write(a.ws.join("b.txt"), "b\n").unwrap();
    let external = a.run(
        &["diff", "--no-index", "--ext-diff", "a.txt", "b.txt"],
        None,
    );
    let textconv = a.run(
        &[
            "diff",
            "--no-index",
            "--no-ext-diff",
            "--textconv",
            "a.txt",
            "b.txt",
        ],
        None,
    );
    assert!(
        String::from_utf8_lossy(&textconv.stdout).contains("+b"),
        "{textconv:?}"
    );
    for out in [&external, &textconv] {
        a.assert_never_ran(&["external", "diff-command", "textconv", "pager-diff"], out);
    }
}

#[test]
fn the_credential_helper_and_askpass_never_run_even_when_credentials_are_asked_for() {
    let a = Armed::new();
    let out = a.run(
        &["credential", "fill"],
        Some(b"protocol=https\nhost=example.com\n\n"),
    );
    a.assert_never_ran(&["helper", "askpass"], &out);
}

#[test]
fn the_ssh_command_never_runs_even_for_a_remote() {
    let a = Armed::new();
    for url in ["ssh://example.invalid/x", "example.invalid:x"] {
        let out = a.run(&["ls-remote", url], None);
        a.assert_never_ran(&["ssh"], &out);
        let out = a.run(&["fetch", url], None);
        a.assert_never_ran(&["ssh"], &out);
    }
}

#[test]
fn the_pager_and_editors_git_would_start_are_never_the_repository_s() {
    let a = Armed::new();
    for (var, ours) in [
        ("GIT_PAGER", "cat"),
        ("GIT_EDITOR", ":"),
        ("GIT_SEQUENCE_EDITOR", ":"),
    ] {
        let out = a.run(&["var", var], None);
        assert!(out.status.success(), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ours, "{var}");
    }
    // They start only on a terminal, which Latch's git never has.
    let out = a.run(&["-p", "log", "-1"], None);
    a.assert_never_ran(&["pager", "pager-diff", "editor", "sequence-editor"], &out);
}
