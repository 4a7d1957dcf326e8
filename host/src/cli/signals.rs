//! SIGINT and SIGTERM for the commands that run a turn and then end
//! (`latch run`, `latch group join`): the first signal interrupts the
//! running turn, so the command ends the way an interrupted turn does —
//! the interruption committed, its agent group left cleanly and its claims
//! released (a leave that fails is left to the lease's expiry); a second
//! signal ends the process at once.

use crate::agent::TurnControl;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal watch of one command; dropping it restores the defaults'
/// effect for the rest of the process (the watch thread ends).
pub struct Stop {
    handle: Handle,
    thread: Option<std::thread::JoinHandle<()>>,
    got: Arc<AtomicI32>,
}

impl Stop {
    /// Watch SIGINT and SIGTERM for the turns `control` runs.
    pub fn watch(control: TurnControl) -> std::io::Result<Stop> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let got = Arc::new(AtomicI32::new(0));
        let seen = got.clone();
        let thread = std::thread::Builder::new()
            .name("latch-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if seen.swap(sig, Ordering::SeqCst) != 0 {
                        // A second signal: no more waiting.
                        std::process::exit(128 + sig);
                    }
                    let name = if sig == SIGTERM { "SIGTERM" } else { "SIGINT" };
                    eprintln!(
                        "\n{name}: stopping the turn and leaving the agent group (again to quit \
                         at once)"
                    );
                    control.interrupt();
                }
            })?;
        Ok(Stop {
            handle,
            thread: Some(thread),
            got,
        })
    }

    /// The exit code a signal asks for (128 + its number), once one came.
    pub fn exit_code(&self) -> Option<i32> {
        match self.got.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(128 + sig),
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
