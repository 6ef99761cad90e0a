//! dstack's own client libraries against the stand-in guest agent
//! (`test_support::dstack_agent`): `@phala/dstack-sdk` from npm and `dstack-sdk` from PyPI
//! (versions pinned in `scripts/setup`) make every call keyservice makes of the real agent
//! — `getKey`/`get_key`, `getQuote`/`get_quote`, `info` — and `emitEvent`/`emit_event`,
//! each parsing and validating the answers as it does the real agent's (the Python SDK
//! checks `Info` and its `tcb_info` field by field with pydantic; the node SDK reads only
//! `Content-Length` framing and parses `tcb_info` and the quote's event log). Each script
//! prints what the SDK returned, and the test checks what a user of the SDK would see.
//!
//! Like every test that uses the test tools, these fail (with the command that installs
//! them) where node, the virtualenv or an SDK is missing, in CI and elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256, Sha384};
use test_support::dstack_agent::{
    AgentConfig, FAKE_APP_ID, FAKE_DEVICE_ID, FAKE_INSTANCE_ID, FAKE_KEY_PROVIDER_INFO,
    FAKE_OS_IMAGE_HASH, FAKE_VM_CONFIG, RUNTIME_EVENT_TYPE, StandInAgent, fake_quote,
};
use test_support::node::node_eval;
use test_support::tools::{node_package, venv_bin};

/// The npm SDK's version (as `scripts/setup` pins it).
const NPM_SDK: &str = "0.5.8";
/// The PyPI SDK's version (as `scripts/setup` pins it).
const PYPI_SDK: &str = "0.5.4";

const COMPOSE: &str = "{\"manifest_version\":2,\"name\":\"sdk-check\",\"runner\":\"docker-compose\",\"docker_compose_file\":\"services: {}\\n\"}";
const SEED: u8 = 9;
/// What keyservice asks for: its sealing-key path and purpose.
const KEY_PATH: &str = "keyservice/seal/v1/00112233";
const KEY_PURPOSE: &str = "keyservice-root-sealing";

/// Calls the SDK as `node -e NODE_SCRIPT socket path purpose report_data_hex event payload`.
const NODE_SCRIPT: &str = r#"
const { DstackClient } = require('@phala/dstack-sdk');
const [socket, path, purpose, reportHex, event, payload] = process.argv.slice(1);
const hex = (bytes) => Buffer.from(bytes).toString('hex');
(async () => {
  const client = new DstackClient(socket);
  const key = await client.getKey(path, purpose);
  const quote = await client.getQuote(Buffer.from(reportHex, 'hex'));
  const replayed = quote.replayRtmrs();
  await client.emitEvent(event, payload);
  const info = await client.info();
  const after = await client.getQuote(Buffer.from(reportHex, 'hex'));
  console.log(JSON.stringify({
    key: hex(key.key),
    signature_chain: key.signature_chain.map(hex),
    quote: quote.quote,
    report_data: quote.report_data,
    vm_config: quote.vm_config,
    event_log: JSON.parse(quote.event_log),
    replayed_rtmrs: replayed,
    event_log_after: JSON.parse(after.event_log),
    info,
  }));
})().catch((err) => { console.error(err); process.exit(1); });
"#;

/// Calls the SDK as `python -c PYTHON_SCRIPT socket path purpose report_data_hex event payload`.
const PYTHON_SCRIPT: &str = r#"
import importlib.metadata, json, sys
from dstack_sdk import DstackClient
from dstack_sdk.dstack_client import replay_rtmr

socket, path, purpose, report_hex, event, payload = sys.argv[1:]
client = DstackClient(socket)
key = client.get_key(path, purpose)
quote = client.get_quote(bytes.fromhex(report_hex))
client.emit_event(event, payload)
info = client.info()
after = client.get_quote(bytes.fromhex(report_hex))
tcb = info.tcb_info
print(json.dumps({
    "version": importlib.metadata.version("dstack-sdk"),
    "key": key.decode_key().hex(),
    "signature_chain": [s.hex() for s in key.decode_signature_chain()],
    "quote": quote.decode_quote().hex(),
    "report_data": quote.report_data,
    "vm_config": quote.vm_config,
    "event_log": [e.model_dump() for e in quote.decode_event_log()],
    "event_log_after": [e.model_dump() for e in after.decode_event_log()],
    "info": {**info.model_dump(exclude={"tcb_info"}), "tcb_info": tcb.model_dump()},
    "replayed_info": [replay_rtmr([e.digest for e in tcb.event_log if e.imr == i]) for i in range(4)],
}))
"#;

fn agent(dir: &tempfile::TempDir) -> StandInAgent {
    StandInAgent::start_in(dir.path(), "dstack.sock", AgentConfig::new(COMPOSE, SEED))
}

fn args<'a>(agent: &'a StandInAgent, report_data: &'a str, payload: &'a str) -> [&'a str; 6] {
    [
        agent.socket().to_str().unwrap(),
        KEY_PATH,
        KEY_PURPOSE,
        report_data,
        "sdk-check-event",
        payload,
    ]
}

fn parse(out: &str, sdk: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|err| panic!("{sdk} printed {out:?}: {err}"))
}

/// `report_data` zero-padded to 64 bytes, as the agent quotes it.
fn padded(report_data: &[u8]) -> Vec<u8> {
    let mut padded = report_data.to_vec();
    padded.resize(64, 0);
    padded
}

fn field<'a>(value: &'a Value, name: &str) -> &'a str {
    value[name]
        .as_str()
        .unwrap_or_else(|| panic!("no string {name} in {value}"))
}

fn runtime_digest(name: &str, payload: &[u8]) -> String {
    let mut h = Sha384::new();
    h.update(RUNTIME_EVENT_TYPE.to_le_bytes());
    h.update(b":");
    h.update(name.as_bytes());
    h.update(b":");
    h.update(payload);
    hex::encode(h.finalize())
}

/// The key: the stand-in's derivation, `sha256(app seed ‖ path)`, with a signature chain
/// of two 65-byte entries, as the real agent gives.
fn check_key(got: &Value) {
    let mut h = Sha256::new();
    h.update([SEED; 32]);
    h.update(KEY_PATH.as_bytes());
    assert_eq!(field(got, "key"), hex::encode(h.finalize()));
    let chain = got["signature_chain"].as_array().unwrap();
    assert_eq!(chain.len(), 2, "{chain:?}");
    for sig in chain {
        assert_eq!(hex::decode(sig.as_str().unwrap()).unwrap().len(), 65);
    }
}

/// The quote: over the padded report data, which the answer also names; the vm config.
fn check_quote(got: &Value, report_data: &[u8]) {
    let padded = padded(report_data);
    assert_eq!(
        hex::decode(field(got, "quote")).unwrap(),
        fake_quote(&padded)
    );
    assert_eq!(field(got, "report_data"), hex::encode(&padded));
    assert_eq!(field(got, "vm_config"), FAKE_VM_CONFIG);
}

/// A quote's event log, as the real agent sends it: boot events with 48-byte digests and
/// no payload, then runtime events naming the app — with their payloads, without digests —
/// ending with `emitted` (`(name, payload)`), if any.
fn check_quoted_log(events: &Value, emitted: Option<(&str, &[u8])>) {
    let events = events.as_array().unwrap();
    let boot: Vec<&Value> = events.iter().filter(|e| e["imr"] != 3).collect();
    assert!(!boot.is_empty(), "no boot events: {events:?}");
    for e in &boot {
        assert_eq!(field(e, "digest").len(), 96, "{e}");
        assert_eq!(field(e, "event_payload"), "", "{e}");
    }
    let runtime: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["imr"] == 3)
        .map(|e| {
            assert_eq!(e["event_type"], RUNTIME_EVENT_TYPE, "{e}");
            assert_eq!(field(e, "digest"), "", "{e}");
            (field(e, "event"), field(e, "event_payload"))
        })
        .collect();
    let compose_hash = hex::encode(Sha256::digest(COMPOSE));
    for (name, payload) in [
        ("app-id", FAKE_APP_ID),
        ("compose-hash", compose_hash.as_str()),
        ("instance-id", FAKE_INSTANCE_ID),
    ] {
        assert!(
            runtime.contains(&(name, payload)),
            "no {name} event with {payload}: {runtime:?}"
        );
    }
    let ready = runtime
        .iter()
        .position(|(name, _)| *name == "system-ready")
        .expect("a system-ready event");
    let after_ready: Vec<(&str, String)> = runtime[ready + 1..]
        .iter()
        .map(|(name, payload)| (*name, (*payload).to_owned()))
        .collect();
    let expected: Vec<(&str, String)> = emitted
        .map(|(name, payload)| (name, hex::encode(payload)))
        .into_iter()
        .collect();
    assert_eq!(after_ready, expected);
}

/// `Info`, parsed by the SDK: the app's ids and compose, the hash of that compose, the
/// TCB info whose event log ends with the emitted event and whose `mr_aggregated` is
/// dstack's hash of the MRs.
fn check_info(info: &Value, emitted: (&str, &[u8])) {
    let compose_hash = hex::encode(Sha256::digest(COMPOSE));
    assert_eq!(field(info, "app_id"), FAKE_APP_ID);
    assert_eq!(field(info, "instance_id"), FAKE_INSTANCE_ID);
    assert_eq!(field(info, "app_name"), "sdk-check");
    assert_eq!(field(info, "compose_hash"), compose_hash);
    assert_eq!(field(info, "device_id"), FAKE_DEVICE_ID);
    assert_eq!(field(info, "os_image_hash"), FAKE_OS_IMAGE_HASH);
    assert_eq!(field(info, "key_provider_info"), FAKE_KEY_PROVIDER_INFO);
    let vm_config: Value = serde_json::from_str(field(info, "vm_config")).unwrap();
    assert_eq!(vm_config["os_image_hash"], FAKE_OS_IMAGE_HASH);
    let tcb = &info["tcb_info"];
    assert_eq!(field(tcb, "app_compose"), COMPOSE);
    assert_eq!(field(tcb, "compose_hash"), compose_hash);
    assert_eq!(field(tcb, "os_image_hash"), FAKE_OS_IMAGE_HASH);
    assert_eq!(field(tcb, "device_id"), FAKE_DEVICE_ID);
    let mrs: Vec<u8> = ["mrtd", "rtmr0", "rtmr1", "rtmr2", "rtmr3"]
        .iter()
        .flat_map(|mr| {
            let bytes = hex::decode(field(tcb, mr)).unwrap();
            assert_eq!(bytes.len(), 48, "{mr}");
            bytes
        })
        .collect();
    let mr_aggregated = hex::encode(Sha256::digest(&mrs));
    assert_eq!(field(tcb, "mr_aggregated"), mr_aggregated);
    assert_eq!(field(info, "mr_aggregated"), mr_aggregated);
    // Info's log is the full one: every digest, every payload.
    let last = tcb["event_log"].as_array().unwrap().last().unwrap().clone();
    let (name, payload) = emitted;
    assert_eq!(field(&last, "event"), name);
    assert_eq!(field(&last, "event_payload"), hex::encode(payload));
    assert_eq!(field(&last, "digest"), runtime_digest(name, payload));
}

/// The emitted event reached the agent, with its payload.
fn check_emitted(agent: &StandInAgent, payload: &str) {
    assert_eq!(
        agent.emitted_events(),
        vec![("sdk-check-event".to_owned(), payload.as_bytes().to_vec())]
    );
    assert_eq!(
        agent.key_requests(),
        [(KEY_PATH.to_owned(), KEY_PURPOSE.to_owned())]
    );
}

#[test]
fn the_npm_sdk_gets_keys_quotes_info_and_emits_events() {
    node_package("@phala/dstack-sdk", NPM_SDK);
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&dir);
    // keyservice's report data is 64 bytes.
    let report_data: Vec<u8> = (0..64).collect();
    let report_hex = hex::encode(&report_data);
    let payload = "from node";
    let out = node_eval(NODE_SCRIPT, &args(&agent, &report_hex, payload));
    let got = parse(&out, "node");

    check_key(&got);
    check_quote(&got, &report_data);
    check_quoted_log(&got["event_log"], None);
    let emitted = ("sdk-check-event", payload.as_bytes());
    check_quoted_log(&got["event_log_after"], Some(emitted));
    check_info(&got["info"], emitted);
    check_emitted(&agent, payload);
    // The SDK's replay of the quote's log reproduces the boot RTMRs Info reports. (Not
    // RTMR3: the quote's runtime events come without digests, from the real agent too,
    // and this SDK version replays the empty digests.)
    let replayed: Vec<&str> = got["replayed_rtmrs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let tcb = &got["info"]["tcb_info"];
    assert_eq!(
        replayed[..3],
        [
            field(tcb, "rtmr0"),
            field(tcb, "rtmr1"),
            field(tcb, "rtmr2")
        ]
    );
}

#[test]
fn the_pypi_sdk_gets_keys_quotes_info_and_emits_events() {
    let python = venv_bin("python");
    let dir = tempfile::tempdir().unwrap();
    let agent = agent(&dir);
    // Shorter than 64 bytes: the agent pads it.
    let report_data = Sha256::digest(b"sdk-check").to_vec();
    let report_hex = hex::encode(&report_data);
    let payload = "from python";
    let out = Command::new(&python)
        .arg("-c")
        .arg(PYTHON_SCRIPT)
        .args(args(&agent, &report_hex, payload))
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", python.display()));
    assert!(
        out.status.success(),
        "python failed (run scripts/setup if dstack-sdk is missing): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = parse(&String::from_utf8(out.stdout).unwrap(), "python");
    assert_eq!(
        field(&got, "version"),
        PYPI_SDK,
        "dstack-sdk is not {PYPI_SDK}; run scripts/setup"
    );

    check_key(&got);
    check_quote(&got, &report_data);
    check_quoted_log(&got["event_log"], None);
    let emitted = ("sdk-check-event", payload.as_bytes());
    check_quoted_log(&got["event_log_after"], Some(emitted));
    check_info(&got["info"], emitted);
    check_emitted(&agent, payload);
    // The SDK's replay of Info's full log gives the RTMRs Info reports, the emitted event's
    // extension of RTMR3 included.
    let tcb = &got["info"]["tcb_info"];
    assert_eq!(
        got["replayed_info"],
        serde_json::json!([
            field(tcb, "rtmr0"),
            field(tcb, "rtmr1"),
            field(tcb, "rtmr2"),
            field(tcb, "rtmr3")
        ])
    );
}
