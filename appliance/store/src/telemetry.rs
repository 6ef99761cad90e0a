//! What the store reports about itself, handed in by whoever composes it: the store names
//! no metrics registry and no request context. The appliance implements
//! [`StoreTelemetry`] over its registry and its request spans and installs it with
//! [`crate::Store::set_telemetry`]; a store without one (tools, tests) reports nothing.

use std::time::Duration;

/// The kind of a timed transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionKind {
    /// One read on a read connection (SQLite) or a pooled session (PostgreSQL).
    Read,
    /// One write, from submission to durable commit.
    Write,
}

impl TransactionKind {
    /// `read` or `write` (the metric label).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

/// Receives the store's spans and timings.
pub trait StoreTelemetry: Send + Sync + 'static {
    /// The span of one transaction (`Span::none()` when nobody wants it).
    fn span(&self, kind: TransactionKind) -> tracing::Span {
        let _ = kind;
        tracing::Span::none()
    }

    /// One transaction of `kind` took `elapsed`.
    fn transaction(&self, kind: TransactionKind, elapsed: Duration);
}
