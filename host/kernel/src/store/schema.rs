//! The database schema and its migrations. Version `n` of the schema is the
//! result of applying `MIGRATIONS[0..n]` in order; the version is kept in the
//! `latch_schema` table.

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = 5;

/// `PRAGMA application_id` of a Latch store ("LATC").
pub const APPLICATION_ID: i64 = 0x4C41_5443;

/// Migration `i` brings the schema from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: sessions, append-only events with full-text search, artifacts.
    r#"
    CREATE TABLE latch_schema (version INTEGER NOT NULL);
    INSERT INTO latch_schema (version) VALUES (0);

    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        parent      TEXT REFERENCES sessions(id),
        workspace   TEXT NOT NULL,
        model_json  TEXT NOT NULL,
        created_ms  INTEGER NOT NULL
    );
    CREATE INDEX sessions_by_workspace ON sessions(workspace, created_ms);
    CREATE INDEX sessions_by_parent ON sessions(parent);

    CREATE TABLE events (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        session  TEXT NOT NULL REFERENCES sessions(id),
        kind     TEXT NOT NULL,
        body     TEXT NOT NULL,
        time_ms  INTEGER NOT NULL,
        wide     INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX events_by_session ON events(session, seq);
    CREATE INDEX events_workspace_wide ON events(seq, session) WHERE wide = 1;
    CREATE INDEX events_tombstones ON events(session) WHERE kind = 'tombstone';

    CREATE TRIGGER events_are_append_only_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;

    CREATE VIRTUAL TABLE events_fts USING fts5(
        text,
        content = '',
        tokenize = "unicode61 remove_diacritics 0 tokenchars '_'"
    );

    CREATE TABLE artifacts (
        sha256      TEXT PRIMARY KEY,
        mime        TEXT NOT NULL,
        byte_len    INTEGER NOT NULL,
        width       INTEGER,
        height      INTEGER,
        bytes       BLOB NOT NULL,
        created_ms  INTEGER NOT NULL
    );
    "#,
    // 2: the engine that wrote each kernel-context entry, indexed so that
    // the last entry of another engine is found without reading bodies.
    r#"
    ALTER TABLE events ADD COLUMN author TEXT;
    CREATE INDEX events_kernel_context_author ON events(session, author, seq)
        WHERE kind = 'kernel_context';
    "#,
    // 3: the agent-group projection, a cache over the `group` events of
    // root sessions (rebuilt from them at every open), and an index that
    // finds those events without reading the rest of the log.
    r#"
    CREATE INDEX events_group ON events(session, seq) WHERE kind = 'group';
    CREATE TABLE group_groups (
        root         TEXT PRIMARY KEY,
        lead         TEXT NOT NULL,
        created_seq  INTEGER NOT NULL,
        delivered    INTEGER NOT NULL,
        last_ms      INTEGER NOT NULL
    );
    CREATE TABLE group_members (
        root         TEXT NOT NULL,
        member       TEXT NOT NULL,
        role         TEXT NOT NULL,
        active       INTEGER NOT NULL,
        left_reason  TEXT,
        joined_seq   INTEGER NOT NULL,
        last_ms      INTEGER NOT NULL,
        PRIMARY KEY (root, member)
    );
    CREATE TABLE group_tasks (
        root         TEXT NOT NULL,
        id           INTEGER NOT NULL,
        title        TEXT NOT NULL,
        description  TEXT NOT NULL,
        idem_key     TEXT,
        status       TEXT NOT NULL,
        owner        TEXT,
        result       TEXT,
        PRIMARY KEY (root, id)
    );
    CREATE INDEX group_tasks_by_key ON group_tasks(root, idem_key) WHERE idem_key IS NOT NULL;
    CREATE TABLE group_task_deps (
        root  TEXT NOT NULL,
        task  INTEGER NOT NULL,
        dep   INTEGER NOT NULL,
        PRIMARY KEY (root, task, dep)
    );
    CREATE TABLE group_pending (
        root       TEXT NOT NULL,
        recipient  TEXT NOT NULL,
        message    INTEGER NOT NULL,
        sender     TEXT NOT NULL,
        text       TEXT NOT NULL,
        PRIMARY KEY (root, recipient, message)
    );
    "#,
    // 4: who drives each session (one lease per session, renewed by its
    // holder's heartbeat; coordination, not history), and an index that
    // finds a session's latest profile without reading the rest of its log.
    r#"
    CREATE TABLE session_leases (
        session     TEXT PRIMARY KEY REFERENCES sessions(id),
        token       TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        pid_start   TEXT,
        host        TEXT NOT NULL,
        surface     TEXT NOT NULL,
        since_ms    INTEGER NOT NULL,
        renewed_ms  INTEGER NOT NULL,
        ttl_ms      INTEGER NOT NULL
    );
    CREATE INDEX events_session_profile ON events(session, seq) WHERE kind = 'session_profile';
    "#,
    // 5: the git repository Latch's own git uses for each session, fixed
    // when the session is created (JSON; NULL for sessions created before).
    r#"
    ALTER TABLE sessions ADD COLUMN git_repository TEXT;
    "#,
];
