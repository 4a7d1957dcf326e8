//! Where log lines go. Outside the screen a line goes to stderr as it
//! always did (except one marked `surfaced = true`, which the surface
//! running the turn already shows); while the screen is up ([`capture`]) every line goes to the
//! workspace's log file instead (`.latch/latch.log`), and the latest
//! warning waits for the status line ([`take_status`]). Nothing is ever
//! written across the screen.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;

/// Where lines go while the screen is up.
struct Captured {
    file: Option<File>,
    status: Option<String>,
}

/// Most characters of a retry's reason on the status line.
const REASON_MAX: usize = 40;

static CAPTURED: Mutex<Option<Captured>> = Mutex::new(None);

/// The tracing layer that writes every log line to stderr, or to the log
/// file while the screen is up. Install it once, in `main`.
pub fn layer() -> LogLayer {
    LogLayer
}

/// See [`layer`].
#[derive(Clone, Copy, Debug, Default)]
pub struct LogLayer;

/// While this lives, log lines go to a file and to the status line, not
/// to the terminal. Dropping it sends them back to stderr.
#[derive(Debug)]
pub struct Capture {
    path: PathBuf,
}

impl Capture {
    /// The log file lines go to.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        *lock() = None;
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Captured>> {
    CAPTURED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Send every log line to `path` (appended; its folder is created) until
/// the returned guard drops. A file that cannot be opened drops the lines
/// rather than let them cross the screen.
pub fn capture(path: &Path) -> Capture {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .ok();
    *lock() = Some(Captured { file, status: None });
    Capture {
        path: path.to_path_buf(),
    }
}

/// The latest warning logged since the last call, for the status line.
pub fn take_status() -> Option<String> {
    lock().as_mut().and_then(|c| c.status.take())
}

/// The fields of one event.
#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<(String, String)>,
}

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.rest
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The line for the status bar: a provider retry reads as "retrying in
    /// 6 s: connection refused, attempt 5"; anything else is its message.
    fn status(&self) -> String {
        if let (Some(delay), Some(attempt)) = (self.get("delay_ms"), self.get("attempt"))
            && let Ok(ms) = delay.parse::<u64>()
        {
            let reason = self
                .message
                .strip_prefix("retrying: ")
                .unwrap_or(&self.message);
            // The reason is cut, never the attempt (the log has it whole).
            let reason = match reason.char_indices().nth(REASON_MAX) {
                Some((i, _)) => format!("{}…", &reason[..i]),
                None => reason.to_string(),
            };
            return format!(
                "retrying in {} s: {reason}, attempt {attempt}",
                ms.div_ceil(1000)
            );
        }
        self.message.clone()
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.rest
                .push((field.name().to_string(), value.to_string()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.rest
                .push((field.name().to_string(), format!("{value:?}")));
        }
    }
}

impl<S: Subscriber> tracing_subscriber::Layer<S> for LogLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = Fields::default();
        event.record(&mut fields);
        let mut line = format!("{:>5} {}: {}", meta.level(), meta.target(), fields.message);
        for (k, v) in &fields.rest {
            let _ = write!(line, " {k}={v}");
        }
        let mut captured = lock();
        if let Some(c) = captured.as_mut() {
            if let Some(file) = c.file.as_mut() {
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let _ = writeln!(file, "{secs} {line}");
            }
            if *meta.level() <= Level::WARN {
                c.status = Some(fields.status());
            }
            return;
        }
        drop(captured);
        // An event marked `surfaced` (a provider retry) is already shown by
        // the surface that runs the turn: on stderr it would read twice.
        if fields.get("surfaced") == Some("true") {
            return;
        }
        eprintln!("{line}");
    }
}
