//! Latch's own git against a hostile repository and hostile commands.
//!
//! Each test plants one way of making git run a program — a config key, a
//! hook, a filter, an include, a `commondir`, a `gitdir:` file, a planted
//! `.git`, the environment — as a repository handed over would carry it or
//! as a sandboxed command (`npm test`, `make`) could write it mid-session.
//! Then the whole bookkeeping of a session runs on it: a command that may
//! write (fingerprint before and after, the snapshot, the checkpoints read
//! back from it), a command killed mid-way and settled on resume, a rewind.
//! The planted program writes a marker inside Latch's snapshot directory
//! (the one place Latch's git may write) and one outside: neither may
//! appear.

mod door;

use latch_engine_sdk::types::ModelProfile;
use latch_kernel::{EventKind, Store, run_possible_mutation, settle_pending_mutations};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every hook git knows (githooks(5)).
const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
    "post-index-change",
];

/// The git commands Latch's bookkeeping runs (for `pager.<command>`).
const COMMANDS: &[&str] = &[
    "ls-files",
    "add",
    "write-tree",
    "ls-tree",
    "check-attr",
    "cat-file",
    "diff-tree",
    "rev-parse",
];

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// One attack: a repository (its work tree at `root`, the workspace at
/// `ws`, the same or `root/ws`), a store beside it, and the two markers.
struct Attack {
    _dir: tempfile::TempDir,
    base: PathBuf,
    root: PathBuf,
    ws: PathBuf,
    store_dir: PathBuf,
}

impl Attack {
    /// A committed repository: `tracked.txt`, `old.txt`, `old.rs` and a
    /// `.gitattributes` that gives the `.txt` files a filter and a diff
    /// driver; `untracked.txt` beside them. With `nested`, the workspace is the
    /// repository's `ws/` subdirectory.
    fn new(nested: bool) -> Attack {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("repo");
        let ws = if nested {
            root.join("ws")
        } else {
            root.clone()
        };
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("tracked.txt"), "tracked v1\n").unwrap();
        std::fs::write(ws.join("old.txt"), "old\n").unwrap();
        std::fs::write(ws.join("old.rs"), "old\n").unwrap();
        std::fs::write(ws.join(".gitattributes"), "*.txt filter=evil diff=evil\n").unwrap();
        git(&root, &["init", "-q"]);
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-qm", "start"]);
        std::fs::write(ws.join("untracked.txt"), "untracked v1\n").unwrap();
        let store_dir = base.join("store");
        // The snapshot directory exists before anything runs, so a program
        // that runs can always leave its marker there.
        std::fs::create_dir_all(store_dir.join("snapshots")).unwrap();
        Attack {
            _dir: dir,
            base,
            root,
            ws,
            store_dir,
        }
    }

    /// Where a planted program leaves its marks: inside Latch's snapshot
    /// directory (writable even for a confined git) and outside.
    fn markers(&self) -> [PathBuf; 2] {
        [
            self.store_dir.join("snapshots").join("pwned"),
            self.base.join("pwned"),
        ]
    }

    /// The planted program, as a shell command line.
    fn program(&self) -> String {
        let [a, b] = self.markers();
        format!("touch {} ; touch {}", a.display(), b.display())
    }

    /// The planted program as an executable script at `path`.
    fn script(&self, path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("#!/bin/sh\n{}\ncat\n", self.program())).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// Append `text` to the config file `file`.
    fn add_config(&self, file: &Path, text: &str) {
        let mut config = std::fs::read_to_string(file).unwrap_or_default();
        config.push_str(text);
        std::fs::write(file, config).unwrap();
    }

    /// A config text that sets every program-running key to the program.
    fn every_key(&self) -> String {
        let p = self.program();
        let mut text = format!(
            "[core]\n\tfsmonitor = \"{p}\"\n\thooksPath = {hooks}\n\tpager = \"{p}\"\n\
             \teditor = \"{p}\"\n\taskPass = \"{p}\"\n\tsshCommand = \"{p}\"\n\
             [filter \"evil\"]\n\tclean = \"{p}; cat\"\n\tsmudge = \"{p}; cat\"\n\
             [diff \"evil\"]\n\ttextconv = \"{p}; cat\"\n[diff]\n\texternal = \"{p}\"\n\
             [credential]\n\thelper = \"!{p}\"\n",
            hooks = self.base.join("hooks").display()
        );
        for command in COMMANDS {
            text.push_str(&format!("[pager]\n\t{command} = \"{p}\"\n"));
        }
        for hook in HOOKS {
            self.script(&self.base.join("hooks").join(hook));
        }
        text
    }

    /// A session of the workspace.
    fn session(&self) -> (Store, String) {
        let store = Store::open(self.store_dir.join("latch.db")).unwrap();
        let model = ModelProfile::with_defaults("openai", "m");
        let id = store
            .create_session(self.ws.to_str().unwrap(), None, &model)
            .unwrap()
            .id;
        (store, id)
    }

    /// The bookkeeping of a session: a command that edits a tracked file,
    /// creates files and removes files; a command killed mid-way, settled as a
    /// resume does; a rewind of all of it.
    fn bookkeeping(&self, store: &Store, session: &str) {
        let ws = &self.ws;
        let user = store.append(session, EventKind::user_text("go")).unwrap();
        run_possible_mutation(store, session, "shell", Some("edit".into()), ws, || {
            std::fs::write(ws.join("tracked.txt"), "tracked v2\n").unwrap();
            std::fs::write(ws.join("new.txt"), "new\n").unwrap();
            std::fs::write(ws.join("new.rs"), "new\n").unwrap();
            std::fs::remove_file(ws.join("old.txt")).unwrap();
            std::fs::remove_file(ws.join("old.rs")).unwrap();
        })
        .unwrap();
        if let Some(tree) = door::snapshot_tree(store, session, ws, &self.store_dir) {
            store
                .append(
                    session,
                    EventKind::MutationPending {
                        source: "shell".into(),
                        command: Some("killed".into()),
                        snapshot: Some(tree),
                    },
                )
                .unwrap();
            std::fs::write(ws.join("untracked.txt"), "untracked v2\n").unwrap();
            settle_pending_mutations(store, session, ws).unwrap();
        }
        door::rewind(store, session, ws, user);
    }

    /// Neither marker exists.
    fn assert_never_ran(&self) {
        for m in self.markers() {
            assert!(
                !m.exists(),
                "the planted program ran: {} exists",
                m.display()
            );
        }
    }

    /// The files a checkpoint of the session names.
    fn checkpointed(store: &Store, session: &str) -> Vec<String> {
        let mut paths: Vec<String> = store
            .all_events(session)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::Checkpoint { path, .. } => Some(path),
                _ => None,
            })
            .collect();
        paths.sort();
        paths.dedup();
        paths
    }

    /// Run the bookkeeping on a repository planted before the session
    /// (handed over as a directory or a tarball); Latch's git really ran
    /// (the command's changes were checkpointed), and the program did not.
    fn handed_over(&self) {
        let (store, session) = self.session();
        self.bookkeeping(&store, &session);
        self.assert_never_ran();
        let checkpointed = Self::checkpointed(&store, &session);
        assert!(
            checkpointed.contains(&"old.rs".to_string())
                && checkpointed.contains(&"new.rs".to_string()),
            "Latch's git did its work: {checkpointed:?}"
        );
    }

    /// Plant with `plant` after the session started (as a command would),
    /// then run the bookkeeping.
    fn mid_session(&self, plant: impl FnOnce(&Attack)) {
        let (store, session) = self.session();
        plant(self);
        self.bookkeeping(&store, &session);
        self.assert_never_ran();
    }

    fn git_dir(&self) -> PathBuf {
        self.root.join(".git")
    }

    /// A copy of the repository's directory at `to` with `config` added to
    /// its config (a repository directory of the attacker's).
    fn evil_copy(&self, to: &Path, config: &str) {
        let ok = Command::new("cp")
            .arg("-a")
            .arg(self.git_dir())
            .arg(to)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        self.add_config(&to.join("config"), config);
    }
}

/// One test per key: the key in the repository's `.git/config`.
macro_rules! config_key {
    ($name:ident, $config:expr) => {
        #[test]
        fn $name() {
            let a = Attack::new(false);
            let text = $config(&a);
            a.add_config(&a.git_dir().join("config"), &text);
            a.handed_over();
        }
    };
}

config_key!(core_fsmonitor, |a: &Attack| format!(
    "[core]\n\tfsmonitor = \"{}\"\n",
    a.program()
));
config_key!(core_hooks_path_and_every_hook, |a: &Attack| {
    for hook in HOOKS {
        a.script(&a.base.join("hooks").join(hook));
    }
    format!("[core]\n\thooksPath = {}\n", a.base.join("hooks").display())
});
config_key!(filter_clean, |a: &Attack| format!(
    "[filter \"evil\"]\n\tclean = \"{}; cat\"\n\tsmudge = cat\n",
    a.program()
));
config_key!(filter_smudge, |a: &Attack| format!(
    "[filter \"evil\"]\n\tclean = cat\n\tsmudge = \"{}; cat\"\n",
    a.program()
));
config_key!(filter_process, |a: &Attack| {
    a.script(&a.base.join("filter-process"));
    format!(
        "[filter \"evil\"]\n\tprocess = {}\n",
        a.base.join("filter-process").display()
    )
});
config_key!(diff_textconv, |a: &Attack| format!(
    "[diff \"evil\"]\n\ttextconv = \"{}; cat\"\n",
    a.program()
));
config_key!(diff_external, |a: &Attack| format!(
    "[diff]\n\texternal = \"{}\"\n",
    a.program()
));
config_key!(core_pager_and_pager_per_command, |a: &Attack| {
    let p = a.program();
    let mut text = format!("[core]\n\tpager = \"{p}\"\n");
    for command in COMMANDS {
        text.push_str(&format!("[pager]\n\t{command} = \"{p}\"\n"));
    }
    text
});
config_key!(core_editor, |a: &Attack| format!(
    "[core]\n\teditor = \"{p}\"\n[sequence]\n\teditor = \"{p}\"\n",
    p = a.program()
));
config_key!(core_askpass, |a: &Attack| format!(
    "[core]\n\taskPass = \"{}\"\n",
    a.program()
));
config_key!(credential_helper, |a: &Attack| format!(
    "[credential]\n\thelper = \"!{}\"\n",
    a.program()
));
config_key!(core_ssh_command, |a: &Attack| format!(
    "[core]\n\tsshCommand = \"{}\"\n",
    a.program()
));
config_key!(include_path_pulling_every_key, |a: &Attack| {
    let evil = a.base.join("evil.cfg");
    std::fs::write(&evil, a.every_key()).unwrap();
    format!("[include]\n\tpath = {}\n", evil.display())
});
config_key!(include_if_pulling_every_key, |a: &Attack| {
    let evil = a.base.join("evil.cfg");
    std::fs::write(&evil, a.every_key()).unwrap();
    format!("[includeIf \"gitdir:/\"]\n\tpath = {}\n", evil.display())
});

#[test]
fn hooks_in_the_repository_hooks_directory() {
    let a = Attack::new(false);
    for hook in HOOKS {
        a.script(&a.git_dir().join("hooks").join(hook));
    }
    a.handed_over();
}

#[test]
fn commondir_planted_by_a_command_mid_session() {
    let a = Attack::new(false);
    a.mid_session(|a| {
        let evil = a.base.join("evil-common");
        a.evil_copy(&evil, &a.every_key());
        std::fs::write(
            a.git_dir().join("commondir"),
            format!("{}\n", evil.display()),
        )
        .unwrap();
    });
}

#[test]
fn commondir_in_a_repository_handed_over() {
    let a = Attack::new(false);
    let evil = a.base.join("evil-common");
    a.evil_copy(&evil, &a.every_key());
    std::fs::write(a.git_dir().join("commondir"), "../evil-common\n").unwrap();
    // `../evil-common` from `repo/.git`.
    std::fs::rename(&evil, a.root.join("evil-common")).unwrap();
    a.handed_over();
}

#[test]
fn gitdir_file_planted_in_the_workspace_by_a_command() {
    // The workspace is a subdirectory of the repository: a `.git` file in
    // it would win git's discovery.
    let a = Attack::new(true);
    a.mid_session(|a| {
        let evil = a.base.join("evil-gitdir");
        a.evil_copy(&evil, &a.every_key());
        std::fs::write(a.ws.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
    });
}

#[test]
fn gitdir_file_of_a_workspace_handed_over() {
    // The workspace's own `.git` is a file naming the attacker's directory.
    let a = Attack::new(false);
    let evil = a.base.join("evil-gitdir");
    a.evil_copy(&evil, &a.every_key());
    std::fs::remove_dir_all(a.git_dir()).unwrap();
    std::fs::write(a.git_dir(), format!("gitdir: {}\n", evil.display())).unwrap();
    a.handed_over();
}

#[test]
fn nested_git_directory_planted_in_the_workspace_by_a_command() {
    let a = Attack::new(true);
    a.mid_session(|a| {
        let evil = a.ws.join(".git");
        a.evil_copy(&evil, &a.every_key());
    });
}

#[test]
fn git_init_by_a_command_in_a_workspace_without_a_repository() {
    let a = Attack::new(false);
    std::fs::remove_dir_all(a.git_dir()).unwrap();
    let (store, session) = a.session();
    // `git init && git config core.fsmonitor …` inside the sandbox.
    git(&a.ws, &["init", "-q"]);
    let text = a.every_key();
    a.add_config(&a.git_dir().join("config"), &text);
    a.bookkeeping(&store, &session);
    a.assert_never_ran();
    assert!(
        !door::repository_in_use(&store, &session, &a.ws),
        "a repository that appeared mid-session is not used"
    );
    assert_eq!(
        Attack::checkpointed(&store, &session),
        Vec::<String>::new(),
        "Latch's git never ran on it"
    );
}

/// Git's own variables in Latch's environment (`GIT_DIR`, the
/// `GIT_CONFIG_*` parameters, `GIT_EXTERNAL_DIFF`, `GIT_PAGER`, ...): the
/// test runs itself again with them set.
#[test]
fn git_variables_in_latch_environment() {
    const CHILD: &str = "LATCH_GIT_DOORS_CHILD";
    if let Some(dir) = std::env::var_os(CHILD) {
        // The child: the attack is set up by the parent; run the bookkeeping.
        let base = PathBuf::from(dir);
        let a = Attack {
            _dir: tempfile::tempdir().unwrap(),
            root: base.join("repo"),
            ws: base.join("repo"),
            store_dir: base.join("store"),
            base,
        };
        a.handed_over();
        return;
    }
    let a = Attack::new(false);
    let evil = a.base.join("evil-env");
    a.evil_copy(&evil, &a.every_key());
    let evil_cfg = a.base.join("evil.cfg");
    std::fs::write(&evil_cfg, a.every_key()).unwrap();
    let p = a.program();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "git_variables_in_latch_environment",
            "--nocapture",
        ])
        .env(CHILD, &a.base)
        .env("GIT_DIR", &evil)
        .env("GIT_COMMON_DIR", &evil)
        .env("GIT_CONFIG", &evil_cfg)
        .env("GIT_CONFIG_GLOBAL", &evil_cfg)
        .env("GIT_CONFIG_SYSTEM", &evil_cfg)
        .env(
            "GIT_CONFIG_PARAMETERS",
            format!("'core.fsmonitor'='{p}' 'filter.evil.clean'='{p}; cat'"),
        )
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "core.hooksPath")
        .env("GIT_CONFIG_VALUE_0", a.base.join("hooks"))
        .env("GIT_EXTERNAL_DIFF", &p)
        .env("GIT_PAGER", &p)
        .env("GIT_EDITOR", &p)
        .env("GIT_ASKPASS", &p)
        .env("GIT_SSH_COMMAND", &p)
        .env("GIT_TRACE", a.markers()[0].with_extension("trace"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    a.assert_never_ran();
    assert!(!a.markers()[0].with_extension("trace").exists());
}
