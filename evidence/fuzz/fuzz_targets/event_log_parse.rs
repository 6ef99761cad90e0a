#![no_main]
//! The event-log parser on arbitrary text: never panics; a parsed log replays, yields an
//! identity or a clean error, and round-trips through its wire form.

use evidence::event_log::EventLog;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(log) = EventLog::parse(text) {
        let rtmrs = log.replay();
        let _ = log.identity();
        let again = EventLog::parse(&log.to_json()).expect("wire form re-parses");
        assert_eq!(again.replay(), rtmrs);
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = EventLog::from_value(&v);
    }
});
