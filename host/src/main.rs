//! The `latch` binary.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

fn main() {
    // Log lines go to stderr, or to `.latch/latch.log` and the status line
    // while the terminal UI is up (they never cross its screen).
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::EnvFilter::try_from_env("LATCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with(latch_tui::log_sink::layer())
        .init();
    std::process::exit(latch::cli::main_with(std::env::args().collect()));
}
