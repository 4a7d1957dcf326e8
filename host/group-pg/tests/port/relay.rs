//! A TCP relay to the test cluster's unix socket that a test can cut and
//! restore: a database connection lost for real, mid-session. Shared with
//! the end-to-end tests of the agent loop (included there by path).

use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A TCP relay to the test cluster's unix socket that can be cut.
pub struct Relay {
    /// The loopback port it listens on.
    pub port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    /// Listen on a loopback port and relay each connection to `socket`.
    pub fn start(socket: PathBuf) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        {
            let (cut, open) = (cut.clone(), open.clone());
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    let Ok(tcp) = tcp else { continue };
                    if cut.load(Ordering::SeqCst) {
                        let _ = tcp.shutdown(Shutdown::Both);
                        continue;
                    }
                    let Ok(unix) = UnixStream::connect(&socket) else {
                        continue;
                    };
                    open.lock().unwrap().push(tcp.try_clone().unwrap());
                    let (mut t1, mut u1) = (tcp.try_clone().unwrap(), unix.try_clone().unwrap());
                    let (mut t2, mut u2) = (tcp, unix);
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut t1, &mut u1);
                        let _ = u1.shutdown(Shutdown::Both);
                    });
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut u2, &mut t2);
                        let _ = t2.shutdown(Shutdown::Both);
                    });
                }
            });
        }
        Relay { port, cut, open }
    }

    /// Close every open connection and refuse new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Accept connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
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
