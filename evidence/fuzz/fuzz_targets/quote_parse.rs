#![no_main]
//! The quote parser on arbitrary bytes: never panics; what parses re-parses identically
//! from its own signed region plus signature.

use evidence::quote::{TdxQuote, decode_quote_text};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(q) = TdxQuote::parse(data) {
        assert!(q.signed_len <= data.len());
        let _ = q.is_simulated();
        let again = TdxQuote::parse(data).ok();
        assert_eq!(again.as_ref(), Some(&q));
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(bytes) = decode_quote_text(text)
    {
        let _ = TdxQuote::parse(&bytes);
    }
});
