//! Generates the Connect service traits and message types from the checked-in
//! descriptor set (`proto/agentlane-bridge-v1.binpb`, made by `buf build` from
//! `proto/`; `scripts/proto.sh` regenerates it and the tests check it is
//! current), so building needs neither `protoc` nor `buf`.

fn main() {
    let descriptors = "../../proto/agentlane-bridge-v1.binpb";
    println!("cargo:rerun-if-changed={descriptors}");
    connectrpc_build::Config::new()
        .descriptor_set(descriptors)
        .files(&["agentlane/bridge/v1/bridge.proto"])
        .include_file("_connectrpc.rs")
        .compile()
        .expect("generating the agentlane.bridge.v1 code");
}
