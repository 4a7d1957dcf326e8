//! Making engine-provided text safe to print. Everything an engine says
//! (errors, reports, captured log lines, conformance evidence) is untrusted:
//! before the CLI or the log writes it to a terminal, [`terminal_safe`]
//! escapes its control characters and cuts it to a bounded length.

/// `text` with every control character escaped (`\n`, `\r`, `\t`, `\e`, and
/// `\u{..}` for the rest of C0, DEL and C1, e.g. the one-byte CSI `U+009B`),
/// cut after `max_chars` characters with a note saying how many were left
/// out. The result never contains a control character, so it can neither
/// move the cursor, clear the screen, rewrite earlier output nor start a new
/// line.
pub fn terminal_safe(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 2));
    for (count, (i, c)) in text.char_indices().enumerate() {
        if count == max_chars {
            let rest = text[i..].chars().count();
            out.push_str(&format!("… [cut: {rest} more characters]"));
            return out;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Longest engine-provided string the CLI prints whole.
pub const MAX_PRINTED_CHARS: usize = 2_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_is_cut() {
        let hostile = "\u{1b}[2J\u{1b}[H\u{9b}31m✓ all 214 tests passed\r\nsafe\u{7}\u{7f}";
        let safe = terminal_safe(hostile, 1_000);
        assert_eq!(
            safe,
            "\\e[2J\\e[H\\u{9b}31m✓ all 214 tests passed\\r\\nsafe\\u{7}\\u{7f}"
        );
        assert!(!safe.chars().any(char::is_control));
        let long = "é".repeat(50);
        assert_eq!(
            terminal_safe(&long, 10),
            format!("{}… [cut: 40 more characters]", "é".repeat(10))
        );
        assert_eq!(terminal_safe("plain", 5), "plain");
    }
}
