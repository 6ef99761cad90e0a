//! Only keyservice talks to the guest agent: in the rendered compose (the bytes that are
//! measured), the dstack guest-agent socket and the configfs-tsm tree are mounted into
//! the keyservice service and into no other service.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

/// Paths that give access to quotes, guest-agent keys or event emission.
const GUEST_AGENT_PATHS: [&str; 3] = ["dstack.sock", "/sys/kernel/config", "tappd.sock"];

/// The docker-compose text inside a rendered `app-compose.json`.
fn rendered_docker_compose(bytes: &[u8]) -> String {
    let app: serde_json::Value = serde_json::from_slice(bytes).unwrap();
    app["docker_compose_file"].as_str().unwrap().to_owned()
}

/// The non-comment lines of each service, by service name. The template's layout:
/// `services:` at column 0, each service name at two spaces, its keys deeper; the block
/// ends at the next line at column 0.
fn service_lines(compose: &str) -> BTreeMap<String, Vec<String>> {
    let mut services = BTreeMap::new();
    let mut in_services = false;
    let mut current: Option<String> = None;
    for line in compose.lines() {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        let indent = line.len() - content.len();
        if indent == 0 {
            in_services = content == "services:";
            current = None;
            continue;
        }
        if !in_services {
            continue;
        }
        if indent == 2 {
            let name = content.trim_end_matches(':').to_owned();
            services.insert(name.clone(), Vec::new());
            current = Some(name);
        } else if let Some(name) = &current {
            services.get_mut(name).unwrap().push(content.to_owned());
        }
    }
    services
}

fn mentions_guest_agent(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| GUEST_AGENT_PATHS.iter().any(|p| l.contains(p)))
        .cloned()
        .collect()
}

fn check(compose: &str) {
    let services = service_lines(compose);
    // Positive controls: the parser found the services, and keyservice does mount the
    // guest agent (the check below would pass vacuously otherwise).
    assert!(services.contains_key("appliance"), "{services:?}");
    let keyservice = services.get("keyservice").expect("a keyservice service");
    assert!(
        keyservice
            .iter()
            .any(|l| l == "- /var/run/dstack.sock:/var/run/dstack.sock"),
        "keyservice does not mount the guest agent: {keyservice:?}"
    );
    for (name, lines) in &services {
        if name == "keyservice" {
            continue;
        }
        let found = mentions_guest_agent(lines);
        assert!(
            found.is_empty(),
            "service {name} reaches the guest agent: {found:?}"
        );
    }
}

#[test]
fn only_keyservice_mounts_the_guest_agent_in_the_rendered_compose() {
    let dev = compose_pin::render_dev().unwrap();
    check(&rendered_docker_compose(dev.bytes()));

    let image = compose_pin::ImageRef::new("ghcr.io/example/appliance", [7; 32]).unwrap();
    let mut options = compose_pin::RenderOptions::new(image);
    options.appliance_config = "[attestation]\nprovider = \"dstack\"\n".to_owned();
    let rendered = compose_pin::render(compose_pin::TEMPLATE, &options).unwrap();
    check(&rendered_docker_compose(rendered.bytes()));
}

#[test]
fn the_check_catches_a_front_end_with_the_socket() {
    // The same check on a compose that hands the appliance the socket fails: the test
    // above is not vacuous.
    let compose = rendered_docker_compose(compose_pin::render_dev().unwrap().bytes());
    let leaked = compose.replacen(
        "      - appliance-data:/var/lib/appliance\n",
        "      - appliance-data:/var/lib/appliance\n      - /var/run/dstack.sock:/var/run/dstack.sock\n",
        1,
    );
    assert_ne!(leaked, compose, "the template changed shape");
    let outcome = std::panic::catch_unwind(|| check(&leaked));
    assert!(
        outcome.is_err(),
        "a leaked guest-agent socket went unnoticed"
    );
    let tsm = compose.replacen(
        "      - appliance-data:/var/lib/appliance\n",
        "      - appliance-data:/var/lib/appliance\n      - /sys/kernel/config/tsm:/sys/kernel/config/tsm\n",
        1,
    );
    assert!(std::panic::catch_unwind(|| check(&tsm)).is_err());
}
