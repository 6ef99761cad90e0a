//! How an executable is linked, read from its ELF program headers (no `ldd`, no loader
//! run): a binary with no program interpreter (`PT_INTERP`) and no `DT_NEEDED` entry in
//! its dynamic section loads no file of the machine it runs on, so the image needs none.
//!
//! Only what that question needs is parsed: 64-bit little-endian ELF (the image is
//! linux on amd64), the program header table and the `PT_DYNAMIC` segment's tags.

/// The linkage of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Linkage {
    /// A static executable (static-pie included): loads no shared library.
    Static,
    /// Needs a loader (`interpreter`, e.g. `/lib64/ld-linux-x86-64.so.2`) and/or
    /// `needed` shared libraries.
    Dynamic {
        interpreter: Option<String>,
        needed: usize,
    },
    /// Not a 64-bit little-endian ELF file (with the reason).
    NotElf(&'static str),
}

const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const DT_NULL: u64 = 0;
const DT_NEEDED: u64 = 1;

/// The little-endian field of `N` bytes at `at`, if the file holds it.
fn field<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    field(b, at).map(u16::from_le_bytes)
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    field(b, at).map(u32::from_le_bytes)
}

fn usize_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(field(b, at)?)).ok()
}

/// The linkage of the ELF file `bytes`.
pub fn linkage(bytes: &[u8]) -> Linkage {
    match parse(bytes) {
        Ok(l) => l,
        Err(why) => Linkage::NotElf(why),
    }
}

fn parse(b: &[u8]) -> Result<Linkage, &'static str> {
    if b.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("no ELF magic");
    }
    // EI_CLASS = 2 (64-bit), EI_DATA = 1 (little-endian).
    if b.get(4) != Some(&2) || b.get(5) != Some(&1) {
        return Err("not a 64-bit little-endian ELF file");
    }
    let truncated = "truncated ELF header";
    let phoff = usize_at(b, 0x20).ok_or(truncated)?;
    let phentsize = usize::from(u16_at(b, 0x36).ok_or(truncated)?);
    let phnum = usize::from(u16_at(b, 0x38).ok_or(truncated)?);
    if phentsize < 56 {
        return Err("bad program header size");
    }
    let mut interpreter = None;
    let mut needed = 0;
    for i in 0..phnum {
        let ph = i
            .checked_mul(phentsize)
            .and_then(|o| o.checked_add(phoff))
            .ok_or("bad program header table")?;
        let p_type = u32_at(b, ph).ok_or("truncated program header table")?;
        let offset = usize_at(b, ph + 8).ok_or("truncated program header table")?;
        let filesz = usize_at(b, ph + 32).ok_or("truncated program header table")?;
        let end = offset.checked_add(filesz).ok_or("bad segment")?;
        let segment = b.get(offset..end).ok_or("segment outside the file")?;
        match p_type {
            PT_INTERP => {
                let path = segment.split(|&c| c == 0).next().unwrap_or_default();
                interpreter = Some(String::from_utf8_lossy(path).into_owned());
            }
            PT_DYNAMIC => {
                for entry in segment.chunks_exact(16) {
                    let tag = field(entry, 0)
                        .map(u64::from_le_bytes)
                        .ok_or("truncated dynamic entry")?;
                    if tag == DT_NULL {
                        break;
                    }
                    if tag == DT_NEEDED {
                        needed += 1;
                    }
                }
            }
            _ => {}
        }
    }
    if interpreter.is_none() && needed == 0 {
        Ok(Linkage::Static)
    } else {
        Ok(Linkage::Dynamic {
            interpreter,
            needed,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A minimal ELF64 header with `phdrs` (type, segment bytes) appended.
    fn elf(phdrs: &[(u32, Vec<u8>)]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        let mut data_at = 64 + 56 * phdrs.len();
        let mut data: Vec<u8> = Vec::new();
        for (kind, bytes) in phdrs {
            let mut ph = vec![0u8; 56];
            ph[..4].copy_from_slice(&kind.to_le_bytes());
            ph[8..16].copy_from_slice(&(data_at as u64).to_le_bytes());
            ph[32..40].copy_from_slice(&(bytes.len() as u64).to_le_bytes());
            b.extend(ph);
            data.extend(bytes);
            data_at += bytes.len();
        }
        b.extend(data);
        b
    }

    fn dynamic(tags: &[u64]) -> Vec<u8> {
        tags.iter()
            .flat_map(|t| [t.to_le_bytes(), 0u64.to_le_bytes()].concat())
            .collect()
    }

    #[test]
    fn interpreter_or_needed_libraries_make_a_binary_dynamic() {
        assert_eq!(
            linkage(&elf(&[(PT_DYNAMIC, dynamic(&[0x6ffffffb, DT_NULL]))])),
            Linkage::Static,
            "static-pie: a dynamic section without DT_NEEDED"
        );
        assert_eq!(
            linkage(&elf(&[(
                PT_DYNAMIC,
                dynamic(&[DT_NEEDED, DT_NEEDED, DT_NULL, DT_NEEDED])
            )])),
            Linkage::Dynamic {
                interpreter: None,
                needed: 2
            },
            "entries after DT_NULL do not count"
        );
        assert_eq!(
            linkage(&elf(&[(
                PT_INTERP,
                b"/lib64/ld-linux-x86-64.so.2\0".to_vec()
            )])),
            Linkage::Dynamic {
                interpreter: Some("/lib64/ld-linux-x86-64.so.2".into()),
                needed: 0
            }
        );
    }

    #[test]
    fn other_files_are_not_elf() {
        assert!(matches!(linkage(b"#!/bin/sh\n"), Linkage::NotElf(_)));
        let mut bad = elf(&[(PT_INTERP, b"/x\0".to_vec())]);
        bad.truncate(80);
        assert!(matches!(linkage(&bad), Linkage::NotElf(_)));
        let mut be = elf(&[]);
        be[5] = 2;
        assert!(matches!(linkage(&be), Linkage::NotElf(_)));
    }
}
