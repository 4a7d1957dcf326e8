//! The group port on both backends: one conformance suite run against the
//! SQLite store and against PostgreSQL ([`conformance`]), claims raced by
//! processes that each have their own local store ([`race`]), two "hosts"
//! (own stores, host names and network namespaces) working one group
//! ([`hosts`]), members on separate hosts (a namespace and a veth pair
//! each, [`net`]) through a SIGKILL, a silent link and a kill during leave
//! ([`across`]), members
//! SIGKILLed mid-claim and mid-delivery ([`kill`]), the failures of a
//! database that is away, silent or whose reply is lost ([`faults`]),
//! member leases and their expiry ([`leases`]), TLS ([`tls`]), and one
//! pool shared by the sessions of a process ([`shared`]). Worker processes
//! are this binary run again with [`WORKER_ENV`] set ([`worker`]).
//!
//! PostgreSQL comes from `LATCH_PG_TEST_URL` (`.ci/run` starts a throwaway
//! cluster); without it the PostgreSQL cases print why they skip, unless
//! `LATCH_PG_TEST_REQUIRED=1` makes that a failure.

mod across;
mod common;
mod conformance;
mod faults;
mod hosts;
mod kill;
mod leases;
mod net;
mod race;
mod relay;
mod shared;
mod tls;
mod worker;

/// The variable that turns this binary into a worker process.
pub const WORKER_ENV: &str = "LATCH_GROUP_PG_WORKER";
