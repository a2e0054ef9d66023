//! Integration tests: the real server on ephemeral ports, the real binary.

mod breakers;
mod cli;
mod common;
mod reload;
mod rpc;
mod shared;
mod vectors;
