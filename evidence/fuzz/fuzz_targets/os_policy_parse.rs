#![no_main]
//! The OS measurement inputs on arbitrary text: policy files, `vm_config` and
//! `sha256sum.txt` never panic; a parsed policy re-parses from its own serialization.

use evidence::os_image::{OsPolicy, VmConfig, parse_checksums, parse_memory_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(policy) = OsPolicy::parse(data) {
        let json = serde_json::to_vec(&policy).expect("a policy serializes");
        let again = OsPolicy::parse(&json).expect("its serialization re-parses");
        assert_eq!(again.entries.len(), policy.entries.len());
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(vm) = VmConfig::parse(text) {
        let _ = vm.image_name_info();
        let _ = vm.shape.differences(&vm.shape);
    }
    let _ = parse_checksums(text);
    let _ = parse_memory_size(text);
});
