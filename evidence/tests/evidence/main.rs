//! The evidence crate's integration tests, one test binary with a module per area
//! (`cargo test -p evidence --test evidence parsing::`): one link instead of one per area,
//! and the compiler sees the shared [`fixtures`] as one crate, so an unused fixture is a
//! warning rather than something each area must tolerate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixtures;

mod caa;
mod cli;
mod dcap;
mod gateway;
mod governance;
mod not_applicable;
mod online;
mod os_image;
mod parsing;
mod pccs;
mod rtmr0;
mod verifier;
