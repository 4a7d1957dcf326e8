//! The provider adapters against the local server that speaks each
//! provider's exact wire format: golden bodies, streaming tool loops, usage,
//! typed errors, retries and images. One test binary for all of them.

mod common;
mod errors;
mod golden;
mod hostile;
mod images;
mod local;
mod responses;
mod retry;
mod thinking;
mod tool_loop;
mod usage;
