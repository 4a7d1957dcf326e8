//! Whole views from continued ones.
//!
//! An engine may answer `materialize` with a continuation of its previous
//! view: the first `kept_messages` messages of the view the same instance
//! returned last, followed by `messages`. An engine whose cache epoch is
//! append-only thereby moves only what is new across the component
//! boundary. Whoever drives an engine — the host, the conformance suite, a
//! native test — restores the whole view with a [`ViewAssembler`];
//! [`Assembled`] pairs an SDK engine with one.

use crate::engine::{Engine, SessionView};
use crate::types::*;
use crate::validate::ViewRule;

/// An engine kept more messages than its previous view had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptTooMany {
    /// What the view claimed to keep.
    pub kept: u32,
    /// How many messages the previous view had.
    pub previous: usize,
}

impl KeptTooMany {
    /// The view rule this breaks.
    pub const RULE: ViewRule = ViewRule::Continuation;
}

impl std::fmt::Display for KeptTooMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the view keeps {} messages of a previous view that had {}; a fresh instance must send `kept-messages: 0` and the whole view",
            self.kept, self.previous
        )
    }
}

impl std::error::Error for KeptTooMany {}

/// Restores whole views from one engine instance's answers. Keep one per
/// instance; [`ViewAssembler::reset`] it when the instance is replaced.
#[derive(Clone, Debug, Default)]
pub struct ViewAssembler {
    previous: Vec<Message>,
}

impl ViewAssembler {
    /// An assembler that has seen no view (what a fresh instance continues).
    pub fn new() -> Self {
        Self::default()
    }

    /// The whole view `view` describes, with `kept_messages` 0. It becomes
    /// the previous view of the next call. On error nothing changes.
    pub fn assemble(&mut self, mut view: ContextView) -> Result<ContextView, KeptTooMany> {
        let kept = view.kept_messages;
        if kept as usize > self.previous.len() {
            return Err(KeptTooMany {
                kept,
                previous: self.previous.len(),
            });
        }
        self.previous.truncate(kept as usize);
        self.previous.append(&mut view.messages);
        view.messages = self.previous.clone();
        view.kept_messages = 0;
        Ok(view)
    }

    /// Forget the previous view (the instance was replaced).
    pub fn reset(&mut self) {
        self.previous.clear();
    }

    /// The messages of the last whole view.
    pub fn previous(&self) -> &[Message] {
        &self.previous
    }
}

/// An SDK engine driven the way a host drives it: `materialize` returns
/// whole views. For native tests and benchmarks; derefs to the engine.
#[derive(Clone, Debug)]
pub struct Assembled<E> {
    engine: E,
    views: ViewAssembler,
}

impl<E: Engine> Assembled<E> {
    /// Wrap an engine instance that has returned no view yet.
    pub fn new(engine: E) -> Self {
        Assembled {
            engine,
            views: ViewAssembler::new(),
        }
    }

    /// The engine's view, whole. A continuation that keeps too much is an
    /// [`EngineError::Internal`] naming the rule.
    pub fn materialize(
        &mut self,
        session: &dyn SessionView,
        request: &ContextRequest,
    ) -> Result<ContextView, EngineError> {
        let view = self.engine.materialize(session, request)?;
        self.views
            .assemble(view)
            .map_err(|e| EngineError::Internal(format!("{}: {e}", KeptTooMany::RULE)))
    }

    /// The wrapped engine.
    pub fn into_inner(self) -> E {
        self.engine
    }

    /// The engine and the assembler holding its previous view, to hand both
    /// to another driver.
    pub fn into_parts(self) -> (E, ViewAssembler) {
        (self.engine, self.views)
    }
}

impl<E> std::ops::Deref for Assembled<E> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.engine
    }
}

impl<E> std::ops::DerefMut for Assembled<E> {
    fn deref_mut(&mut self) -> &mut E {
        &mut self.engine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(kept: u32, texts: &[&str]) -> ContextView {
        ContextView {
            system: String::new(),
            kept_messages: kept,
            messages: texts
                .iter()
                .map(|t| Message::text(Role::User, *t))
                .collect(),
            persist: vec![],
            report: ContextReport::empty("test"),
        }
    }

    fn texts(v: &ContextView) -> Vec<String> {
        v.messages
            .iter()
            .map(|m| match &m.parts[0] {
                Part::Text(t) => t.clone(),
                _ => unreachable!(),
            })
            .collect()
    }

    #[test]
    fn a_continuation_keeps_the_prefix_and_appends() {
        let mut a = ViewAssembler::new();
        let first = a.assemble(view(0, &["a", "b", "c"])).unwrap();
        assert_eq!(texts(&first), ["a", "b", "c"]);
        let next = a.assemble(view(2, &["x", "y"])).unwrap();
        assert_eq!(texts(&next), ["a", "b", "x", "y"]);
        assert_eq!(next.kept_messages, 0);
        let whole = a.assemble(view(0, &["z"])).unwrap();
        assert_eq!(texts(&whole), ["z"]);
    }

    #[test]
    fn keeping_more_than_the_previous_view_is_refused_and_changes_nothing() {
        let mut a = ViewAssembler::new();
        let err = a.assemble(view(1, &["a"])).unwrap_err();
        assert_eq!(
            err,
            KeptTooMany {
                kept: 1,
                previous: 0
            }
        );
        assert!(err.to_string().contains("fresh instance must send"));
        a.assemble(view(0, &["a", "b"])).unwrap();
        assert!(a.assemble(view(3, &[])).is_err());
        assert_eq!(
            a.previous().len(),
            2,
            "a refused view leaves the previous one"
        );
        a.reset();
        assert!(a.assemble(view(1, &[])).is_err());
    }
}
