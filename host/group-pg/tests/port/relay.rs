//! A TCP relay to the test cluster that a test can break the ways a network
//! breaks: cut every connection (a FIN), stall them (nothing passes, nothing
//! closes: a link that went silent), or lose the server's reply to the next
//! `COMMIT` (the commit applied, the client never told). It listens on a
//! loopback port or on a given address (the root side of a veth pair) and
//! relays to the cluster's unix socket or to a TCP address. Shared with the
//! end-to-end tests of the agent loop (included there by path).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the relay connects.
#[derive(Clone, Debug)]
pub enum Target {
    /// The cluster's unix socket.
    Unix(PathBuf),
    /// A TCP address.
    Tcp(SocketAddr),
}

#[derive(Default)]
struct Faults {
    cut: AtomicBool,
    stall: AtomicBool,
    lose_commit: AtomicBool,
    lost: AtomicUsize,
}

/// One relayed connection's two sockets, closable from the test.
enum Side {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Side {
    fn shutdown(&self) {
        let _ = match self {
            Side::Tcp(s) => s.shutdown(Shutdown::Both),
            Side::Unix(s) => s.shutdown(Shutdown::Both),
        };
    }

    fn try_clone(&self) -> std::io::Result<Side> {
        Ok(match self {
            Side::Tcp(s) => Side::Tcp(s.try_clone()?),
            Side::Unix(s) => Side::Unix(s.try_clone()?),
        })
    }
}

impl Read for Side {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Side::Tcp(s) => s.read(buf),
            Side::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Side {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Side::Tcp(s) => s.write(buf),
            Side::Unix(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A relay to the test cluster that can be broken.
pub struct Relay {
    /// The port it listens on.
    pub port: u16,
    /// The address it listens on.
    pub addr: SocketAddr,
    faults: Arc<Faults>,
    open: Arc<Mutex<Vec<(Side, Side)>>>,
}

impl Relay {
    /// Listen on a loopback port and relay each connection to `socket`.
    pub fn start(socket: PathBuf) -> Relay {
        Relay::start_at("127.0.0.1:0", Target::Unix(socket))
    }

    /// Listen on `bind` (`ip:port`, port 0 for any) and relay each
    /// connection to `target`.
    pub fn start_at(bind: &str, target: Target) -> Relay {
        let listener = TcpListener::bind(bind).unwrap();
        let addr = listener.local_addr().unwrap();
        let faults = Arc::new(Faults::default());
        let open: Arc<Mutex<Vec<(Side, Side)>>> = Arc::default();
        {
            let (faults, open) = (faults.clone(), open.clone());
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    let Ok(tcp) = tcp else { continue };
                    if faults.cut.load(Ordering::SeqCst) {
                        let _ = tcp.shutdown(Shutdown::Both);
                        continue;
                    }
                    let server = match &target {
                        Target::Unix(p) => UnixStream::connect(p).map(Side::Unix),
                        Target::Tcp(a) => TcpStream::connect(a).map(Side::Tcp),
                    };
                    let Ok(server) = server else {
                        let _ = tcp.shutdown(Shutdown::Both);
                        continue;
                    };
                    let client = Side::Tcp(tcp);
                    open.lock()
                        .unwrap()
                        .push((client.try_clone().unwrap(), server.try_clone().unwrap()));
                    let muted = Arc::new(AtomicBool::new(false));
                    pipe(
                        client.try_clone().unwrap(),
                        server.try_clone().unwrap(),
                        faults.clone(),
                        muted.clone(),
                        true,
                    );
                    pipe(server, client, faults.clone(), muted, false);
                }
            });
        }
        Relay {
            port: addr.port(),
            addr,
            faults,
            open,
        }
    }

    /// Close every open connection and refuse new ones.
    pub fn cut(&self) {
        self.faults.cut.store(true, Ordering::SeqCst);
        for (a, b) in self.open.lock().unwrap().drain(..) {
            a.shutdown();
            b.shutdown();
        }
    }

    /// Accept connections again.
    pub fn restore(&self) {
        self.faults.cut.store(false, Ordering::SeqCst);
    }

    /// Stop (`true`) or resume relaying: while stalled nothing passes in
    /// either direction and nothing is closed.
    pub fn stall(&self, on: bool) {
        self.faults.stall.store(on, Ordering::SeqCst);
    }

    /// Lose the server's answer to the next `COMMIT` a client sends: the
    /// `COMMIT` reaches the server, then that connection is closed before
    /// a byte of the answer passes.
    pub fn lose_next_commit_reply(&self) {
        self.faults.lose_commit.store(true, Ordering::SeqCst);
    }

    /// How many `COMMIT` answers were lost so far.
    pub fn lost_replies(&self) -> usize {
        self.faults.lost.load(Ordering::SeqCst)
    }
}

/// Copy `from` to `to` until either closes, as the faults say; `upstream`
/// is the client-to-server direction.
fn pipe(mut from: Side, mut to: Side, faults: Arc<Faults>, muted: Arc<AtomicBool>, upstream: bool) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            while faults.stall.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            while faults.stall.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let chunk = &buf[..n];
            if !upstream && muted.load(Ordering::SeqCst) {
                // The answer to a COMMIT whose reply is lost.
                break;
            }
            let commit = upstream
                && chunk.windows(6).any(|w| w == b"COMMIT")
                && faults.lose_commit.swap(false, Ordering::SeqCst);
            if commit {
                muted.store(true, Ordering::SeqCst);
                faults.lost.fetch_add(1, Ordering::SeqCst);
            }
            if to.write_all(chunk).is_err() {
                break;
            }
            if commit {
                // Give the server the time to apply it, then drop the
                // connection before its answer passes.
                std::thread::sleep(Duration::from_millis(300));
                from.shutdown();
                to.shutdown();
                return;
            }
        }
        to.shutdown();
        from.shutdown();
    });
}

/// The test cluster's socket file (from `LATCH_PG_TEST_SOCKET`).
pub fn socket() -> Option<PathBuf> {
    let dir = std::env::var("LATCH_PG_TEST_SOCKET").ok()?;
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.starts_with(".s.PGSQL.") && !name.ends_with(".lock")
        })
}
