//! RTMR0 of a dstack TD: the events its TDX firmware (OVMF) measures before the kernel,
//! recomputed from the firmware's TDVF metadata and the VM's memory size — all but the
//! three ACPI table events, which only QEMU (dstack's own build of it) can rebuild.
//!
//! dstack's firmware extends RTMR0 with 13 events, in this order (event types from the
//! TCG PC Client specification; digests as dstack's measurement tool `dstack-mr`
//! computes them, dstack-mr's src/tdvf.rs at dstack commit
//! `312dc605ebaaf93372534ffb135ea011533d28e9`):
//!
//! * event 1, the TD HOB (`EV_EFI_HANDOFF_TABLES2`): SHA-384 of the hand-off block list the
//!   VMM gives the firmware — a 56-byte PHIT header (version 9, its end-of-list field the
//!   HOB's address plus the list's length plus 8) and one 48-byte resource descriptor per
//!   memory range: the firmware's TD_HOB and TEMP_MEM sections (accepted, type 0), the gaps
//!   between them and the rest of RAM (type 7). With 0xB0000000 bytes of memory or more,
//!   QEMU keeps 2 GiB below 4 GiB and puts the rest above 4 GiB, so the last range is split
//!   there ([`TdHobLayout`]);
//! * event 2, the configuration firmware volume (`EV_EFI_PLATFORM_FIRMWARE_BLOB2`): a
//!   constant digest for dstack's firmware ([`CFV_DIGEST`]);
//! * events 3 to 7, the secure-boot variables `SecureBoot`, `PK`, `KEK` (vendor GUID
//!   `8BE4DF61-93CA-11D2-AA0D-00E098032B8C`), `db`, `dbx` (vendor GUID
//!   `D719B2CB-3D3A-4596-A3BC-DAD00E67656F`) (`EV_EFI_VARIABLE_DRIVER_CONFIG`), all absent:
//!   SHA-384 of the GUID (on-disk byte order), the name's length in characters (u64), a
//!   zero data length (u64) and the name in UTF-16LE;
//! * event 8, the separator (`EV_SEPARATOR`): SHA-384 of four zero bytes;
//! * events 9 to 11, QEMU's etc/table-loader, etc/acpi/rsdp and etc/acpi/tables
//!   (`EV_PLATFORM_CONFIG_FLAGS`): taken from the event log, not recomputed;
//! * event 12, `BootOrder` (`EV_EFI_VARIABLE_BOOT`): SHA-384 of two zero bytes;
//! * event 13, `Boot0000` (`EV_EFI_VARIABLE_BOOT`): a constant digest for dstack's
//!   (pre-202505) firmware ([`BOOT0000_DIGEST`]).
//!
//! [`check_event_log`] holds an event log's RTMR0 events to that sequence and returns the
//! three ACPI digests it could not check. The ACPI tables carry AML code the guest kernel
//! runs, so a verifier who needs RTMR0 pinned still pins it (a policy entry's `rtmr0`).

use sha2::{Digest, Sha384};

use crate::event_log::{EventLog, extend};
use crate::tdvf::{SECTION_TD_HOB, SECTION_TEMP_MEM, Tdvf};

/// Events dstack's firmware measures into RTMR0.
pub const EVENT_COUNT: usize = 13;

/// Digest of the configuration firmware volume event, as `dstack-mr` states it for
/// dstack's firmware (`cfv_image_hash` in dstack-mr's src/tdvf.rs, dstack commit
/// `312dc605ebaaf93372534ffb135ea011533d28e9`); the same in both dstack fixtures.
pub const CFV_DIGEST: [u8; 48] = hex48(
    b"344bc51c980ba621aaa00da3ed7436f7d6e549197dfe699515dfa2c6583d95e6412af21c097d473155875ffd561d6790",
);

/// Digest of the `Boot0000` event (OVMF's UiApp boot option) for dstack's pre-202505
/// firmware, as `dstack-mr` states it (`boot000_hash`, same file and commit as
/// [`CFV_DIGEST`]).
pub const BOOT0000_DIGEST: [u8; 48] = hex48(
    b"23ada07f5261f12f34a0bd8e46760962d6b4d576a416f1fea1c64bc656b1d28eacf7047ae6e967c58fd2a98bfa74c298",
);

/// Event types (TCG PC Client Platform Firmware Profile).
const EV_SEPARATOR: u32 = 0x4;
const EV_PLATFORM_CONFIG_FLAGS: u32 = 0xa;
const EV_EFI_VARIABLE_DRIVER_CONFIG: u32 = 0x8000_0001;
const EV_EFI_VARIABLE_BOOT: u32 = 0x8000_0002;
const EV_EFI_PLATFORM_FIRMWARE_BLOB2: u32 = 0x8000_000a;
const EV_EFI_HANDOFF_TABLES2: u32 = 0x8000_000b;

/// EFI global variable vendor GUID `8BE4DF61-93CA-11D2-AA0D-00E098032B8C`, on-disk order.
const EFI_GLOBAL_VARIABLE: [u8; 16] = [
    0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c,
];
/// EFI image security database GUID `D719B2CB-3D3A-4596-A3BC-DAD00E67656F`, on-disk order.
const EFI_IMAGE_SECURITY_DATABASE: [u8; 16] = [
    0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45, 0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f,
];

/// Guest memory QEMU keeps below 4 GiB when the VM has at least
/// [`SPLIT_MEMORY_THRESHOLD`] bytes (q35).
const LOW_MEMORY_WHEN_SPLIT: u64 = 0x8000_0000;
/// From this memory size on, QEMU splits RAM at 2 GiB and puts the rest above 4 GiB.
const SPLIT_MEMORY_THRESHOLD: u64 = 0xb000_0000;
const FOUR_GIB: u64 = 0x1_0000_0000;
/// Most accepted ranges a TD HOB layout may have (dstack's firmware has four).
const MAX_RANGES: usize = 64;

const fn hex48(s: &[u8; 96]) -> [u8; 48] {
    const fn nibble(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not a lowercase hex digit"),
        }
    }
    let mut out = [0u8; 48];
    let mut i = 0;
    while i < 48 {
        out[i] = (nibble(s[2 * i]) << 4) | nibble(s[2 * i + 1]);
        i += 1;
    }
    out
}

/// The RTMR0 events, in the order the firmware measures them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rtmr0Event {
    TdHob,
    FirmwareVolume,
    SecureBoot,
    Pk,
    Kek,
    Db,
    Dbx,
    Separator,
    AcpiLoader,
    AcpiRsdp,
    AcpiTables,
    BootOrder,
    Boot0000,
}

impl Rtmr0Event {
    /// All events, in measurement order.
    pub const ALL: [Self; EVENT_COUNT] = [
        Self::TdHob,
        Self::FirmwareVolume,
        Self::SecureBoot,
        Self::Pk,
        Self::Kek,
        Self::Db,
        Self::Dbx,
        Self::Separator,
        Self::AcpiLoader,
        Self::AcpiRsdp,
        Self::AcpiTables,
        Self::BootOrder,
        Self::Boot0000,
    ];

    /// What the event measures, as reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::TdHob => "TD HOB",
            Self::FirmwareVolume => "configuration firmware volume",
            Self::SecureBoot => "SecureBoot variable",
            Self::Pk => "PK variable",
            Self::Kek => "KEK variable",
            Self::Db => "db variable",
            Self::Dbx => "dbx variable",
            Self::Separator => "separator",
            Self::AcpiLoader => "ACPI etc/table-loader",
            Self::AcpiRsdp => "ACPI etc/acpi/rsdp",
            Self::AcpiTables => "ACPI etc/acpi/tables",
            Self::BootOrder => "BootOrder variable",
            Self::Boot0000 => "Boot0000 variable",
        }
    }

    /// The event type the firmware logs it with.
    pub fn event_type(self) -> u32 {
        match self {
            Self::TdHob => EV_EFI_HANDOFF_TABLES2,
            Self::FirmwareVolume => EV_EFI_PLATFORM_FIRMWARE_BLOB2,
            Self::SecureBoot | Self::Pk | Self::Kek | Self::Db | Self::Dbx => {
                EV_EFI_VARIABLE_DRIVER_CONFIG
            }
            Self::Separator => EV_SEPARATOR,
            Self::AcpiLoader | Self::AcpiRsdp | Self::AcpiTables => EV_PLATFORM_CONFIG_FLAGS,
            Self::BootOrder | Self::Boot0000 => EV_EFI_VARIABLE_BOOT,
        }
    }

    /// Whether the event measures QEMU's ACPI tables (not recomputed).
    pub fn is_acpi(self) -> bool {
        matches!(self, Self::AcpiLoader | Self::AcpiRsdp | Self::AcpiTables)
    }
}

/// Why RTMR0 cannot be recomputed, or an event log's RTMR0 events differ from it. Event
/// positions count from 1 among the log's RTMR0 events; `index` is the event's place in
/// the whole log (from 0).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rtmr0Error {
    #[error("the firmware's TDVF metadata has {0} TD_HOB sections (one expected)")]
    TdHobSections(usize),
    #[error("the firmware's TD_HOB and TEMP_MEM sections number {0} (at most {MAX_RANGES})")]
    TooManyRanges(usize),
    #[error("the firmware's TD_HOB and TEMP_MEM sections overlap at {0:#x}")]
    OverlappingRanges(u64),
    #[error("a TD_HOB or TEMP_MEM section is empty")]
    EmptyRange,
    #[error(
        "the VM's memory ({memory_size:#x} bytes) does not extend past the firmware's TD_HOB and TEMP_MEM sections (up to {end:#x})"
    )]
    MemoryTooSmall { memory_size: u64, end: u64 },
    #[error(
        "RTMR0 event {position} ({event}) is missing: the event log has {found} RTMR0 events, dstack's firmware measures {EVENT_COUNT}"
    )]
    Missing {
        position: usize,
        event: &'static str,
        found: usize,
    },
    #[error(
        "RTMR0 event {position} (log entry {index}) is one too many: dstack's firmware measures {EVENT_COUNT}"
    )]
    Extra { position: usize, index: usize },
    #[error(
        "RTMR0 event {position} ({event}, log entry {index}) has event type {found:#x}, the firmware logs it as {expected:#x}"
    )]
    WrongType {
        position: usize,
        event: &'static str,
        index: usize,
        found: u32,
        expected: u32,
    },
    #[error(
        "RTMR0 event {position} ({event}, log entry {index}) has digest {found}, recomputed {expected}"
    )]
    Mismatch {
        position: usize,
        event: &'static str,
        index: usize,
        found: String,
        expected: String,
    },
}

/// What the VMM's TD HOB is made of: where the firmware expects it and the memory ranges
/// the firmware's metadata has the VMM accept (its TD_HOB and TEMP_MEM sections).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TdHobLayout {
    /// Guest physical address of the TD HOB.
    pub td_hob_address: u64,
    /// Accepted ranges (start, length), sorted, disjoint, none empty.
    pub accepted: Vec<(u64, u64)>,
}

impl TdHobLayout {
    /// The layout of the firmware described by `tdvf`: exactly one TD_HOB section, TD_HOB
    /// and TEMP_MEM sections neither empty nor overlapping.
    pub fn from_tdvf(tdvf: &Tdvf) -> Result<Self, Rtmr0Error> {
        let hobs: Vec<u64> = tdvf
            .sections
            .iter()
            .filter(|s| s.section_type == SECTION_TD_HOB)
            .map(|s| s.memory_address)
            .collect();
        let [td_hob_address] = hobs[..] else {
            return Err(Rtmr0Error::TdHobSections(hobs.len()));
        };
        let ranges: Vec<(u64, u64)> = tdvf
            .sections
            .iter()
            .filter(|s| matches!(s.section_type, SECTION_TD_HOB | SECTION_TEMP_MEM))
            .map(|s| (s.memory_address, s.memory_data_size))
            .collect();
        Self::new(td_hob_address, ranges)
    }

    /// A layout from its parts (e.g. dstack's TD HOB witness), checked and sorted.
    pub fn new(td_hob_address: u64, mut accepted: Vec<(u64, u64)>) -> Result<Self, Rtmr0Error> {
        if accepted.len() > MAX_RANGES {
            return Err(Rtmr0Error::TooManyRanges(accepted.len()));
        }
        accepted.sort_unstable();
        let mut end = 0u64;
        for &(start, len) in &accepted {
            if len == 0 {
                return Err(Rtmr0Error::EmptyRange);
            }
            if start < end {
                return Err(Rtmr0Error::OverlappingRanges(start));
            }
            end = start
                .checked_add(len)
                .ok_or(Rtmr0Error::OverlappingRanges(start))?;
        }
        Ok(Self {
            td_hob_address,
            accepted,
        })
    }

    /// The HOB list the VMM hands a TD with `memory_size` bytes of RAM.
    pub fn hob_list(&self, memory_size: u64) -> Result<Vec<u8>, Rtmr0Error> {
        let accepted_end = self.accepted.last().map_or(0, |&(s, l)| s + l);
        if memory_size <= accepted_end {
            return Err(Rtmr0Error::MemoryTooSmall {
                memory_size,
                end: accepted_end,
            });
        }
        // Resource descriptors: (type, start, length). Type 0: system memory (accepted),
        // type 7: unaccepted memory.
        let mut resources = Vec::with_capacity(2 * self.accepted.len() + 2);
        let mut at = 0u64;
        for &(start, len) in &self.accepted {
            if start > at {
                resources.push((7u8, at, start - at));
            }
            resources.push((0u8, start, len));
            at = start + len;
        }
        if memory_size >= SPLIT_MEMORY_THRESHOLD {
            if at < LOW_MEMORY_WHEN_SPLIT {
                resources.push((7, at, LOW_MEMORY_WHEN_SPLIT - at));
            }
            // The rest of RAM (memory_size - 2 GiB) lies above 4 GiB.
            resources.push((7, FOUR_GIB, memory_size - LOW_MEMORY_WHEN_SPLIT));
        } else {
            resources.push((7, at, memory_size - at));
        }

        let mut hob = Vec::with_capacity(56 + 48 * resources.len());
        // PHIT header: type 1, length 56, version 9, the rest zero but the end of the list.
        hob.extend(1u16.to_le_bytes());
        hob.extend(56u16.to_le_bytes());
        hob.extend([0u8; 4]);
        hob.extend(9u32.to_le_bytes());
        hob.extend([0u8; 36]);
        let end_of_list = self.td_hob_address + (56 + 48 * resources.len() as u64) + 8;
        hob.extend(end_of_list.to_le_bytes());
        for (kind, start, len) in resources {
            // Resource descriptor: type 3, length 48, owner GUID zero, resource type,
            // attributes 7 (present, initialized, tested), start, length.
            hob.extend(3u16.to_le_bytes());
            hob.extend(48u16.to_le_bytes());
            hob.extend([0u8; 4]);
            hob.extend([0u8; 16]);
            hob.extend(u32::from(kind).to_le_bytes());
            hob.extend(7u32.to_le_bytes());
            hob.extend(start.to_le_bytes());
            hob.extend(len.to_le_bytes());
        }
        Ok(hob)
    }

    /// Digest of the TD HOB event for `memory_size` bytes of RAM.
    pub fn digest(&self, memory_size: u64) -> Result<[u8; 48], Rtmr0Error> {
        Ok(Sha384::digest(self.hob_list(memory_size)?).into())
    }
}

/// Digest of an absent EFI variable's measurement.
fn variable_digest(guid: &[u8; 16], name: &str) -> [u8; 48] {
    let mut h = Sha384::new();
    h.update(guid);
    h.update((name.encode_utf16().count() as u64).to_le_bytes());
    h.update(0u64.to_le_bytes());
    for unit in name.encode_utf16() {
        h.update(unit.to_le_bytes());
    }
    h.finalize().into()
}

/// The RTMR0 digests a dstack TD's firmware measures, `None` for the ACPI events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedRtmr0 {
    pub digests: [Option<[u8; 48]>; EVENT_COUNT],
}

impl ExpectedRtmr0 {
    /// The events of a TD booting the firmware of `layout` with `memory_size` bytes of RAM.
    pub fn new(layout: &TdHobLayout, memory_size: u64) -> Result<Self, Rtmr0Error> {
        let td_hob = layout.digest(memory_size)?;
        let digests = Rtmr0Event::ALL.map(|e| match e {
            Rtmr0Event::TdHob => Some(td_hob),
            Rtmr0Event::FirmwareVolume => Some(CFV_DIGEST),
            Rtmr0Event::SecureBoot => Some(variable_digest(&EFI_GLOBAL_VARIABLE, "SecureBoot")),
            Rtmr0Event::Pk => Some(variable_digest(&EFI_GLOBAL_VARIABLE, "PK")),
            Rtmr0Event::Kek => Some(variable_digest(&EFI_GLOBAL_VARIABLE, "KEK")),
            Rtmr0Event::Db => Some(variable_digest(&EFI_IMAGE_SECURITY_DATABASE, "db")),
            Rtmr0Event::Dbx => Some(variable_digest(&EFI_IMAGE_SECURITY_DATABASE, "dbx")),
            Rtmr0Event::Separator => Some(Sha384::digest([0u8; 4]).into()),
            Rtmr0Event::AcpiLoader | Rtmr0Event::AcpiRsdp | Rtmr0Event::AcpiTables => None,
            Rtmr0Event::BootOrder => Some(Sha384::digest([0u8; 2]).into()),
            Rtmr0Event::Boot0000 => Some(BOOT0000_DIGEST),
        });
        Ok(Self { digests })
    }

    /// The events of a TD booting firmware `tdvf` with `memory_size` bytes of RAM.
    pub fn from_tdvf(tdvf: &Tdvf, memory_size: u64) -> Result<Self, Rtmr0Error> {
        Self::new(&TdHobLayout::from_tdvf(tdvf)?, memory_size)
    }
}

/// The three ACPI table digests of an event log's RTMR0 events, which are not recomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcpiDigests {
    /// etc/table-loader.
    pub loader: [u8; 48],
    /// etc/acpi/rsdp.
    pub rsdp: [u8; 48],
    /// etc/acpi/tables.
    pub tables: [u8; 48],
}

impl AcpiDigests {
    /// RTMR0 with these ACPI digests and the `expected` others.
    pub fn rtmr0(&self, expected: &ExpectedRtmr0) -> [u8; 48] {
        let mut r = [0u8; 48];
        for (e, d) in Rtmr0Event::ALL.iter().zip(&expected.digests) {
            let digest = match e {
                Rtmr0Event::AcpiLoader => self.loader,
                Rtmr0Event::AcpiRsdp => self.rsdp,
                Rtmr0Event::AcpiTables => self.tables,
                _ => d.unwrap_or([0u8; 48]),
            };
            extend(&mut r, &digest);
        }
        r
    }
}

/// Holds the RTMR0 events of `log` to `expected`: exactly [`EVENT_COUNT`] events, each of
/// its event type, each recomputed digest equal. Returns the ACPI digests, taken on trust;
/// the first event that differs is named in the error.
pub fn check_event_log(
    log: &EventLog,
    expected: &ExpectedRtmr0,
) -> Result<AcpiDigests, Rtmr0Error> {
    let events: Vec<(usize, &crate::event_log::Event)> = log
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.imr == 0)
        .collect();
    let mut acpi = [[0u8; 48]; 3];
    for (i, (event, want)) in Rtmr0Event::ALL.iter().zip(&expected.digests).enumerate() {
        let position = i + 1;
        let Some(&(index, got)) = events.get(i) else {
            return Err(Rtmr0Error::Missing {
                position,
                event: event.name(),
                found: events.len(),
            });
        };
        if got.event_type != event.event_type() {
            return Err(Rtmr0Error::WrongType {
                position,
                event: event.name(),
                index,
                found: got.event_type,
                expected: event.event_type(),
            });
        }
        match want {
            Some(want) if *want != got.digest => {
                return Err(Rtmr0Error::Mismatch {
                    position,
                    event: event.name(),
                    index,
                    found: hex::encode(got.digest),
                    expected: hex::encode(want),
                });
            }
            Some(_) => {}
            None => {
                let slot = match event {
                    Rtmr0Event::AcpiLoader => 0,
                    Rtmr0Event::AcpiRsdp => 1,
                    _ => 2,
                };
                acpi[slot] = got.digest;
            }
        }
    }
    if let Some(&(index, _)) = events.get(EVENT_COUNT) {
        return Err(Rtmr0Error::Extra {
            position: EVENT_COUNT + 1,
            index,
        });
    }
    let [loader, rsdp, tables] = acpi;
    Ok(AcpiDigests {
        loader,
        rsdp,
        tables,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_decode() {
        assert_eq!(hex::encode(CFV_DIGEST)[..16], *"344bc51c980ba621");
        assert_eq!(hex::encode(BOOT0000_DIGEST)[..16], *"23ada07f5261f12f");
    }

    #[test]
    fn bad_layouts_are_refused() {
        assert_eq!(
            TdHobLayout::new(0x1000, vec![(0x1000, 0x2000), (0x2000, 0x1000)]),
            Err(Rtmr0Error::OverlappingRanges(0x2000))
        );
        assert_eq!(
            TdHobLayout::new(0x1000, vec![(0x1000, 0)]),
            Err(Rtmr0Error::EmptyRange)
        );
        let l = TdHobLayout::new(0x1000, vec![(0x1000, 0x1000)]).unwrap();
        assert_eq!(
            l.hob_list(0x2000),
            Err(Rtmr0Error::MemoryTooSmall {
                memory_size: 0x2000,
                end: 0x2000
            })
        );
        assert!(l.hob_list(0x2001).is_ok());
    }
}
