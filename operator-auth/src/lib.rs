//! Signed operator requests.
//!
//! The day-2 tasks of a deployed appliance (inspect, back up, export the sealed root,
//! reseal it for an upgrade) run without a shell in the CVM: the operator's client sends
//! them over attested TLS, each carrying a short text signed by an operator's Ethereum key
//! with EIP-191 (`personal_sign`, what every wallet signs):
//!
//! ```text
//! appliance operator request
//! action: reseal
//! target: 0x<64 hex>
//! app: 0x<40 hex>
//! compose hash: 0x<64 hex>
//! issued at: 1764300000
//! nonce: 0x<32 hex>
//! ```
//!
//! (`target` only for `reseal`.) The text names the app and the compose hash the client
//! verified in the deployment's evidence, so a signature is good only for that app running
//! that code; `issued at` (Unix seconds) and `nonce` make it good once, within
//! [`WINDOW_SECS`] of the server's clock. The format is strict: exactly these lines in this
//! order, lower-case hex, no trailing newline ([`OperatorRequest::parse`] renders what it
//! parsed and refuses any text that differs), so one request has exactly one text.
//!
//! The operators are the addresses in the measured configuration (`[operator] addresses`
//! of `appliance.toml`): whoever can change them changes the compose hash.
//! [`Verifier`] checks a request against them; the appliance checks every operator
//! request, and keyservice checks again the ones that reach a key (reseal), with its own
//! replay memory, so a compromised front end cannot reseal the root by itself.
//!
//! May depend on: no workspace crate: it is a vocabulary the front end, the key process
//! and the command line share.

mod request;
mod signature;
mod verify;

pub use request::{Action, MAX_TEXT_LEN, OperatorRequest, PREAMBLE, ParseError};
pub use signature::{
    Address, SIGNATURE_LEN, SignatureError, address_of, eip191_digest, recover, sign,
};
pub use verify::{Authorized, Binding, MAX_REMEMBERED, Verifier, VerifyError, WINDOW_SECS};
