//! RTMR0's firmware events recomputed (`evidence::rtmr0`) against a real dstack TD: the
//! dstack verifier's "lite" fixture (dstack OS 0.6.0, QEMU 8.2.2, 2 vCPUs, 2 GiB; see
//! `tests/data/dstack-verifier/README.md`). The fixture carries no firmware, but its
//! `vm_config` carries dstack's TD HOB witness (the firmware's TD_HOB and TEMP_MEM
//! sections, bound to `os_image_hash` through `measurement.tdx.cbor` and the checksum
//! file); the recomputed events must equal the fixture's event log, whose replay is the
//! quote's RTMR0.

use crate::fixtures::{b64, read};
use evidence::event_log::{Event, EventLog};
use evidence::quote::TdxQuote;
use evidence::rtmr0::{EVENT_COUNT, ExpectedRtmr0, Rtmr0Error, check_event_log};
use evidence::tdvf::{SECTION_TD_HOB, SECTION_TEMP_MEM, Tdvf, TdvfSection};
use serde_json::Value;
use sha2::{Digest, Sha256};

const TWO_GIB: u64 = 2 << 30;

fn fixture() -> Value {
    serde_json::from_slice(&read("dstack-verifier/tdx-lite-getquote.json")).unwrap()
}

/// The firmware's TD_HOB and TEMP_MEM sections, from dstack's TD HOB witness (v1: LEB128
/// page numbers — base page, TD_HOB page minus base, range count, then per range its
/// start page minus base and its page count), read from the image's measurement
/// document, which the checksum file (whose SHA-256 is `os_image_hash`) covers.
fn witness_sections(f: &Value) -> Vec<TdvfSection> {
    let vm: Value = serde_json::from_str(f["vm_config"].as_str().unwrap()).unwrap();
    let sums = b64(vm["tdx_measurement"]["checksum_file"].as_str().unwrap());
    let cbor = b64(vm["tdx_measurement"]["measurement"].as_str().unwrap());
    assert_eq!(
        hex::encode(Sha256::digest(&sums)),
        vm["os_image_hash"].as_str().unwrap()
    );
    let listed = evidence::os_image::parse_checksums(std::str::from_utf8(&sums).unwrap()).unwrap();
    assert_eq!(listed[0].0, <[u8; 32]>::from(Sha256::digest(&cbor)));
    // The CBOR text key "td_hob" (0x66) and its byte string (0x40 + length < 24).
    let key = b"\x66td_hob";
    let at = cbor.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    let len = usize::from(cbor[at] - 0x40);
    assert!(len < 24);
    let witness = &cbor[at + 1..at + 1 + len];
    assert_eq!(hex::encode(witness), "80100904000609020b021010");
    let mut bytes = witness.iter();
    let mut varuint = || {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = *bytes.next().unwrap();
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return v;
            }
        }
    };
    let base = varuint();
    let td_hob = base + varuint();
    let count = varuint();
    (0..count)
        .map(|_| {
            let start = base + varuint();
            let pages = varuint();
            TdvfSection {
                data_offset: 0,
                raw_data_size: 0,
                memory_address: start * 0x1000,
                memory_data_size: pages * 0x1000,
                section_type: if start == td_hob {
                    SECTION_TD_HOB
                } else {
                    SECTION_TEMP_MEM
                },
                attributes: 0,
            }
        })
        .collect()
}

fn expected(f: &Value, memory: u64) -> ExpectedRtmr0 {
    let tdvf = Tdvf {
        sections: witness_sections(f),
    };
    ExpectedRtmr0::from_tdvf(&tdvf, memory).unwrap()
}

fn log(f: &Value) -> EventLog {
    EventLog::from_value(&f["event_log"]).unwrap()
}

fn quote_rtmr0(f: &Value) -> [u8; 48] {
    let q = hex::decode(f["quote"].as_str().unwrap()).unwrap();
    TdxQuote::parse(&q).unwrap().report.rtmr0
}

/// The log's entry index of its `n`-th RTMR0 event (from 1).
fn rtmr0_index(log: &EventLog, n: usize) -> usize {
    log.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.imr == 0)
        .nth(n - 1)
        .unwrap()
        .0
}

#[test]
fn lite_fixture_rtmr0_events_are_recomputed_but_for_acpi() {
    let f = fixture();
    let log = log(&f);
    let want = expected(&f, TWO_GIB);
    // The recomputed events are the fixture's, digest for digest.
    let logged: Vec<[u8; 48]> = log
        .events
        .iter()
        .filter(|e| e.imr == 0)
        .map(|e| e.digest)
        .collect();
    assert_eq!(logged.len(), EVENT_COUNT);
    for (i, d) in want.digests.iter().enumerate() {
        match d {
            Some(d) => assert_eq!(*d, logged[i], "event {}", i + 1),
            None => assert!((8..11).contains(&i), "event {} not recomputed", i + 1),
        }
    }
    assert!(hex::encode(want.digests[0].unwrap()).starts_with("0b8772e5"));
    let acpi = check_event_log(&log, &want).unwrap();
    assert!(hex::encode(acpi.loader).starts_with("095d04cf"));
    assert!(hex::encode(acpi.rsdp).starts_with("8d9a4d47"));
    assert!(hex::encode(acpi.tables).starts_with("3070721e"));
    // With those three, RTMR0 is the quote's.
    assert_eq!(acpi.rtmr0(&want), quote_rtmr0(&f));
}

#[test]
fn another_memory_size_fails_on_the_td_hob() {
    let f = fixture();
    let log = log(&f);
    // 4 GiB: memory split at 2 GiB / 4 GiB; 1 GiB: one smaller range.
    for memory in [4u64 << 30, 1 << 30, TWO_GIB + 0x1000] {
        let err = check_event_log(&log, &expected(&f, memory)).unwrap_err();
        assert!(
            matches!(
                err,
                Rtmr0Error::Mismatch {
                    position: 1,
                    event: "TD HOB",
                    index: 0,
                    ..
                }
            ),
            "{memory:#x}: {err}"
        );
        assert!(
            err.to_string().starts_with("RTMR0 event 1 (TD HOB"),
            "{err}"
        );
    }
}

#[test]
fn a_changed_secure_boot_event_fails_naming_it() {
    let f = fixture();
    let want = expected(&f, TWO_GIB);
    let mut log = log(&f);
    let pk = rtmr0_index(&log, 4);
    log.events[pk].digest[47] ^= 1;
    let err = check_event_log(&log, &want).unwrap_err();
    assert!(
        matches!(
            err,
            Rtmr0Error::Mismatch {
                position: 4,
                event: "PK variable",
                ..
            }
        ),
        "{err}"
    );
    // A changed ACPI digest is not detected here: those are taken on trust.
    let mut log = self::log(&f);
    let tables = rtmr0_index(&log, 11);
    log.events[tables].digest[0] ^= 1;
    let acpi = check_event_log(&log, &want).unwrap();
    assert_ne!(acpi.rtmr0(&want), quote_rtmr0(&f));
}

#[test]
fn extra_or_missing_rtmr0_events_fail_naming_the_event() {
    let f = fixture();
    let want = expected(&f, TWO_GIB);
    let original = log(&f);
    let extra_event = |digest: [u8; 48]| Event {
        imr: 0,
        event_type: 0x8000_0002,
        name: String::new(),
        payload: Vec::new(),
        digest,
    };

    // One more at the end.
    let mut log = original.clone();
    log.events.push(extra_event([7; 48]));
    let last = log.events.len() - 1;
    let err = check_event_log(&log, &want).unwrap_err();
    assert_eq!(
        err,
        Rtmr0Error::Extra {
            position: 14,
            index: last
        }
    );

    // One more in the middle (a second dbx measurement before the separator).
    let mut log = original.clone();
    let dbx = rtmr0_index(&log, 7);
    let copy = log.events[dbx].clone();
    log.events.insert(dbx + 1, copy);
    let err = check_event_log(&log, &want).unwrap_err();
    assert!(
        matches!(
            err,
            Rtmr0Error::WrongType {
                position: 8,
                event: "separator",
                found: 0x8000_0001,
                expected: 0x4,
                ..
            }
        ),
        "{err}"
    );

    // Boot0000 missing.
    let mut log = original.clone();
    let boot = rtmr0_index(&log, 13);
    log.events.remove(boot);
    let err = check_event_log(&log, &want).unwrap_err();
    assert_eq!(
        err,
        Rtmr0Error::Missing {
            position: 13,
            event: "Boot0000 variable",
            found: 12
        }
    );

    // SecureBoot missing: PK's measurement now stands where SecureBoot's should.
    let mut log = original.clone();
    let sb = rtmr0_index(&log, 3);
    log.events.remove(sb);
    let err = check_event_log(&log, &want).unwrap_err();
    assert!(
        matches!(
            err,
            Rtmr0Error::Mismatch {
                position: 3,
                event: "SecureBoot variable",
                ..
            }
        ),
        "{err}"
    );

    // An ACPI event missing: the boot-order events shift into its place.
    let mut log = original.clone();
    let rsdp = rtmr0_index(&log, 10);
    log.events.remove(rsdp);
    let err = check_event_log(&log, &want).unwrap_err();
    assert!(
        matches!(
            err,
            Rtmr0Error::WrongType {
                position: 11,
                event: "ACPI etc/acpi/tables",
                ..
            }
        ),
        "{err}"
    );
}

/// The legacy fixture (QEMU 9.2.1, 16 vCPUs, 64 GiB, a GPU) carries no witness, but its
/// firmware has the same TD_HOB and TEMP_MEM sections as the lite fixture's: with 64 GiB
/// (RAM split at 2 GiB, the rest above 4 GiB) the recomputed events equal its log, and
/// with its three ACPI digests RTMR0 is its quote's.
#[test]
fn legacy_fixture_64_gib_splits_memory_above_4_gib() {
    let lite = fixture();
    let f: Value = serde_json::from_slice(&read("dstack-verifier/quote-report.json")).unwrap();
    let log = log(&f);
    let want = expected(&lite, 64 << 30);
    assert!(hex::encode(want.digests[0].unwrap()).starts_with("8ae1e425"));
    let acpi = check_event_log(&log, &want).unwrap();
    assert_eq!(acpi.rtmr0(&want), quote_rtmr0(&f));
    // Its TD HOB is not the 2 GiB one.
    let err = check_event_log(&log, &expected(&lite, TWO_GIB)).unwrap_err();
    assert!(
        matches!(err, Rtmr0Error::Mismatch { position: 1, .. }),
        "{err}"
    );
}
