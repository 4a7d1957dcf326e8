//! Wake-ups through `LISTEN/NOTIFY`: one connection per process listens on
//! [`crate::CHANNEL`]; each notification (payload: the root session, sent
//! by every commit that appends to its log) bumps that group's generation
//! and wakes the waiters. The connection is
//! re-established when it drops; a waiter re-reads the pending messages
//! either way, so a notification lost with a connection delays a delivery
//! by at most the waiter's timeout, never loses it.

use crate::connect::Target;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio_postgres::AsyncMessage;

/// The generations of the groups this process heard about.
#[derive(Default)]
pub(crate) struct Wake {
    generations: Mutex<HashMap<String, u64>>,
    changed: Condvar,
    up: AtomicBool,
}

impl Wake {
    /// The number of notifications heard for `root`.
    pub(crate) fn generation(&self, root: &str) -> u64 {
        let g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        g.get(root).copied().unwrap_or(0)
    }

    fn bump(&self, root: &str) {
        let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        *g.entry(root.to_string()).or_default() += 1;
        self.changed.notify_all();
    }

    /// Wait until `root`'s generation moves past `seen` or `timeout`.
    pub(crate) fn wait(&self, root: &str, seen: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.generations.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if g.get(root).copied().unwrap_or(0) > seen {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub(crate) fn listening(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }
}

/// Listen until the runtime stops, reconnecting after a second when the
/// connection fails.
pub(crate) async fn run(target: Target, wake: std::sync::Arc<Wake>) {
    loop {
        if let Ok((client, mut conn)) = target.config.connect(target.tls.clone()).await {
            let listen = async {
                client
                    .batch_execute(&format!("LISTEN {}", crate::CHANNEL))
                    .await
            };
            let mut listen = std::pin::pin!(listen);
            // Drive the connection while LISTEN runs, then read messages.
            let ok = loop {
                tokio::select! {
                    r = &mut listen => break r.is_ok(),
                    m = std::future::poll_fn(|cx| conn.poll_message(cx)) => {
                        if let Some(Ok(AsyncMessage::Notification(n))) = m {
                            wake.bump(n.payload());
                        } else if !matches!(m, Some(Ok(_))) {
                            break false;
                        }
                    }
                }
            };
            if ok {
                wake.up.store(true, Ordering::SeqCst);
                while let Some(m) = std::future::poll_fn(|cx| conn.poll_message(cx)).await {
                    match m {
                        Ok(AsyncMessage::Notification(n)) => wake.bump(n.payload()),
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
                wake.up.store(false, Ordering::SeqCst);
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
