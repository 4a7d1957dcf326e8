//! The ContinuityEngine through the sandbox: warm materialize at 1k/10k/100k
//! events, native against component, and a cold instance at 100k.

fn main() {}
