//! Agent groups on the real SQLite store: the projection against
//! `GroupState::replay` and an independent model of the rules at every step
//! of generated histories ([`model`]), claims raced by threads and by
//! processes on one file ([`race`]), and SIGKILL at random points of a
//! scripted group session ([`kill`]). Worker processes are this binary run
//! again with [`WORKER_ENV`] set ([`worker`]).

mod common;
mod kill;
mod model;
mod race;
#[path = "../common/seeds.rs"]
mod seeds;
mod worker;

/// The variable that turns this binary into a worker process.
pub const WORKER_ENV: &str = "LATCH_GROUP_WORKER";
