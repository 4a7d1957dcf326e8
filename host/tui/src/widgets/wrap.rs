//! Word wrapping of styled lines to a width (display columns), so the
//! transcript knows its height and scrolls by whole lines.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthStr;

/// Wrap `text` (one logical line) to `width` columns; continuation lines
/// start with `indent`. Every piece has `style`.
pub fn wrap(
    prefix: Span<'static>,
    text: &str,
    style: Style,
    indent: usize,
    width: usize,
) -> Vec<Line<'static>> {
    let width = width.max(indent + 8);
    let mut out = Vec::new();
    let mut current: Vec<Span<'static>> = vec![prefix.clone()];
    let mut used = prefix.content.width();
    let mut word_line = String::new();
    let flush = |current: &mut Vec<Span<'static>>, word_line: &mut String| {
        if !word_line.is_empty() {
            current.push(Span::styled(std::mem::take(word_line), style));
        }
    };
    for word in split_keep_spaces(text) {
        let w = word.width();
        if used + w > width && used > indent.max(prefix.content.width()) {
            word_line.truncate(word_line.trim_end().len());
            flush(&mut current, &mut word_line);
            out.push(Line::from(std::mem::take(&mut current)));
            current.push(Span::raw(" ".repeat(indent)));
            used = indent;
            if word.trim().is_empty() {
                continue;
            }
        }
        if w > width - indent {
            // A word longer than the line: hard-break it.
            for ch in word.chars() {
                let cw = ch.to_string().width();
                if used + cw > width {
                    flush(&mut current, &mut word_line);
                    out.push(Line::from(std::mem::take(&mut current)));
                    current.push(Span::raw(" ".repeat(indent)));
                    used = indent;
                }
                word_line.push(ch);
                used += cw;
            }
            continue;
        }
        word_line.push_str(word);
        used += w;
    }
    flush(&mut current, &mut word_line);
    out.push(Line::from(current));
    out
}

fn split_keep_spaces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if c == ' ' {
            if start < i {
                out.push(&text[start..i]);
            }
            out.push(&text[i..i + 1]);
            start = i + 1;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(lines: &[Line]) -> Vec<String> {
        lines
            .iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn wraps_at_words_and_breaks_long_ones() {
        let lines = wrap(
            Span::raw("● "),
            "add subtracts its arguments here",
            Style::new(),
            2,
            16,
        );
        assert_eq!(
            plain(&lines),
            ["● add subtracts", "  its arguments", "  here"]
        );
        let lines = wrap(
            Span::raw(""),
            "abcdefghijklmnopqrstuvwxyz",
            Style::new(),
            0,
            10,
        );
        assert_eq!(plain(&lines), ["abcdefghij", "klmnopqrst", "uvwxyz"]);
    }
}
