//! The terminal loop: the only code here that does I/O. It owns the
//! terminal (raw mode, alternate screen, bracketed paste), applies what the
//! session sends, draws when something changed and turns keys into
//! [`Command`]s for the session.
//!
//! A question (a permission modal, the workspace-trust modal) reads only
//! keys typed after it was drawn: when one appears, input that waits
//! unread — in the terminal or already parsed — is dropped, so a key meant
//! for something else (or pushed by a program) never answers it.

use crate::event::{Command, Input};
use crate::keys;
use crate::state::UiState;
use crate::widgets;
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture,
    Event, MouseEventKind,
};
use ratatui::crossterm::execute;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How long the loop waits for a key before it looks at the session again.
const TICK: Duration = Duration::from_millis(25);
/// How often the spinner and the elapsed time move.
const SPIN: Duration = Duration::from_millis(100);

/// Where the loop's keys come from: the terminal, or a script in tests.
pub trait KeySource {
    /// The next event, waiting at most `timeout`; `None` when none came.
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<Event>>;
    /// Drop every event typed but not taken yet: what waits in the
    /// terminal and what was already read and parsed.
    fn discard_pending(&mut self) -> std::io::Result<()>;
}

/// The controlling terminal, through crossterm.
pub struct TerminalKeys;

impl KeySource for TerminalKeys {
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<Event>> {
        if event::poll(timeout)? {
            return event::read().map(Some);
        }
        Ok(None)
    }

    fn discard_pending(&mut self) -> std::io::Result<()> {
        // What the terminal holds unread (crossterm reads `/dev/tty`).
        if let Ok(tty) = std::fs::File::open("/dev/tty") {
            use std::os::fd::AsRawFd;
            // SAFETY: tcflush takes plain integers.
            unsafe {
                libc::tcflush(tty.as_raw_fd(), libc::TCIFLUSH);
            }
        }
        // What crossterm already read and parsed.
        while event::poll(Duration::ZERO)? {
            event::read()?;
        }
        Ok(())
    }
}

/// Which question the screen shows, to notice a new one after a draw.
#[derive(Debug, Default)]
pub struct Questions {
    shown: Option<String>,
}

impl Questions {
    /// After a draw showing the modal of `call` (none: no modal): true
    /// when it is a question the previous draw did not show, whose answer
    /// must come from keys typed from now on.
    pub fn drawn(&mut self, call: Option<&str>) -> bool {
        let new = call.is_some() && call != self.shown.as_deref();
        self.shown = call.map(str::to_string);
        new
    }
}

/// Run the screen until the user leaves: `inputs` brings what the session
/// committed and streamed; `send` takes the user's commands. The terminal
/// is restored on every exit path (a panic too: ratatui's hook).
pub fn run(
    mut state: UiState,
    inputs: Receiver<Input>,
    mut send: impl FnMut(Command),
) -> std::io::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let _ = execute!(std::io::stdout(), EnableBracketedPaste, EnableMouseCapture);
    let result = run_loop(
        &mut terminal,
        &mut TerminalKeys,
        &mut state,
        &inputs,
        &mut send,
    );
    let _ = execute!(
        std::io::stdout(),
        DisableBracketedPaste,
        DisableMouseCapture
    );
    ratatui::restore();
    result
}

/// The loop of [`run`] over any backend and key source (tests drive it with
/// ratatui's `TestBackend` and scripted keys).
pub fn run_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    keys_in: &mut impl KeySource,
    state: &mut UiState,
    inputs: &Receiver<Input>,
    send: &mut impl FnMut(Command),
) -> std::io::Result<()> {
    let mut dirty = true;
    let mut session_gone = false;
    let mut drawn = Instant::now();
    let mut questions = Questions::default();
    loop {
        if let Some(warning) = crate::log_sink::take_status() {
            state.warning = Some(warning);
            dirty = true;
        }
        if state.started.is_some() && drawn.elapsed() >= SPIN {
            dirty = true;
        }
        while !session_gone {
            match inputs.try_recv() {
                Ok(input) => {
                    state.input(input);
                    dirty = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    session_gone = true;
                    state.running = false;
                    dirty = true;
                }
            }
        }
        if state.quit {
            return Ok(());
        }
        if dirty {
            terminal
                .draw(|f| widgets::draw(f, state))
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            dirty = false;
            drawn = Instant::now();
            if questions.drawn(state.modal().map(|p| p.call_id.as_str())) {
                keys_in.discard_pending()?;
            }
        }
        if let Some(ev) = keys_in.next(TICK)? {
            match ev {
                Event::Key(key) => {
                    for command in keys::on_key(state, key) {
                        send(command);
                    }
                }
                Event::Paste(text) => keys::on_paste(state, &text),
                Event::Mouse(mouse) => match mouse.kind {
                    MouseEventKind::ScrollUp => keys::scroll_up(state, keys::WHEEL),
                    MouseEventKind::ScrollDown => keys::scroll_down(state, keys::WHEEL),
                    _ => {}
                },
                // A resize reflows on the next draw.
                _ => {}
            }
            dirty = true;
        }
    }
}

/// Before a session starts: show the workspace-trust modal on its own
/// screen and wait for `y` (true) or `n` / Esc / Ctrl-C (false). The
/// terminal is restored before it returns.
pub fn ask_trust(question: &widgets::trust::TrustQuestion) -> std::io::Result<bool> {
    let mut terminal = ratatui::try_init()?;
    let result = trust_loop(&mut terminal, question);
    ratatui::restore();
    result
}

fn trust_loop(
    terminal: &mut ratatui::DefaultTerminal,
    question: &widgets::trust::TrustQuestion,
) -> std::io::Result<bool> {
    let mut keys_in = TerminalKeys;
    terminal.draw(|f| widgets::trust::render(f, question))?;
    // Only keys typed once the question is on the screen answer it.
    keys_in.discard_pending()?;
    loop {
        terminal.draw(|f| widgets::trust::render(f, question))?;
        if let Event::Key(key) = event::read()?
            && let Some(answer) = widgets::trust::answer(key)
        {
            return Ok(answer);
        }
    }
}
