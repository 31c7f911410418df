//! Compiles `proto/tau/v1/*.proto` with protox (pure Rust, so no system `protoc`) and generates the
//! tonic client and server code plus the encoded descriptor set that server reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/tau/v1/tau.proto",
        "proto/tau/v1/status.proto",
        "proto/tau/v1/tiers.proto",
        "proto/tau/v1/sessions.proto",
        "proto/tau/v1/turns.proto",
        "proto/tau/v1/events.proto",
        "proto/tau/v1/approvals.proto",
        "proto/tau/v1/catalog.proto",
        "proto/tau/v1/routines.proto",
        "proto/tau/v1/nodes.proto",
    ];
    for proto in &protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(protos, ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("tau_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .codec_path("crate::codec::TauCodec")
        .compile_fds(fds)?;
    Ok(())
}
