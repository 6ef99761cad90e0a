//! What dstack's firmware measures of the kernel, its command line and initrd into RTMR1
//! and RTMR2, recomputed from the files.
//!
//! * RTMR1: the Authenticode SHA-384 of the kernel image as the firmware loads it — the
//!   bzImage after QEMU patched its Linux boot-protocol setup header
//!   ([`qemu_patched_kernel`]) — then the firmware's fixed events: the action
//!   "Calling EFI Application from Boot Option", the separator (four zero bytes), and the
//!   actions "Exit Boot Services Invocation" and "Exit Boot Services Returned with
//!   Success" ([`rtmr1_log`]).
//! * RTMR2: the kernel command line as UTF-16LE with a terminating NUL (the image's
//!   command line followed by ` initrd=initrd`, which the firmware appends), then the
//!   SHA-384 of the initrd file ([`rtmr2_log`]).
//!
//! The event sequence and the QEMU patch are those dstack-mr computes (in
//! github.com/Dstack-TEE/dstack, `dstack/dstack-mr`), confirmed against a real quote and
//! event log in this crate's tests; the Authenticode hash follows the PE format (Microsoft Authenticode):
//! the headers up to `SizeOfHeaders` without the checksum field and the certificate-table
//! directory entry, then every section's raw data in file order, then — only when the
//! image has a certificate table — the bytes after the sections that are not the
//! certificate table; finally zero bytes up to a multiple of 8 of the file size.

use sha2::{Digest, Sha384};

use crate::le;

/// QEMU's ACPI data reservation below the top of low memory (`acpi_data_size`).
pub const QEMU_ACPI_DATA_SIZE: u32 = 0x28000;
/// From this guest memory size up, QEMU's q35 machine splits memory at 2 GiB, else at
/// 2.75 GiB (`0xB0000000`).
const Q35_HIGH_MEMORY_SPLIT: u64 = 0xB000_0000;
/// The suffix the firmware adds to the image's kernel command line.
pub const FIRMWARE_CMDLINE_SUFFIX: &str = " initrd=initrd";

/// The firmware's fixed RTMR1 events after the kernel (EV_EFI_ACTION strings, and the
/// separator between them).
const CALLING_EFI_APPLICATION: &[u8] = b"Calling EFI Application from Boot Option";
const EXIT_BOOT_SERVICES: &[u8] = b"Exit Boot Services Invocation";
const EXIT_BOOT_SERVICES_OK: &[u8] = b"Exit Boot Services Returned with Success";

/// Why a kernel image cannot be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    #[error("not a PE image: {0}")]
    NotPe(&'static str),
    #[error("the kernel image is too short for a Linux setup header")]
    TooShort,
    #[error("the kernel's boot protocol is too old to load an initrd")]
    TooOldForInitrd,
    #[error("the initrd ({0} bytes) does not fit below the initrd limit")]
    InitrdTooLarge(u64),
    #[error("the memory size leaves no room for QEMU's ACPI data")]
    MemoryTooSmall,
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, KernelError> {
    le::u16_at(b, at).ok_or(KernelError::NotPe("truncated header"))
}
fn u32_at(b: &[u8], at: usize) -> Result<u32, KernelError> {
    le::u32_at(b, at).ok_or(KernelError::NotPe("truncated header"))
}

/// The Authenticode SHA-384 of PE image `pe` (see the module documentation).
pub fn authenticode_sha384(pe: &[u8]) -> Result<[u8; 48], KernelError> {
    let pe_at = u32_at(pe, 0x3c)? as usize;
    if pe.get(pe_at..pe_at.saturating_add(4)) != Some(b"PE\0\0".as_slice()) {
        return Err(KernelError::NotPe("no PE signature"));
    }
    let coff = pe_at + 4;
    let sections = usize::from(u16_at(pe, coff + 2)?);
    let optional_size = usize::from(u16_at(pe, coff + 16)?);
    let optional = coff + 20;
    let data_dirs = match u16_at(pe, optional)? {
        0x10b => optional + 96,
        0x20b => optional + 112,
        _ => return Err(KernelError::NotPe("unknown optional header magic")),
    };
    let checksum = optional + 64;
    // Data directory 4: the certificate table (file offset, size).
    let cert_dir = data_dirs + 4 * 8;
    let headers_size = u32_at(pe, optional + 60)? as usize;
    let cert_at = u32_at(pe, cert_dir)? as usize;
    let cert_size = u32_at(pe, cert_dir + 4)? as usize;
    if !(checksum + 4 <= cert_dir && cert_dir + 8 <= headers_size && headers_size <= pe.len()) {
        return Err(KernelError::NotPe("inconsistent header sizes"));
    }
    let mut h = Sha384::new();
    h.update(&pe[..checksum]);
    h.update(&pe[checksum + 4..cert_dir]);
    h.update(&pe[cert_dir + 8..headers_size]);
    let mut hashed = headers_size;
    let table = optional + optional_size;
    let mut raw: Vec<(usize, usize)> = Vec::with_capacity(sections.min(96));
    for i in 0..sections {
        let at = table + 40 * i;
        let size = u32_at(pe, at + 16)? as usize;
        let offset = u32_at(pe, at + 20)? as usize;
        if size > 0 {
            raw.push((offset, size));
        }
    }
    raw.sort_by_key(|&(offset, _)| offset);
    for (offset, size) in raw {
        // A section running past the end of the file is hashed as far as it goes.
        let end = offset.saturating_add(size).min(pe.len());
        if offset < end {
            h.update(&pe[offset..end]);
        }
        hashed = hashed.saturating_add(size);
    }
    if cert_at > 0 && cert_size > 0 && pe.len() > hashed {
        let extra = (pe.len() - hashed).saturating_sub(cert_size);
        if extra > 0 {
            h.update(&pe[hashed..hashed + extra]);
        }
    }
    let rem = pe.len() % 8;
    if rem != 0 {
        h.update(&[0u8; 8][..8 - rem]);
    }
    Ok(h.finalize().into())
}

/// The kernel image as QEMU hands it to the firmware: the Linux setup header patched for
/// the boot (loader type, heap, command-line address, and the initrd's address and size,
/// which depend on the guest's memory size).
pub fn qemu_patched_kernel(
    kernel: &[u8],
    initrd_size: u64,
    memory_size: u64,
    acpi_data_size: u32,
) -> Result<Vec<u8>, KernelError> {
    if kernel.len() < 0x1000 {
        return Err(KernelError::TooShort);
    }
    let mut k = kernel.to_vec();
    let protocol = u16::from_le_bytes([k[0x206], k[0x207]]);
    let loaded_high = protocol >= 0x200 && k[0x211] & 0x01 != 0;
    let (real_addr, cmdline_addr): (u32, u32) = if loaded_high {
        (0x10000, 0x20000)
    } else {
        (0x90000, 0x9a000)
    };
    if protocol >= 0x200 {
        k[0x210] = 0xb0; // type_of_loader: QEMU
    }
    if protocol >= 0x201 {
        k[0x211] |= 0x80; // CAN_USE_HEAP
        let heap_end = (cmdline_addr - real_addr - 0x200) as u16;
        k[0x224..0x226].copy_from_slice(&heap_end.to_le_bytes());
    }
    if protocol >= 0x202 {
        k[0x228..0x22c].copy_from_slice(&cmdline_addr.to_le_bytes());
    } else {
        k[0x20..0x22].copy_from_slice(&0xa33f_u16.to_le_bytes());
        k[0x22..0x24].copy_from_slice(&((cmdline_addr - real_addr) as u16).to_le_bytes());
    }
    if initrd_size > 0 {
        if protocol < 0x200 {
            return Err(KernelError::TooOldForInitrd);
        }
        let mut initrd_max: u32 =
            if protocol >= 0x20c && u16::from_le_bytes([k[0x236], k[0x237]]) & 0x40 != 0 {
                u32::MAX // XLF_CAN_BE_LOADED_ABOVE_4G
            } else if protocol >= 0x203 {
                match u32::from_le_bytes([k[0x22c], k[0x22d], k[0x22e], k[0x22f]]) {
                    0 => 0x37ff_ffff,
                    max => max,
                }
            } else {
                0x37ff_ffff
            };
        let low_memory_top = if memory_size >= Q35_HIGH_MEMORY_SPLIT {
            0x8000_0000u32
        } else {
            // Below the split all memory is low memory (it fits in 32 bits).
            memory_size as u32
        };
        let available = low_memory_top
            .checked_sub(acpi_data_size)
            .ok_or(KernelError::MemoryTooSmall)?;
        if initrd_max >= available {
            initrd_max = available.saturating_sub(1);
        }
        let size =
            u32::try_from(initrd_size).map_err(|_| KernelError::InitrdTooLarge(initrd_size))?;
        if size >= initrd_max {
            return Err(KernelError::InitrdTooLarge(initrd_size));
        }
        let initrd_addr = (initrd_max - size) & !0xfff;
        k[0x218..0x21c].copy_from_slice(&initrd_addr.to_le_bytes());
        k[0x21c..0x220].copy_from_slice(&size.to_le_bytes());
    }
    Ok(k)
}

/// SHA-384.
pub fn sha384(data: &[u8]) -> [u8; 48] {
    Sha384::digest(data).into()
}

/// The digest of the kernel command-line event: SHA-384 of the UTF-16LE text and a NUL.
pub fn cmdline_digest(cmdline: &str) -> [u8; 48] {
    let mut h = Sha384::new();
    for unit in cmdline.encode_utf16() {
        h.update(unit.to_le_bytes());
    }
    h.update([0u8, 0]);
    h.finalize().into()
}

/// RTMR1's events, given the Authenticode digest of the (patched) kernel.
pub fn rtmr1_log(kernel_authenticode: [u8; 48]) -> Vec<[u8; 48]> {
    vec![
        kernel_authenticode,
        sha384(CALLING_EFI_APPLICATION),
        sha384(&[0u8; 4]),
        sha384(EXIT_BOOT_SERVICES),
        sha384(EXIT_BOOT_SERVICES_OK),
    ]
}

/// RTMR2's events: the measured command line (the image's, with the firmware's suffix)
/// and the initrd.
pub fn rtmr2_log(cmdline_digest: [u8; 48], initrd_sha384: [u8; 48]) -> Vec<[u8; 48]> {
    vec![cmdline_digest, initrd_sha384]
}

/// RTMR ← SHA-384(RTMR ‖ digest) over `log`, from 48 zero bytes.
pub fn replay(log: &[[u8; 48]]) -> [u8; 48] {
    let mut r = [0u8; 48];
    for d in log {
        crate::event_log::extend(&mut r, d);
    }
    r
}
