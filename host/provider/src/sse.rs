//! An incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary chunks; complete events come out. Lines end in
//! `\n`, `\r\n` or `\r`; `event:` names the event, `data:` lines are joined
//! with `\n`, comments (`:`) and other fields are ignored, and a blank line
//! dispatches. An event left incomplete when the stream ends is discarded,
//! as the SSE specification requires. An event larger than
//! [`MAX_EVENT_BYTES`] stops the parser ([`SseParser::overflowed`]) instead
//! of growing its buffer without bound.

/// The largest event (its field lines together) the parser accepts: far
/// above any real provider event (a whole Responses `response.completed`
/// with its output), far below what would exhaust memory.
pub const MAX_EVENT_BYTES: usize = 64 << 20;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when absent.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: Option<String>,
    data: Option<String>,
    skip_lf: bool,
    overflowed: bool,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk and returns the events it completed. Once an event
    /// grew past [`MAX_EVENT_BYTES`] nothing more is read.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.overflowed {
                break;
            }
            if self.skip_lf {
                self.skip_lf = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' => self.end_line(&mut out),
                b'\r' => {
                    self.end_line(&mut out);
                    self.skip_lf = true;
                }
                _ => {
                    self.buf.push(b);
                    if self.pending_bytes() > MAX_EVENT_BYTES {
                        self.overflowed = true;
                    }
                }
            }
        }
        out
    }

    /// True once an event grew past [`MAX_EVENT_BYTES`]: the stream cannot
    /// be read further.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn pending_bytes(&self) -> usize {
        self.buf.len()
            + self.data.as_ref().map_or(0, String::len)
            + self.event.as_ref().map_or(0, String::len)
    }

    /// True when part of an event has been read but not dispatched.
    pub fn has_pending(&self) -> bool {
        !self.buf.is_empty() || self.data.is_some() || self.event.is_some()
    }

    fn end_line(&mut self, out: &mut Vec<SseEvent>) {
        let line = String::from_utf8_lossy(&self.buf).into_owned();
        self.buf.clear();
        if line.is_empty() {
            if let Some(data) = self.data.take() {
                out.push(SseEvent {
                    event: self.event.take().unwrap_or_else(|| "message".to_string()),
                    data,
                });
            }
            self.event = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_arbitrary_chunking() {
        let stream = b"event: ping\ndata: {\"type\":\"ping\"}\n\n: comment\r\ndata: a\r\ndata: b\r\n\r\nevent: x\ndata: tail";
        for split in 0..stream.len() {
            let mut p = SseParser::new();
            let mut got = p.push(&stream[..split]);
            got.extend(p.push(&stream[split..]));
            assert_eq!(
                got,
                vec![
                    SseEvent {
                        event: "ping".into(),
                        data: "{\"type\":\"ping\"}".into()
                    },
                    SseEvent {
                        event: "message".into(),
                        data: "a\nb".into()
                    },
                ],
                "split at {split}"
            );
            assert!(p.has_pending(), "the unterminated last event stays pending");
        }
    }

    #[test]
    fn bare_cr_ends_lines_and_utf8_split_across_chunks_is_kept() {
        let mut p = SseParser::new();
        let text = "data: héllo\r\r".as_bytes();
        let mut got = p.push(&text[..8]);
        got.extend(p.push(&text[8..]));
        assert_eq!(got[0].data, "héllo");
        assert!(!p.has_pending());
    }
}
