//! The agent's side of the stdio connection: one writer every thread shares
//! (a message is one line, written whole), and the requests Latch sent the
//! client that wait for their answers.

use crate::wire::RpcError;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

/// The connection's output and Latch's pending requests.
#[derive(Clone)]
pub struct Channel {
    inner: Arc<Inner>,
}

struct Inner {
    out: Mutex<Box<dyn Write + Send>>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, Sender<Result<Value, RpcError>>>>,
}

impl Channel {
    /// A channel that writes to `out`.
    pub fn new(out: Box<dyn Write + Send>) -> Channel {
        Channel {
            inner: Arc::new(Inner {
                out: Mutex::new(out),
                next_id: AtomicU64::new(1),
                pending: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn write(&self, message: &Value) {
        let mut line = serde_json::to_string(message).unwrap_or_default();
        line.push('\n');
        let mut out = self.inner.out.lock().unwrap_or_else(|p| p.into_inner());
        // A client that went away cannot be told anything; the reader sees
        // its end of input and stops the server.
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            tracing::debug!("the ACP client closed its input");
        }
    }

    /// Answer the client's request `id` with `result`.
    pub fn respond(&self, id: &Value, result: Result<Value, RpcError>) {
        let message = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        self.write(&message);
    }

    /// Send a notification.
    pub fn notify(&self, method: &str, params: impl Serialize) {
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Send a request; its answer arrives on the returned receiver (an
    /// error when the client answers with one or the connection ends).
    pub fn request(
        &self,
        method: &str,
        params: impl Serialize,
    ) -> (u64, Receiver<Result<Value, RpcError>>) {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        let params = serde_json::to_value(params).unwrap_or(Value::Null);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (id, rx)
    }

    /// Forget a request nobody waits for any more.
    pub fn forget(&self, id: u64) {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Route the client's answer to the request it answers; false when no
    /// request of Latch's has that id.
    pub fn answer(&self, id: &Value, result: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_u64() else {
            return false;
        };
        let waiting = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        match waiting {
            Some(tx) => {
                let _ = tx.send(result);
                true
            }
            None => false,
        }
    }

    /// The connection ended: every waiting request fails.
    pub fn close(&self) {
        self.inner
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
