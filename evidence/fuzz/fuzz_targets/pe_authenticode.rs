#![no_main]
//! The kernel measurement on arbitrary images: the Authenticode hash and QEMU's setup
//! header patch never panic, and the patch keeps the image's length.

use evidence::kernel::{QEMU_ACPI_DATA_SIZE, authenticode_sha384, qemu_patched_kernel};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = authenticode_sha384(data);
    let Some((head, kernel)) = data.split_first_chunk::<12>() else {
        return;
    };
    let initrd = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let memory = u64::from_le_bytes([
        head[4], head[5], head[6], head[7], head[8], head[9], head[10], head[11],
    ]);
    if let Ok(patched) = qemu_patched_kernel(kernel, u64::from(initrd), memory, QEMU_ACPI_DATA_SIZE)
    {
        assert_eq!(patched.len(), kernel.len());
        let _ = authenticode_sha384(&patched);
    }
});
