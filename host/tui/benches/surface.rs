//! The terminal UI's costs at a 10k-event session, as figures and ratios
//! that stay meaningful on a noisy machine:
//!
//! * committed event → the frame that shows it: the shared reducer applies
//!   one new assistant message and the screen draws a 120×40 frame on
//!   ratatui's `TestBackend`, at 10k events against 1k (the ratio says how
//!   the per-event cost grows with the session);
//! * the reducers' memory at 10k events: bytes the surface holds, counted
//!   by a counting allocator around `Surface::replay`.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::{EventKind, Outcome, StateOp, StoredEvent};
use latch_surface::Surface;
use latch_tui::UiState;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const SESSION: &str = "bench";

/// A session of `n` events: turns of a user message, an assistant message
/// with two tool calls, their results, usage, a state update and a
/// validation, like a working session.
fn session(n: usize) -> Vec<StoredEvent> {
    let mut kinds = Vec::with_capacity(n);
    let mut turn = 0;
    while kinds.len() < n {
        turn += 1;
        let call = |k: &str, name: &str, args: String| {
            Part::ToolCall(ToolCall {
                id: format!("{k}{turn}"),
                name: name.into(),
                arguments_json: args,
            })
        };
        let result = |k: &str, name: &str, content: String| {
            EventKind::ToolResult(ToolResult {
                call_id: format!("{k}{turn}"),
                name: name.into(),
                content,
                is_error: false,
                images: vec![],
            })
        };
        kinds.extend([
            EventKind::RunStarted {
                mode: "interactive".into(),
                context: None,
            },
            EventKind::user_text(format!("step {turn}: make the parser accept nested lists")),
            EventKind::AssistantMessage {
                parts: vec![
                    Part::Text(format!("Reading src/parser{turn}.rs and running the tests.")),
                    call("r", "read_file", format!(r#"{{"path":"src/parser{turn}.rs"}}"#)),
                    call(
                        "e",
                        "edit_file",
                        format!(
                            r#"{{"path":"src/parser{turn}.rs","old_string":"fn a() {{}}","new_string":"fn a() {{ {turn} }}"}}"#
                        ),
                    ),
                ],
            },
            result("r", "read_file", "fn a() {}\n".repeat(20)),
            result("e", "edit_file", "edited".into()),
            EventKind::ProviderUsage {
                input_tokens: Some(12_000),
                output_tokens: Some(300),
                cache_read_tokens: Some(10_000),
                cache_creation_tokens: None,
                cache_miss_tokens: Some(2_000),
                common_prefix_tokens: Some(11_000),
                reasoning_tokens: None,
                estimated_input_tokens: None,
                provider: None,
                model: None,
                base_url: None,
            },
            EventKind::StateUpdate(StateOp::RecordDecision {
                text: format!("decision {turn}"),
            }),
            EventKind::Validation {
                requirements: vec!["tests pass".into()],
                command: "cargo test".into(),
                outcome: Outcome::Passed,
                exit_code: Some(0),
                output: "ok".into(),
                generation: 0,
            },
            EventKind::assistant_text(format!("Step {turn} done.")),
            EventKind::RunFinished {
                outcome: "completed".into(),
            },
        ]);
    }
    kinds.truncate(n);
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| StoredEvent {
            seq: i as u64 + 1,
            session: SESSION.into(),
            time_ms: 0,
            kind,
        })
        .collect()
}

fn next_event(seq: u64) -> StoredEvent {
    StoredEvent {
        seq,
        session: SESSION.into(),
        time_ms: 0,
        kind: EventKind::assistant_text("One more committed answer that the frame must show."),
    }
}

fn state(n: usize) -> UiState {
    UiState::new(Surface::replay(SESSION, &session(n)), "bench")
}

/// Apply the next committed event and draw the frame that shows it.
fn event_to_frame(state: &mut UiState, terminal: &mut Terminal<TestBackend>) {
    let seq = state.surface.durable().watermark + 1;
    state.surface.apply(&next_event(seq));
    terminal.draw(|f| latch_tui::draw(f, state)).unwrap();
}

fn median(n: usize, n_events: usize) -> Duration {
    let base = state(n_events);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let mut s = base.clone();
            let t = Instant::now();
            event_to_frame(&mut s, &mut terminal);
            t.elapsed()
        })
        .collect();
    samples.sort();
    samples[n / 2]
}

fn bench(c: &mut Criterion) {
    // Memory of the reducers at 10k events.
    let events = session(10_000);
    let before = LIVE.load(Ordering::Relaxed);
    let surface = Surface::replay(SESSION, &events);
    let held = LIVE.load(Ordering::Relaxed) - before;
    let log_bytes: usize = events.iter().map(|e| e.kind.to_json().len()).sum();
    println!(
        "surface memory at 10k events: {:.2} MiB ({} bytes/event; the log's JSON is {:.2} MiB)",
        held as f64 / (1024.0 * 1024.0),
        held / 10_000,
        log_bytes as f64 / (1024.0 * 1024.0)
    );
    drop(surface);

    let at_1k = median(31, 1_000);
    let at_10k = median(31, 10_000);
    println!(
        "committed event -> frame (120x40): {:.2} ms at 1k events, {:.2} ms at 10k events; ratio 10k/1k = {:.2}",
        at_1k.as_secs_f64() * 1e3,
        at_10k.as_secs_f64() * 1e3,
        at_10k.as_secs_f64() / at_1k.as_secs_f64()
    );

    let base = state(10_000);
    let mut terminal = Terminal::new(TestBackend::new(120, 40)).unwrap();
    c.bench_function("event_to_frame_10k", |b| {
        b.iter_batched(
            || base.clone(),
            // The state is returned so that dropping it is not timed.
            |mut s| {
                event_to_frame(&mut s, &mut terminal);
                s
            },
            BatchSize::LargeInput,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
