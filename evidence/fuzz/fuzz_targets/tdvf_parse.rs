#![no_main]
//! The TDVF metadata parser on arbitrary firmware images: never panics; parsed metadata
//! yields an MRTD (or a clean error) in both page orders.

use evidence::tdvf::{PageOrder, Tdvf};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(tdvf) = Tdvf::parse(data) {
        // Any section list, however large its declared sizes, is judged without a loop.
        if tdvf.pages_measured() > evidence::tdvf::MAX_PAGES {
            assert!(tdvf.mrtd(data, PageOrder::SinglePass).is_err());
        }
        // Keep each run short: at most 4096 pages (16 MiB of guest memory).
        if tdvf.pages_measured() <= 4096 {
            let single = tdvf.mrtd(data, PageOrder::SinglePass);
            let two = tdvf.mrtd(data, PageOrder::TwoPass);
            assert_eq!(single.is_ok(), two.is_ok());
        }
    }
});
