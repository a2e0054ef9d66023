//! Generates the Rust gRPC code from `proto/` without a system protoc:
//! protox parses the proto in pure Rust, tonic-prost-build writes the code,
//! and the descriptor set is kept for server reflection.
use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/rebound/v1/rebound.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("rebound_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // tonic-prost's codec, decoding each message from one slice: see src/codec.rs.
        .codec_path("crate::codec::ReboundCodec")
        .compile_fds(fds)?;
    Ok(())
}
