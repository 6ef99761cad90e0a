//! The end-to-end tests, one module per area, linked into one test binary (one link
//! instead of seventeen). Each test's full name starts with its area, so
//! `cargo test -p e2e billing::` runs the billing tests only; `tests/README.md` lists
//! the areas.
//!
//! The harness they share (processes, HTTPS client, chain, Pebble, viem) is the `e2e`
//! library in `tests/common/`.

mod abuse_http;
mod abuse_quotas;
mod accounts;
mod acme;
mod actions;
mod attested_client;
mod backup;
mod billing;
mod chain_actions;
mod chain_mirror;
mod cli;
mod container;
mod cors;
mod dashboard;
mod deploy;
mod deploy_dstack;
mod dev_stack;
mod disk_full;
mod durability;
mod evidence_e2e;
mod examples;
mod execution;
mod fair_execution;
mod faults;
mod fresh_evidence;
mod gateway;
mod groups;
mod http_conventions;
mod imports;
mod keyservice;
mod kill_campaign;
mod observability;
mod openapi;
mod operator;
mod permissions;
mod proxy_protocol;
mod reference_examples;
mod replicas;
mod schemathesis;
mod sdk_js;
mod signatures;
mod usage_keys;
mod wallets;
mod worker_binding;
