//! The sandbox an engine instance runs in: a WASI context that grants nothing
//! (no preopened directories, environment, arguments, network or inherited
//! stdio), deterministic clocks and randomness, captured and capped output, a
//! memory cap and a per-call deadline that counts the time spent in host
//! calls too.

use super::session_host::SessionSlot;
use bytes::Bytes;
use latch_engine_sdk::validate::KernelContextLimits;
use rand::SeedableRng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

/// Limits an engine instance runs under.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SandboxLimits {
    /// Wall-clock deadline of one call, in milliseconds.
    pub deadline_ms: u64,
    /// Linear-memory cap of one instance, in MiB.
    pub memory_mib: u64,
    /// Bytes of stdout/stderr kept per call; the rest is dropped.
    pub log_bytes: usize,
    /// Most bytes of text in one kernel-context entry an engine asks the
    /// host to persist.
    pub context_entry_bytes: u64,
    /// Most bytes of kernel-context text one view (or one `manual-compact`)
    /// asks the host to persist.
    pub context_view_bytes: u64,
}

impl SandboxLimits {
    /// The kernel-context limits the host's checks apply.
    pub fn kernel_context(&self) -> KernelContextLimits {
        KernelContextLimits {
            entry_bytes: self.context_entry_bytes,
            view_bytes: self.context_view_bytes,
        }
    }
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            deadline_ms: 5_000,
            memory_mib: 512,
            log_bytes: 64 * 1024,
            context_entry_bytes: KernelContextLimits::default().entry_bytes,
            context_view_bytes: KernelContextLimits::default().view_bytes,
        }
    }
}

/// The data of one engine instance's wasmtime store.
pub struct EngineState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) session: SessionSlot,
    /// The per-call deadline.
    pub(crate) deadline: Duration,
    /// When the call in progress started (host calls check it).
    pub(crate) started: Option<Instant>,
}

impl WasiView for EngineState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Shared handles the host keeps to steer an instance's sandbox between calls.
#[derive(Clone)]
pub struct SandboxHandles {
    /// Wall-clock time the guest sees, in milliseconds since the Unix epoch:
    /// the time of the session's latest event, set before every call.
    pub clock_ms: Arc<AtomicU64>,
    /// Captured stdout.
    pub stdout: CapturedLog,
    /// Captured stderr.
    pub stderr: CapturedLog,
}

impl EngineState {
    /// A fresh sandbox for the engine serving session `seed_key`.
    pub fn new(limits: &SandboxLimits, seed_key: &str) -> (Self, SandboxHandles) {
        let handles = SandboxHandles {
            clock_ms: Arc::new(AtomicU64::new(0)),
            stdout: CapturedLog::new(limits.log_bytes),
            stderr: CapturedLog::new(limits.log_bytes),
        };
        let seed = seed_from(seed_key);
        let mut builder = WasiCtx::builder();
        builder
            .stdout(handles.stdout.clone())
            .stderr(handles.stderr.clone())
            .wall_clock(SessionClock(handles.clock_ms.clone()))
            .monotonic_clock(StepClock::default())
            .secure_random(rand::rngs::StdRng::seed_from_u64(seed))
            .insecure_random(rand::rngs::StdRng::seed_from_u64(
                seed ^ 0x9e37_79b9_7f4a_7c15,
            ))
            .insecure_random_seed(seed as u128)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let state = EngineState {
            wasi: builder.build(),
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(limits.memory_mib),
            session: SessionSlot::default(),
            deadline: Duration::from_millis(limits.deadline_ms),
            started: None,
        };
        (state, handles)
    }
}

/// FNV-1a of the key: a stable seed, the same for every instance of a session.
fn seed_from(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// Wall clock pinned to a host-chosen instant.
struct SessionClock(Arc<AtomicU64>);

impl wasmtime_wasi::HostWallClock for SessionClock {
    fn resolution(&self) -> Duration {
        Duration::from_millis(1)
    }
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.load(Ordering::Relaxed))
    }
}

/// Monotonic clock that advances one microsecond per reading: deterministic,
/// yet never standing still for a guest that waits on it.
#[derive(Default)]
struct StepClock(AtomicU64);

impl wasmtime_wasi::HostMonotonicClock for StepClock {
    fn resolution(&self) -> u64 {
        1_000
    }
    fn now(&self) -> u64 {
        self.0.fetch_add(1_000, Ordering::Relaxed)
    }
}

/// Caps an instance's linear memory and remembers whether the cap was hit, so
/// that the trap that follows is reported as out-of-memory.
pub struct MemoryLimiter {
    max_bytes: usize,
    /// True once a growth beyond the cap was refused.
    pub hit: bool,
    /// Largest memory size granted, in bytes.
    pub peak_bytes: usize,
}

impl MemoryLimiter {
    fn new(memory_mib: u64) -> Self {
        MemoryLimiter {
            max_bytes: (memory_mib as usize) << 20,
            hit: false,
            peak_bytes: 0,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }

    fn instances(&self) -> usize {
        64
    }

    fn memories(&self) -> usize {
        64
    }

    fn tables(&self) -> usize {
        64
    }
}

/// A capped in-memory sink for a guest's stdout or stderr. Writes beyond the
/// cap are dropped silently (never an error, so a chatty engine does not fail),
/// and the host drains it into its log after every call.
#[derive(Clone)]
pub struct CapturedLog {
    inner: Arc<Mutex<LogBuffer>>,
}

struct LogBuffer {
    bytes: Vec<u8>,
    cap: usize,
    dropped: usize,
}

impl CapturedLog {
    /// A sink keeping at most `cap` bytes between drains.
    pub fn new(cap: usize) -> Self {
        CapturedLog {
            inner: Arc::new(Mutex::new(LogBuffer {
                bytes: Vec::new(),
                cap,
                dropped: 0,
            })),
        }
    }

    fn append(&self, data: &[u8]) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = buf.cap.saturating_sub(buf.bytes.len());
        let take = room.min(data.len());
        buf.bytes.extend_from_slice(&data[..take]);
        buf.dropped += data.len() - take;
    }

    /// Take what was written since the last drain, with the count of dropped
    /// bytes.
    pub fn drain(&self) -> (String, usize) {
        let mut buf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&buf.bytes).into_owned();
        buf.bytes.clear();
        let dropped = std::mem::take(&mut buf.dropped);
        (text, dropped)
    }
}

impl IsTerminal for CapturedLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for CapturedLog {
    async fn ready(&mut self) {}
}

impl OutputStream for CapturedLog {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.append(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CapturedLog {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}
