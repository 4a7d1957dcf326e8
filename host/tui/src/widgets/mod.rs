//! Pure renderers of [`UiState`]: the transcript, the sidebar, the input
//! box, the status line and the overlays. [`draw`] lays them out for the
//! frame's size; nothing here changes state or talks to the session.

pub mod overlay;
pub mod sidebar;
pub mod status;
pub mod transcript;
pub mod trust;
pub mod wrap;

use crate::state::UiState;
use ratatui::layout::{Constraint, Layout};
use ratatui::{Frame, Terminal};

/// Width of the sidebar beside the transcript.
pub const SIDEBAR_WIDTH: u16 = 38;
/// Most lines the input box grows to.
const INPUT_MAX_LINES: u16 = 8;

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, state: &UiState) {
    let area = frame.area();
    let input_lines = (state.composer.text().lines().count().max(1) as u16
        + state.composer.text().ends_with('\n') as u16)
        .min(INPUT_MAX_LINES);
    let [main, input, status_area] = Layout::vertical([
        Constraint::Min(3),
        Constraint::Length(input_lines + 2),
        Constraint::Length(1),
    ])
    .areas(area);
    if state.sidebar_beside(area.width) {
        let [left, right] =
            Layout::horizontal([Constraint::Min(20), Constraint::Length(SIDEBAR_WIDTH)])
                .areas(main);
        transcript::render(frame, left, state);
        sidebar::render(frame, right, state);
    } else if state.sidebar_instead(area.width) {
        sidebar::render(frame, main, state);
    } else {
        transcript::render(frame, main, state);
    }
    status::render_input(frame, input, state);
    status::render_status(frame, status_area, state);
    overlay::render(frame, main, state);
}

/// The screen as text rows, drawn at `width`×`height` on ratatui's test
/// backend (for tests and golden checks; no terminal is touched).
pub fn snapshot(state: &UiState, width: u16, height: u16) -> Vec<String> {
    let Ok(mut terminal) = Terminal::new(ratatui::backend::TestBackend::new(width, height));
    if terminal.draw(|f| draw(f, state)).is_err() {
        return Vec::new();
    }
    let buf = terminal.backend().buffer();
    (0..height)
        .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect())
        .collect()
}
