use super::*;
use crate::event::EventKind;

fn store() -> (tempfile::TempDir, Store, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("t.db")).unwrap();
    let id = store
        .create_session(
            "/ws",
            None,
            &latch_engine_sdk::ModelProfile::with_defaults("openai", "m"),
        )
        .unwrap()
        .id;
    (dir, store, id)
}

#[test]
fn events_cannot_be_updated_or_deleted() {
    let (_d, store, id) = store();
    store.append(&id, EventKind::user_text("fixed")).unwrap();
    let conn = store.conn();
    let upd = conn
        .execute("UPDATE events SET body = '{}'", [])
        .unwrap_err();
    assert!(upd.to_string().contains("append-only"), "{upd}");
    let del = conn.execute("DELETE FROM events", []).unwrap_err();
    assert!(del.to_string().contains("append-only"), "{del}");
}

fn plan(store: &Store, sql: &str, params: impl rusqlite::Params) -> String {
    let conn = store.conn();
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = stmt
        .query_map(params, |r| r.get::<_, String>(3))
        .unwrap()
        .map(|r| r.unwrap())
        .collect::<Vec<_>>();
    rows.join(" | ")
}

#[test]
fn reads_use_the_indexes() {
    let (_d, store, id) = store();
    let range = plan(
        &store,
        "SELECT seq FROM events WHERE session = ?1 AND seq >= ?2 AND seq < ?3 ORDER BY seq LIMIT ?4",
        rusqlite::params![id, 0, 10, 10],
    );
    assert!(
        range.contains("events_by_session") && !range.contains("TEMP B-TREE"),
        "{range}"
    );
    let before = plan(
        &store,
        "SELECT seq FROM events WHERE session = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
        rusqlite::params![id, 10, 10],
    );
    assert!(
        before.contains("events_by_session") && !before.contains("TEMP B-TREE"),
        "{before}"
    );
    let search = plan(
        &store,
        "SELECT e.seq FROM events_fts f JOIN events e ON e.seq = f.rowid
         WHERE events_fts MATCH ?1 AND e.session = ?2 ORDER BY f.rowid DESC LIMIT ?3",
        rusqlite::params!["\"x\"", id, 10],
    );
    assert!(
        search.contains("VIRTUAL TABLE") && !search.contains("TEMP B-TREE"),
        "{search}"
    );
}

#[test]
fn session_ids_are_short_sortable_and_unique() {
    let a = new_session_id(1_700_000_000_000);
    let b = new_session_id(1_700_000_000_001);
    assert_eq!(a.len(), 14);
    assert!(a[..10] < b[..10]);
    let many: std::collections::BTreeSet<String> = (0..1000)
        .map(|_| new_session_id(1_700_000_000_000))
        .collect();
    assert!(many.len() > 990, "random suffixes rarely collide");
}

#[test]
fn a_read_only_store_reads_and_refuses_every_write() {
    let (dir, store, id) = store();
    store.append(&id, EventKind::user_text("kept")).unwrap();
    store.delete_session(&id).unwrap();
    drop(store);
    let path = dir.path().join("t.db");
    let before = std::fs::read(&path).unwrap();
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(ro.all_events(&id).unwrap().len(), 2);
    assert_eq!(
        ro.deleted_session_matching(&id[..6]).unwrap(),
        Some(id.clone())
    );
    assert_eq!(ro.kernel(&id).unwrap().own_event_count(), 2);
    let refused = ro.append(&id, EventKind::user_text("new")).unwrap_err();
    assert!(refused.to_string().contains("readonly"), "{refused}");
    let model = latch_engine_sdk::ModelProfile::with_defaults("openai", "m");
    assert!(ro.create_session("/ws", None, &model).is_err());
    assert!(ro.conn().execute("CREATE TABLE x (y)", []).is_err());
    drop(ro);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is unchanged"
    );

    let missing = Store::open_read_only(dir.path().join("none.db")).unwrap_err();
    assert!(matches!(missing, StoreError::Missing { .. }), "{missing}");
    assert!(!dir.path().join("none.db").exists(), "nothing is created");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute("UPDATE latch_schema SET version = 3", [])
            .unwrap();
    }
    let older = Store::open_read_only(&path).unwrap_err();
    assert!(
        older.to_string().contains("schema version 3") && older.to_string().contains("upgrade"),
        "{older}"
    );
}
