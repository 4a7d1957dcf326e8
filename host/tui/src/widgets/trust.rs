//! The workspace-trust modal, shown before a session starts when the
//! workspace's config sets keys that take effect only once the user trusts
//! it: the file, exactly those keys with their values and what each would
//! do, and the keys that answer. Pure: [`render`] draws a
//! [`TrustQuestion`], [`answer`] reads a key; the terminal loop is
//! [`crate::app::ask_trust`].

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Clear, Paragraph, Wrap};

/// The keys of the modal.
pub const TRUST_HELP: &str = "y trust this config · n ignore these keys for this run";

/// What the modal asks about.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustQuestion {
    /// The workspace's config file.
    pub file: String,
    /// Each key needing trust: `key = value` and what it would do.
    pub keys: Vec<(String, String)>,
    /// Where the answer is recorded, and how to change it later.
    pub note: String,
}

/// The answer a key gives: `y` trusts, `n`, Esc or Ctrl-C do not; other
/// keys give none.
pub fn answer(key: KeyEvent) -> Option<bool> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    match key.code {
        KeyCode::Char('y') | KeyCode::Char('Y') => Some(true),
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Some(false),
        KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Some(false),
        _ => None,
    }
}

/// Draw the modal over the whole frame.
pub fn render(frame: &mut Frame, question: &TrustQuestion) {
    let area = frame.area();
    let mut lines = vec![
        Line::styled(
            "Trust this workspace's config?",
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Line::raw(""),
        Line::raw(format!(
            "{} sets keys that take effect only once you trust it:",
            question.file
        )),
        Line::raw(""),
    ];
    for (key, effect) in &question.keys {
        lines.push(Line::styled(
            format!("  {key}"),
            Style::new().fg(Color::Yellow),
        ));
        lines.push(Line::styled(
            format!("      {effect}"),
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines.push(Line::raw(""));
    lines.push(Line::raw(
        "Everything else in the file applies either way; your own config and flags are always \
         trusted. A yes is asked again when the file changes.",
    ));
    if !question.note.is_empty() {
        lines.push(Line::styled(
            question.note.clone(),
            Style::new().fg(Color::DarkGray),
        ));
    }
    // The key line has a row of its own at the bottom: a long list is cut
    // (and says so), never the answers.
    let width = area.width.saturating_sub(4).min(110);
    let inner = width.saturating_sub(2).max(1) as usize;
    let rows = |l: &Line| l.width().max(1).div_ceil(inner);
    let room = area.height.saturating_sub(5) as usize;
    let mut used: usize = lines.iter().map(rows).sum();
    if used > room {
        let more = Line::styled(
            "… more: `latch trust` lists them all",
            Style::new().fg(Color::DarkGray),
        );
        while used + 1 > room && lines.len() > 1 {
            used -= lines.pop().map(|l| rows(&l)).unwrap_or(0);
        }
        lines.push(more);
        used += 1;
    }
    let height = (used as u16 + 3).min(area.height.saturating_sub(2));
    let rect = Rect {
        x: area.x + area.width.saturating_sub(width) / 2,
        y: area.y + 1,
        width,
        height,
    };
    let block = Block::bordered().title(" workspace trust ");
    let inside = block.inner(rect);
    let [body, keys] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inside);
    frame.render_widget(Clear, rect);
    frame.render_widget(block, rect);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), body);
    frame.render_widget(
        Paragraph::new(Line::styled(TRUST_HELP, Style::new().fg(Color::Yellow))),
        keys,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    fn question() -> TrustQuestion {
        TrustQuestion {
            file: "/w/.latch/config.toml".into(),
            keys: vec![
                (
                    "sandbox.mode = \"full-access\"".into(),
                    "lowers safety".into(),
                ),
                (
                    "mcp.servers.fs = { command = \"npx\" }".into(),
                    "starts a program".into(),
                ),
            ],
            note: "recorded in /c/latch/trusted-workspaces.toml".into(),
        }
    }

    fn rows(q: &TrustQuestion, w: u16, h: u16) -> String {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal.draw(|f| render(f, q)).unwrap();
        let buf = terminal.backend().buffer();
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_modal_shows_the_file_each_key_and_the_answers() {
        let all = rows(&question(), 120, 30);
        for needle in [
            "workspace trust",
            "/w/.latch/config.toml",
            "sandbox.mode = \"full-access\"",
            "lowers safety",
            "mcp.servers.fs = { command = \"npx\" }",
            "starts a program",
            "y trust this config",
        ] {
            assert!(all.contains(needle), "{needle} missing:\n{all}");
        }
        // A short terminal keeps the key line.
        let mut many = question();
        for i in 0..30 {
            many.keys
                .push((format!("sandbox.writable_roots = [\"/r{i}\"]"), "x".into()));
        }
        let short = rows(&many, 80, 16);
        assert!(short.contains("y trust this config"), "{short}");
        assert!(short.contains("`latch trust` lists them all"), "{short}");
    }

    #[test]
    fn keys_answer() {
        let key = |code| KeyEvent::new(code, KeyModifiers::NONE);
        assert_eq!(answer(key(KeyCode::Char('y'))), Some(true));
        assert_eq!(answer(key(KeyCode::Char('n'))), Some(false));
        assert_eq!(answer(key(KeyCode::Esc)), Some(false));
        assert_eq!(
            answer(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(false)
        );
        assert_eq!(answer(key(KeyCode::Char('x'))), None);
        assert_eq!(answer(key(KeyCode::Enter)), None);
    }
}
