//! The slots reduced from the log: the permission prompt (open from a
//! request until its decision, shown as waiting only while a live process
//! asks), the GROUP block from a group log recorded through the store's
//! checked port, and usage figures the provider did not report staying
//! unknown.

use latch_kernel::group::{GroupEvent, GroupPort};
use latch_kernel::{
    DecidedBy, EventKind, GrantScope, PermissionKind, PermissionRequest, Store, StoredEvent,
};
use latch_surface::{Activity, Item, Surface};

fn store() -> (tempfile::TempDir, Store, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("latch.db")).unwrap();
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("anthropic", "m");
    let s = store.create_session("/work/demo", None, &model).unwrap().id;
    (dir, store, s)
}

fn edit_request(call: &str) -> EventKind {
    EventKind::PermissionRequested(PermissionRequest {
        call_id: call.into(),
        tool: "edit_file".into(),
        kind: PermissionKind::Edit,
        command: None,
        path: Some("src/a.rs".into()),
        diff: Some("--- a/src/a.rs\n+++ b/src/a.rs\n-x\n+y\n".into()),
        reason: "approval mode `untrusted` asks".into(),
        model_reason: None,
        approval: "untrusted".into(),
        sandbox: "workspace-write".into(),
        mcp: None,
    })
}

fn all(store: &Store, s: &str) -> Vec<StoredEvent> {
    store.all_events(s).unwrap()
}

#[test]
fn a_permission_request_fills_the_modal_until_it_is_decided() {
    let (_dir, store, s) = store();
    let mut live = Surface::replay(&s, &all(&store, &s));
    live.go_live();
    store.append_batch(&s, vec![edit_request("c1")]).unwrap();
    for e in all(&store, &s) {
        live.apply(&e);
    }
    let modal = live.live_permission().expect("the modal is up").clone();
    assert_eq!(
        (
            modal.tool.as_str(),
            modal.subject.as_str(),
            modal.call_id.as_str()
        ),
        ("edit_file", "src/a.rs", "c1")
    );
    assert_eq!(modal.action, "edit_file wants to change:");
    assert!(modal.detail.contains(&"+y".to_string()), "{modal:?}");
    assert!(modal.reason.contains("untrusted"), "{modal:?}");
    assert_eq!(
        live.activity(),
        Activity::AwaitingPermission("edit_file".into())
    );
    // The same log replayed holds the same pending request, but nobody
    // waits on it: no modal, and the status does not claim a live wait.
    let resumed = Surface::replay(&s, &all(&store, &s));
    assert_eq!(resumed.durable(), live.durable());
    assert_eq!(resumed.live_permission(), None);
    assert!(!matches!(
        resumed.activity(),
        Activity::AwaitingPermission(_)
    ));

    store
        .append_batch(
            &s,
            vec![EventKind::PermissionGranted {
                call_id: "c1".into(),
                tool: "edit_file".into(),
                subject: "src/a.rs".into(),
                by: DecidedBy::User,
                scope: GrantScope::Session,
                key: "edit:src/a.rs".into(),
            }],
        )
        .unwrap();
    let granted = Surface::replay(&s, &all(&store, &s));
    assert_eq!(granted.durable().permission, None, "a grant closes it");
    assert!(matches!(
        granted.durable().transcript.items().last(),
        Some(Item::Notification { source, text, .. })
            if source == "permission" && text.contains("allowed `src/a.rs` for this session (by the user)")
    ));

    store
        .append_batch(
            &s,
            vec![
                edit_request("c2"),
                EventKind::PermissionDenied {
                    call_id: "c2".into(),
                    tool: "edit_file".into(),
                    subject: "src/a.rs".into(),
                    by: DecidedBy::User,
                    reason: "use the generator".into(),
                },
            ],
        )
        .unwrap();
    let denied = Surface::replay(&s, &all(&store, &s));
    assert_eq!(denied.durable().permission, None, "a denial closes it");
    assert!(matches!(
        denied.durable().transcript.items().last(),
        Some(Item::Denied { tool, reason, .. })
            if tool == "edit_file" && reason.contains("denied by the user: use the generator")
    ));
}

#[test]
fn the_group_block_is_reduced_from_the_group_log_live_and_on_resume() {
    let (_dir, store, root) = store();
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("anthropic", "m");
    let child = store
        .create_session("/work/demo", Some(&root), &model)
        .unwrap()
        .id;
    let mut live = Surface::new(&root);
    live.go_live();
    let mut seen = 0;
    let mut step = |event: GroupEvent, live: &mut Surface| {
        store.commit(&root, event).unwrap();
        let after = seen;
        for e in all(&store, &root).into_iter().filter(|e| e.seq > after) {
            seen = e.seq;
            live.apply(&e);
            // Live equals resumed after every event.
            assert_eq!(
                live.durable(),
                Surface::replay(&root, &all(&store, &root)[..]).durable()
            );
        }
    };
    assert_eq!(live.durable().group, None, "no group yet");
    step(GroupEvent::Created { lead: root.clone() }, &mut live);
    step(
        GroupEvent::MemberJoined {
            member: root.clone(),
            role: "lead".into(),
        },
        &mut live,
    );
    step(
        GroupEvent::MemberJoined {
            member: child.clone(),
            role: "fixer".into(),
        },
        &mut live,
    );
    step(
        GroupEvent::TaskCreated {
            title: "fix the parser".into(),
            description: String::new(),
            depends_on: vec![],
            key: None,
            by: root.clone(),
        },
        &mut live,
    );
    let task = all(&store, &root).last().unwrap().seq;
    step(
        GroupEvent::TaskClaimed {
            task,
            by: child.clone(),
        },
        &mut live,
    );
    let group = live.durable().group.clone().expect("the block is filled");
    assert_eq!(group.title, "GROUP · 2 members · 1 tasks · 0 pending");
    let short = &child[..8];
    assert!(
        group
            .lines
            .contains(&format!("fixer {short} active · holds #{task}")),
        "{group:?}"
    );
    assert!(
        group
            .lines
            .contains(&format!("#{task} claimed {short}: fix the parser")),
        "{group:?}"
    );
    let resumed = Surface::replay(&root, &all(&store, &root));
    assert_eq!(resumed.durable().group, Some(group));
}

fn usage(input: Option<u64>, output: Option<u64>) -> EventKind {
    EventKind::ProviderUsage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: None,
        cache_creation_tokens: None,
        cache_miss_tokens: None,
        common_prefix_tokens: None,
        reasoning_tokens: None,
        estimated_input_tokens: None,
        provider: None,
        model: None,
        base_url: None,
    }
}

#[test]
fn usage_the_provider_did_not_report_stays_unknown() {
    let (_dir, store, s) = store();
    store.append_batch(&s, vec![usage(None, None)]).unwrap();
    let unknown = Surface::replay(&s, &all(&store, &s));
    let u = &unknown.durable().usage;
    let last = u.last().unwrap();
    assert_eq!((last.input_tokens, last.output_tokens), (None, None));
    assert_eq!(u.reported_totals(), (None, None), "unknown, never 0");
    store
        .append_batch(&s, vec![usage(Some(1_200), None)])
        .unwrap();
    let u = Surface::replay(&s, &all(&store, &s))
        .durable()
        .usage
        .clone();
    assert_eq!(u.last().unwrap().input_tokens, Some(1_200));
    assert_eq!(u.reported_totals(), (Some(1_200), None));
    assert_eq!(u.totals(), (1_200, 0));
}

#[test]
fn an_mcp_request_shows_its_server_tool_and_arguments() {
    let request = PermissionRequest {
        call_id: "m1".into(),
        tool: "mcp__fs__write_file".into(),
        kind: PermissionKind::McpTool,
        command: None,
        path: None,
        diff: None,
        reason: "approval mode `untrusted` asks before every MCP tool not annotated read-only"
            .into(),
        model_reason: None,
        approval: "untrusted".into(),
        sandbox: "workspace-write".into(),
        mcp: Some(latch_kernel::McpToolCall {
            server: "fs".into(),
            tool: "write_file".into(),
            arguments: r#"{"path":"notes.txt","content":"x"}"#.into(),
        }),
    };
    let prompt = latch_surface::PermissionPrompt::from_request(7, &request);
    assert_eq!(prompt.action, "MCP server `fs` wants to run its tool:");
    assert_eq!(prompt.subject, "fs/write_file");
    assert_eq!(
        prompt.detail,
        [r#"arguments: {"path":"notes.txt","content":"x"}"#]
    );
    assert!(prompt.reason.contains("untrusted"));
}
