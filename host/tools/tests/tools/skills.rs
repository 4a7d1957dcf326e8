//! Agent Skills on real directories: discovery precedence (nearer
//! directories first, `.latch` before `.agents` before `.claude`, the user
//! directory last), malformed files skipped with a warning naming file and
//! field, the capped list, and `load_skill` confined to the skill's
//! directory.

use latch_engine_sdk::types::EstimatorProfile;
use latch_tools::skills::{self, Skill};
use std::path::{Path, PathBuf};

fn skill(root: &Path, name: &str, description: &str, body: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}"),
    )
    .unwrap();
    dir
}

struct Tree {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    ws: PathBuf,
    user: PathBuf,
}

/// A repository with a nested workspace `repo/sub/ws` and a user config
/// directory beside it.
fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = root.join("repo");
    let ws = repo.join("sub/ws");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&ws).unwrap();
    let user = root.join("user");
    std::fs::create_dir_all(&user).unwrap();
    Tree {
        _dir: dir,
        repo,
        ws,
        user,
    }
}

fn by_name<'a>(skills: &'a [Skill], name: &str) -> &'a Skill {
    skills.iter().find(|s| s.name == name).unwrap()
}

#[test]
fn nearer_directories_and_latch_dirs_win_and_the_user_dir_comes_last() {
    let t = tree();
    // The same name in five places; the workspace's .latch wins.
    skill(&t.ws.join(".claude/skills"), "dup", "ws claude", "");
    skill(&t.ws.join(".latch/skills"), "dup", "ws latch", "");
    skill(&t.ws.join(".agents/skills"), "dup", "ws agents", "");
    skill(&t.repo.join(".latch/skills"), "dup", "repo latch", "");
    skill(&t.user.join("skills"), "dup", "user", "");
    // .agents beats .claude in the same directory.
    skill(&t.ws.join(".claude/skills"), "pair", "claude", "");
    skill(&t.ws.join(".agents/skills"), "pair", "agents", "");
    // A parent directory up to the repository root is searched...
    skill(
        &t.repo.join(".claude/skills"),
        "from-repo",
        "repo skill",
        "",
    );
    // ...and nothing above the repository root.
    skill(
        &t.repo.parent().unwrap().join(".latch/skills"),
        "above-root",
        "never seen",
        "",
    );
    // A skill only the user has is found.
    skill(&t.user.join("skills"), "mine", "user skill", "");
    let found = skills::discover(&t.ws, Some(&t.user));
    let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dup", "from-repo", "mine", "pair"], "name order");
    assert_eq!(by_name(&found.skills, "dup").description, "ws latch");
    assert_eq!(by_name(&found.skills, "pair").description, "agents");
    assert_eq!(found.shadowed.len(), 5, "{:?}", found.shadowed);
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    // Without a repository, only the workspace itself is searched.
    std::fs::remove_dir_all(t.repo.join(".git")).unwrap();
    let found = skills::discover(&t.ws, None);
    let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["dup", "pair"]);
}

#[test]
fn malformed_skills_are_skipped_with_a_warning_naming_file_and_field() {
    let t = tree();
    let root = t.ws.join(".latch/skills");
    skill(&root, "good", "A good skill.", "body");
    // name does not match the directory
    let wrong = skill(&root, "wrong-dir", "d", "");
    std::fs::write(
        wrong.join("SKILL.md"),
        "---\nname: other\ndescription: d\n---\n",
    )
    .unwrap();
    // upper-case name
    let upper = root.join("Upper");
    std::fs::create_dir_all(&upper).unwrap();
    std::fs::write(
        upper.join("SKILL.md"),
        "---\nname: Upper\ndescription: d\n---\n",
    )
    .unwrap();
    // description missing
    let nodesc = root.join("nodesc");
    std::fs::create_dir_all(&nodesc).unwrap();
    std::fs::write(nodesc.join("SKILL.md"), "---\nname: nodesc\n---\n").unwrap();
    // description too long
    let long = skill(&root, "long", &"x".repeat(1025), "");
    // no frontmatter at all
    let bare = root.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::write(bare.join("SKILL.md"), "# just markdown\n").unwrap();
    // invalid YAML
    let yaml = root.join("yaml");
    std::fs::create_dir_all(&yaml).unwrap();
    std::fs::write(yaml.join("SKILL.md"), "---\nname: [yaml\n---\n").unwrap();
    // a directory without SKILL.md is not a skill and not a warning
    std::fs::create_dir_all(root.join("notes")).unwrap();

    let found = skills::discover(&t.ws, None);
    assert_eq!(found.skills.len(), 1);
    assert_eq!(found.skills[0].name, "good");
    let mut got: Vec<(PathBuf, Option<String>)> = found
        .warnings
        .iter()
        .map(|w| (w.file.clone(), w.field.clone()))
        .collect();
    got.sort();
    let mut want = vec![
        (bare.join("SKILL.md"), None),
        (long.join("SKILL.md"), Some("description".to_string())),
        (nodesc.join("SKILL.md"), Some("description".to_string())),
        (upper.join("SKILL.md"), Some("name".to_string())),
        (wrong.join("SKILL.md"), Some("name".to_string())),
        (yaml.join("SKILL.md"), None),
    ];
    want.sort();
    assert_eq!(got, want);
    let text = found
        .warnings
        .iter()
        .find(|w| w.file == wrong.join("SKILL.md"))
        .unwrap()
        .to_string();
    assert!(
        text.contains("wrong-dir/SKILL.md")
            && text.contains("field `name`")
            && text.contains("`other`"),
        "{text}"
    );
}

#[test]
fn the_list_is_capped_with_a_note_of_what_was_left_out() {
    let t = tree();
    let root = t.ws.join(".latch/skills");
    for i in 0..40 {
        skill(
            &root,
            &format!("skill-{i:02}"),
            &format!("Skill number {i} does a particular thing well when asked to."),
            "",
        );
    }
    let found = skills::discover(&t.ws, None);
    let p = EstimatorProfile::Anthropic;
    let all = skills::catalog(&found.skills, 1_000_000, p);
    assert_eq!(all.listed.len(), 40);
    assert!(all.omitted.is_empty() && !all.text.contains("not listed"));
    // 2% of a 16k window: 320 tokens.
    let cap = skills::cap_tokens(16_000, 2);
    assert_eq!(cap, 320);
    let capped = skills::catalog(&found.skills, cap, p);
    assert!(!capped.listed.is_empty() && !capped.omitted.is_empty());
    assert_eq!(capped.listed.len() + capped.omitted.len(), 40);
    assert!(
        latch_engine_sdk::estimate(p, &capped.text) as u64 <= cap,
        "the list with its note stays within the cap"
    );
    assert_eq!(capped.listed[0], "skill-00", "listed in name order");
    assert!(
        capped.text.contains(&format!(
            "{} more skill(s) not listed",
            capped.omitted.len()
        )),
        "{}",
        capped.text
    );
    assert!(
        capped.text.contains(&capped.omitted[0]),
        "the note names them"
    );
    // Byte-stable.
    assert_eq!(skills::catalog(&found.skills, cap, p), capped);
    // No skills, no text.
    assert!(skills::catalog(&[], cap, p).text.is_empty());
}

#[test]
fn load_skill_returns_the_body_or_a_file_and_refuses_escapes() {
    let t = tree();
    let root = t.ws.join(".latch/skills");
    let dir = skill(
        &root,
        "pdf",
        "PDF tools.",
        "# PDF\nUse scripts/extract.py.\n",
    );
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/extract.py"), "print('text')\n").unwrap();
    std::fs::write(t.ws.join("secret.txt"), "do not read").unwrap();
    std::os::unix::fs::symlink(t.ws.join("secret.txt"), dir.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&t.ws, dir.join("up")).unwrap();
    let found = skills::discover(&t.ws, None);
    let load = |args: &str| skills::load_skill(&found.skills, args);

    let body = load(r#"{"name":"pdf"}"#).unwrap();
    assert!(body.contains("# PDF\nUse scripts/extract.py."), "{body}");
    assert!(
        !body.contains("description:"),
        "the frontmatter is not repeated"
    );
    assert!(body.contains("scripts/extract.py"), "its files are listed");
    let file = load(r#"{"name":"pdf","path":"scripts/extract.py"}"#).unwrap();
    assert!(file.contains("print('text')"), "{file}");

    for path in [
        "../../secret.txt",
        "scripts/../../../secret.txt",
        "link.txt",
        "up/secret.txt",
    ] {
        let err = load(&format!(r#"{{"name":"pdf","path":"{path}"}}"#)).unwrap_err();
        assert!(err.starts_with("denied:"), "{path}: {err}");
        assert!(!err.contains("do not read"), "{path}: {err}");
    }
    let abs = t.ws.join("secret.txt");
    let err = load(&format!(r#"{{"name":"pdf","path":"{}"}}"#, abs.display())).unwrap_err();
    assert!(err.contains("absolute"), "{err}");
    let err = load(r#"{"name":"pdf","path":"references/none.md"}"#).unwrap_err();
    assert!(
        err.contains("no file") && err.contains("scripts/extract.py"),
        "{err}"
    );
    let err = load(r#"{"name":"nope"}"#).unwrap_err();
    assert!(
        err.contains("no skill `nope`") && err.contains("pdf"),
        "{err}"
    );
    let err = load(r#"{"path":"x"}"#).unwrap_err();
    assert!(err.contains("`name`"), "{err}");
}

/// A symbolic link to a file outside the skill is refused with an error
/// that says why, and never shows the file.
#[test]
fn a_symbolic_link_out_of_the_skill_is_refused_with_a_clear_error() {
    let t = tree();
    let dir = skill(&t.ws.join(".latch/skills"), "pdf", "PDF tools.", "# PDF\n");
    std::fs::write(t.ws.join("secret.txt"), "do not read").unwrap();
    std::os::unix::fs::symlink(t.ws.join("secret.txt"), dir.join("notes.md")).unwrap();
    let found = skills::discover(&t.ws, None);
    let err = skills::load_skill(&found.skills, r#"{"name":"pdf","path":"notes.md"}"#).unwrap_err();
    assert!(
        err.starts_with("denied: `notes.md` is or passes through a symbolic link"),
        "{err}"
    );
    assert!(err.contains("inside the skill's directory"), "{err}");
    assert!(!err.contains("do not read"), "{err}");
    // SKILL.md itself swapped for a link is refused too.
    std::fs::rename(dir.join("SKILL.md"), t.ws.join("SKILL.md")).unwrap();
    std::os::unix::fs::symlink(t.ws.join("SKILL.md"), dir.join("SKILL.md")).unwrap();
    let err = skills::load_skill(&found.skills, r#"{"name":"pdf"}"#).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
}

/// The race a check-then-open loses: while `load_skill` reads
/// `scripts/run.py` again and again, another thread keeps exchanging the
/// `scripts` directory with a symbolic link to a directory outside the
/// skill that holds a `run.py` of its own. Every load returns the skill's
/// file or a refusal, never the outside file.
#[test]
fn a_component_swapped_for_a_link_while_loading_never_reads_outside() {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    let t = tree();
    let dir = skill(
        &t.ws.join(".latch/skills"),
        "ops",
        "Ops scripts.",
        "# Ops\n",
    );
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/run.py"), "print('inside')\n").unwrap();
    let outside = t.ws.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("run.py"), "OUTSIDE SECRET\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("swap")).unwrap();
    let found = skills::discover(&t.ws, None);

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, a, b) = (stop.clone(), dir.join("scripts"), dir.join("swap"));
        std::thread::spawn(move || {
            let mut swaps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        })
    };
    let (mut inside, mut refused) = (0, 0);
    let started = std::time::Instant::now();
    while inside + refused < 20_000 && started.elapsed() < std::time::Duration::from_secs(3) {
        match skills::load_skill(&found.skills, r#"{"name":"ops","path":"scripts/run.py"}"#) {
            Ok(text) => {
                assert!(
                    !text.contains("OUTSIDE SECRET"),
                    "read outside the skill: {text}"
                );
                assert!(text.contains("print('inside')"), "{text}");
                inside += 1;
            }
            Err(e) => {
                assert!(!e.contains("OUTSIDE SECRET"), "{e}");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    assert!(
        swaps > 100,
        "the swap raced too little to prove anything: {swaps}"
    );
    assert!(
        inside > 0 && refused > 0,
        "both states were seen: {inside} read, {refused} refused"
    );
}

/// A skill of the repository whose directory or `SKILL.md` is a link out
/// of the repository is skipped with a warning, its description never
/// read (it would go to the provider); links inside are followed, and the
/// user's own directory is the user's.
#[test]
fn a_skill_linked_out_of_the_repository_is_skipped_never_read() {
    let t = tree();
    let outside = t.user.parent().unwrap().join("outside");
    skill(&outside, "stolen", "SECRET description", "SECRET body");
    skill(&outside, "keyfile", "SECRET key", "");
    let skills_dir = t.ws.join(".latch/skills");
    std::fs::create_dir_all(&skills_dir).unwrap();
    std::os::unix::fs::symlink(outside.join("stolen"), skills_dir.join("stolen")).unwrap();
    std::fs::create_dir_all(skills_dir.join("keyfile")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("keyfile/SKILL.md"),
        skills_dir.join("keyfile/SKILL.md"),
    )
    .unwrap();
    let shared = skill(&t.repo.join("shared"), "shared", "Shared inside.", "");
    std::os::unix::fs::symlink(&shared, skills_dir.join("shared")).unwrap();
    let found = skills::discover(&t.ws, None);
    let names: Vec<&str> = found.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shared"]);
    assert!(
        found
            .skills
            .iter()
            .all(|s| !s.description.contains("SECRET")),
        "{:?}",
        found.skills
    );
    assert_eq!(found.warnings.len(), 2, "{:?}", found.warnings);
    for w in &found.warnings {
        assert!(w.to_string().contains("symbolic link"), "{w}");
        assert!(w.to_string().contains("neither read nor sent"), "{w}");
        assert!(!w.to_string().contains("SECRET"), "{w}");
    }
}
