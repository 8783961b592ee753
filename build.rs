//! Build script: links the `piidx` binary as a position-dependent
//! executable on Linux (`-no-pie`).
//!
//! Every query is a short process, so start-up counts. Linked as a
//! position-independent executable (rustc's default), the binary carries
//! 18,000 relative relocations (442 KB of `.rela.dyn`) that the dynamic
//! loader reads and applies at each start, writing to 36 pages that are then
//! copied on write: `piidx --version` took 1.25 ms of CPU with 278 page
//! faults, and 1.00 ms with 187 faults linked this way; a search 0.92× the
//! CPU (docs/performance.md, issue 36). The code is still compiled
//! position-independent; only the link fixes its address, which costs the
//! executable's own address randomisation (the libraries, heap and stacks
//! keep theirs). Only the binaries: the library and the tests link as before.

fn main() {
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let gnu_or_musl =
        std::env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|env| env == "gnu" || env == "musl");
    if linux && gnu_or_musl {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
