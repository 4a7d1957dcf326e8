//! The input box's editor: multi-line text with a cursor, paste, and the
//! history of submitted messages.

/// A multi-line editor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Composer {
    text: String,
    /// Byte offset of the cursor, always on a char boundary.
    cursor: usize,
    history: Vec<String>,
    /// Position while browsing history (`history.len()` = the draft).
    browsing: Option<usize>,
    draft: String,
}

impl Composer {
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The cursor's byte offset.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// True when nothing is typed.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Insert text at the cursor (typing or a paste; `\r\n` and `\r` become
    /// newlines).
    pub fn insert(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        self.text.insert_str(self.cursor, &s);
        self.cursor += s.len();
    }

    /// Delete the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    /// Delete the character at the cursor.
    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    /// Move the cursor one character left.
    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    /// Move the cursor one character right.
    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    /// Move to the start of the line.
    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    /// Move to the end of the line.
    pub fn end(&mut self) {
        self.cursor += self.text[self.cursor..]
            .find('\n')
            .unwrap_or(self.text.len() - self.cursor);
    }

    /// Delete from the start of the line to the cursor (Ctrl-U).
    pub fn kill_to_start(&mut self) {
        let start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Delete from the cursor to the end of the line (Ctrl-K).
    pub fn kill_to_end(&mut self) {
        let end = self.cursor
            + self.text[self.cursor..]
                .find('\n')
                .unwrap_or(self.text.len() - self.cursor);
        self.text.replace_range(self.cursor..end, "");
    }

    /// Delete the word before the cursor and the spaces after it (Ctrl-W,
    /// Alt-Backspace).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches([' ', '\t']);
        let start = trimmed.rfind(|c: char| c.is_whitespace()).map_or(0, |i| {
            i + trimmed[i..].chars().next().map_or(1, char::len_utf8)
        });
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// True when the text has more than one line.
    pub fn multi_line(&self) -> bool {
        self.text.contains('\n')
    }

    /// Move the cursor one line up, keeping its column where it can; on
    /// the first line, to the start of the text.
    pub fn up(&mut self) {
        let line_start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
        if line_start == 0 {
            self.cursor = 0;
            return;
        }
        let column = self.text[line_start..self.cursor].chars().count();
        let prev_start = self.text[..line_start - 1].rfind('\n').map_or(0, |i| i + 1);
        self.cursor = column_at(&self.text, prev_start, line_start - 1, column);
    }

    /// Move the cursor one line down, keeping its column where it can; on
    /// the last line, to the end of the text.
    pub fn down(&mut self) {
        let Some(nl) = self.text[self.cursor..].find('\n') else {
            self.cursor = self.text.len();
            return;
        };
        let line_start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
        let column = self.text[line_start..self.cursor].chars().count();
        let next_start = self.cursor + nl + 1;
        let next_end = next_start
            + self.text[next_start..]
                .find('\n')
                .unwrap_or(self.text.len() - next_start);
        self.cursor = column_at(&self.text, next_start, next_end, column);
    }

    /// True while an entry of the history is shown (Up and Down walk it).
    pub fn browsing(&self) -> bool {
        self.browsing.is_some()
    }

    /// True when the cursor is on the first line.
    pub fn on_first_line(&self) -> bool {
        !self.text[..self.cursor].contains('\n')
    }

    /// True when the cursor is on the last line.
    pub fn on_last_line(&self) -> bool {
        !self.text[self.cursor..].contains('\n')
    }

    /// Replace the text (cursor at its end).
    pub fn set(&mut self, text: impl Into<String>) {
        self.text = text.into();
        self.cursor = self.text.len();
    }

    /// Take the text for submission; it joins the history.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// Clear the text without keeping it.
    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
    }

    /// Show the previous history entry.
    pub fn history_prev(&mut self) {
        let at = self.browsing.unwrap_or(self.history.len());
        if at == 0 {
            return;
        }
        if self.browsing.is_none() {
            self.draft = self.text.clone();
        }
        self.browsing = Some(at - 1);
        self.set(self.history[at - 1].clone());
    }

    /// Show the next history entry (past the newest: the draft).
    pub fn history_next(&mut self) {
        let Some(at) = self.browsing else { return };
        if at + 1 >= self.history.len() {
            self.browsing = None;
            let draft = std::mem::take(&mut self.draft);
            self.set(draft);
        } else {
            self.browsing = Some(at + 1);
            self.set(self.history[at + 1].clone());
        }
    }
}

/// The byte offset of `column` characters into `text[start..end]`
/// (its end when the line is shorter).
fn column_at(text: &str, start: usize, end: usize, column: usize) -> usize {
    text[start..end]
        .char_indices()
        .nth(column)
        .map_or(end, |(i, _)| start + i)
}

#[cfg(test)]
mod tests {
    use super::Composer;

    #[test]
    fn edits_pastes_and_walks_history() {
        let mut c = Composer::default();
        c.insert("fix ä");
        c.backspace();
        c.insert("the test\r\nnow");
        assert_eq!(c.text(), "fix the test\nnow");
        c.home();
        assert!(!c.on_first_line() && c.on_last_line());
        assert_eq!(c.take(), "fix the test\nnow");
        c.insert("draft");
        c.history_prev();
        assert_eq!(c.text(), "fix the test\nnow");
        c.history_next();
        assert_eq!(c.text(), "draft");
    }
}
