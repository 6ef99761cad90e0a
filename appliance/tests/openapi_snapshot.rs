//! The OpenAPI document is part of the wire contract: its operations, responses (402s for
//! billed calls included) and schemas are compared with the committed snapshot
//! `tests/data/openapi.json`, so a refactoring cannot change what clients are told.
//!
//! After an intended API change, regenerate the snapshot and review its diff:
//! `UPDATE_OPENAPI_SNAPSHOT=1 cargo test -p appliance --test openapi_snapshot`.

use std::path::Path;

#[test]
fn the_openapi_document_matches_the_committed_snapshot() {
    let (_, openapi) = appliance::api::routes();
    let served = serde_json::to_value(&openapi).expect("OpenAPI serializes");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI_SNAPSHOT").is_some() {
        let text = serde_json::to_string_pretty(&served).expect("pretty JSON");
        std::fs::write(&path, text + "\n").expect("write the snapshot");
        return;
    }
    let text = std::fs::read_to_string(&path).expect("the committed snapshot");
    let committed: serde_json::Value = serde_json::from_str(&text).expect("snapshot is JSON");
    if served != committed {
        let served = serde_json::to_string_pretty(&served).unwrap_or_default();
        let diff: Vec<String> = served
            .lines()
            .zip(text.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(10)
            .map(|(i, (a, b))| format!("line {}: served `{a}`, snapshot `{b}`", i + 1))
            .collect();
        panic!(
            "the served OpenAPI document differs from tests/data/openapi.json (first differences below; \
             regenerate with UPDATE_OPENAPI_SNAPSHOT=1 only for an intended API change):\n{}",
            diff.join("\n")
        );
    }
}
