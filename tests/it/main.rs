//! Integration tests: the real server on ephemeral ports, the real binary.

mod abuse;
mod breakers;
mod chaos;
mod classification;
mod cli;
mod common;
mod deploy;
mod redaction;
mod reload;
mod rpc;
mod shared;
mod snippets;
mod traces;
mod vectors;
