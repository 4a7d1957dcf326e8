//! The terminal loop: the only code here that does I/O. It owns the
//! terminal (raw mode, alternate screen, bracketed paste), applies what the
//! session sends, draws when something changed and turns keys into
//! [`Command`]s for the session.

use crate::event::{Command, Input};
use crate::keys;
use crate::state::UiState;
use crate::widgets;
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
    let result = run_loop(&mut terminal, &mut state, &inputs, &mut send);
    let _ = execute!(
        std::io::stdout(),
        DisableBracketedPaste,
        DisableMouseCapture
    );
    ratatui::restore();
    result
}

fn run_loop(
    terminal: &mut ratatui::DefaultTerminal,
    state: &mut UiState,
    inputs: &Receiver<Input>,
    send: &mut impl FnMut(Command),
) -> std::io::Result<()> {
    let mut dirty = true;
    let mut session_gone = false;
    let mut drawn = Instant::now();
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
            terminal.draw(|f| widgets::draw(f, state))?;
            dirty = false;
            drawn = Instant::now();
        }
        if event::poll(TICK)? {
            match event::read()? {
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
    loop {
        terminal.draw(|f| widgets::trust::render(f, question))?;
        if let Event::Key(key) = event::read()?
            && let Some(answer) = widgets::trust::answer(key)
        {
            return Ok(answer);
        }
    }
}
