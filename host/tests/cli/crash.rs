//! Crash trials: `latch run` is SIGKILLed at random points of a scripted
//! multi-tool session against the local wire-format server. After each kill:
//! every event the run reported as committed (`--json` prints each one as it
//! commits) is in the store unchanged, the store opens, and `latch resume`
//! continues with requests the server (which checks tool-call protocol as the
//! real services do) accepts, leaving no open run or unanswered call.
//!
//! Five trials run with the tests; `cargo test -p latch --test cli -- --ignored
//! crash_trials_fifty` runs fifty.

use super::{at, git, latch, project, resume_last, runtime};
use latch_kernel::{EventKind, Store, Unfinished};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A tiny deterministic generator (xorshift64*), so a failing trial can be
/// replayed from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A multi-tool session: task state, reads, a shell command, an edit, a new
/// file, a validation and completion; then anything more gets a closing
/// answer.
fn session_script() -> Script {
    let req = "sh test.sh passes";
    Script::new([
        ScriptedTurn::text("Recording the goal.")
            .with_tool_call("set_goal", r#"{"text":"make sh test.sh pass"}"#)
            .with_tool_call(
                "require_validation",
                format!(r#"{{"requirement":"{req}"}}"#),
            ),
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#)
            .with_tool_call("read_file", r#"{"path":"test.sh"}"#),
        ScriptedTurn::tool_call("shell", r#"{"command":"cat test.sh; sleep 0.2"}"#),
        ScriptedTurn::text("Fixing the operator.").with_tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        ),
        ScriptedTurn::tool_call(
            "write_file",
            r#"{"path":"NOTES.md","content":"add() adds now.\n"}"#,
        ),
        ScriptedTurn::tool_call(
            "validate",
            format!(r#"{{"requirement":"{req}","command":"sh test.sh"}}"#),
        ),
        ScriptedTurn::tool_call("shell", r#"{"command":"ls; sleep 0.1"}"#),
        ScriptedTurn::tool_call("complete", r#"{"summary":"add() adds; sh test.sh passes"}"#),
        ScriptedTurn::text("Done."),
    ])
    .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Resumed; nothing left to do.")))
}

/// How one trial went.
#[derive(Debug, Default)]
struct Trial {
    /// Events the run reported committed before it was killed.
    acknowledged: usize,
    /// The run finished before the kill landed.
    finished: bool,
    /// Killed before any session existed (nothing to resume).
    before_session: bool,
    /// Events the resume repaired or added.
    resumed_events: usize,
}

fn trial(cache: &Path, delay: Option<Duration>) -> (Trial, Duration) {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(session_script())).unwrap();
    let ws = project();
    let started = Instant::now();
    let mut child = latch(ws.path())
        .env("LATCH_CACHE_DIR", cache)
        .args(at(&server))
        .args(["run", "--json", "make sh test.sh pass"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let reader = {
        let lines = lines.clone();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        })
    };
    let mut outcome = Trial::default();
    match delay {
        Some(delay) => {
            std::thread::sleep(delay);
            let _ = child.kill(); // SIGKILL
            let status = child.wait().unwrap();
            outcome.finished = status.success();
        }
        None => assert!(child.wait().unwrap().success()),
    }
    let elapsed = started.elapsed();
    reader.join().unwrap();
    let lines = lines.lock().unwrap().clone();
    let mut acknowledged: Vec<Value> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str(line) {
            Ok(v) => acknowledged.push(v),
            // The kill can land while the last acknowledgment is printed.
            Err(_) if i + 1 == lines.len() => {}
            Err(e) => panic!("acknowledgment {i} is not JSON ({e}): {line}"),
        }
    }
    outcome.acknowledged = acknowledged.len();

    // The store opens, and nothing the run reported committed is lost.
    let db = latch_kernel::default_store_path(ws.path());
    let store = Store::open(&db).expect("the store opens after the kill");
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let Some(session) = store.list_sessions(&key).unwrap().into_iter().next() else {
        assert!(acknowledged.is_empty());
        outcome.before_session = true;
        return (outcome, elapsed);
    };
    for ack in &acknowledged {
        let seq = ack["seq"].as_u64().unwrap();
        let stored = store
            .event(seq)
            .unwrap()
            .unwrap_or_else(|| panic!("committed event {seq} was lost"));
        assert_eq!(
            serde_json::to_value(&stored.kind).unwrap(),
            ack["event"],
            "event {seq} changed"
        );
    }
    let before = store.events(&session.id, 0, u64::MAX, 100_000).unwrap();
    drop(store);

    // Resume continues protocol-safe.
    let mut resume = latch(ws.path());
    resume.env("LATCH_CACHE_DIR", cache).args(at(&server));
    let out = resume_last(resume, b"continue\n/exit\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "resume failed: {stderr}");
    assert!(
        !stderr.contains("error:"),
        "resume reported an error: {stderr}"
    );
    assert_eq!(
        server.requests().len(),
        server.served().len(),
        "the server refused a request after the resume: {:?}",
        server.requests().last().map(|r| &r.body)
    );
    let store = Store::open(&db).unwrap();
    let after = store.events(&session.id, 0, u64::MAX, 100_000).unwrap();
    assert!(
        after.len() > before.len(),
        "the resume continued the session"
    );
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((b.seq, &b.kind), (a.seq, &a.kind), "history was rewritten");
    }
    assert!(
        after
            .iter()
            .any(|e| matches!(&e.kind, EventKind::UserMessage { parts } if format!("{parts:?}").contains("continue"))),
        "the resumed turn ran"
    );
    assert_eq!(
        store.kernel(&session.id).unwrap().unfinished(),
        &Unfinished::default(),
        "no open run or unanswered call is left"
    );
    outcome.resumed_events = after.len() - before.len();
    (outcome, elapsed)
}

fn crash_trials(n: usize, seed: u64) {
    let cache = tempfile::tempdir().unwrap();
    // A first uninterrupted run warms the component cache the trials
    // share; a second, warm one sets the span the kill points are drawn from.
    trial(cache.path(), None);
    let (_, full) = trial(cache.path(), None);
    let span = full.as_millis().max(200) as u64;
    let mut rng = Rng(seed);
    let mut results = Vec::new();
    for i in 0..n {
        let delay = Duration::from_millis(rng.next() % span);
        let (t, _) = trial(cache.path(), Some(delay));
        println!("crash trial {i}: killed at {delay:?} of ~{span} ms: {t:?}");
        results.push(t);
    }
    let mid_run = results
        .iter()
        .filter(|t| !t.finished && !t.before_session)
        .count();
    let acknowledged: usize = results.iter().map(|t| t.acknowledged).sum();
    println!(
        "figure crash trials: {n} trials (seed {seed}, span {span} ms): {mid_run} killed mid-run, \
         {} before the session existed, {} after the run finished; {acknowledged} acknowledged \
         events all found; every resume accepted",
        results.iter().filter(|t| t.before_session).count(),
        results.iter().filter(|t| t.finished).count(),
    );
    assert!(mid_run > 0, "no trial killed the run mid-way");
}

#[test]
fn crash_trials_five() {
    crash_trials(5, 0x5EED_0005);
}

#[test]
#[ignore = "local tier: fifty SIGKILLs of `latch run` (several minutes)"]
fn crash_trials_fifty() {
    crash_trials(50, 0x5EED_0050);
}

/// The pin of "a mutation is committed before it executes" for commands in a
/// git work tree: `latch run` proves a requirement, then runs a `shell`
/// command that edits a tracked file and sleeps; it is SIGKILLed while the
/// command runs. The pending mutation was committed before the command, so
/// the resume settles it with a generation-advancing mutation (what the
/// killed command changed is unknown): the evidence proven before is stale
/// and `complete` is refused naming the requirement; the edit the command
/// made is checkpointed from the snapshot taken before it; the resumed log
/// is protocol-safe and leaves nothing open.
#[test]
fn a_run_killed_mid_command_leaves_earlier_evidence_stale() {
    let rt = runtime();
    let req = "smoke passes";
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(
                "require_validation",
                format!(r#"{{"requirement":"{req}"}}"#),
            ),
            ScriptedTurn::tool_call(
                "validate",
                format!(r#"{{"requirement":"{req}","command":"sh smoke.sh"}}"#),
            ),
            ScriptedTurn::tool_call(
                "shell",
                r#"{"command":"echo '# touched' >> src/math.sh; sleep 20"}"#,
            ),
            // After the resume.
            ScriptedTurn::tool_call("complete", r#"{"summary":"smoke passes"}"#),
            ScriptedTurn::text("Not certified yet."),
        ])))
        .unwrap();
    let ws = project();
    let original = std::fs::read(ws.path().join("src/math.sh")).unwrap();
    std::fs::write(ws.path().join("smoke.sh"), "exit 0\n").unwrap();
    std::fs::write(ws.path().join(".gitignore"), ".test-home/\n").unwrap();
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "start"]);

    let mut run = latch(ws.path())
        .args(at(&server))
        .args(["run", "prove smoke, then touch math"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the command runs: its pending mutation is committed and
    // its edit is on disk.
    let db = latch_kernel::default_store_path(ws.path());
    let deadline = Instant::now() + Duration::from_secs(60);
    let session = loop {
        assert!(Instant::now() < deadline, "the shell command never started");
        let touched = std::fs::read_to_string(ws.path().join("src/math.sh"))
            .unwrap()
            .contains("# touched");
        if touched && let Ok(store) = Store::open_existing(&db) {
            let key = ws.path().canonicalize().unwrap().display().to_string();
            if let Some(s) = store.list_sessions(&key).unwrap().into_iter().next()
                && store.all_events(&s.id).unwrap().iter().any(|e| {
                    matches!(&e.kind, EventKind::MutationPending { source, .. } if source == "shell")
                })
            {
                break s;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    run.kill().unwrap(); // SIGKILL, mid-command
    run.wait().unwrap();

    let store = Store::open(&db).unwrap();
    let generation = store.generation_of(&session.id).unwrap();
    assert_eq!(
        store.certification(&session.id).unwrap().blockers,
        Vec::<String>::new(),
        "before the resume the proof still looks fresh"
    );
    drop(store);

    let mut resume = latch(ws.path());
    resume.args(at(&server));
    let out = resume_last(resume, b"finish\n/exit\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "resume failed: {stderr}");
    assert_eq!(
        server.requests().len(),
        server.served().len(),
        "the server refused a request after the resume: {:?}",
        server.requests().last().map(|r| &r.body)
    );

    let store = Store::open(&db).unwrap();
    assert!(store.generation_of(&session.id).unwrap() > generation);
    let events = store.all_events(&session.id).unwrap();
    let refusal = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "complete" => Some(r.content.clone()),
            _ => None,
        })
        .expect("complete ran after the resume");
    assert!(
        refusal.contains(&format!("stale: {req}")),
        "complete was not refused for the stale proof: {refusal}"
    );
    let pending = events
        .iter()
        .position(
            |e| matches!(&e.kind, EventKind::MutationPending { source, .. } if source == "shell"),
        )
        .unwrap();
    assert!(
        events[pending..].iter().any(|e| matches!(
            &e.kind,
            EventKind::Mutation { source, unchanged: false, .. } if source == "shell"
        )),
        "the pending mutation was settled as a change"
    );
    // What the killed command replaced is checkpointed from its snapshot.
    let before = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::Checkpoint { path, before, .. } if path == "src/math.sh" => before.clone(),
            _ => None,
        })
        .expect("the killed command's edit is checkpointed");
    assert_eq!(store.artifact_bytes(&before).unwrap().unwrap(), original);
    assert_eq!(
        store.kernel(&session.id).unwrap().unfinished(),
        &Unfinished::default(),
        "no open run, unanswered call or pending mutation is left"
    );
}
