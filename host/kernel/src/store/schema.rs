//! The database schema and its migrations. Version `n` of the schema is the
//! result of applying `MIGRATIONS[0..n]` in order; the version is kept in the
//! `latch_schema` table.

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = 2;

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
];
