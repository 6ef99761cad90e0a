#![no_main]
//! The keyservice socket protocol on an arbitrary byte stream, as either end reads it:
//! frames are cut by the buffered `FrameReader` (the client) and by `read_frame` (the
//! one-frame reader), which must agree; every frame respects the length limits, its header
//! re-encodes to the same bytes, and every request or response payload that decodes
//! re-encodes to exactly the bytes it came from (the format has one encoding per value).

use std::pin::pin;
use std::task::{Context, Poll, Waker};

use keyservice_api::codec::{FrameHeader, FrameReader, encode_frame, read_frame};
use keyservice_api::protocol::{HEADER_LEN, MAX_FRAME_LEN, Op, Request, Response};
use libfuzzer_sys::fuzz_target;

/// Runs a future whose reads come from a byte slice: such reads never wait, so polling
/// until ready needs no runtime.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn check_frame(body: &[u8]) {
    assert!(body.len() >= HEADER_LEN && body.len() <= MAX_FRAME_LEN);
    let header = FrameHeader::parse(body).expect("a frame holds a header");
    let payload = &body[HEADER_LEN..];
    let mut again = Vec::new();
    let len = encode_frame(&mut again, header, |b| b.extend_from_slice(payload));
    assert_eq!(len, body.len());
    assert_eq!(&again[4..], body);
    assert_eq!(&again[..4], &(body.len() as u32).to_be_bytes());

    let Some(op) = Op::from_u8(header.op) else {
        return;
    };
    if let Ok(req) = Request::decode(op, payload) {
        assert_eq!(req.op(), op);
        let mut buf = Vec::new();
        req.encode_payload(&mut buf);
        assert_eq!(buf, payload, "{op:?} request re-encodes differently");
        assert_eq!(Request::decode(op, &buf).as_ref(), Ok(&req));
    }
    if let Ok(resp) = Response::decode(op, payload) {
        let mut buf = Vec::new();
        resp.encode_payload(&mut buf);
        assert_eq!(buf, payload, "{op:?} response re-encodes differently");
    }
}

fuzz_target!(|data: &[u8]| {
    // The buffered reader (the client's side of the socket).
    let mut buffered = Vec::new();
    block_on(async {
        let mut reader = FrameReader::new(data);
        while let Ok(Some(body)) = reader.next_frame().await {
            buffered.push(body.to_vec());
        }
    });
    // The one-frame reader: the same frames, in the same order.
    let mut single = Vec::new();
    block_on(async {
        let mut rest = data;
        while let Ok(Some(body)) = read_frame(&mut rest).await {
            single.push(body.to_vec());
        }
    });
    assert_eq!(buffered, single, "the two frame readers disagree");
    for body in &buffered {
        check_frame(body);
    }
    // The input as one frame body as well, so payload decoding is reached directly.
    if data.len() >= HEADER_LEN && data.len() <= MAX_FRAME_LEN {
        check_frame(data);
    }
});
