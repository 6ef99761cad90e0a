//! Framing: `len:u32be ‖ version:u8 ‖ op:u8 ‖ status:u8 ‖ id:u64be ‖ payload`.
//!
//! `len` counts everything after itself (header + payload) and must be in
//! `HEADER_LEN..=MAX_FRAME_LEN`; anything else is a framing error after which the stream
//! cannot be trusted and is closed. The request id is chosen by the client and echoed in
//! the response, which is what lets many requests be in flight on one connection.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use zeroize::{Zeroize, Zeroizing};

use crate::protocol::{HEADER_LEN, MAX_FRAME_LEN, PROTOCOL_VERSION};

/// The fixed part of every frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FrameHeader {
    pub version: u8,
    /// [`crate::protocol::Op`] as a byte (a response echoes the request's op).
    pub op: u8,
    /// 0 in requests and successful responses, else an [`crate::protocol::ErrorCode`].
    pub status: u8,
    /// Chosen by the client, echoed by the server; 0 is reserved for connection errors.
    pub id: u64,
}

impl FrameHeader {
    pub fn new(op: u8, status: u8, id: u64) -> Self {
        Self {
            version: PROTOCOL_VERSION,
            op,
            status,
            id,
        }
    }

    pub fn parse(body: &[u8]) -> Option<Self> {
        if body.len() < HEADER_LEN {
            return None;
        }
        let mut id = [0u8; 8];
        id.copy_from_slice(&body[3..11]);
        Some(Self {
            version: body[0],
            op: body[1],
            status: body[2],
            id: u64::from_be_bytes(id),
        })
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length {0} exceeds the {MAX_FRAME_LEN}-byte limit")]
    TooLarge(usize),
    #[error("frame length {0} is shorter than the {HEADER_LEN}-byte header")]
    TooShort(usize),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
}

/// Appends one complete frame (length prefix included) to `buf`.
///
/// `payload` writes the payload; the length prefix is patched afterwards. Returns the
/// body length so callers can enforce [`MAX_FRAME_LEN`] before sending.
pub fn encode_frame(
    buf: &mut Vec<u8>,
    header: FrameHeader,
    payload: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 4]);
    buf.push(header.version);
    buf.push(header.op);
    buf.push(header.status);
    buf.extend_from_slice(&header.id.to_be_bytes());
    payload(buf);
    let body_len = buf.len() - start - 4;
    let prefix = u32::try_from(body_len).unwrap_or(u32::MAX).to_be_bytes();
    buf[start..start + 4].copy_from_slice(&prefix);
    body_len
}

/// Checks a length prefix against the limits.
pub fn check_len(len: u32) -> Result<usize, FrameError> {
    let len = len as usize;
    if len > MAX_FRAME_LEN {
        Err(FrameError::TooLarge(len))
    } else if len < HEADER_LEN {
        Err(FrameError::TooShort(len))
    } else {
        Ok(len)
    }
}

/// Reads one frame body (header + payload, without the length prefix).
///
/// Returns `Ok(None)` on a clean end of stream at a frame boundary. The body buffer is
/// zeroized on drop because responses can carry exported keys.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<Zeroizing<Vec<u8>>>, FrameError> {
    let mut prefix = [0u8; 4];
    match r.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            // Distinguish "closed between frames" from "closed inside a length prefix" is
            // not worth a partial-read loop: both simply end the connection.
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    }
    let len = check_len(u32::from_be_bytes(prefix))?;
    let mut body = Zeroizing::new(vec![0u8; len]);
    match r.read_exact(&mut body).await {
        Ok(_) => Ok(Some(body)),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(FrameError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// A buffered frame reader whose buffer is wiped as frames are consumed, so answers that
/// carry exported keys or random secrets do not linger in a read buffer (as they would in a
/// `BufReader`).
pub struct FrameReader<R> {
    inner: R,
    buf: Zeroizing<Vec<u8>>,
    start: usize,
    end: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: Zeroizing::new(vec![0u8; 2 * (MAX_FRAME_LEN + 4)]),
            start: 0,
            end: 0,
        }
    }

    /// The next frame body (header + payload); `Ok(None)` on a clean end of stream.
    pub async fn next_frame(&mut self) -> Result<Option<Zeroizing<Vec<u8>>>, FrameError> {
        loop {
            let avail = self.end - self.start;
            let mut need = 4;
            if avail >= 4 {
                let mut prefix = [0u8; 4];
                prefix.copy_from_slice(&self.buf[self.start..self.start + 4]);
                let len = check_len(u32::from_be_bytes(prefix))?;
                need = 4 + len;
                if avail >= need {
                    let body_start = self.start + 4;
                    let body = Zeroizing::new(self.buf[body_start..body_start + len].to_vec());
                    self.buf[self.start..self.start + need].zeroize();
                    self.start += need;
                    if self.start == self.end {
                        self.start = 0;
                        self.end = 0;
                    }
                    return Ok(Some(body));
                }
            }
            if self.buf.len() - self.start < need {
                // Move the partial frame to the front and wipe where it was.
                self.buf.copy_within(self.start..self.end, 0);
                let old = self.start;
                self.end -= old;
                self.start = 0;
                let wipe_from = self.end.max(old);
                self.buf[wipe_from..self.end + old].zeroize();
            }
            let n = self.inner.read(&mut self.buf[self.end..]).await?;
            if n == 0 {
                return if self.start == self.end {
                    Ok(None)
                } else {
                    Err(FrameError::Truncated)
                };
            }
            self.end += n;
        }
    }
}

/// Writes queued frames until every sender is gone, coalescing whatever is queued into
/// one write (up to [`MAX_FRAME_LEN`]) and wiping each batch once written (frames can carry
/// keys). Each write must finish within `write_timeout`. Used by both ends.
pub async fn write_frames<W: AsyncWrite + Unpin>(
    wr: &mut W,
    rx: &mut mpsc::Receiver<Vec<u8>>,
    write_timeout: Duration,
) -> io::Result<()> {
    // Room for one largest frame (its length prefix too): a batch never reallocates, so no
    // unwiped copy of an answer is left behind in freed memory.
    let mut buf: Vec<u8> = Vec::with_capacity(MAX_FRAME_LEN + 4);
    let mut next: Option<Vec<u8>> = None;
    loop {
        let first = match next.take() {
            Some(frame) => frame,
            None => match rx.recv().await {
                Some(frame) => frame,
                None => break,
            },
        };
        take_into(&mut buf, first);
        while let Ok(frame) = rx.try_recv() {
            if buf.len() + frame.len() > buf.capacity() {
                next = Some(frame);
                break;
            }
            take_into(&mut buf, frame);
        }
        let written = tokio::time::timeout(write_timeout, wr.write_all(&buf)).await;
        // Wipe the bytes this batch used, not the capacity: `Vec::zeroize` would write all
        // of it one volatile byte at a time after every answer (it was about half of
        // keyservice's time per TLS signature). Past `len` the buffer only holds bytes an
        // earlier batch already wiped.
        buf.as_mut_slice().zeroize();
        buf.clear();
        match written {
            Ok(result) => result?,
            Err(_) => {
                if let Some(mut frame) = next {
                    frame.zeroize();
                }
                return Err(io::Error::new(io::ErrorKind::TimedOut, "write timed out"));
            }
        }
    }
    wr.shutdown().await
}

/// Appends `frame` to the batch and wipes it. Callers only add to a non-empty batch what
/// fits its room; a first frame larger than the room (the encoder never makes one) grows
/// the empty, already wiped buffer.
fn take_into(buf: &mut Vec<u8>, mut frame: Vec<u8>) {
    if buf.len() + frame.len() > buf.capacity() {
        debug_assert!(buf.is_empty());
        buf.reserve(frame.len());
    }
    buf.extend_from_slice(&frame);
    frame.zeroize();
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frame_round_trip_and_limits() {
        let mut buf = Vec::new();
        let n = encode_frame(&mut buf, FrameHeader::new(4, 0, 42), |b| {
            b.extend_from_slice(b"hello")
        });
        assert_eq!(n, HEADER_LEN + 5);
        let mut cursor = &buf[..];
        let body = read_frame(&mut cursor).await.unwrap().unwrap();
        let h = FrameHeader::parse(&body).unwrap();
        assert_eq!(h, FrameHeader::new(4, 0, 42));
        assert_eq!(&body[HEADER_LEN..], b"hello");
        assert!(read_frame(&mut cursor).await.unwrap().is_none());

        let huge = ((MAX_FRAME_LEN + 1) as u32).to_be_bytes();
        assert!(matches!(
            read_frame(&mut &huge[..]).await,
            Err(FrameError::TooLarge(_))
        ));
        let tiny = 3u32.to_be_bytes();
        assert!(matches!(
            read_frame(&mut &tiny[..]).await,
            Err(FrameError::TooShort(3))
        ));
        // The same frames through FrameReader, byte by byte and in one go.
        let mut two = buf.clone();
        two.extend_from_slice(&buf);
        let mut fr = FrameReader::new(&two[..]);
        for _ in 0..2 {
            let body = fr.next_frame().await.unwrap().unwrap();
            assert_eq!(&body[HEADER_LEN..], b"hello");
        }
        assert!(fr.next_frame().await.unwrap().is_none());
        let mut fr = FrameReader::new(&two[..7]);
        assert!(matches!(fr.next_frame().await, Err(FrameError::Truncated)));

        // Big frames force the buffer to compact partial frames.
        let mut big = Vec::new();
        for i in 0..5u8 {
            encode_frame(&mut big, FrameHeader::new(1, 0, u64::from(i)), |b| {
                b.extend(std::iter::repeat_n(i, 50_000))
            });
        }
        let mut fr = FrameReader::new(&big[..]);
        for i in 0..5u8 {
            let body = fr.next_frame().await.unwrap().unwrap();
            assert_eq!(FrameHeader::parse(&body).unwrap().id, u64::from(i));
            assert!(body[HEADER_LEN..].iter().all(|&b| b == i));
        }
        assert!(fr.next_frame().await.unwrap().is_none());

        let half = &buf[..8];
        assert!(matches!(
            read_frame(&mut &half[..]).await,
            Err(FrameError::Truncated)
        ));
    }

    /// Queued answers larger together than one batch all arrive, whole and in order (a
    /// frame that does not fit the batch waits for the next write), and the stream ends
    /// cleanly when the senders are gone.
    #[tokio::test]
    async fn queued_frames_larger_than_a_batch_arrive_whole_and_in_order() {
        let (tx, mut rx) = mpsc::channel(16);
        let payload = |i: u8| vec![i; MAX_FRAME_LEN / 3];
        for i in 0..7u8 {
            let mut frame = Vec::new();
            encode_frame(&mut frame, FrameHeader::new(4, 0, u64::from(i)), |b| {
                b.extend_from_slice(&payload(i))
            });
            tx.send(frame).await.unwrap();
        }
        // The largest frame the protocol allows fits one batch on its own.
        let mut largest = Vec::new();
        encode_frame(&mut largest, FrameHeader::new(4, 0, 7), |b| {
            b.extend_from_slice(&vec![0xAB; MAX_FRAME_LEN - HEADER_LEN])
        });
        tx.send(largest).await.unwrap();
        drop(tx);
        let (mut client, mut server) = tokio::io::duplex(4096);
        let writer = tokio::spawn(async move {
            write_frames(&mut server, &mut rx, Duration::from_secs(5)).await
        });
        let mut reader = FrameReader::new(&mut client);
        for i in 0..7u8 {
            let body = reader.next_frame().await.unwrap().unwrap();
            assert_eq!(FrameHeader::parse(&body).unwrap().id, u64::from(i));
            assert_eq!(&body[HEADER_LEN..], payload(i).as_slice());
        }
        let body = reader.next_frame().await.unwrap().unwrap();
        assert_eq!(body.len(), MAX_FRAME_LEN);
        assert!(body[HEADER_LEN..].iter().all(|&b| b == 0xAB));
        assert!(reader.next_frame().await.unwrap().is_none());
        writer.await.unwrap().unwrap();
    }
}
