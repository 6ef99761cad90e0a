//! The `os-image` check and what it rests on: TDVF metadata and MRTD (Debian's OVMF and a
//! synthetic firmware), the kernel's Authenticode hash and RTMR1/RTMR2 (a synthetic
//! image, expected values computed here independently), the policy file, `os-measure`,
//! and dstack's own verifier fixtures (real quotes and event logs).

use std::path::Path;
use std::sync::Arc;

use crate::fixtures::*;
use evidence::bundle::Bundle;
use evidence::check::{CHECKS, Options, Report, Status, run};
use evidence::event_log::EventLog;
use evidence::os_image::{OsEntry, OsImage, OsPolicy, VmShape};
use evidence::tdvf::{PageOrder, Tdvf, TdvfError};
use serde_json::{Value, json};
use sha2::{Digest, Sha256, Sha384};

// ---------------------------------------------------------------------------------------
// Independent reference computations (straightforward, from the TDX module ABI and the
// firmware's event definitions; no code shared with the crate).

fn sha384(b: &[u8]) -> [u8; 48] {
    Sha384::digest(b).into()
}

fn extend_all(digests: &[[u8; 48]]) -> [u8; 48] {
    let mut r = [0u8; 48];
    for d in digests {
        let mut buf = r.to_vec();
        buf.extend_from_slice(d);
        r = sha384(&buf);
    }
    r
}

/// A section of the synthetic firmware: (data offset, memory address, pages, type,
/// attributes).
type Sec = (u32, u64, u64, u32, u32);

/// MRTD as the TDX module accumulates it: 128-byte MEM.PAGE.ADD records, and for
/// measured sections 128-byte MR.EXTEND records each followed by 256 bytes of content.
fn reference_mrtd(fw: &[u8], sections: &[Sec], two_pass: bool) -> [u8; 48] {
    let mut stream = Vec::new();
    let add = |stream: &mut Vec<u8>, gpa: u64| {
        let mut r = vec![0u8; 128];
        r[..12].copy_from_slice(b"MEM.PAGE.ADD");
        r[16..24].copy_from_slice(&gpa.to_le_bytes());
        stream.extend(r);
    };
    let ext = |stream: &mut Vec<u8>, gpa: u64, data: &[u8]| {
        for i in 0..16u64 {
            let mut r = vec![0u8; 128];
            r[..9].copy_from_slice(b"MR.EXTEND");
            r[16..24].copy_from_slice(&(gpa + i * 256).to_le_bytes());
            stream.extend(r);
            stream.extend_from_slice(&data[(i * 256) as usize..(i * 256 + 256) as usize]);
        }
    };
    for &(data_offset, addr, pages, _, attr) in sections {
        let page_data = |p: u64| {
            let at = data_offset as usize + (p * 4096) as usize;
            &fw[at..at + 4096]
        };
        if two_pass {
            for p in 0..pages {
                add(&mut stream, addr + p * 4096);
            }
            if attr & 1 != 0 {
                for p in 0..pages {
                    ext(&mut stream, addr + p * 4096, page_data(p));
                }
            }
        } else {
            for p in 0..pages {
                add(&mut stream, addr + p * 4096);
                if attr & 1 != 0 {
                    ext(&mut stream, addr + p * 4096, page_data(p));
                }
            }
        }
    }
    sha384(&stream)
}

fn guid_bytes(a: u32, b: u16, c: u16, d: [u8; 8]) -> Vec<u8> {
    let mut v = a.to_le_bytes().to_vec();
    v.extend(b.to_le_bytes());
    v.extend(c.to_le_bytes());
    v.extend(d);
    v
}

/// A 16 KiB firmware with TDVF metadata: a measured BFV (2 pages), an unmeasured CFV
/// (1 page), a TD HOB and temporary memory.
fn synthetic_firmware() -> (Vec<u8>, Vec<Sec>) {
    let mut fw: Vec<u8> = (0..0x4000u32).map(|i| (i * 7 + i / 251) as u8).collect();
    let sections: Vec<Sec> = vec![
        (0x0, 0xffff_c000, 2, 0, 1),
        (0x2000, 0xffff_b000, 1, 1, 0),
        (0, 0x80_9000, 2, 2, 0),
        (0, 0x80_0000, 6, 3, 0),
    ];
    let desc_at = 0x3000usize;
    let mut desc = b"TDVF".to_vec();
    desc.extend((16 + 32 * sections.len() as u32).to_le_bytes());
    desc.extend(1u32.to_le_bytes());
    desc.extend((sections.len() as u32).to_le_bytes());
    for &(off, addr, pages, ty, attr) in &sections {
        let raw = if ty <= 1 { (pages * 4096) as u32 } else { 0 };
        desc.extend(off.to_le_bytes());
        desc.extend(raw.to_le_bytes());
        desc.extend(addr.to_le_bytes());
        desc.extend((pages * 4096).to_le_bytes());
        desc.extend(ty.to_le_bytes());
        desc.extend(attr.to_le_bytes());
    }
    fw[desc_at..desc_at + desc.len()].copy_from_slice(&desc);
    // GUID-ed table at the end: [offset entry][footer], then 32 bytes.
    let back = (fw.len() - desc_at) as u32;
    let mut entry = back.to_le_bytes().to_vec();
    entry.extend(22u16.to_le_bytes());
    entry.extend(guid_bytes(
        0xe47a_6535,
        0x984a,
        0x4798,
        [0x86, 0x5e, 0x46, 0x85, 0xa7, 0xbf, 0x8e, 0xc2],
    ));
    let mut footer = ((entry.len() + 18) as u16).to_le_bytes().to_vec();
    footer.extend(guid_bytes(
        0x96b5_82de,
        0x1fb2,
        0x45f7,
        [0xba, 0xea, 0xa3, 0x66, 0xc5, 0x5a, 0x08, 0x2d],
    ));
    let end = fw.len() - 32;
    let start = end - footer.len() - entry.len();
    fw[start..start + entry.len()].copy_from_slice(&entry);
    fw[start + entry.len()..end].copy_from_slice(&footer);
    (fw, sections)
}

/// A bzImage-shaped PE32+ kernel: PE header at 0x40, headers up to 0x200, two sections
/// listed out of file order (0x1000+0x1000, 0x200+0xe00), a Linux setup header at 0x1f1
/// (boot protocol 2.15, loaded high, initrd limit 0x7fffffff), five trailing bytes.
fn synthetic_kernel() -> Vec<u8> {
    let mut k: Vec<u8> = (0..0x2005u32).map(|i| (i * 13 + 5) as u8).collect();
    k[..0x200].fill(0);
    k[0..2].copy_from_slice(b"MZ");
    k[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
    k[0x40..0x44].copy_from_slice(b"PE\0\0");
    k[0x46..0x48].copy_from_slice(&2u16.to_le_bytes()); // sections
    k[0x54..0x56].copy_from_slice(&0xf0u16.to_le_bytes()); // optional header size
    k[0x58..0x5a].copy_from_slice(&0x20bu16.to_le_bytes()); // PE32+
    k[0x58 + 60..0x58 + 64].copy_from_slice(&0x200u32.to_le_bytes()); // SizeOfHeaders
    k[0x98..0x9c].copy_from_slice(&0xdead_beefu32.to_le_bytes()); // checksum (excluded)
    let table = 0x58 + 0xf0;
    for (i, (ptr, size)) in [(0x1000u32, 0x1000u32), (0x200, 0xe00)].iter().enumerate() {
        let at = table + 40 * i;
        k[at..at + 5].copy_from_slice(b".sec\0");
        k[at + 16..at + 20].copy_from_slice(&size.to_le_bytes());
        k[at + 20..at + 24].copy_from_slice(&ptr.to_le_bytes());
    }
    // Linux setup header (the PE header ends at 0x198).
    k[0x1f1..0x270].fill(0);
    k[0x202..0x206].copy_from_slice(b"HdrS");
    k[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    k[0x211] = 0x01; // LOADED_HIGH
    k[0x22c..0x230].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    k
}

/// What the firmware hashes of the kernel QEMU hands over, for `initrd_len` bytes of
/// initrd and 2 GiB of memory.
fn reference_kernel_hash(kernel: &[u8], initrd_len: u32) -> [u8; 48] {
    let mut k = kernel.to_vec();
    k[0x210] = 0xb0;
    k[0x211] |= 0x80;
    k[0x224..0x226].copy_from_slice(&0xfe00u16.to_le_bytes());
    k[0x228..0x22c].copy_from_slice(&0x20000u32.to_le_bytes());
    // 2 GiB: all memory is low; QEMU keeps 0x28000 bytes for ACPI at its top.
    let initrd_max = 0x8000_0000u32 - 0x28000 - 1;
    let addr = (initrd_max - initrd_len) & !0xfff;
    k[0x218..0x21c].copy_from_slice(&addr.to_le_bytes());
    k[0x21c..0x220].copy_from_slice(&initrd_len.to_le_bytes());
    let mut h = Sha384::new();
    h.update(&k[..0x98]);
    h.update(&k[0x9c..0xe8]);
    h.update(&k[0xf0..0x200]);
    h.update(&k[0x200..0x1000]);
    h.update(&k[0x1000..0x2000]);
    h.update([0u8; 3]); // file size 0x2005 padded to a multiple of 8
    h.finalize().into()
}

const CMDLINE: &str = "console=ttyS0 dstack.rootfs_hash=abc ro";
const TWO_GIB: u64 = 2 << 30;

struct Synthetic {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    mrtd_single: [u8; 48],
    mrtd_two: [u8; 48],
    /// RTMR0 of the synthetic RTMR0 events ([`synthetic_rtmr0_events`]) with [`ACPI`].
    rtmr0: [u8; 48],
    rtmr1: [u8; 48],
    rtmr2: [u8; 48],
    hash: [u8; 32],
}

fn write_image(dir: &Path, files: &[(&str, Vec<u8>)]) -> [u8; 32] {
    let mut sums = String::new();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
        sums.push_str(&format!("{}  {name}\n", hex::encode(Sha256::digest(bytes))));
    }
    std::fs::write(dir.join("sha256sum.txt"), &sums).unwrap();
    Sha256::digest(sums.as_bytes()).into()
}

fn metadata(cmdline: &str) -> Vec<u8> {
    json!({"bios": "ovmf.fd", "kernel": "bzImage", "initrd": "initramfs.cpio.gz",
           "cmdline": cmdline, "version": "0.5.99", "is_dev": true})
    .to_string()
    .into_bytes()
}

fn synthetic_image() -> Synthetic {
    let dir = tempfile::tempdir().unwrap();
    let (fw, sections) = synthetic_firmware();
    let kernel = synthetic_kernel();
    let initrd: Vec<u8> = (0..5000u32).map(|i| (i % 256) as u8).collect();
    let hash = write_image(
        dir.path(),
        &[
            ("metadata.json", metadata(CMDLINE)),
            ("ovmf.fd", fw.clone()),
            ("bzImage", kernel.clone()),
            ("initramfs.cpio.gz", initrd.clone()),
        ],
    );
    let rtmr1 = extend_all(&[
        reference_kernel_hash(&kernel, initrd.len() as u32),
        sha384(b"Calling EFI Application from Boot Option"),
        sha384(&[0, 0, 0, 0]),
        sha384(b"Exit Boot Services Invocation"),
        sha384(b"Exit Boot Services Returned with Success"),
    ]);
    let mut cmdline_utf16: Vec<u8> = format!("{CMDLINE} initrd=initrd")
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    cmdline_utf16.extend([0, 0]);
    let rtmr2 = extend_all(&[sha384(&cmdline_utf16), sha384(&initrd)]);
    Synthetic {
        path: dir.path().to_owned(),
        _dir: dir,
        mrtd_single: reference_mrtd(&fw, &sections, false),
        mrtd_two: reference_mrtd(&fw, &sections, true),
        rtmr0: replay0(&synthetic_rtmr0_events(ACPI)),
        rtmr1,
        rtmr2,
        hash,
    }
}

/// The near-mpc quote with its MRTD and RTMR0-2 replaced (its signature no longer holds;
/// the `os-image` check reads the registers, the `quote` check judges the signature).
fn quote_with(mrtd: [u8; 48], rtmr: [[u8; 48]; 3]) -> Vec<u8> {
    let mut q = near_quote();
    q[48 + 136..48 + 184].copy_from_slice(&mrtd);
    for (i, r) in rtmr.iter().enumerate() {
        let at = 48 + 328 + 48 * i;
        q[at..at + 48].copy_from_slice(r);
    }
    q
}

fn bundle_with(quote: &[u8], vm_config: Value) -> Bundle {
    bundle_with_rtmr0(quote, vm_config, synthetic_rtmr0_events(ACPI))
}

/// A bundle whose event log has `rtmr0` as its RTMR0 events, then the near-mpc log's
/// other events.
fn bundle_with_rtmr0(quote: &[u8], vm_config: Value, rtmr0: Vec<Value>) -> Bundle {
    let near: Vec<Value> = serde_json::from_str(&near_getquote_event_log()).unwrap();
    let mut events = rtmr0;
    events.extend(near.into_iter().filter(|e| e["imr"] != 0));
    Bundle {
        attestation: Some(json!({
            "quote": hex::encode(quote),
            "event_log": Value::Array(events).to_string(),
            "vm_config": vm_config.to_string(),
        })),
        ..Default::default()
    }
}

/// Digests of the three ACPI table events of the synthetic event log (QEMU's tables
/// are not recomputed: any value stands for them).
const ACPI: [[u8; 48]; 3] = [[0x11; 48], [0x22; 48], [0x33; 48]];

/// The TD HOB a TD with 2 GiB gets from the synthetic firmware (TEMP_MEM 0x800000-
/// 0x806000, TD_HOB 0x809000-0x80b000): a PHIT header (type 1, 56 bytes, version 9, end of
/// the list at the HOB's address + its length + 8) and resource descriptors (type 3, 48
/// bytes) for the gaps (unaccepted, resource type 7) and the accepted sections (type 0).
fn reference_td_hob_2gib() -> Vec<u8> {
    let resources: [(u32, u64, u64); 5] = [
        (7, 0, 0x80_0000),
        (0, 0x80_0000, 0x6000),
        (7, 0x80_6000, 0x3000),
        (0, 0x80_9000, 0x2000),
        (7, 0x80_b000, TWO_GIB - 0x80_b000),
    ];
    let mut hob = vec![0u8; 56];
    hob[0] = 1;
    hob[2] = 56;
    hob[8] = 9;
    let end = 0x80_9000u64 + 56 + 48 * 5 + 8;
    hob[48..56].copy_from_slice(&end.to_le_bytes());
    for (kind, start, len) in resources {
        let mut r = vec![0u8; 48];
        r[0] = 3;
        r[2] = 48;
        r[24..28].copy_from_slice(&kind.to_le_bytes());
        r[28..32].copy_from_slice(&7u32.to_le_bytes());
        r[32..40].copy_from_slice(&start.to_le_bytes());
        r[40..48].copy_from_slice(&len.to_le_bytes());
        hob.extend(r);
    }
    hob
}

/// SHA-384 of an absent EFI variable's measurement: GUID, name length, zero data
/// length, UTF-16LE name.
fn variable(guid: &[u8], name: &str) -> [u8; 48] {
    let mut b = guid.to_vec();
    b.extend((name.len() as u64).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(name.encode_utf16().flat_map(|u| u.to_le_bytes()));
    sha384(&b)
}

/// The 13 RTMR0 events dstack's firmware logs for the synthetic firmware and 2 GiB,
/// with `acpi` as the three ACPI table digests. The firmware volume and Boot0000 digests
/// are the constants dstack's `dstack-mr` states (dstack commit 312dc605, also in the
/// lite fixture's log).
fn synthetic_rtmr0_events(acpi: [[u8; 48]; 3]) -> Vec<Value> {
    let global = guid_bytes(
        0x8be4_df61,
        0x93ca,
        0x11d2,
        [0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c],
    );
    let db = guid_bytes(
        0xd719_b2cb,
        0x3d3a,
        0x4596,
        [0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f],
    );
    let constant = |h: &str| -> [u8; 48] { hex::decode(h).unwrap().try_into().unwrap() };
    let events: [(u32, [u8; 48]); 13] = [
        (0x8000_000b, sha384(&reference_td_hob_2gib())),
        (
            0x8000_000a,
            constant(
                "344bc51c980ba621aaa00da3ed7436f7d6e549197dfe699515dfa2c6583d95e6412af21c097d473155875ffd561d6790",
            ),
        ),
        (0x8000_0001, variable(&global, "SecureBoot")),
        (0x8000_0001, variable(&global, "PK")),
        (0x8000_0001, variable(&global, "KEK")),
        (0x8000_0001, variable(&db, "db")),
        (0x8000_0001, variable(&db, "dbx")),
        (0x4, sha384(&[0; 4])),
        (0xa, acpi[0]),
        (0xa, acpi[1]),
        (0xa, acpi[2]),
        (0x8000_0002, sha384(&[0; 2])),
        (
            0x8000_0002,
            constant(
                "23ada07f5261f12f34a0bd8e46760962d6b4d576a416f1fea1c64bc656b1d28eacf7047ae6e967c58fd2a98bfa74c298",
            ),
        ),
    ];
    events
        .iter()
        .map(|(t, d)| {
            json!({"imr": 0, "event_type": t, "digest": hex::encode(d), "event": "",
                   "event_payload": ""})
        })
        .collect()
}

fn replay0(events: &[Value]) -> [u8; 48] {
    let digests: Vec<[u8; 48]> = events
        .iter()
        .map(|e| {
            hex::decode(e["digest"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        })
        .collect();
    extend_all(&digests)
}

fn os_check(r: &Report) -> (Status, String) {
    let c = r.get("os-image").unwrap();
    (c.status, c.detail.clone())
}

// ---------------------------------------------------------------------------------------

#[test]
fn synthetic_firmware_metadata_and_mrtd() {
    let (fw, sections) = synthetic_firmware();
    let tdvf = Tdvf::parse(&fw).unwrap();
    assert_eq!(tdvf.sections.len(), 4);
    assert_eq!(tdvf.sections[0].memory_address, 0xffff_c000);
    assert_eq!(tdvf.sections[2].section_type, 2);
    assert_eq!(
        tdvf.mrtd(&fw, PageOrder::SinglePass).unwrap(),
        reference_mrtd(&fw, &sections, false)
    );
    assert_eq!(
        tdvf.mrtd(&fw, PageOrder::TwoPass).unwrap(),
        reference_mrtd(&fw, &sections, true)
    );
    // One byte of the measured volume changes MRTD; one of the unmeasured one does not.
    let mut bfv = fw.clone();
    bfv[0x100] ^= 1;
    assert_ne!(
        Tdvf::parse(&bfv).unwrap().mrtd(&bfv, PageOrder::SinglePass),
        tdvf.mrtd(&fw, PageOrder::SinglePass)
    );
    let mut cfv = fw.clone();
    cfv[0x2100] ^= 1;
    assert_eq!(
        Tdvf::parse(&cfv).unwrap().mrtd(&cfv, PageOrder::SinglePass),
        tdvf.mrtd(&fw, PageOrder::SinglePass)
    );
    // A firmware without the GUID-ed table is not TDX firmware.
    let mut plain = fw.clone();
    let n = plain.len();
    plain[n - 40] ^= 1;
    assert_eq!(Tdvf::parse(&plain), Err(TdvfError::NoGuidTable));
}

/// A section the VMM neither adds nor extends (`PAGE.AUG`, like a large temporary-memory
/// region) leaves no trace in MRTD, whatever size it declares, and costs nothing to skip:
/// a descriptor declaring a 4 PiB `PAGE.AUG` section computes at once (it used to loop
/// over every declared page; fuzzing found it). A section that is added is still bounded.
#[test]
fn page_aug_sections_of_any_size_are_skipped_and_added_ones_bounded() {
    let (mut fw, sections) = synthetic_firmware();
    // Section 3 (temporary memory) becomes PAGE.AUG with a declared size of 2^52 bytes.
    let sec3 = 0x3000 + 16 + 32 * 3;
    fw[sec3 + 16..sec3 + 24].copy_from_slice(&(1u64 << 52).to_le_bytes());
    fw[sec3 + 28..sec3 + 32].copy_from_slice(&2u32.to_le_bytes());
    let tdvf = Tdvf::parse(&fw).unwrap();
    assert_eq!(tdvf.pages_measured(), 2 + 1 + 2);
    assert_eq!(
        tdvf.mrtd(&fw, PageOrder::SinglePass).unwrap(),
        reference_mrtd(&fw, &sections[..3], false)
    );
    assert_eq!(
        tdvf.mrtd(&fw, PageOrder::TwoPass).unwrap(),
        reference_mrtd(&fw, &sections[..3], true)
    );
    // The same size on a section that is added is refused before any work.
    fw[sec3 + 28..sec3 + 32].copy_from_slice(&0u32.to_le_bytes());
    let tdvf = Tdvf::parse(&fw).unwrap();
    assert_eq!(
        tdvf.mrtd(&fw, PageOrder::SinglePass),
        Err(TdvfError::TooManyPages)
    );
}

/// Debian's `ovmf` package (`/usr/share/ovmf/OVMF.fd`, installed by scripts/setup)
/// carries TDVF metadata. MRTD is checked against the reference computation above, and
/// for the file of Debian 12's package (2022.11-6+deb12u2) against values a separate
/// Python implementation gave.
#[test]
fn debian_ovmf_tdvf_metadata_and_mrtd() {
    let path = Path::new("/usr/share/ovmf/OVMF.fd");
    if !path.exists() {
        // Under CI (as test_support's PostgreSQL tests read it) a missing file fails.
        let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
        assert!(
            !ci,
            "{} is missing: scripts/setup installs Debian's ovmf",
            path.display()
        );
        eprintln!(
            "SKIPPED: {} is missing (apt-get install ovmf, or run scripts/setup)",
            path.display()
        );
        return;
    }
    let fw = std::fs::read(path).unwrap();
    let tdvf = Tdvf::parse(&fw).unwrap();
    // A measured boot firmware volume, and the TD HOB.
    assert!(
        tdvf.sections
            .iter()
            .any(|s| s.section_type == 0 && s.attributes & 1 == 1),
        "{tdvf:?}"
    );
    assert_eq!(
        tdvf.sections.iter().filter(|s| s.section_type == 2).count(),
        1
    );
    let sections: Vec<Sec> = tdvf
        .sections
        .iter()
        .map(|s| {
            (
                s.data_offset,
                s.memory_address,
                s.memory_data_size / 4096,
                s.section_type,
                s.attributes,
            )
        })
        .collect();
    let single = tdvf.mrtd(&fw, PageOrder::SinglePass).unwrap();
    let two = tdvf.mrtd(&fw, PageOrder::TwoPass).unwrap();
    assert_eq!(single, reference_mrtd(&fw, &sections, false));
    assert_eq!(two, reference_mrtd(&fw, &sections, true));
    assert_ne!(single, two);
    // Debian 12's ovmf 2022.11-6+deb12u2.
    const DEBIAN_12: &str = "7b456907dd0786d415999e801a1ac4637b8ed4d7cf5378cfc6edbe5e574dd773";
    if hex::encode(Sha256::digest(&fw)) == DEBIAN_12 {
        assert_eq!(
            hex::encode(single),
            "4c7206f0f483c524f12c366c711e9049030a8d47c471ee5aa9c4999a08de4057fb887fed0744d5631a212967fb231c47"
        );
        assert_eq!(
            hex::encode(two),
            "acccbcc870a381adab0d3919d90a7f268ac3b0364771f202ed4bb4e892d045b33db3b32e6924cba830a724eed443f7e1"
        );
    }
}

#[test]
fn synthetic_kernel_authenticode_and_qemu_patch() {
    let kernel = synthetic_kernel();
    let patched = evidence::kernel::qemu_patched_kernel(&kernel, 5000, TWO_GIB, 0x28000).unwrap();
    assert_eq!(
        evidence::kernel::authenticode_sha384(&patched).unwrap(),
        reference_kernel_hash(&kernel, 5000)
    );
    // Above 2.75 GiB QEMU splits memory at 2 GiB: the same placement as 2 GiB exactly.
    let high = evidence::kernel::qemu_patched_kernel(&kernel, 5000, 16 << 30, 0x28000).unwrap();
    assert_eq!(high, patched);
    let low = evidence::kernel::qemu_patched_kernel(&kernel, 5000, 1 << 30, 0x28000).unwrap();
    assert_ne!(low[0x218..0x21c], patched[0x218..0x21c]);
    assert!(evidence::kernel::authenticode_sha384(b"MZ not a PE image").is_err());
}

#[test]
fn an_image_directory_is_checked_and_measured() {
    let img = synthetic_image();
    let image = OsImage::load(&img.path).unwrap();
    assert_eq!(image.os_image_hash, img.hash);
    assert_eq!(image.metadata.version, "0.5.99");
    let r = image.measure(TWO_GIB).unwrap();
    assert_eq!(r.mrtd_single_pass, img.mrtd_single);
    assert_eq!(r.mrtd_two_pass, img.mrtd_two);
    assert_eq!(r.rtmr1, img.rtmr1);
    assert_eq!(r.rtmr2, img.rtmr2);
    // A file that no longer matches sha256sum.txt makes the directory unusable.
    std::fs::write(img.path.join("bzImage"), b"other kernel").unwrap();
    let err = OsImage::load(&img.path).unwrap_err().to_string();
    assert!(err.contains("bzImage does not match"), "{err}");
}

#[tokio::test]
async fn the_os_image_check_recomputes_and_pins() {
    let img = synthetic_image();
    let image = Arc::new(OsImage::load(&img.path).unwrap());
    let vm = json!({"os_image_hash": hex::encode(img.hash), "cpu_count": 2,
                    "memory_size": TWO_GIB, "image": "dstack-dev-0.5.99"});
    let quote = quote_with(img.mrtd_single, [img.rtmr0, img.rtmr1, img.rtmr2]);
    let bundle = bundle_with(&quote, vm.clone());

    // No pin at all: a failure that says how to pin, and N/A on request.
    let r = run(&bundle, &Options::default()).await;
    let (status, detail) = os_check(&r);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("--os-image DIR"), "{detail}");
    assert_eq!(r.os.as_ref().unwrap().unpinned.len(), 4);
    let allow = Options {
        allow_unpinned_os: true,
        ..Options::default()
    };
    assert_eq!(
        os_check(&run(&bundle, &allow).await).0,
        Status::NotApplicable
    );

    // The image alone recomputes MRTD, RTMR1, RTMR2 and RTMR0's events but the ACPI
    // tables; RTMR0 stays unpinned, its ACPI digests reported as taken from the log.
    let image_only = Options {
        os_image: Some(image.clone()),
        ..Options::default()
    };
    let r = run(&bundle, &image_only).await;
    let (status, detail) = os_check(&r);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(detail.contains("NOT pinned: RTMR0"), "{detail}");
    assert!(
        detail.contains("RTMR0: TD HOB, firmware volume, secure-boot variables and boot order recomputed, its three ACPI table events taken on trust from the event log"),
        "{detail}"
    );
    let os = r.os.clone().unwrap();
    assert_eq!(os.recomputed, vec!["MRTD", "RTMR1", "RTMR2"]);
    assert_eq!(os.unpinned, vec!["RTMR0"]);
    let rtmr0 = os.rtmr0.clone().unwrap();
    assert_eq!(rtmr0.recomputed_events.len(), 10);
    assert_eq!(rtmr0.recomputed_events[0], "TD HOB");
    assert_eq!(
        [
            &rtmr0.acpi_table_loader,
            &rtmr0.acpi_rsdp,
            &rtmr0.acpi_tables
        ],
        [ACPI[0], ACPI[1], ACPI[2]].map(hex::encode).each_ref()
    );
    let text = r.to_text();
    assert!(
        text.contains(&format!(
            "taken on trust from the event log: ACPI etc/table-loader {}",
            hex::encode(ACPI[0])
        )),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["os"]["rtmr0"]["acpi_tables"], hex::encode(ACPI[2]));
    // Accepted unpinned, the partial RTMR0 is what stands.
    let (status, _) = os_check(
        &run(
            &bundle,
            &Options {
                allow_unpinned_os: true,
                ..image_only.clone()
            },
        )
        .await,
    );
    assert_eq!(status, Status::NotApplicable);

    // A recomputed RTMR0 event that differs fails the check, naming the event: another
    // SecureBoot measurement (the quote's RTMR0 replaying it), another memory size (the
    // TD HOB; RTMR1 differs too), an extra event, or a log that does not replay to the
    // quote's RTMR0.
    let mut events = synthetic_rtmr0_events(ACPI);
    events[2]["digest"] = json!(hex::encode([9u8; 48]));
    let sb = bundle_with_rtmr0(
        &quote_with(img.mrtd_single, [replay0(&events), img.rtmr1, img.rtmr2]),
        vm.clone(),
        events,
    );
    let (status, detail) = os_check(&run(&sb, &image_only).await);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(
        detail.contains("RTMR0 event 3 (SecureBoot variable, log entry 2) has digest 0909"),
        "{detail}"
    );
    let mut vm_4g = vm.clone();
    vm_4g["memory_size"] = json!(4u64 << 30);
    let (status, detail) = os_check(&run(&bundle_with(&quote, vm_4g), &image_only).await);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(detail.contains("RTMR0 event 1 (TD HOB"), "{detail}");
    let mut events = synthetic_rtmr0_events(ACPI);
    events.push(events[12].clone());
    let extra = bundle_with_rtmr0(
        &quote_with(img.mrtd_single, [replay0(&events), img.rtmr1, img.rtmr2]),
        vm.clone(),
        events,
    );
    let (status, detail) = os_check(&run(&extra, &image_only).await);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(
        detail.contains("RTMR0 event 14 (log entry 13) is one too many"),
        "{detail}"
    );
    let unreplayed = bundle_with(
        &quote_with(img.mrtd_single, [[1; 48], img.rtmr1, img.rtmr2]),
        vm.clone(),
    );
    let (status, detail) = os_check(&run(&unreplayed, &image_only).await);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(
        detail.contains("do not replay to the quote's RTMR0"),
        "{detail}"
    );
    assert_eq!(os.version.as_deref(), Some("0.5.99"));
    assert_eq!(os.is_dev, Some(true));
    assert_eq!(
        os.version_source.as_deref(),
        Some("the image's metadata.json")
    );

    // With a policy entry that pins RTMR0 for this image and shape: PASS, and the report
    // says which registers were recomputed and which taken on trust.
    let shape = VmShape {
        cpu_count: Some(2),
        memory_size: Some(TWO_GIB),
        ..VmShape::default()
    };
    let entry = image.entry(shape.clone(), Some(img.rtmr0)).unwrap();
    let policy = OsPolicy {
        entries: vec![entry.clone()],
    };
    let both = Options {
        os_image: Some(image.clone()),
        os_policy: Some(policy.clone()),
        ..Options::default()
    };
    let r = run(&bundle, &both).await;
    let (status, detail) = os_check(&r);
    assert_eq!(status, Status::Pass, "{detail}");
    let os = r.os.clone().unwrap();
    assert_eq!(os.recomputed, vec!["MRTD", "RTMR1", "RTMR2"]);
    assert_eq!(os.from_policy, vec!["RTMR0"]);
    assert!(os.unpinned.is_empty());
    let text = r.to_text();
    assert!(
        text.contains("os: dstack 0.5.99 (DEVELOPMENT image)"),
        "{text}"
    );
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["os"]["os_image_hash"], hex::encode(img.hash));
    assert_eq!(json["os"]["from_policy"], json!(["RTMR0"]));

    // The policy alone (no download): everything from the policy file.
    let policy_only = Options {
        os_policy: Some(policy.clone()),
        ..Options::default()
    };
    let r = run(&bundle, &policy_only).await;
    assert_eq!(os_check(&r).0, Status::Pass, "{}", os_check(&r).1);
    assert_eq!(
        r.os.unwrap().from_policy,
        vec!["MRTD", "RTMR0", "RTMR1", "RTMR2"]
    );

    // The QEMU 8 page order is accepted too.
    let two = bundle_with(
        &quote_with(img.mrtd_two, [img.rtmr0, img.rtmr1, img.rtmr2]),
        vm.clone(),
    );
    let (status, detail) = os_check(&run(&two, &both).await);
    assert_eq!(status, Status::Pass, "{detail}");
    assert!(detail.contains("two passes"), "{detail}");

    // Another kernel command line (RTMR2): the image does not produce this quote.
    let mut other = img.rtmr2;
    other[0] ^= 1;
    let tampered = bundle_with(
        &quote_with(img.mrtd_single, [img.rtmr0, img.rtmr1, other]),
        vm.clone(),
    );
    let (status, detail) = os_check(&run(&tampered, &both).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("RTMR2 (command line, initrd)"), "{detail}");

    // Other ACPI tables (another shape, or other AML): the image accepts them (taken on
    // trust), the policy entry's RTMR0 does not.
    let events = synthetic_rtmr0_events([ACPI[0], ACPI[1], [0x44; 48]]);
    let acpi = bundle_with_rtmr0(
        &quote_with(img.mrtd_single, [replay0(&events), img.rtmr1, img.rtmr2]),
        vm.clone(),
        events,
    );
    let (status, detail) = os_check(&run(&acpi, &image_only).await);
    assert_eq!(status, Status::Fail, "{detail}");
    assert!(detail.contains("NOT pinned: RTMR0"), "{detail}");
    let (status, detail) = os_check(&run(&acpi, &both).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("differs in RTMR0"), "{detail}");

    // A deployment naming another image than the one given.
    let mut vm_other = vm.clone();
    vm_other["os_image_hash"] = json!(hex::encode([7u8; 32]));
    let renamed = bundle_with(&quote, vm_other);
    let (status, detail) = os_check(&run(&renamed, &both).await);
    assert_eq!(status, Status::Fail);
    assert!(detail.contains("the --os-image directory is"), "{detail}");
    // (The policy alone against other registers, images and shapes: the shared cases of
    // `policy_cases_shared_with_the_js_sdk`.)
}

#[test]
fn policy_files_are_checked() {
    let good = |mrtd: Value| {
        json!({"entries": [{"os_image_hash": "ab".repeat(32), "mrtd": mrtd,
            "rtmr0": null, "rtmr1": "cd".repeat(48), "rtmr2": "ef".repeat(48),
            "vm_shape": {"cpu_count": 2, "memory_size": 1024, "qemu_version": "9.2.1"}}]})
    };
    let p = OsPolicy::parse(good(json!("01".repeat(48))).to_string().as_bytes()).unwrap();
    assert_eq!(p.entries[0].mrtd.len(), 1);
    assert_eq!(p.entries[0].vm_shape.other["qemu_version"], "9.2.1");
    let p = OsPolicy::parse(
        good(json!(["01".repeat(48), "02".repeat(48)]))
            .to_string()
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(p.entries[0].mrtd.len(), 2);
    // Malformed files: the shared cases below.
}

// ---------------------------------------------------------------------------------------
// The policy match on the cases of tests/data/os-policy-cases.json, which the JS SDK's
// checkOsMeasurements is held to as well (sdk/js/test/os-measurements.test.mjs).

/// Every shared case, through the `os-image` check alone: the case's policy file parsed
/// as `--os-measurements` reads it, the near-mpc quote carrying the case's registers, and
/// its `vm_config` and `/info` `tcb_info`.
#[tokio::test]
async fn policy_cases_shared_with_the_js_sdk() {
    let doc: Value = serde_json::from_slice(&read("os-policy-cases.json")).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    let only_os = |allow_unpinned_os| Options {
        skip: CHECKS
            .iter()
            .map(|(id, _)| (*id).to_owned())
            .filter(|id| id != "os-image")
            .collect(),
        allow_unpinned_os,
        ..Options::default()
    };
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let expect = &case["expect"];
        let text = match &case["policy"] {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        };
        let parsed = OsPolicy::parse(text.as_bytes());
        if expect["verdict"] == "error" {
            let err = parsed.expect_err(name).to_string();
            let want = expect["error"].as_str().unwrap();
            assert!(err.contains(want), "{name}: {err:?} lacks {want:?}");
            continue;
        }
        let policy = parsed.unwrap_or_else(|e| panic!("{name}: {e}"));
        let o = &case["observed"];
        let register = |k: &str| -> [u8; 48] {
            hex::decode(o[k].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap()
        };
        let quote = quote_with(
            register("mrtd"),
            [register("rtmr0"), register("rtmr1"), register("rtmr2")],
        );
        let vm_config = match &o["vm_config"] {
            Value::Null => String::new(),
            v => v.to_string(),
        };
        let bundle = Bundle {
            attestation: Some(json!({"quote": hex::encode(&quote), "vm_config": vm_config})),
            info: (!o["tcb_info"].is_null()).then(|| json!({"tcb_info": o["tcb_info"]})),
            ..Default::default()
        };
        let check = |allow| {
            let opts = Options {
                os_policy: Some(policy.clone()),
                ..only_os(allow)
            };
            let bundle = bundle.clone();
            async move { run(&bundle, &opts).await }
        };
        let r = check(false).await;
        let (status, detail) = os_check(&r);
        let matched = format!("policy entry {} matches", expect["entry"]);
        match expect["verdict"].as_str().unwrap() {
            "pass" => {
                assert_eq!(status, Status::Pass, "{name}: {detail}");
                assert!(detail.contains(&matched), "{name}: {detail}");
                let os = r.os.unwrap();
                assert_eq!(
                    os.from_policy,
                    ["MRTD", "RTMR0", "RTMR1", "RTMR2"],
                    "{name}"
                );
                assert!(os.unpinned.is_empty(), "{name}");
            }
            "unpinned" => {
                assert_eq!(status, Status::Fail, "{name}: {detail}");
                assert!(detail.contains(&matched), "{name}: {detail}");
                assert!(detail.contains("NOT pinned: RTMR0"), "{name}: {detail}");
                let os = r.os.unwrap();
                assert_eq!(os.from_policy, ["MRTD", "RTMR1", "RTMR2"], "{name}");
                assert_eq!(os.unpinned, ["RTMR0"], "{name}");
                // Accepted unpinned on request.
                let (status, detail) = os_check(&check(true).await);
                assert_eq!(status, Status::NotApplicable, "{name}: {detail}");
            }
            "refused" => {
                // The deployment's vm_config is malformed: the check fails on it, whatever
                // the policy says.
                assert_eq!(status, Status::Fail, "{name}: {detail}");
                let want = expect["error"].as_str().unwrap();
                assert!(detail.contains(want), "{name}: {detail:?} lacks {want:?}");
                assert!(r.os.is_none(), "{name}: {detail}");
                assert_eq!(os_check(&check(true).await).0, Status::Fail, "{name}");
            }
            "fail" => {
                assert_eq!(status, Status::Fail, "{name}: {detail}");
                for want in expect["detail"].as_array().unwrap() {
                    let want = want.as_str().unwrap();
                    assert!(detail.contains(want), "{name}: {detail:?} lacks {want:?}");
                }
                assert!(
                    r.os.is_none_or(|os| os.from_policy.is_empty()),
                    "{name}: {detail}"
                );
                // Not a matter of accepting an unpinned OS.
                assert_eq!(os_check(&check(true).await).0, Status::Fail, "{name}");
            }
            other => panic!("{name}: verdict {other}"),
        }
    }
}

fn evidence_bin(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_evidence"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An operator publishes `os-measure`'s entry; a verifier pins it with
/// `--os-measurements` (or recomputes with `--os-image`).
#[test]
fn os_measure_writes_the_policy_verify_pins() {
    let img = synthetic_image();
    let dir = tempfile::tempdir().unwrap();
    let policy_path = dir.path().join("os.json");
    let policy = policy_path.to_str().unwrap();
    let image_dir = img.path.to_str().unwrap();
    let rtmr0 = hex::encode(img.rtmr0);
    let (code, _, err) = evidence_bin(&[
        "os-measure",
        image_dir,
        "--cpus",
        "2",
        "--memory",
        "2G",
        "--rtmr0",
        &rtmr0,
        "--out",
        policy,
    ]);
    assert_eq!(code, 0, "{err}");
    // A second shape is added beside the first.
    let (code, _, err) = evidence_bin(&[
        "os-measure",
        image_dir,
        "--cpus",
        "4",
        "--memory",
        "4G",
        "--out",
        policy,
    ]);
    assert_eq!(code, 0, "{err}");
    let p = OsPolicy::load(&policy_path).unwrap();
    assert_eq!(p.entries.len(), 2);
    let e: &OsEntry = &p.entries[0];
    assert_eq!(e.os_image_hash, hex::encode(img.hash));
    assert_eq!(
        e.mrtd,
        vec![hex::encode(img.mrtd_single), hex::encode(img.mrtd_two)]
    );
    assert_eq!(e.rtmr0.as_deref(), Some(rtmr0.as_str()));
    assert_eq!(e.rtmr1, hex::encode(img.rtmr1));
    assert_eq!(e.rtmr2, hex::encode(img.rtmr2));
    assert_eq!(e.vm_shape.memory_size, Some(TWO_GIB));
    assert_eq!(p.entries[1].rtmr0, None);

    let vm =
        json!({"os_image_hash": hex::encode(img.hash), "cpu_count": 2, "memory_size": TWO_GIB});
    let bundle_dir = tempfile::tempdir().unwrap();
    bundle_with(
        &quote_with(img.mrtd_single, [img.rtmr0, img.rtmr1, img.rtmr2]),
        vm,
    )
    .save(bundle_dir.path())
    .unwrap();
    let b = bundle_dir.path().to_str().unwrap();
    let (_, out, _) = evidence_bin(&["verify", "--bundle", b, "--os-measurements", policy]);
    assert!(out.contains("PASS  os-image"), "{out}");
    let (_, out, _) = evidence_bin(&[
        "verify",
        "--bundle",
        b,
        "--os-measurements",
        policy,
        "--os-image",
        image_dir,
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["os"]["recomputed"], json!(["MRTD", "RTMR1", "RTMR2"]));
    assert_eq!(v["os"]["from_policy"], json!(["RTMR0"]));
    // A policy file that does not parse is a usage error.
    std::fs::write(&policy_path, "{").unwrap();
    let (code, _, err) = evidence_bin(&["verify", "--bundle", b, "--os-measurements", policy]);
    assert_eq!(code, 2, "{err}");
}

// ---------------------------------------------------------------------------------------
// dstack's verifier fixtures (tests/data/dstack-verifier/README.md).

fn fixture(name: &str) -> Value {
    serde_json::from_slice(&read(&format!("dstack-verifier/{name}"))).unwrap()
}

fn fixture_bundle(f: &Value) -> Bundle {
    Bundle {
        attestation: Some(json!({
            "quote": f["quote"], "event_log": f["event_log"], "vm_config": f["vm_config"],
        })),
        ..Default::default()
    }
}

/// The TDX "lite" fixture: vm_config carries the image's measurement material (the
/// `sha256sum.txt` bytes and `measurement.tdx.cbor`), which binds the digests dstack
/// measures to os_image_hash. RTMR1 and RTMR2 composed from those digests by this crate's
/// event sequence equal the real quote's: the sequence is right.
#[tokio::test]
async fn dstack_lite_fixture_pins_mrtd_rtmr1_rtmr2_from_its_image_material() {
    let f = fixture("tdx-lite-getquote.json");
    let vm: Value = serde_json::from_str(f["vm_config"].as_str().unwrap()).unwrap();
    let os_image_hash = "e6f5cfec20c02e7b97baa213d0f718020b55e040172d90ccbcb946d56c8b09db";
    assert_eq!(vm["os_image_hash"], os_image_hash);
    let sums = b64(vm["tdx_measurement"]["checksum_file"].as_str().unwrap());
    let cbor = b64(vm["tdx_measurement"]["measurement"].as_str().unwrap());
    assert_eq!(hex::encode(Sha256::digest(&sums)), os_image_hash);
    let listed = evidence::os_image::parse_checksums(std::str::from_utf8(&sums).unwrap()).unwrap();
    assert_eq!(listed[0].1, "measurement.tdx.cbor");
    assert_eq!(listed[0].0, <[u8; 32]>::from(Sha256::digest(&cbor)));
    // The CBOR document's byte strings (0x58 0x30 = 48 bytes), decoded by hand.
    let digest = |h: &str| {
        let d: [u8; 48] = hex::decode(h).unwrap().try_into().unwrap();
        let mut tagged = vec![0x58, 0x30];
        tagged.extend(d);
        assert!(
            cbor.windows(50).any(|w| w == tagged),
            "{h} not in the document"
        );
        d
    };
    let cmdline = digest(
        "786280842b7364287a3a70d96f7e309252857beb45fb1f91314a2ea863db0adc04c8431ecbf29a966405604631a5aab8",
    );
    let kernel = digest(
        "ac7e632dcf5cd2a1fe5c1f41f4d9b8219570e64ed3c61038fdbf25404e6f542ffd57f276bc5076307efaf882e6d64177",
    );
    let initrd = digest(
        "4fe4f7710134a61d7def357add6ac50bdbfeee5032a4c100375e207216ffe42a3bd5822b24e679f91501fff795b81521",
    );
    let single = digest(
        "a6f2ac9451810686a4db259fe8fa5438dc4a58bda9fd2f5b1fb0928335705500d29a15c92387416a2f52dddce99c83f8",
    );
    let two = digest(
        "fd685522ce791dfef67414614eb07d03fc07a32c5a66f36288b329dab92b724b1564c73d436ffb9ea84488c51ac5a1c5",
    );
    let rtmr1 = evidence::kernel::replay(&evidence::kernel::rtmr1_log(kernel));
    let rtmr2 = evidence::kernel::replay(&evidence::kernel::rtmr2_log(cmdline, initrd));

    let policy = OsPolicy {
        entries: vec![OsEntry {
            os_image_hash: os_image_hash.to_owned(),
            version: Some("0.6.0".to_owned()),
            is_dev: None,
            vm_shape: VmShape {
                cpu_count: Some(2),
                memory_size: Some(TWO_GIB),
                ..VmShape::default()
            },
            mrtd: vec![hex::encode(single), hex::encode(two)],
            rtmr0: None,
            rtmr1: hex::encode(rtmr1),
            rtmr2: hex::encode(rtmr2),
        }],
    };
    let opts = Options {
        os_policy: Some(policy),
        allow_unpinned_os: true,
        ..Options::default()
    };
    let r = run(&fixture_bundle(&f), &opts).await;
    assert_eq!(
        r.get("rtmr-replay").unwrap().status,
        Status::Pass,
        "{}",
        r.to_text()
    );
    let (status, detail) = os_check(&r);
    // MRTD (QEMU 8.2.2: two passes), RTMR1 and RTMR2 match; RTMR0 is not pinned.
    assert_eq!(status, Status::NotApplicable, "{detail}");
    let os = r.os.clone().unwrap();
    assert_eq!(os.from_policy, vec!["MRTD", "RTMR1", "RTMR2"]);
    assert_eq!(os.unpinned, vec!["RTMR0"]);
    assert_eq!(os.os_image_hash.as_deref(), Some(os_image_hash));
    assert_eq!(os.vm_shape.as_ref().unwrap().memory_size, Some(TWO_GIB));
    assert_eq!(os.version.as_deref(), Some("0.6.0"));
    let kp = r.key_provider.clone().unwrap();
    assert_eq!(kp.name, "kms");
    assert!(kp.id.starts_with("3059301306072a8648ce3d0201"), "{}", kp.id);
    let text = r.to_text();
    assert!(text.contains("key provider: kms 3059"), "{text}");
    let log = EventLog::from_value(&f["event_log"]).unwrap();
    assert_eq!(
        log.identity().unwrap().app_id.as_deref(),
        Some("86b0e55f2fa8e4fb69d890f14f54d5612707646e")
    );
}

/// The legacy fixture (QEMU 9.2.1, 64 GiB, a GPU): its os_image_hash, key provider and
/// app id are reported; without a pin the OS check fails and says so.
#[tokio::test]
async fn dstack_legacy_fixture_reports_image_key_provider_and_app_id() {
    let f = fixture("quote-report.json");
    let r = run(&fixture_bundle(&f), &Options::default()).await;
    assert_eq!(
        r.get("rtmr-replay").unwrap().status,
        Status::Pass,
        "{}",
        r.to_text()
    );
    assert_eq!(os_check(&r).0, Status::Fail);
    let os = r.os.clone().unwrap();
    assert_eq!(
        os.os_image_hash.as_deref(),
        Some("14ad42d0270b444eaeb53918a5a94d9b17eec7a817cd336173b17c5327541c67")
    );
    let shape = os.vm_shape.unwrap();
    assert_eq!(
        (shape.cpu_count, shape.memory_size),
        (Some(16), Some(64 << 30))
    );
    assert_eq!(shape.other["num_gpus"], 1);
    let kp = r.key_provider.clone().unwrap();
    assert_eq!(kp.name, "local-sgx");
    assert_eq!(
        kp.id,
        "1b7a49378403249b6986a907844cab0921eca32dd47e657f3c10311ccaeccf8b"
    );
    let log = EventLog::from_value(&f["event_log"]).unwrap();
    assert_eq!(
        log.identity().unwrap().app_id.as_deref(),
        Some("3763bc34552cf3a27ff71ad5f7a90471562a1a2d")
    );
}
