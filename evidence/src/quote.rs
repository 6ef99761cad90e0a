//! TDX quote parsing (versions 4 and 5): the header, the TD report body and the signature
//! section. Parsing never trusts the quote: it only slices bytes, checking every length, so
//! it is safe on hostile input (fuzzed in `fuzz/`). Whether the quote is genuine is decided
//! by [`crate::verify`].
//!
//! Layout (v4): a 48-byte header, the 584-byte TD report at offset 48 (mr_td at 184,
//! rtmr0..3 at 376/424/472/520, report_data at 568..632), then a u32 length and the
//! signature data. The signed region is bytes 0..632. v5 inserts a body descriptor
//! (u16 type, u32 size) after the header; type 2 is a TD report 1.0, type 3 a TD report 1.5
//! (64 more bytes: tee_tcb_svn2 and mr_servicetd).

use serde::Serialize;

/// TEE type of TDX in the quote header.
pub const TEE_TYPE_TDX: u32 = 0x81;
/// Length of the quote header.
pub const HEADER_LEN: usize = 48;
/// Length of a TD report 1.0 body.
pub const TD_REPORT10_LEN: usize = 584;
/// Length of a TD report 1.5 body.
pub const TD_REPORT15_LEN: usize = 648;
/// Marker in the header's `user_data` field of quotes made by the `simulated` provider.
pub const SIMULATED_MARKER: &[u8; 17] = b"SIMULATED-TDX-DEV";

/// Why bytes are not a TDX quote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuoteParseError {
    #[error("quote is truncated: {what} needs {need} bytes, {have} present")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("unsupported quote version {0} (only 4 and 5)")]
    UnsupportedVersion(u16),
    #[error("not a TDX quote (tee_type {0:#x})")]
    NotTdx(u32),
    #[error("unsupported v5 body type {0}")]
    UnsupportedBodyType(u16),
    #[error("v5 body size {size} does not match body type {body_type}")]
    BodySizeMismatch { body_type: u16, size: u32 },
}

/// The quote header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuoteHeader {
    pub version: u16,
    pub attestation_key_type: u16,
    pub tee_type: u32,
    pub qe_svn: u16,
    pub pce_svn: u16,
    #[serde(with = "hex_bytes")]
    pub qe_vendor_id: [u8; 16],
    #[serde(with = "hex_bytes")]
    pub user_data: [u8; 20],
}

/// The TD report body: the measurements a verifier compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TdReport {
    #[serde(with = "hex_bytes")]
    pub tee_tcb_svn: [u8; 16],
    #[serde(with = "hex_bytes")]
    pub mr_seam: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub mr_signer_seam: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub seam_attributes: [u8; 8],
    #[serde(with = "hex_bytes")]
    pub td_attributes: [u8; 8],
    #[serde(with = "hex_bytes")]
    pub xfam: [u8; 8],
    #[serde(with = "hex_bytes")]
    pub mr_td: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub mr_config_id: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub mr_owner: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub mr_owner_config: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub rtmr0: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub rtmr1: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub rtmr2: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub rtmr3: [u8; 48],
    #[serde(with = "hex_bytes")]
    pub report_data: [u8; 64],
}

impl TdReport {
    /// RTMR `i` (0..=3).
    pub fn rtmr(&self, i: usize) -> Option<&[u8; 48]> {
        match i {
            0 => Some(&self.rtmr0),
            1 => Some(&self.rtmr1),
            2 => Some(&self.rtmr2),
            3 => Some(&self.rtmr3),
            _ => None,
        }
    }
}

/// A parsed TDX quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TdxQuote {
    pub header: QuoteHeader,
    pub report: TdReport,
    /// Length of the region the quoting enclave signed (header + body).
    pub signed_len: usize,
    /// The signature data after the u32 length (ECDSA signature, QE report, certification
    /// data; for simulated quotes the dev-key signature).
    #[serde(skip)]
    pub signature_data: Vec<u8>,
}

impl TdxQuote {
    /// Parses a v4 or v5 TDX quote. Bytes after the signature data are ignored (dstack pads
    /// its quotes with zeros).
    pub fn parse(bytes: &[u8]) -> Result<Self, QuoteParseError> {
        let mut r = Reader::new(bytes);
        let version = r.u16("header")?;
        let attestation_key_type = r.u16("header")?;
        let tee_type = r.u32("header")?;
        let qe_svn = r.u16("header")?;
        let pce_svn = r.u16("header")?;
        let qe_vendor_id = r.array::<16>("header")?;
        let user_data = r.array::<20>("header")?;
        let header = QuoteHeader {
            version,
            attestation_key_type,
            tee_type,
            qe_svn,
            pce_svn,
            qe_vendor_id,
            user_data,
        };
        if version != 4 && version != 5 {
            return Err(QuoteParseError::UnsupportedVersion(version));
        }
        if tee_type != TEE_TYPE_TDX {
            return Err(QuoteParseError::NotTdx(tee_type));
        }
        let body_len = if version == 5 {
            let body_type = r.u16("v5 body descriptor")?;
            let size = r.u32("v5 body descriptor")?;
            let expected = match body_type {
                2 => TD_REPORT10_LEN,
                3 => TD_REPORT15_LEN,
                other => return Err(QuoteParseError::UnsupportedBodyType(other)),
            };
            if usize::try_from(size).ok() != Some(expected) {
                return Err(QuoteParseError::BodySizeMismatch { body_type, size });
            }
            expected
        } else {
            TD_REPORT10_LEN
        };
        let body_start = r.pos;
        let report = TdReport {
            tee_tcb_svn: r.array("TD report")?,
            mr_seam: r.array("TD report")?,
            mr_signer_seam: r.array("TD report")?,
            seam_attributes: r.array("TD report")?,
            td_attributes: r.array("TD report")?,
            xfam: r.array("TD report")?,
            mr_td: r.array("TD report")?,
            mr_config_id: r.array("TD report")?,
            mr_owner: r.array("TD report")?,
            mr_owner_config: r.array("TD report")?,
            rtmr0: r.array("TD report")?,
            rtmr1: r.array("TD report")?,
            rtmr2: r.array("TD report")?,
            rtmr3: r.array("TD report")?,
            report_data: r.array("TD report")?,
        };
        // TD report 1.5 carries tee_tcb_svn2 and mr_servicetd after report_data.
        r.skip(body_start + body_len - r.pos, "TD report 1.5")?;
        let signed_len = r.pos;
        let sig_len = r.u32("signature length")?;
        let sig_len = usize::try_from(sig_len).unwrap_or(usize::MAX);
        let signature_data = r.take(sig_len, "signature data")?.to_vec();
        Ok(Self {
            header,
            report,
            signed_len,
            signature_data,
        })
    }

    /// True if the quote carries the `simulated` provider's marker.
    pub fn is_simulated(&self) -> bool {
        self.header.user_data.starts_with(SIMULATED_MARKER)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], QuoteParseError> {
        let have = self.bytes.len().saturating_sub(self.pos);
        if n > have {
            return Err(QuoteParseError::Truncated {
                what,
                need: n,
                have,
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn skip(&mut self, n: usize, what: &'static str) -> Result<(), QuoteParseError> {
        self.take(n, what).map(|_| ())
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], QuoteParseError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, QuoteParseError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, QuoteParseError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
}

/// Why [`decode_quote_text`] could not decode a quote.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QuoteTextError {
    #[error("quote array: {0}")]
    Array(#[source] serde_json::Error),
    #[error("quote hex: {0}")]
    Hex(#[source] hex::FromHexError),
}

/// Decodes a quote given as hex (optionally `0x`-prefixed) or as a JSON array of bytes.
pub fn decode_quote_text(text: &str) -> Result<Vec<u8>, QuoteTextError> {
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str::<Vec<u8>>(t).map_err(QuoteTextError::Array);
    }
    let t = t.strip_prefix("0x").unwrap_or(t);
    hex::decode(t).map_err(QuoteTextError::Hex)
}

/// Serde helper: fixed byte arrays as lowercase hex strings.
pub(crate) mod hex_bytes {
    use serde::Serializer;

    pub fn serialize<S: Serializer, const N: usize>(v: &[u8; N], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex::encode(v))
    }
}
