//! One pool per process and store: the handles [`PgGroup::open`] gives for
//! one URL (one per session, each with its own local store) share one
//! connection pool and one LISTEN connection, counted on the server in
//! `pg_stat_activity`, and a NOTIFY wakes the waiters of every handle.

use crate::common::pg_url;
use latch_engine_sdk::types::ModelProfile;
use latch_group_pg::PgGroup;
use latch_kernel::Store;
use latch_kernel::group::{ALL, GroupEvent, GroupPort};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The server's connections whose application name is `name`.
fn backends(url: &str, name: &str) -> i64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .await
            .unwrap()
            .get(0)
    })
}

#[test]
fn the_sessions_of_one_process_share_one_pool_and_every_one_is_woken() {
    let Some(base) = pg_url() else { return };
    let name = format!("latch-shared-{}", std::process::id());
    let url = format!("{base} application_name={name}");
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let model = ModelProfile::with_defaults("openai-compatible", "m");
    let mut sessions = Vec::new();
    let mut handles = Vec::new();
    for d in &dirs {
        let local = Arc::new(Store::open(d.path().join("latch.db")).unwrap());
        sessions.push(local.create_session("/ws", None, &model).unwrap().id);
        handles.push(Arc::new(PgGroup::open(&url, local).unwrap()));
    }
    assert!(handles[0].shares_pool_with(&handles[1]));
    assert!(handles[0].shares_pool_with(&handles[2]));
    // A pool of its own stays apart.
    let apart = PgGroup::connect(
        &url,
        Arc::new(Store::open(dirs[0].path().join("x.db")).unwrap()),
    )
    .unwrap();
    assert!(!apart.shares_pool_with(&handles[0]));
    drop(apart);

    // One group: the first session leads, the others join through their
    // own handles.
    let root = sessions[0].clone();
    handles[0]
        .commit(&root, GroupEvent::Created { lead: root.clone() })
        .unwrap();
    for (h, s) in handles.iter().zip(&sessions) {
        h.commit(
            &root,
            GroupEvent::MemberJoined {
                member: s.clone(),
                role: "r".into(),
            },
        )
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !handles[0].listening() {
        assert!(Instant::now() < deadline, "LISTEN never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    // One pooled connection (the work above is sequential) and one
    // listener for all three sessions; a pool each would be six.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = backends(&base, &name);
        if n == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} connections for three sessions of one process, expected 2"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A message to all wakes the waiters of the other two handles.
    let waiters: Vec<_> = (1..3)
        .map(|i| {
            let (h, root, me) = (handles[i].clone(), root.clone(), sessions[i].clone());
            std::thread::spawn(move || h.wait_for_message(&root, &me, Duration::from_secs(20)))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    handles[0]
        .commit(
            &root,
            GroupEvent::MessageQueued {
                from: root.clone(),
                to: ALL.into(),
                recipients: vec![],
                text: "wake up".into(),
            },
        )
        .unwrap();
    for w in waiters {
        assert!(w.join().unwrap().unwrap(), "woken by NOTIFY");
    }
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "woken promptly, not by the timeout"
    );
    // Each delivery lands in its own session's local store.
    for (h, s) in handles.iter().zip(&sessions).skip(1) {
        assert_eq!(h.deliver(&root, s).unwrap().len(), 1);
    }
}
