//! The native core's pure-Rust modules, compiled straight from `rust/` for fuzzing.
//!
//! The fuzz targets exercise exactly the code the extension ships — the same source files —
//! but without `rust/lib.rs` (the PyO3 bindings), so a fuzz build compiles neither PyO3 nor its
//! proc macros and links no libpython: minutes less to build in CI. Keep the module list in
//! step with the `pub mod` lines of `rust/lib.rs`; dependency versions come from the same
//! `Cargo.lock` entries (see `Cargo.toml`).

#[path = "../../rust/bm25/mod.rs"]
pub mod bm25;
#[path = "../../rust/memory.rs"]
pub mod memory;
#[path = "../../rust/offsets.rs"]
pub mod offsets;
#[path = "../../rust/store.rs"]
pub mod store;
#[path = "../../rust/tokenizer.rs"]
pub mod tokenizer;

pub mod check;
