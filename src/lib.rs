//! Rebound: the error-handling sidecar for AI agents.
//!
//! An agent reports each tool outcome; Rebound answers with a verdict: the
//! category, the action, a retry delay, a snippet for the LLM and the state
//! of its circuit breakers.
//!
//! # Layout
//! - `model`: domain types (outcome, verdict, the closed enums).
//! - `classify`: rules as data; which category a failure is and which rule said so;
//!   `message_patterns`: which of the rules' message patterns a text matches, in one pass.
//! - `backoff`: retry delays, jitter, and the Retry-After family of headers.
//! - `breaker`: session breakers (consecutive, session errors, identical, limits) and tool breakers across sessions.
//! - `budget`: per-tool retry budgets (token buckets).
//! - `fingerprint`: what makes two error messages "the same".
//! - `analysis`: what a failure's own fields give (classification, fingerprint, what to show),
//!   kept by the engine for the failures that come again.
//! - `redact`: secrets out of every text Rebound writes.
//! - `compact`: the `<error>` snippet and the Context text; `trace`: stack traces collapsed;
//!   `templates`: user snippet templates and token counting for budgets.
//! - `session`: one run's state, and the sharded store with expiry and eviction.
//!   `shapes`: the messages sessions keep, as shapes shared across sessions and their own numbers.
//! - `shared`: tool breakers and retry budgets shared across sidecars through Redis, fail-open.
//! - `engine`: outcome in, verdict out; ties the above together. `verdict`: one outcome's verdict
//!   within its session (action, retry plan, snippet, escalation report); `nearest`: the tools
//!   nearest to an unknown one.
//! - `config`: the TOML file and `REBOUND_*` overrides; `policy`: its values checked and compiled.
//! - `metrics`: metric names and stored handles; `memory`: the allocator (jemalloc) and its settings.
//! - `convert`: protobuf ⇄ domain types, errors ⇄ gRPC statuses; `codec`: how the generated
//!   service and client decode messages.
//! - `server`: the gRPC edge (service, health, reflection, drain); `listener`: binding and accepting
//!   within bounds; `sidecar`: the serving process.
//! - `replay`: JSON lines through the engine; `cli`: the command line.
//! - `clock`, `rng`: injected time and randomness.

pub mod analysis;
pub mod backoff;
pub mod breaker;
pub mod budget;
pub mod classify;
pub mod cli;
pub mod clock;
pub mod codec;
pub mod compact;
pub mod config;
pub mod convert;
pub mod engine;
pub mod fingerprint;
pub mod listener;
pub mod memory;
pub mod message_patterns;
pub mod metrics;
pub mod model;
pub mod named_codes;
pub mod nearest;
pub mod policy;
pub mod redact;
pub mod replay;
pub mod rng;
pub mod server;
pub mod session;
pub mod shapes;
pub mod shared;
pub mod sidecar;
pub mod templates;
pub mod trace;
pub mod verdict;

/// Code generated from `proto/rebound/v1/rebound.proto`.
#[allow(missing_docs, clippy::all)]
pub mod pb {
    tonic::include_proto!("rebound.v1");
}
