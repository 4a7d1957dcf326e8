//! Failure supervision: streaks of repeated failures, rebuilt from the
//! session's own raw events. A lineage is keyed by the failing operation (a
//! tool and its target, a validation command, certification) and its
//! normalized error, so two different errors are two lineages. Only lineages
//! still active are kept (and rendered); a success of the same operation, a
//! certified completion or a disproof naming the lineage closes it.

use latch_engine_sdk::types::FailureLineage;

/// One supervised streak.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Lineage {
    /// Stable key (group plus normalized error).
    pub(crate) key: String,
    /// What closes it (the tool, the validation command, or certification).
    pub(crate) group: String,
    pub(crate) summary: String,
    pub(crate) count: u32,
    pub(crate) first_seq: u64,
    pub(crate) last_seq: u64,
    /// The count at the last `reground` event for it (0: none yet).
    pub(crate) regrounded_at: u32,
}

/// The active lineages, in order of first occurrence.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FailureState {
    active: Vec<Lineage>,
}

/// The group of a failing tool call: the operation it named (see
/// [`super::turns::operation_of`]), or the tool alone when its call is not in
/// the log.
pub(crate) fn tool_group(operation: &str) -> String {
    format!("tool:{operation}")
}

/// The group of a validation command.
pub(crate) fn validation_group(command: &str) -> String {
    format!("validation:{}", command.trim())
}

/// The group of certification attempts.
pub(crate) const CERTIFICATION_GROUP: &str = "certification";

/// What a failure lineage's key names, for a person: the validation
/// command (`` validation `sh test.sh` ``), the failing tool operation
/// (`` shell `cargo build` ``, without the normalized error the key ends
/// with), `completion` for certification, or the key itself when it is none
/// of these.
pub fn lineage_label(key: &str) -> String {
    if let Some(command) = key.strip_prefix("validation:") {
        return format!("validation `{command}`");
    }
    if let Some(rest) = key.strip_prefix("tool:") {
        // `name:error` or ``name `target`:error`` (see `operation_of`).
        let (name, after) = rest.split_at(rest.find([' ', ':']).unwrap_or(rest.len()));
        return match after
            .strip_prefix(" `")
            .and_then(|t| t.find("`:").map(|end| &t[..end]))
        {
            Some(target) => format!("{name} `{target}`"),
            None => name.to_string(),
        };
    }
    if key == CERTIFICATION_GROUP || key.starts_with("certification:") {
        return "completion".into();
    }
    key.to_string()
}

/// A stable, short form of an error message: its first non-empty line,
/// lower-cased, free-standing numbers replaced by `#`, whitespace collapsed,
/// at most 120 characters. Line numbers and counts therefore do not split a
/// streak, while numbers that are part of a word (error codes such as
/// `E0425` or `TS2304`, names such as `file1.rs`) are kept: two different
/// error codes are two different failures.
pub fn normalize_error(text: &str) -> String {
    normalize(text, true)
}

/// The key form of one certification blocker: every number replaced by `#`,
/// so the generations a blocker quotes (`checked generation 3, workspace is
/// at 5`) do not make a repeated blocker look new.
pub(crate) fn normalize_blocker(text: &str) -> String {
    normalize(text, false)
}

fn normalize(text: &str, keep_codes: bool) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut out = String::new();
    let mut space = false;
    // Inside a word that started with a letter: its digits are kept.
    let mut in_word = false;
    for c in line.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            in_word = false;
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        if c.is_ascii_digit() && !(keep_codes && in_word) {
            if !out.ends_with('#') {
                out.push('#');
            }
        } else {
            out.extend(c.to_lowercase());
            in_word = c.is_alphanumeric() || (in_word && c == '_');
        }
        if out.chars().count() >= 120 {
            break;
        }
    }
    out
}

/// The first non-empty line of `text`, at most 200 characters.
pub(crate) fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}

impl FailureState {
    /// Record one failure; always changes the rendering.
    pub(crate) fn failure(&mut self, group: &str, key: String, summary: String, seq: u64) -> bool {
        match self.active.iter_mut().find(|l| l.key == key) {
            Some(l) => {
                l.count = l.count.saturating_add(1);
                l.last_seq = seq;
                l.summary = summary;
            }
            None => self.active.push(Lineage {
                key,
                group: group.to_string(),
                summary,
                count: 1,
                first_seq: seq,
                last_seq: seq,
                regrounded_at: 0,
            }),
        }
        true
    }

    /// Close every lineage of `group`.
    pub(crate) fn close_group(&mut self, group: &str) -> bool {
        let before = self.active.len();
        self.active.retain(|l| l.group != group);
        before != self.active.len()
    }

    /// Close every lineage of `group` except `keep`.
    pub(crate) fn close_group_except(&mut self, group: &str, keep: &str) -> bool {
        let before = self.active.len();
        self.active.retain(|l| l.group != group || l.key == keep);
        before != self.active.len()
    }

    /// Close the lineage with `key`.
    pub(crate) fn close_key(&mut self, key: &str) -> bool {
        let before = self.active.len();
        self.active.retain(|l| l.key != key);
        before != self.active.len()
    }

    /// A `reground` event answered the lineage with `key` at `count`.
    pub(crate) fn regrounded(&mut self, key: &str, count: u32) {
        if let Some(l) = self.active.iter_mut().find(|l| l.key == key) {
            l.regrounded_at = l.regrounded_at.max(count);
        }
    }

    /// The active lineages.
    pub(crate) fn active(&self) -> &[Lineage] {
        &self.active
    }

    /// The contract's rendering.
    pub(crate) fn render(&self) -> Vec<FailureLineage> {
        self.active
            .iter()
            .map(|l| FailureLineage {
                key: l.key.clone(),
                summary: l.summary.clone(),
                count: l.count,
                first_seq: l.first_seq,
                last_seq: l.last_seq,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_ignores_line_numbers_and_spacing_but_keeps_error_codes() {
        assert_eq!(
            normalize_error("\n  error[E0425]: cannot find `x` at line 12  \nmore"),
            normalize_error("error[E0425]:   cannot find `x` at line 99")
        );
        assert_ne!(
            normalize_error("error[E0425]: cannot find `x` at src/main.rs:12:5"),
            normalize_error("error[E0433]: cannot find `x` at src/main.rs:12:5")
        );
        assert_eq!(
            normalize_error("src/file1.rs:12:5: TS2304 x"),
            "src/file1.rs:#:#: ts2304 x"
        );
        assert_eq!(normalize_error("Error  A"), "error a");
        assert_eq!(
            normalize_blocker("stale: unit (checked generation 3, workspace is at 15)"),
            normalize_blocker("stale: unit (checked generation 16, workspace is at 17)")
        );
    }

    #[test]
    fn a_lineage_label_names_the_operation_without_its_error() {
        assert_eq!(
            lineage_label(&validation_group("sh test.sh")),
            "validation `sh test.sh`"
        );
        let shell = format!(
            "{}:{}",
            tool_group("shell `cargo build`"),
            normalize_error("error: `x`: no")
        );
        assert_eq!(lineage_label(&shell), "shell `cargo build`");
        let bare = format!("{}:{}", tool_group("list_dir"), normalize_error("boom"));
        assert_eq!(lineage_label(&bare), "list_dir");
        assert_eq!(lineage_label("certification:no evidence"), "completion");
        assert_eq!(lineage_label("other"), "other");
    }

    #[test]
    fn streaks_count_and_close() {
        let mut f = FailureState::default();
        f.failure("tool:shell", "k".into(), "s1".into(), 1);
        f.failure("tool:shell", "k".into(), "s2".into(), 5);
        assert_eq!(f.render()[0].count, 2);
        assert_eq!((f.render()[0].first_seq, f.render()[0].last_seq), (1, 5));
        assert!(!f.close_group("tool:read"));
        assert!(f.close_group("tool:shell"));
        assert!(f.render().is_empty());
    }
}
