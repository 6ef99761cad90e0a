//! TDX firmware (TDVF, e.g. OVMF built with TDX support): its metadata and the MRTD the
//! TDX module computes when the VMM adds the firmware's pages to a new TD.
//!
//! Layout (TDVF design guide, "TDVF metadata"): the last 32 bytes of the image follow an
//! OVMF GUID-ed table whose footer GUID `96b582de-1fb2-45f7-baea-a366c55a082d` sits just
//! before them, preceded by the table's total length (u16). Walking the table backwards,
//! each entry ends with its GUID, preceded by its length (u16, the whole entry); the entry
//! `e47a6535-984a-4798-865e-4685a7bf8ec2` ends with a u32 offset, counted back from the end
//! of the image, of the TDVF descriptor: `"TDVF"`, length, version (1), number of sections
//! (u32 each), then 32-byte section records: data offset (u32), raw data size (u32),
//! memory address (u64), memory size (u64), type (u32), attributes (u32).
//!
//! MRTD (TDX module ABI): every page the VMM adds with TDH.MEM.PAGE.ADD extends MRTD with a
//! 128-byte record `"MEM.PAGE.ADD"` ‖ zeros, with the page's guest physical address at
//! bytes 16..24 (little endian); every 256-byte chunk measured with TDH.MR.EXTEND extends it
//! with the 128-byte record `"MR.EXTEND"` ‖ zeros, GPA at 16..24, followed by the chunk's
//! 256 bytes. MRTD is the SHA-384 of that stream. Sections with the `MR.EXTEND` attribute
//! are measured (their bytes are the image's, from the data offset, for the whole memory
//! size, as QEMU maps them); sections with `PAGE.AUG` are not added at all. QEMU 8 added
//! all pages of a section before extending them (two passes); later versions extend each
//! page right after adding it (one pass). Both orders are computed.

use sha2::{Digest, Sha384};

use crate::le::{u16_at, u32_at, u64_at};

/// A guest page.
pub const PAGE_SIZE: u64 = 0x1000;
/// Bytes measured by one TDH.MR.EXTEND.
const MR_EXTEND_CHUNK: usize = 0x100;
/// Section attribute: the section's content is measured into MRTD.
pub const ATTRIBUTE_MR_EXTEND: u32 = 0x1;
/// Section attribute: the pages are added later (TDH.MEM.PAGE.AUG), not measured.
pub const ATTRIBUTE_PAGE_AUG: u32 = 0x2;

/// Section types of the TDVF descriptor.
pub const SECTION_BFV: u32 = 0;
pub const SECTION_CFV: u32 = 1;
pub const SECTION_TD_HOB: u32 = 2;
pub const SECTION_TEMP_MEM: u32 = 3;

const FOOTER_GUID: [u8; 16] = guid_le(
    0x96b5_82de,
    0x1fb2,
    0x45f7,
    [0xba, 0xea, 0xa3, 0x66, 0xc5, 0x5a, 0x08, 0x2d],
);
const METADATA_OFFSET_GUID: [u8; 16] = guid_le(
    0xe47a_6535,
    0x984a,
    0x4798,
    [0x86, 0x5e, 0x46, 0x85, 0xa7, 0xbf, 0x8e, 0xc2],
);
/// Bytes after the GUID-ed table's footer GUID at the end of the image.
const BYTES_AFTER_FOOTER: usize = 32;
/// Most sections a descriptor may declare (real firmware has about six).
const MAX_SECTIONS: u32 = 64;
/// Most pages the MRTD computation adds in all (16 GiB of guest memory).
pub const MAX_PAGES: u64 = 1 << 22;

/// A GUID in its on-disk (mixed-endian) byte order.
const fn guid_le(a: u32, b: u16, c: u16, d: [u8; 8]) -> [u8; 16] {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    let c = c.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6],
        d[7],
    ]
}

/// Why a firmware image yields no TDVF metadata or no MRTD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TdvfError {
    #[error("firmware image is too small ({0} bytes)")]
    TooSmall(usize),
    #[error("no OVMF GUID-ed table at the end of the firmware (footer GUID missing)")]
    NoGuidTable,
    #[error("the OVMF GUID-ed table's length {0} does not fit in the image")]
    BadTableLength(usize),
    #[error("a GUID-ed table entry's length {0} does not fit in the table")]
    BadEntryLength(usize),
    #[error("the firmware has no TDX metadata entry (not a TDX firmware)")]
    NoTdxMetadata,
    #[error("the TDVF descriptor offset {0:#x} is outside the image")]
    BadDescriptorOffset(u64),
    #[error("the TDVF descriptor signature is not \"TDVF\"")]
    BadSignature,
    #[error("unsupported TDVF descriptor version {0}")]
    BadVersion(u32),
    #[error("the TDVF descriptor declares {0} sections (at most {MAX_SECTIONS})")]
    TooManySections(u32),
    #[error("TDVF section {index}: {why}")]
    BadSection { index: usize, why: &'static str },
    #[error("the sections add or extend more than {MAX_PAGES} pages")]
    TooManyPages,
}

/// One section of the TDVF descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TdvfSection {
    pub data_offset: u32,
    pub raw_data_size: u32,
    pub memory_address: u64,
    pub memory_data_size: u64,
    pub section_type: u32,
    pub attributes: u32,
}

impl TdvfSection {
    fn pages(&self) -> u64 {
        self.memory_data_size / PAGE_SIZE
    }

    /// Whether the VMM adds this section's pages with TDH.MEM.PAGE.ADD (measured).
    fn is_added(&self) -> bool {
        self.attributes & ATTRIBUTE_PAGE_AUG == 0
    }

    /// Whether the section's content is extended into MRTD.
    fn is_extended(&self) -> bool {
        self.attributes & ATTRIBUTE_MR_EXTEND != 0
    }

    /// Pages the MRTD computation visits: none for a section that is neither added nor
    /// extended (a `PAGE.AUG` section of any declared size costs nothing).
    fn measured_pages(&self) -> u64 {
        if self.is_added() || self.is_extended() {
            self.pages()
        } else {
            0
        }
    }
}

/// The order in which the VMM added and measured the firmware's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageOrder {
    /// Each page extended right after it is added (QEMU 9 and later).
    SinglePass,
    /// All pages of a section added, then all extended (QEMU 8).
    TwoPass,
}

/// The TDVF metadata of a firmware image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tdvf {
    pub sections: Vec<TdvfSection>,
}

impl Tdvf {
    /// Finds and checks the TDVF descriptor of firmware image `fw`.
    pub fn parse(fw: &[u8]) -> Result<Self, TdvfError> {
        let end = fw
            .len()
            .checked_sub(BYTES_AFTER_FOOTER)
            .filter(|&e| e >= 18)
            .ok_or(TdvfError::TooSmall(fw.len()))?;
        if fw[end - 16..end] != FOOTER_GUID {
            return Err(TdvfError::NoGuidTable);
        }
        // The table's length counts the footer (GUID and length) too.
        let table_len = usize::from(u16_at(fw, end - 18).ok_or(TdvfError::NoGuidTable)?);
        if table_len < 18 || table_len > end {
            return Err(TdvfError::BadTableLength(table_len));
        }
        let table = &fw[end - table_len..end - 18];
        let mut at = table.len();
        let mut entry = None;
        while at >= 18 {
            let len = usize::from(u16_at(table, at - 18).ok_or(TdvfError::BadEntryLength(0))?);
            if len < 18 || len > at {
                return Err(TdvfError::BadEntryLength(len));
            }
            if table[at - 16..at] == METADATA_OFFSET_GUID {
                entry = Some(&table[at - len..at - 18]);
                break;
            }
            at -= len;
        }
        let entry = entry.ok_or(TdvfError::NoTdxMetadata)?;
        let back = entry
            .len()
            .checked_sub(4)
            .and_then(|i| u32_at(entry, i))
            .ok_or(TdvfError::NoTdxMetadata)?;
        let start = fw
            .len()
            .checked_sub(back as usize)
            .ok_or(TdvfError::BadDescriptorOffset(u64::from(back)))?;
        let header = fw
            .get(start..start + 16)
            .ok_or(TdvfError::BadDescriptorOffset(u64::from(back)))?;
        if &header[..4] != b"TDVF" {
            return Err(TdvfError::BadSignature);
        }
        let version = u32_at(header, 8).unwrap_or(0);
        if version != 1 {
            return Err(TdvfError::BadVersion(version));
        }
        let count = u32_at(header, 12).unwrap_or(0);
        if count > MAX_SECTIONS {
            return Err(TdvfError::TooManySections(count));
        }
        let mut sections = Vec::with_capacity(count as usize);
        for index in 0..count as usize {
            let at = start + 16 + 32 * index;
            let bad = |why| TdvfError::BadSection { index, why };
            let rec = fw.get(at..at + 32).ok_or(bad("outside the image"))?;
            let s = TdvfSection {
                data_offset: u32_at(rec, 0).unwrap_or(0),
                raw_data_size: u32_at(rec, 4).unwrap_or(0),
                memory_address: u64_at(rec, 8).unwrap_or(0),
                memory_data_size: u64_at(rec, 16).unwrap_or(0),
                section_type: u32_at(rec, 24).unwrap_or(0),
                attributes: u32_at(rec, 28).unwrap_or(0),
            };
            if !s.memory_address.is_multiple_of(PAGE_SIZE) {
                return Err(bad("memory address is not page aligned"));
            }
            if !s.memory_data_size.is_multiple_of(PAGE_SIZE) {
                return Err(bad("memory size is not a multiple of the page size"));
            }
            if s.memory_data_size < u64::from(s.raw_data_size) {
                return Err(bad("memory size is smaller than the raw data"));
            }
            if s.memory_address.checked_add(s.memory_data_size).is_none() {
                return Err(bad("memory range overflows"));
            }
            if s.is_extended() {
                if !matches!(s.section_type, SECTION_BFV | SECTION_CFV) {
                    return Err(bad("only firmware volumes can be measured"));
                }
                let end = u64::from(s.data_offset).checked_add(s.memory_data_size);
                if end.is_none_or(|e| e > fw.len() as u64) {
                    return Err(bad("measured data lies outside the image"));
                }
            }
            sections.push(s);
        }
        Ok(Self { sections })
    }

    /// Pages the VMM adds (all sections but `PAGE.AUG` ones).
    pub fn pages_added(&self) -> u64 {
        self.sections
            .iter()
            .filter(|s| s.is_added())
            .map(TdvfSection::pages)
            .fold(0u64, u64::saturating_add)
    }

    /// Pages the MRTD computation visits (added or extended): its cost, bounded by
    /// [`MAX_PAGES`]. Extended sections are also bounded by the image's size.
    pub fn pages_measured(&self) -> u64 {
        self.sections
            .iter()
            .map(TdvfSection::measured_pages)
            .fold(0u64, u64::saturating_add)
    }

    /// MRTD of a TD built from firmware image `fw` (the image this metadata came from)
    /// with pages added in `order`.
    pub fn mrtd(&self, fw: &[u8], order: PageOrder) -> Result<[u8; 48], TdvfError> {
        if self.pages_measured() > MAX_PAGES {
            return Err(TdvfError::TooManyPages);
        }
        let mut h = Sha384::new();
        for s in &self.sections {
            // Sections that are neither added nor extended leave no trace in MRTD; their
            // declared size must not cost a loop (fuzzing found a PAGE.AUG section
            // declaring terabytes that kept the verifier busy for hours).
            let pages = s.measured_pages();
            match order {
                PageOrder::TwoPass => {
                    for p in 0..pages {
                        page_add(&mut h, s, p);
                    }
                    for p in 0..pages {
                        mr_extend(&mut h, fw, s, p)?;
                    }
                }
                PageOrder::SinglePass => {
                    for p in 0..pages {
                        page_add(&mut h, s, p);
                        mr_extend(&mut h, fw, s, p)?;
                    }
                }
            }
        }
        Ok(h.finalize().into())
    }
}

fn record(tag: &[u8], gpa: u64) -> [u8; 128] {
    let mut r = [0u8; 128];
    r[..tag.len()].copy_from_slice(tag);
    r[16..24].copy_from_slice(&gpa.to_le_bytes());
    r
}

fn page_add(h: &mut Sha384, s: &TdvfSection, page: u64) {
    if s.is_added() {
        h.update(record(b"MEM.PAGE.ADD", s.memory_address + page * PAGE_SIZE));
    }
}

fn mr_extend(h: &mut Sha384, fw: &[u8], s: &TdvfSection, page: u64) -> Result<(), TdvfError> {
    if !s.is_extended() {
        return Ok(());
    }
    let base = s.data_offset as usize + (page * PAGE_SIZE) as usize;
    for i in 0..(PAGE_SIZE as usize / MR_EXTEND_CHUNK) {
        let off = i * MR_EXTEND_CHUNK;
        h.update(record(
            b"MR.EXTEND",
            s.memory_address + page * PAGE_SIZE + off as u64,
        ));
        let chunk =
            fw.get(base + off..base + off + MR_EXTEND_CHUNK)
                .ok_or(TdvfError::BadSection {
                    index: 0,
                    why: "measured data lies outside the image",
                })?;
        h.update(chunk);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_in_on_disk_order() {
        // 96b582de-1fb2-45f7-baea-a366c55a082d as stored.
        assert_eq!(hex::encode(FOOTER_GUID), "de82b596b21ff745baeaa366c55a082d");
        assert_eq!(
            hex::encode(METADATA_OFFSET_GUID),
            "35657ae44a989847865e4685a7bf8ec2"
        );
    }

    #[test]
    fn garbage_is_refused_cleanly() {
        assert_eq!(Tdvf::parse(&[0u8; 10]), Err(TdvfError::TooSmall(10)));
        assert_eq!(Tdvf::parse(&[0u8; 4096]), Err(TdvfError::NoGuidTable));
    }
}
