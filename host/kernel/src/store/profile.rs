//! The latest [`SessionProfile`] of a session, found through its partial
//! index without reading the rest of the log.

use super::events::{decode, read_event};
use super::{Result, Store};
use crate::event::EventKind;
use crate::profile::SessionProfile;
use rusqlite::OptionalExtension;

impl Store {
    /// What `session` last recorded that it runs with; `None` for a
    /// session that never recorded a profile (one created before profiles
    /// existed).
    pub fn session_profile(&self, session: &str) -> Result<Option<SessionProfile>> {
        let raw = self
            .conn()
            .prepare_cached(
                "SELECT seq, session, kind, body, time_ms FROM events
                 WHERE session = ?1 AND kind = 'session_profile'
                 ORDER BY seq DESC LIMIT 1",
            )?
            .query_row([session], read_event)
            .optional()?;
        Ok(match raw.map(decode).transpose()? {
            Some(e) => match e.kind {
                EventKind::SessionProfile(p) => Some(p),
                _ => None,
            },
            None => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::{ProfileChange, SessionProfile};
    use crate::{EventKind, Store};
    use latch_engine_sdk::types::ModelProfile;

    #[test]
    fn the_latest_profile_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("s.db")).unwrap();
        let model = ModelProfile::with_defaults("anthropic", "m");
        let id = store.create_session("/w", None, &model).unwrap().id;
        assert_eq!(store.session_profile(&id).unwrap(), None);
        let first = SessionProfile {
            provider: "anthropic".into(),
            base_url: None,
            model: "m".into(),
            approval: "untrusted".into(),
            sandbox: "read-only".into(),
            changes: vec![],
            group: None,
            mode: Default::default(),
        };
        store
            .append(&id, EventKind::SessionProfile(first.clone()))
            .unwrap();
        store.append(&id, EventKind::user_text("hi")).unwrap();
        assert_eq!(store.session_profile(&id).unwrap(), Some(first.clone()));
        let second = SessionProfile {
            approval: "never".into(),
            changes: vec![ProfileChange {
                setting: "approval".into(),
                from: "untrusted".into(),
                to: "never".into(),
                by: "--approval never".into(),
                looser: true,
            }],
            ..first
        };
        store
            .append(&id, EventKind::SessionProfile(second.clone()))
            .unwrap();
        assert_eq!(store.session_profile(&id).unwrap(), Some(second));
    }
}
