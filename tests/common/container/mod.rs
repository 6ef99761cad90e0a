//! Containers for the container test (`tests/e2e/container.rs`): a private Docker engine
//! ([`engine`]) and the rendered docker-compose file translated into `docker` commands
//! ([`compose`]).

pub mod compose;
pub mod engine;

pub use compose::{Context, Plan, ServicePlan, TranslateError, translate};
pub use engine::{Engine, Unavailable};
