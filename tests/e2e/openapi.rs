//! The OpenAPI description: valid OpenAPI 3.1 (checked by an independent validator),
//! listing every implemented route, and a Swagger UI served from bundled assets.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use e2e::Appliance;
use reqwest::Method;

/// Every route the appliance implements: (method, path).
const ROUTES: &[(&str, &str)] = &[
    ("post", "/core/v1/new_account"),
    ("get", "/core/v1/account_exists"),
    ("post", "/core/v1/add_usage_api_key"),
    ("get", "/core/v1/list_api_keys"),
    ("post", "/core/v1/update_usage_api_key"),
    ("post", "/core/v1/update_usage_api_key_metadata"),
    ("post", "/core/v1/remove_usage_api_key"),
    ("get", "/core/v1/create_wallet"),
    ("post", "/core/v1/create_wallet"),
    ("get", "/core/v1/list_wallets"),
    ("get", "/core/v1/list_wallets_in_group"),
    ("post", "/core/v1/add_group"),
    ("get", "/core/v1/list_groups"),
    ("post", "/core/v1/update_group"),
    ("post", "/core/v1/remove_group"),
    ("post", "/core/v1/add_pkp_to_group"),
    ("post", "/core/v1/remove_pkp_from_group"),
    ("post", "/core/v1/add_action_to_group"),
    ("post", "/core/v1/remove_action_from_group"),
    ("post", "/core/v1/add_action"),
    ("post", "/core/v1/delete_action"),
    ("post", "/core/v1/update_action_metadata"),
    ("get", "/core/v1/list_actions"),
    ("post", "/core/v1/get_lit_action_ipfs_id"),
    ("post", "/core/v1/lit_action"),
    ("get", "/core/v1/get_lit_action_client_config"),
    ("get", "/core/v1/get_node_chain_config"),
    ("get", "/core/v1/get_api_payers"),
    ("get", "/core/v1/get_admin_api_payer"),
    ("post", "/core/v1/create_wallet_with_signature"),
    ("post", "/core/v1/add_usage_api_key_with_signature"),
    ("post", "/core/v1/convert_to_chain_secured_account"),
    ("get", "/core/v1/billing/stripe_config"),
    ("get", "/core/v1/billing/balance"),
    ("get", "/core/v1/billing/usage"),
    ("post", "/core/v1/billing/create_payment_intent"),
    ("post", "/core/v1/billing/confirm_payment"),
    ("get", "/core/v1/billing/prices"),
    ("get", "/health"),
    ("get", "/attestation"),
    ("get", "/info"),
    ("get", "/evidences/"),
    ("get", "/evidences/quote.json"),
    ("get", "/evidences/{file}"),
    ("get", "/version"),
];

/// The `openapi-spec-validator` command installed by `scripts/setup` (PyPI package).
fn validator() -> PathBuf {
    if let Ok(path) = std::env::var("OPENAPI_SPEC_VALIDATOR") {
        return PathBuf::from(path);
    }
    test_support::tools::venv_bin("openapi-spec-validator")
}

#[tokio::test]
async fn openapi_is_valid_3_1_and_lists_every_route() {
    let app = Appliance::start().await;
    let r = app
        .send(app.request(Method::GET, &app.api("/openapi.json")))
        .await;
    let doc = r.assert_ok().clone();
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3.1"),
        "{}",
        doc["openapi"]
    );

    // Every implemented route is documented, with its error responses.
    let paths = doc["paths"].as_object().unwrap();
    for (method, path) in ROUTES {
        let op = &paths
            .get(*path)
            .unwrap_or_else(|| panic!("{path} is not documented"))[*method];
        assert!(op.is_object(), "{method} {path} is not documented");
        let responses = op["responses"].as_object().unwrap();
        assert!(responses.contains_key("200"), "{method} {path}: no 200");
        if op.get("requestBody").is_some() {
            for status in ["400", "413", "415"] {
                assert!(
                    responses.contains_key(status),
                    "{method} {path}: no {status}"
                );
            }
        }
        if op.get("security").is_some() {
            assert!(responses.contains_key("401"), "{method} {path}: no 401");
        }
    }
    // ...and every documented operation exists (nothing documented that 404s).
    let documented: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(
        documented,
        ROUTES.len(),
        "documented operations: {:?}",
        paths.keys().collect::<Vec<_>>()
    );
    for (method, path) in ROUTES {
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
        // A templated path is requested with a name that exists (the evidence files are
        // built just after start, `quote.json` among them).
        let url = app.url(&path.replace("{file}", "sha256sum.txt"));
        let mut r = app.send(app.request(m.clone(), &url)).await;
        for _ in 0..50 {
            if r.status.as_u16() != 404 || !path.starts_with("/evidences/") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            r = app.send(app.request(m.clone(), &url)).await;
        }
        assert_ne!(
            r.status.as_u16(),
            404,
            "{method} {path} is documented but not routed"
        );
        assert_ne!(
            r.status.as_u16(),
            405,
            "{method} {path} is documented but not routed"
        );
    }

    // An independent validator accepts it as OpenAPI 3.1.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, &r.text).unwrap();
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = Command::new(validator())
        .arg("--schema")
        .arg("3.1")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openapi-spec-validator rejected the document:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn swagger_ui_is_served_from_bundled_assets() {
    let app = Appliance::start().await;
    let r = app
        .send(app.request(Method::GET, &app.api("/swagger-ui/")))
        .await;
    assert_eq!(r.status.as_u16(), 200);
    assert!(
        r.text.contains("swagger-ui"),
        "{}",
        &r.text[..r.text.len().min(300)]
    );
    // The bare path works too (redirects to the slash form).
    let r = app
        .send(app.request(Method::GET, &app.api("/swagger-ui")))
        .await;
    assert_eq!(r.status.as_u16(), 200);
    // The JavaScript bundle and the initializer pointing at our document are served.
    let bundle = app
        .send(app.request(Method::GET, &app.api("/swagger-ui/swagger-ui-bundle.js")))
        .await;
    assert_eq!(bundle.status.as_u16(), 200);
    assert!(
        bundle.text.len() > 100_000,
        "the bundle is the real Swagger UI"
    );
    let init = app
        .send(app.request(Method::GET, &app.api("/swagger-ui/swagger-initializer.js")))
        .await;
    assert_eq!(init.status.as_u16(), 200);
    assert!(init.text.contains("/core/v1/openapi.json"), "{}", init.text);
}
