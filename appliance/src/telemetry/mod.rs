//! What an operator can measure and follow (`docs/operators.md`, "Metrics", "Traces",
//! "What to alert on"):
//!
//! * `metrics`: every Prometheus metric the appliance exports, in one registry, and the
//!   calls the rest of the code records through;
//! * `traces`: the `tracing` subscriber, with the OpenTelemetry (OTLP/HTTP) export when
//!   configured;
//! * here: the request scope. The request middleware runs every request inside it: the
//!   request id, which every child span of the request carries ([`request_span!`]), and
//!   the charge of a billed write, counted once the write is answered.
//!
//! This module sits below everything that records (the keyservice client, the executor,
//! the HTTP layer); the listener that serves the registry reads the whole state, so it
//! is a module of its own above them (`crate::metrics_listener`).

pub mod metrics;
pub mod traces;

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static REQUEST: RequestScope;
}

/// What the request being handled carries for telemetry.
struct RequestScope {
    id: Arc<str>,
    /// The charge of a billed management write (set by the `Billed` extractor).
    billed_cents: Cell<Option<u64>>,
}

/// Runs `future` as part of the request `id`: spans made inside it with
/// [`request_span!`] carry the id. A task spawned for the request runs in a scope of its
/// own (see `execution::execute`).
pub async fn in_request<F: Future>(id: Arc<str>, future: F) -> F::Output {
    let scope = RequestScope {
        id,
        billed_cents: Cell::new(None),
    };
    REQUEST.scope(scope, future).await
}

/// The id of the request being handled, if any.
pub fn request_id() -> Option<Arc<str>> {
    REQUEST.try_with(|r| Arc::clone(&r.id)).ok()
}

/// `make(request_id)` inside a request, else a disabled span: background work (the
/// chain followers, the start-up) makes no spans of its own, so every exported trace is
/// one request's.
pub fn with_request_id(make: impl FnOnce(&str) -> tracing::Span) -> tracing::Span {
    REQUEST
        .try_with(|r| make(&r.id))
        .unwrap_or_else(|_| tracing::Span::none())
}

/// Notes that the request is a billed management write costing `cents`.
pub fn note_billed(cents: u64) {
    let _ = REQUEST.try_with(|r| r.billed_cents.set(Some(cents)));
}

/// The charge noted by [`note_billed`], if the request is a billed write.
pub fn billed_cents() -> Option<u64> {
    REQUEST.try_with(|r| r.billed_cents.get()).ok().flatten()
}

/// A child span of the current request (`debug` level, so free unless traces or a
/// `debug` log filter want it) carrying `request_id`; outside a request, no span.
/// `request_span!("store.read")`, `request_span!("keyservice.call", op = name)`.
macro_rules! request_span {
    ($name:literal $(, $($field:tt)+)?) => {
        $crate::telemetry::with_request_id(|request_id| {
            ::tracing::debug_span!($name, request_id $(, $($field)+)?)
        })
    };
}
pub(crate) use request_span;

/// The store's spans and timings, as the appliance reports them: a `store.read` or
/// `store.write` span of the current request, and
/// `appliance_store_transaction_duration_seconds{kind}`.
#[derive(Clone)]
pub struct StoreTelemetry(pub Arc<metrics::Metrics>);

impl crate::store::StoreTelemetry for StoreTelemetry {
    fn span(&self, kind: crate::store::TransactionKind) -> tracing::Span {
        match kind {
            crate::store::TransactionKind::Read => request_span!("store.read"),
            crate::store::TransactionKind::Write => request_span!("store.write"),
        }
    }

    fn transaction(&self, kind: crate::store::TransactionKind, elapsed: std::time::Duration) {
        self.0.store_transaction(kind.as_str(), elapsed);
    }
}

/// The chain followers' progress, as the appliance reports it: the chain head, indexed
/// block and lag gauges.
#[derive(Clone)]
pub struct ChainTelemetry(pub Arc<metrics::Metrics>);

impl appliance_chain::ChainTelemetry for ChainTelemetry {
    fn indexer_progress(&self, head: u64, indexed: u64) {
        self.0.chain_indexer(head, indexed);
    }
}

/// The worker pool's events, as the appliance reports them: workers started, failed to
/// start and retired, and how long jobs waited.
#[derive(Clone)]
pub struct PoolTelemetry(pub Arc<metrics::Metrics>);

impl appliance_execution::pool::PoolTelemetry for PoolTelemetry {
    fn worker_start(&self, ok: bool) {
        if ok {
            self.0.worker_started();
        } else {
            self.0.worker_start_failed();
        }
    }

    fn worker_retired(&self, reason: &'static str) {
        self.0.worker_retired(reason);
    }

    fn action_waited(&self, wait: std::time::Duration) {
        self.0.action_waited(wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_request_scope_carries_its_id_and_charge() {
        assert!(request_id().is_none(), "no request outside the scope");
        assert!(billed_cents().is_none());
        let (id, cents) = in_request(Arc::from("r-1"), async {
            note_billed(3);
            tokio::task::yield_now().await;
            (request_id(), billed_cents())
        })
        .await;
        assert_eq!(id.as_deref(), Some("r-1"));
        assert_eq!(cents, Some(3));
        assert!(request_id().is_none(), "the scope ends with the request");
        let spawned = tokio::spawn(async { request_id() }).await.unwrap();
        assert!(
            spawned.is_none(),
            "a spawned task has no request of its own"
        );
    }
}
