//! `appliance_api::endpoints` (what clients build their calls from) describes exactly the
//! `/core/v1` routes the server documents: a route added without an `Endpoint`, or an
//! `Endpoint` for a route that does not exist, fails here. Each description is also
//! checked against its operation in the OpenAPI document: body or query, and the request
//! and response schemas.

use std::collections::BTreeSet;

use appliance_api::endpoints::{self, ALL, Endpoint, Input, Method, PREFIX, Visit};
use serde_json::Value;

/// The operation keys of an OpenAPI path item.
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The served OpenAPI document.
fn document() -> Result<Value, serde_json::Error> {
    let (_, openapi) = appliance::api::routes();
    serde_json::to_value(&openapi)
}

fn operation<'a>(doc: &'a Value, method: Method, path: &str) -> Option<&'a Value> {
    doc["paths"]
        .get(format!("{PREFIX}{path}"))?
        .get(method.as_str().to_ascii_lowercase())
}

#[test]
fn the_endpoints_are_exactly_the_served_core_routes() {
    let doc = document().expect("OpenAPI serializes");
    let paths = doc["paths"].as_object().expect("paths");
    let mut served = BTreeSet::new();
    for (path, item) in paths {
        let Some(under) = path.strip_prefix(PREFIX).filter(|p| p.starts_with('/')) else {
            continue;
        };
        for method in METHODS {
            if item.get(method).is_some() {
                served.insert((method.to_ascii_uppercase(), under.to_owned()));
            }
        }
    }
    let described: BTreeSet<(String, String)> = ALL
        .iter()
        .map(|(method, path)| (method.as_str().to_owned(), (*path).to_owned()))
        .collect();
    assert_eq!(described.len(), ALL.len(), "an endpoint is described twice");
    let undescribed: Vec<_> = served.difference(&described).collect();
    let unserved: Vec<_> = described.difference(&served).collect();
    assert!(
        undescribed.is_empty() && unserved.is_empty(),
        "served but not in appliance_api::endpoints: {undescribed:?}; \
         described but not served: {unserved:?}"
    );
}

/// The schema name of a wire type of `appliance_api` (or of the items of a `Vec` of
/// one), as the OpenAPI document refers to it; `None` for `String`, `bool`, `()`.
fn schema_name<T>() -> Option<String> {
    let name = std::any::type_name::<T>();
    let name = name
        .strip_prefix("alloc::vec::Vec<")
        .and_then(|inner| inner.strip_suffix('>'))
        .unwrap_or(name);
    name.starts_with("appliance_api::")
        .then(|| name.rsplit("::").next().unwrap_or(name).to_owned())
}

/// Every schema a part of the document refers to.
fn refs(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                match (key.as_str(), inner) {
                    ("$ref", Value::String(target)) => {
                        out.insert(
                            target
                                .trim_start_matches("#/components/schemas/")
                                .to_owned(),
                        );
                    }
                    _ => refs(inner, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs(item, out)),
        _ => {}
    }
}

struct MatchesDocument<'a> {
    doc: &'a Value,
    failures: Vec<String>,
}

impl MatchesDocument<'_> {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }
}

impl Visit for MatchesDocument<'_> {
    fn visit<E: Endpoint>(&mut self) {
        let name = format!("{} {}", E::METHOD.as_str(), E::PATH);
        let Some(op) = operation(self.doc, E::METHOD, E::PATH) else {
            self.failures.push(format!("{name}: not served"));
            return;
        };
        let body = op.get("requestBody");
        let params = op
            .get("parameters")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        match E::INPUT {
            Input::Json => {
                let content = body.and_then(|b| b["content"].get("application/json"));
                self.check(content.is_some(), || {
                    format!("{name}: no JSON request body")
                });
                if let (Some(content), Some(schema)) = (content, schema_name::<E::Request>()) {
                    let mut found = BTreeSet::new();
                    refs(content, &mut found);
                    self.check(found.contains(&schema), || {
                        format!("{name}: the request body is {found:?}, not {schema}")
                    });
                }
            }
            Input::Query => {
                self.check(body.is_none(), || format!("{name}: has a request body"));
                self.check(
                    !params.is_empty() && params.iter().all(|p| p["in"] == "query"),
                    || format!("{name}: documents no query parameters"),
                );
            }
            Input::None => self.check(body.is_none() && params.is_empty(), || {
                format!("{name}: takes a body or parameters")
            }),
        }
        let answer = &op["responses"]["200"]["content"]["application/json"];
        self.check(answer.is_object(), || format!("{name}: no JSON 200 answer"));
        if let Some(schema) = schema_name::<E::Response>() {
            let mut found = BTreeSet::new();
            refs(answer, &mut found);
            self.check(found.contains(&schema), || {
                format!("{name}: the 200 answer is {found:?}, not {schema}")
            });
        }
    }
}

#[test]
fn each_endpoint_matches_its_operation() {
    let doc = document().expect("OpenAPI serializes");
    let mut check = MatchesDocument {
        doc: &doc,
        failures: Vec::new(),
    };
    endpoints::for_each(&mut check);
    assert!(check.failures.is_empty(), "{:#?}", check.failures);
}
