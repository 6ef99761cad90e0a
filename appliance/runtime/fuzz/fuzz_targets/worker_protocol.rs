#![no_main]
//! The appliance ↔ action-worker protocol on an arbitrary byte stream, read both ways: as
//! the worker reads the appliance (`ToWorker` frames through the blocking `FrameReader`) and
//! as the appliance reads a worker (`frame_len` on a header, then `decode` of `FromWorker`).
//! Never a panic; the length limit holds; every message that decodes encodes to a frame
//! that decodes to the same message (numbers with a fraction aside: JSON text does not
//! carry every `f64` exactly through serde_json's default parser).

use action_runtime::protocol::{
    FrameReader, FromWorker, HEADER_LEN, MAX_FRAME_LEN, ProtocolError, ToWorker, decode, encode,
    frame_len,
};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn has_fraction(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_fraction),
        Value::Object(map) => map.values().any(has_fraction),
        _ => false,
    }
}

fn round_trips<M>(msg: &M)
where
    M: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let frame = encode(msg).expect("a decoded message re-encodes");
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&frame[..HEADER_LEN]);
    let len = frame_len(header).expect("an encoded frame is within the limit");
    assert_eq!(len, frame.len() - HEADER_LEN);
    let again: M = decode(&frame[HEADER_LEN..]).expect("an encoded frame decodes");
    let exact = serde_json::to_value(msg).is_ok_and(|v| !has_fraction(&v));
    if exact {
        assert_eq!(&again, msg);
    }
}

/// Every frame of `data` as `M`, through the worker's blocking reader.
fn read_stream<M>(data: &[u8])
where
    M: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let mut reader = FrameReader::new(data);
    loop {
        match reader.read::<M>() {
            Ok(Some(msg)) => round_trips(&msg),
            Ok(None) => break,
            Err(ProtocolError::FrameTooLarge(n)) => {
                assert!(n > MAX_FRAME_LEN);
                break;
            }
            // Malformed JSON ends the stream as the worker would (exit and be replaced).
            Err(_) => break,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    read_stream::<ToWorker>(data);
    read_stream::<FromWorker>(data);
    // The input as one frame body, as the appliance decodes a worker's frame.
    if let Ok(msg) = decode::<FromWorker>(data) {
        round_trips(&msg);
    }
    if let Ok(msg) = decode::<ToWorker>(data) {
        round_trips(&msg);
    }
    // The input's first four bytes as a header.
    if let Some(head) = data.get(..HEADER_LEN) {
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(head);
        let announced = u32::from_be_bytes(header) as usize;
        match frame_len(header) {
            Ok(len) => assert!(len == announced && len <= MAX_FRAME_LEN),
            Err(_) => assert!(announced > MAX_FRAME_LEN),
        }
    }
});
