//! dstack event logs: parsing, digest recomputation, RTMR replay and identity extraction.
//!
//! An event log is a JSON array of `{imr, event_type, digest, event, event_payload}`. It
//! comes in two forms: with every digest filled in (`Info.tcb_info.event_log`), or with
//! empty digests for runtime events (`GetQuote`'s `event_log`). Runtime events
//! (event_type [`RUNTIME_EVENT_TYPE`]) are what identify the application, so their digests
//! are always recomputed from the name and payload — a supplied digest is never trusted, and
//! one that disagrees with the recomputation makes the log invalid. Boot-time events
//! (RTMR0–2) are replayed with their supplied digests; the replay is then compared with the
//! RTMRs of a quote whose signature was checked, which is what makes them trustworthy.
//!
//! Identity (`app-id`, `compose-hash`, `instance-id`, `key-provider`) is read only from
//! RTMR3 runtime events before `system-ready`: anything the application extends later is
//! its own business and cannot impersonate the platform's statements.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha384};

/// event_type of dstack runtime events (RTMR3 extensions by the guest).
pub const RUNTIME_EVENT_TYPE: u32 = 0x0800_0001;
/// The event that ends the platform's statements about the application.
pub const SYSTEM_READY: &str = "system-ready";

/// Why an event log is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EventLogError {
    #[error("event log is not valid JSON: {0}")]
    Json(String),
    #[error("event {index}: imr {imr} is not 0..=3")]
    BadImr { index: usize, imr: u32 },
    #[error("event {index}: {field} is not hex")]
    BadHex { index: usize, field: &'static str },
    #[error("event {index}: digest is {len} bytes, not 48")]
    BadDigestLength { index: usize, len: usize },
    #[error(
        "event {index} ({name}): supplied digest differs from the recomputed one; the log was altered"
    )]
    DigestMismatch { index: usize, name: String },
    #[error("event {index}: a {name} event appears twice before system-ready")]
    DuplicateIdentity { index: usize, name: String },
}

/// One event as it appears on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawEvent {
    pub imr: u32,
    pub event_type: u32,
    #[serde(default)]
    pub digest: String,
    #[serde(default)]
    pub event: String,
    #[serde(default)]
    pub event_payload: String,
}

/// One event after checking: its payload decoded and its digest known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub imr: u32,
    pub event_type: u32,
    pub name: String,
    pub payload: Vec<u8>,
    pub digest: [u8; 48],
}

impl Event {
    /// A runtime event with its digest computed.
    pub fn runtime(name: &str, payload: &[u8]) -> Self {
        Self {
            imr: 3,
            event_type: RUNTIME_EVENT_TYPE,
            name: name.to_owned(),
            payload: payload.to_vec(),
            digest: runtime_digest(RUNTIME_EVENT_TYPE, name, payload),
        }
    }

    /// The wire form, with the digest filled in.
    pub fn to_raw(&self) -> RawEvent {
        RawEvent {
            imr: self.imr,
            event_type: self.event_type,
            digest: hex::encode(self.digest),
            event: self.name.clone(),
            event_payload: hex::encode(&self.payload),
        }
    }
}

/// A parsed, digest-checked event log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventLog {
    pub events: Vec<Event>,
}

/// The application's identity as recorded before `system-ready`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Identity {
    /// hex of the app-id payload
    pub app_id: Option<String>,
    /// hex of the compose-hash payload
    pub compose_hash: Option<String>,
    /// hex of the instance-id payload
    pub instance_id: Option<String>,
    /// the key-provider payload as text (JSON on dstack)
    pub key_provider: Option<String>,
    /// whether `system-ready` was seen
    pub system_ready: bool,
}

/// SHA-384(u32-le(event_type) ‖ ":" ‖ name ‖ ":" ‖ payload).
pub fn runtime_digest(event_type: u32, name: &str, payload: &[u8]) -> [u8; 48] {
    let mut h = Sha384::new();
    h.update(event_type.to_le_bytes());
    h.update(b":");
    h.update(name.as_bytes());
    h.update(b":");
    h.update(payload);
    h.finalize().into()
}

/// RTMR ← SHA-384(RTMR ‖ digest).
pub fn extend(rtmr: &mut [u8; 48], digest: &[u8; 48]) {
    let mut h = Sha384::new();
    h.update(&rtmr[..]);
    h.update(digest);
    *rtmr = h.finalize().into();
}

impl EventLog {
    /// Parses the JSON text of an event log (an array of events).
    pub fn parse(json: &str) -> Result<Self, EventLogError> {
        let raw: Vec<RawEvent> =
            serde_json::from_str(json).map_err(|e| EventLogError::Json(e.to_string()))?;
        Self::from_raw(&raw)
    }

    /// Parses an event log given either as a JSON array or as a string holding one (the
    /// form `/attestation` uses).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, EventLogError> {
        match value {
            serde_json::Value::String(s) => Self::parse(s),
            other => {
                let raw: Vec<RawEvent> = serde_json::from_value(other.clone())
                    .map_err(|e| EventLogError::Json(e.to_string()))?;
                Self::from_raw(&raw)
            }
        }
    }

    /// Checks raw events: hex fields decode, IMRs are 0..=3, runtime digests are recomputed.
    pub fn from_raw(raw: &[RawEvent]) -> Result<Self, EventLogError> {
        let mut events = Vec::with_capacity(raw.len());
        for (index, e) in raw.iter().enumerate() {
            if e.imr > 3 {
                return Err(EventLogError::BadImr { index, imr: e.imr });
            }
            let payload =
                hex::decode(e.event_payload.trim()).map_err(|_| EventLogError::BadHex {
                    index,
                    field: "event_payload",
                })?;
            let supplied = if e.digest.trim().is_empty() {
                None
            } else {
                let d = hex::decode(e.digest.trim()).map_err(|_| EventLogError::BadHex {
                    index,
                    field: "digest",
                })?;
                let len = d.len();
                Some(
                    <[u8; 48]>::try_from(d.as_slice())
                        .map_err(|_| EventLogError::BadDigestLength { index, len })?,
                )
            };
            let digest = if e.event_type == RUNTIME_EVENT_TYPE {
                let computed = runtime_digest(e.event_type, &e.event, &payload);
                if let Some(s) = supplied
                    && s != computed
                {
                    return Err(EventLogError::DigestMismatch {
                        index,
                        name: e.event.clone(),
                    });
                }
                computed
            } else {
                supplied.ok_or(EventLogError::BadDigestLength { index, len: 0 })?
            };
            events.push(Event {
                imr: e.imr,
                event_type: e.event_type,
                name: e.event.clone(),
                payload,
                digest,
            });
        }
        Ok(Self { events })
    }

    /// Replays the log: RTMR0–3 from 48 zero bytes.
    pub fn replay(&self) -> [[u8; 48]; 4] {
        let mut rtmrs = [[0u8; 48]; 4];
        for e in &self.events {
            // imr was checked to be 0..=3 when the log was built.
            if let Some(r) = rtmrs.get_mut(e.imr as usize) {
                extend(r, &e.digest);
            }
        }
        rtmrs
    }

    /// The identity statements made before `system-ready`.
    pub fn identity(&self) -> Result<Identity, EventLogError> {
        let mut id = Identity::default();
        for (index, e) in self.events.iter().enumerate() {
            if e.imr != 3 || e.event_type != RUNTIME_EVENT_TYPE {
                continue;
            }
            if e.name == SYSTEM_READY {
                id.system_ready = true;
                break;
            }
            let slot = match e.name.as_str() {
                "app-id" => &mut id.app_id,
                "compose-hash" => &mut id.compose_hash,
                "instance-id" => &mut id.instance_id,
                "key-provider" => &mut id.key_provider,
                _ => continue,
            };
            if slot.is_some() {
                return Err(EventLogError::DuplicateIdentity {
                    index,
                    name: e.name.clone(),
                });
            }
            *slot = Some(if e.name == "key-provider" {
                String::from_utf8_lossy(&e.payload).into_owned()
            } else {
                hex::encode(&e.payload)
            });
        }
        Ok(id)
    }

    /// The wire form (digests filled in).
    pub fn to_json(&self) -> String {
        let raw: Vec<RawEvent> = self.events.iter().map(Event::to_raw).collect();
        serde_json::to_string(&raw).unwrap_or_else(|_| "[]".to_owned())
    }
}
