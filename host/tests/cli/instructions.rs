//! Instructions where they live, end to end: a repository with a root
//! `AGENTS.md` (importing a file and, refused, `../../etc/passwd`), a
//! workspace level with only a `CLAUDE.md`, a 1 MiB `.latch/instructions.md`
//! cut with a note, the user's global file, and a nested `AGENTS.md` that
//! joins the session when the model first reads a file beside it. The
//! requests the provider receives carry exactly that; `latch
//! instructions` lists it.

use super::{at, git, latch, runtime};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use serde_json::Value;

/// The text of the first user message that is the session context.
fn session_context(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .find(|t| t.starts_with("# Session"))
        .unwrap_or_else(|| panic!("no session context in {body}"))
}

struct Repo {
    _dir: tempfile::TempDir,
    _config: tempfile::TempDir,
    root: std::path::PathBuf,
    app: std::path::PathBuf,
    config: std::path::PathBuf,
}

fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    git(&root, &["init", "-q"]);
    let write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "AGENTS.md",
        "ROOT-RULE: run make check. Style: @docs/style.md, secrets: @../../etc/passwd\n",
    );
    write("docs/style.md", "STYLE-RULE: four spaces.\n");
    write("app/CLAUDE.md", "APP-RULE: the app speaks JSON.\n");
    write("app/lib/AGENTS.md", "NESTED-RULE: no unsafe in lib.\n");
    write("app/lib/CLAUDE.md", "IGNORED-CLAUDE: AGENTS.md wins.\n");
    write("app/lib/x.rs", "pub fn x() {}\n");
    let big: String = "BIG-RULE line\n".repeat(1024 * 1024 / 14 + 1);
    write("app/.latch/instructions.md", &big);
    let config = tempfile::tempdir().unwrap();
    let config_path = config.path().canonicalize().unwrap();
    std::fs::write(
        config_path.join("AGENTS.md"),
        "GLOBAL-RULE: answer briefly.\n",
    )
    .unwrap();
    Repo {
        app: root.join("app"),
        root,
        _dir: dir,
        _config: config,
        config: config_path,
    }
}

/// The session context the README promises for [`repo`].
fn expected(r: &Repo) -> String {
    let big_bytes = std::fs::metadata(r.app.join(".latch/instructions.md"))
        .unwrap()
        .len();
    let big = std::fs::read_to_string(r.app.join(".latch/instructions.md")).unwrap();
    let kept = &big[..32 * 1024];
    format!(
        "# Session\nWorkspace: {app}\nMode: run\n\n# Repository instructions\n\
         ## {config}/AGENTS.md\nGLOBAL-RULE: answer briefly.\n\n\
         ## ../AGENTS.md\nROOT-RULE: run make check. Style: @docs/style.md, secrets: @../../etc/passwd\n\
         [@../../etc/passwd not imported: it leaves {root} (imports stay inside it)]\n\n\
         ## ../docs/style.md\nSTYLE-RULE: four spaces.\n\n\
         ## CLAUDE.md\nAPP-RULE: the app speaks JSON.\n\n\
         ## .latch/instructions.md\n{kept}\n\
         [.latch/instructions.md cut at 32768 of its {big_bytes} bytes: Latch reads at most 32 KiB of each instructions file]",
        app = r.app.display(),
        config = r.config.display(),
        root = r.root.display(),
        kept = kept.trim(),
    )
}

/// `got == want`, showing where they part when they do not.
fn same(got: &str, want: &str) {
    if got == want {
        return;
    }
    let at = got
        .char_indices()
        .zip(want.chars())
        .find(|((_, a), b)| a != b)
        .map(|((i, _), _)| i)
        .unwrap_or(got.len().min(want.len()));
    let from = at.saturating_sub(200);
    let window = |s: &str| {
        s.get(from..(at + 200).min(s.len()))
            .unwrap_or("")
            .to_string()
    };
    panic!(
        "the session context differs at byte {at} (lengths {} and {}):\n got: {:?}\nwant: {:?}",
        got.len(),
        want.len(),
        window(got),
        window(want)
    );
}

#[test]
fn the_first_request_and_the_one_after_a_nested_read_carry_the_instructions() {
    let rt = runtime();
    let r = repo();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("read_file", r#"{"path":"lib/x.rs"}"#),
            ScriptedTurn::text("Read it."),
        ])))
        .unwrap();
    let out = latch(&r.app)
        .env("LATCH_CONFIG_DIR", &r.config)
        .args(at(&server))
        .args(["run", "look at lib"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let first = session_context(&requests[0].body);
    same(&first, &expected(&r));
    let first_all = requests[0].body.to_string();
    assert!(!first_all.contains("NESTED-RULE"), "nested too early");
    // After the model read lib/x.rs, lib/AGENTS.md rides along (and the
    // CLAUDE.md beside it does not); the session context is unchanged.
    let second_all = requests[1].body.to_string();
    assert!(second_all.contains("## lib/AGENTS.md\\nNESTED-RULE: no unsafe in lib."));
    assert!(!second_all.contains("IGNORED-CLAUDE"));
    assert_eq!(session_context(&requests[1].body), first);
    // Durable: the store records it, so a resume carries it again.
    let store = Store::open(latch_kernel::default_store_path(&r.app)).unwrap();
    let session = store
        .latest_root_session(&r.app.display().to_string())
        .unwrap()
        .unwrap();
    let loaded: Vec<(String, Vec<String>)> = store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::InstructionsLoaded { dir, files, .. } => Some((dir, files)),
            _ => None,
        })
        .collect();
    assert_eq!(
        loaded,
        [("lib".to_string(), vec!["lib/AGENTS.md".to_string()])]
    );
}

#[test]
fn latch_instructions_lists_what_a_session_reads_and_from_where() {
    let r = repo();
    let out = latch(&r.app)
        .env("LATCH_CONFIG_DIR", &r.config)
        .args(["instructions", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files: Vec<(String, String, bool)> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["scope"].as_str().unwrap().to_string(),
                f["label"].as_str().unwrap().to_string(),
                f["cut"].as_bool().unwrap(),
            )
        })
        .collect();
    let global = format!("{}/AGENTS.md", r.config.display());
    assert_eq!(
        files,
        [
            ("global".to_string(), global, false),
            ("repository".into(), "../AGENTS.md".into(), false),
            ("import".into(), "../docs/style.md".into(), false),
            ("repository".into(), "CLAUDE.md".into(), false),
            ("latch".into(), ".latch/instructions.md".into(), true),
        ]
    );
    assert_eq!(v["nested"], serde_json::json!(["lib/AGENTS.md"]));
    assert!(
        v["files"][1]["refused_imports"][0]
            .as_str()
            .unwrap()
            .contains("@../../etc/passwd not imported")
    );
    let text = latch(&r.app)
        .env("LATCH_CONFIG_DIR", &r.config)
        .arg("instructions")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("cut at 32768 bytes"), "{text}");
    assert!(text.contains("nested     lib/AGENTS.md"), "{text}");
}
