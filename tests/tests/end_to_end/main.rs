//! Latch's end-to-end tests: the host library with real components, the real
//! SQLite store and the local wire-format server. One test binary for all of
//! them, so a clean build links the host (wasmtime included) once.
//!
//! * [`agent`] — the agent loop through the provider wire formats.
//! * [`call_ids`] — tool-call ids from servers that repeat or omit them, and
//!   stores an older build wrote with repeated ids.
//! * [`certification`] — several requirements proven by real `cargo`
//!   commands in a git repository certify together; an edit stales them.
//! * [`child_policy`] — child-policy components and the supervisor.
//! * [`children`] — child agents: spawn, concurrent workers, reports,
//!   delivery at safe boundaries, resume.
//! * [`config_inputs`] — hostile config files: a seeded property run.
//! * [`children_lifecycle`] — interrupts end the wait for children (which
//!   keep running, or are cancelled as configured); a resumed child's
//!   recorded engine configuration.
//! * [`conformance`] — the conformance suite against the shipped engines and
//!   the adversarial fixture.
//! * [`continuity_component`] — the ContinuityEngine natively and as a
//!   component, byte for byte; warm and fresh instances.
//! * [`core_loop`] — the agent loop's data-safety pins: results committed
//!   per call, truncation, store failures under engine calls, repair cost,
//!   a stable session context.
//! * [`engine_answers`] — a hostile engine's `recall` answers (forged,
//!   foreign, past the limit) refused like bad views; its lying token total
//!   kept out of calibration.
//! * [`durability`] — deterministic serialization between processes; the
//!   stress tier on the real store (no automatic compact, every event kept).
//! * [`interrupts`] — Esc mid-request, an interrupt between tool calls,
//!   steering at the next safe boundary.
//! * [`groups`] — agent groups: a lead and two children work a task list
//!   with a dependency and message each other once; an idle agent is not
//!   woken, and gets its messages at its next safe boundary.
//! * [`groups_pg`] — a group on PostgreSQL through the agent loop: the
//!   connection cut mid-session is a tool error naming the store, the turn
//!   goes on, and nothing is claimed or delivered twice after it is back.
//! * [`invariants`] — the contract's non-negotiable properties.
//! * [`loading`] — loading components: versions, worlds, the compile cache.
//! * [`permissions`] — the approval flow: ask, grant, deny, "always" after
//!   resume, interrupted requests, escalations.
//! * [`polyglot`] — engines in Python, JavaScript and C; `latch engine new`
//!   scaffolds built by their own instructions.
//! * [`local_servers`] — the loop against llama.cpp's servers as the fake
//!   plays them: cut-off tool calls, `n_ctx` overflow, small windows.
//! * [`mcp`] — MCP tools from real npm servers through the agent loop:
//!   results, mutations committed first, a killed server.
//! * [`mcp_approvals`] — MCP tools under the approval modes: asked with
//!   server, tool and arguments, "always" per tool, `never` denies.
//! * [`reads`] — bounded reads over real HTTP: `read_file` of a huge
//!   line, `read_artifact` of a stored tool output, page by page.
//! * [`recall`] — the model's `recall` tool reaches what rotated out.
//! * [`replay`] — `latch engine replay` of a session the agent loop
//!   recorded: the default engine gives back exactly what was sent; the
//!   window example and the baseline under the same requests; nothing
//!   written; traces, redacted or not.
//! * [`reground`] — host-produced re-ground notes: `complete` refused
//!   twice, a validation failing the same way twice; in the next request
//!   and after a resume.
//! * [`sandbox`] — the sandbox against a misbehaving engine.
//! * [`skills`] — the skill list in context, `load_skill` results replayed
//!   on resume.
//! * [`trust`] — every attack of a hostile engine through the command line:
//!   provenance, kernel-context poisoning and bloat, terminal injection,
//!   suite detection, host-call bounds.
//! * [`tui_modal`] — the terminal UI's permission modal: the command or
//!   diff on screen, and `y` / `a` / `r` + a reason answering the real
//!   agent through the TUI's approver.
//! * [`web`] — `latch serve` over real HTTP and SSE: auth, bind, turns,
//!   `Last-Event-ID` resume, snapshots, restart mid-turn.

mod agent;
mod call_ids;
mod certification;
mod child_policy;
mod children;
mod children_lifecycle;
mod common;
mod config_inputs;
mod conformance;
mod continuity_component;
mod core_loop;
mod durability;
mod engine_answers;
mod groups;
mod groups_pg;
mod interrupts;
mod invariants;
mod loading;
mod local_servers;
mod mcp;
mod mcp_approvals;
mod permissions;
mod polyglot;
mod providers;
mod reads;
mod recall;
mod reground;
mod replay;
mod sandbox;
mod skills;
mod trust;
mod tui_modal;
mod web;
