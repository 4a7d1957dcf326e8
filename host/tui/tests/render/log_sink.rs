//! The log sink: while the screen is up a warning goes to the log file and
//! to the status line, never to the terminal; a retry reads as "retrying
//! in 6 s: connection refused, attempt 5".

use latch_tui::log_sink;
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn a_retry_warning_goes_to_the_log_file_and_the_status_line() {
    let dir = std::env::temp_dir().join(format!("latch-log-sink-{}", std::process::id()));
    let path = dir.join(".latch/latch.log");
    let subscriber = tracing_subscriber::registry().with(log_sink::layer());
    tracing::subscriber::with_default(subscriber, || {
        let guard = log_sink::capture(&path);
        tracing::warn!(
            provider = "anthropic",
            attempt = 5,
            delay_ms = 5_200u64,
            "retrying: connection refused"
        );
        assert_eq!(
            log_sink::take_status().as_deref(),
            Some("retrying in 6 s: connection refused, attempt 5")
        );
        assert_eq!(log_sink::take_status(), None, "taken once");
        tracing::info!("an info line");
        assert_eq!(
            log_sink::take_status(),
            None,
            "only warnings reach the status line"
        );
        drop(guard);
    });
    let log = std::fs::read_to_string(&path).unwrap();
    assert!(
        log.contains("WARN") && log.contains("retrying: connection refused"),
        "{log}"
    );
    assert!(log.contains("attempt=5"), "{log}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_long_retry_reason_is_cut_but_never_the_attempt() {
    let dir = std::env::temp_dir().join(format!("latch-log-sink-long-{}", std::process::id()));
    let subscriber = tracing_subscriber::registry().with(log_sink::layer());
    tracing::subscriber::with_default(subscriber, || {
        let _guard = log_sink::capture(&dir.join("latch.log"));
        tracing::warn!(
            attempt = 3,
            delay_ms = 2_000u64,
            "retrying: {}",
            "cannot reach the server ".repeat(10)
        );
        let status = log_sink::take_status().unwrap();
        assert!(
            status.starts_with("retrying in 2 s: cannot reach"),
            "{status}"
        );
        assert!(
            status.ends_with("…, attempt 3") && status.chars().count() < 80,
            "{status}"
        );
    });
    let _ = std::fs::remove_dir_all(dir);
}
