//! The `tau` binary.

fn main() {}
