//! UI-only state (focus, scroll, composer, popups) next to the shared
//! [`Surface`], and how [`Input`]s change it.

use crate::composer::Composer;
use crate::event::Input;
use latch_surface::{PermissionPrompt, Surface};
use std::cell::Cell;
use std::time::Instant;

/// The tool whose permission prompt is a plan to approve.
pub const PLAN_TOOL: &str = "propose_plan";

/// Terminals narrower than this drop the sidebar behind a key.
pub const SIDEBAR_MIN_WIDTH: u16 = 100;

/// A popup over the transcript: a report, search results, help.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Popup {
    /// Its title.
    pub title: String,
    /// Its lines.
    pub lines: Vec<String>,
}

/// Everything the screen shows.
#[derive(Clone, Debug)]
pub struct UiState {
    /// The session as the shared reducers see it.
    pub surface: Surface,
    /// The input box.
    pub composer: Composer,
    /// Transcript lines scrolled up from the bottom (0 follows the end).
    pub scroll: u16,
    /// The sidebar toggle: on wide terminals it hides the sidebar, on
    /// narrow ones it shows it in place of the transcript.
    pub sidebar_toggled: bool,
    /// Tool output shown in full instead of folded to its first lines.
    pub expanded: bool,
    /// A turn runs in the live process.
    pub running: bool,
    /// Messages typed while the turn ran, not yet delivered.
    pub queued: Vec<String>,
    /// The popup shown, if any.
    pub popup: Option<Popup>,
    /// A one-line notice on the status line.
    pub notice: Option<String>,
    /// Chips of the images attached to the next message
    /// (`[image 1: 800×600 png]`), shown on the input box.
    pub attachments: Vec<String>,
    /// A first Ctrl-C on an idle, empty prompt arms exit.
    pub exit_armed: bool,
    /// `q` on an empty prompt quits (the finished demo).
    pub quit_on_q: bool,
    /// The user asked to leave.
    pub quit: bool,
    /// The call whose permission prompt the user answered: its modal stays
    /// closed while the decision commits.
    pub answered: Option<String>,
    /// The reason typed for a denial (`r` in the modal), while it is typed.
    pub deny_reason: Option<String>,
    /// Session, model and engine, for the status line.
    pub title: String,
    /// The custom slash commands (`/help` lists them, Tab completes them).
    pub commands: latch_surface::CustomCommands,
    /// The most the transcript can scroll back, as the last frame laid it
    /// out (scrolling clamps to it).
    pub scroll_max: Cell<u16>,
    /// Lines the open popup or permission modal is scrolled down.
    pub popup_scroll: u16,
    /// The most the open popup or modal can scroll, as last drawn.
    pub popup_max: Cell<u16>,
    /// When the running turn started (the spinner's elapsed time).
    pub started: Option<Instant>,
    /// Why the last turn failed, shown in full under the transcript.
    pub error: Option<String>,
    /// The latest warning the log had (a provider retry, say).
    pub warning: Option<String>,
    /// What the first screen says: where you are and how to start.
    pub welcome: Vec<String>,
    /// The model is scripted (the demo): a message typed once the script
    /// ended is answered with an explanation, not sent.
    pub scripted: bool,
    /// The prices the session's cost is computed with (sidebar, `/context`).
    pub prices: latch_surface::PriceTable,
}

impl UiState {
    /// The state of a screen on `surface`.
    pub fn new(surface: Surface, title: impl Into<String>) -> UiState {
        UiState {
            surface,
            composer: Composer::default(),
            scroll: 0,
            sidebar_toggled: false,
            expanded: false,
            running: false,
            queued: Vec::new(),
            popup: None,
            notice: None,
            attachments: Vec::new(),
            exit_armed: false,
            quit_on_q: false,
            quit: false,
            answered: None,
            deny_reason: None,
            title: title.into(),
            commands: latch_surface::CustomCommands::new(),
            scroll_max: Cell::new(0),
            popup_scroll: 0,
            popup_max: Cell::new(0),
            started: None,
            error: None,
            warning: None,
            welcome: Vec::new(),
            scripted: false,
            prices: latch_surface::PriceTable::builtin(),
        }
    }

    /// The same state, costing with `prices` (the config's `[prices]` over
    /// the built-in list prices).
    pub fn with_prices(mut self, prices: latch_surface::PriceTable) -> UiState {
        self.prices = prices;
        self
    }

    /// What the session's own requests cost so far.
    pub fn cost(&self) -> latch_surface::SessionCost {
        latch_surface::SessionCost::of(&self.surface.durable().usage, &self.prices)
    }

    /// Apply what the session side sent.
    pub fn input(&mut self, input: Input) {
        match input {
            Input::Events(events) => {
                for e in &events {
                    if self.surface.apply(e)
                        && e.session == self.surface.durable().session
                        && let latch_kernel::EventKind::UserMessage { parts } = &e.kind
                    {
                        // A queued message was delivered: it leaves the queue.
                        let text = latch_surface::transcript::parts_text(parts);
                        if let Some(i) = self.queued.iter().position(|q| *q == text) {
                            self.queued.remove(i);
                        }
                    }
                }
            }
            Input::Delta(d) => {
                // Text flows again: a retry warning is over.
                if matches!(d, latch_surface::Delta::Text(_)) {
                    self.warning = None;
                }
                self.surface.delta(d)
            }
            Input::TurnStarted => {
                self.running = true;
                self.started = Some(Instant::now());
                self.queued.clear();
            }
            Input::TurnEnded { error } => {
                self.running = false;
                self.started = None;
                self.warning = None;
                self.notice = error
                    .as_ref()
                    .map(|_| "the turn stopped (see why above)".into());
                self.error = error;
            }
            Input::Report(r) => self.surface.set_report(r),
            Input::Popup { title, mut lines } => {
                if title == "/context" {
                    // The report ends with what the session cost so far.
                    let cost = self.cost();
                    lines.push(format!("  {:<34} {}", "session cost", cost.text()));
                    if cost.priced > 0 {
                        lines.push(format!(
                            "  {:<34} {}",
                            "cost of the cache",
                            cost.cache_text()
                        ));
                    }
                }
                self.popup = Some(Popup { title, lines });
                self.popup_scroll = 0;
            }
            Input::Notice(n) => self.notice = Some(n),
            Input::Attachments(chips) => self.attachments = chips,
            Input::Unsent(texts) => {
                self.queued.clear();
                if !texts.is_empty() {
                    let mut all = texts.join("\n");
                    if !self.composer.is_empty() {
                        all.push('\n');
                        all.push_str(self.composer.text());
                    }
                    self.composer.set(all);
                }
            }
            Input::Group(g) => self.surface.set_group(g),
            Input::Permission(p) => self.surface.set_permission(p),
        }
    }

    /// The permission modal to show: the request the live process waits
    /// on, unless the user already answered it.
    pub fn modal(&self) -> Option<&PermissionPrompt> {
        self.surface
            .live_permission()
            .filter(|p| self.answered.as_deref() != Some(p.call_id.as_str()))
    }

    /// True when the modal shows a plan to approve (`propose_plan`).
    pub fn modal_is_plan(&self) -> bool {
        self.modal().is_some_and(|p| p.tool == PLAN_TOOL)
    }

    /// True when the sidebar shows beside the transcript at `width`.
    pub fn sidebar_beside(&self, width: u16) -> bool {
        width >= SIDEBAR_MIN_WIDTH && !self.sidebar_toggled
    }

    /// True when the sidebar replaces the transcript at `width`.
    pub fn sidebar_instead(&self, width: u16) -> bool {
        width < SIDEBAR_MIN_WIDTH && self.sidebar_toggled
    }
}
