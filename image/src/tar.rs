//! A deterministic tar (POSIX ustar) writer: entries sorted by path, one fixed mtime, fixed
//! numeric owners, no user/group names, no extended attributes or PAX headers.

use std::collections::BTreeMap;

use crate::ImageError;

const BLOCK: usize = 512;

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Vec<u8>),
}

/// One entry: mode (permission bits, including setuid/sticky), owner, content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Entry {
    pub fn dir(mode: u32, uid: u32, gid: u32) -> Self {
        Self {
            kind: Kind::Dir,
            mode,
            uid,
            gid,
        }
    }

    pub fn file(bytes: Vec<u8>, mode: u32) -> Self {
        Self {
            kind: Kind::File(bytes),
            mode,
            uid: 0,
            gid: 0,
        }
    }
}

/// A set of entries keyed by their path (no leading `/`, no trailing `/`). Parent
/// directories that are not given explicitly are added as root-owned 0755.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    entries: BTreeMap<String, Entry>,
}

impl Tree {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the entry at `path` ("usr/local/bin/appliance" or with a
    /// leading `/`).
    pub fn insert(&mut self, path: &str, entry: Entry) -> Result<(), ImageError> {
        let path = path.trim_matches('/');
        if path.is_empty()
            || path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(ImageError::Path(path.to_owned()));
        }
        self.entries.insert(path.to_owned(), entry);
        Ok(())
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(path.trim_matches('/'))
    }

    /// The tar bytes: every directory then entry in byte order of the path, `mtime` for all.
    pub fn to_tar(&self, mtime: u64) -> Result<Vec<u8>, ImageError> {
        let mut all = self.entries.clone();
        for path in self.entries.keys() {
            let mut parent = path.as_str();
            while let Some((p, _)) = parent.rsplit_once('/') {
                all.entry(p.to_owned())
                    .or_insert_with(|| Entry::dir(0o755, 0, 0));
                parent = p;
            }
        }
        let mut out = Vec::new();
        // Directories carry a trailing slash in the archive; sorting by the path without it
        // puts a directory right before its contents.
        for (path, entry) in &all {
            write_entry(&mut out, path, entry, mtime)?;
        }
        out.extend_from_slice(&[0u8; 2 * BLOCK]);
        Ok(out)
    }
}

fn octal(field: &mut [u8], value: u64) -> Result<(), ImageError> {
    let digits = field.len() - 1;
    let text = format!("{value:0digits$o}");
    if text.len() > digits {
        return Err(ImageError::TooLarge(value));
    }
    field[..digits].copy_from_slice(text.as_bytes());
    field[digits] = 0;
    Ok(())
}

/// Splits `name` into ustar (prefix, name) at a `/`.
fn split_name(name: &str) -> Result<(&str, &str), ImageError> {
    if name.len() <= 100 {
        return Ok(("", name));
    }
    for (i, b) in name.bytes().enumerate() {
        if b == b'/' && i <= 155 && name.len() - i - 1 <= 100 && i > 0 {
            return Ok((&name[..i], &name[i + 1..]));
        }
    }
    Err(ImageError::Path(name.to_owned()))
}

fn write_entry(out: &mut Vec<u8>, path: &str, entry: &Entry, mtime: u64) -> Result<(), ImageError> {
    let name = match entry.kind {
        Kind::Dir => format!("{path}/"),
        Kind::File(_) => path.to_owned(),
    };
    let (prefix, short) = split_name(&name)?;
    let mut h = [0u8; BLOCK];
    h[..short.len()].copy_from_slice(short.as_bytes());
    octal(&mut h[100..108], u64::from(entry.mode & 0o7777))?;
    octal(&mut h[108..116], u64::from(entry.uid))?;
    octal(&mut h[116..124], u64::from(entry.gid))?;
    let (size, flag) = match &entry.kind {
        Kind::Dir => (0u64, b'5'),
        Kind::File(bytes) => (bytes.len() as u64, b'0'),
    };
    octal(&mut h[124..136], size)?;
    octal(&mut h[136..148], mtime)?;
    h[156] = flag;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    octal(&mut h[329..337], 0)?;
    octal(&mut h[337..345], 0)?;
    h[345..345 + prefix.len()].copy_from_slice(prefix.as_bytes());
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    out.extend_from_slice(&h);
    if let Kind::File(bytes) = &entry.kind {
        out.extend_from_slice(bytes);
        let pad = (BLOCK - bytes.len() % BLOCK) % BLOCK;
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_valid_ustar_and_parents_are_implied() {
        let mut t = Tree::new();
        t.insert("/usr/local/bin/x", Entry::file(b"hello".to_vec(), 0o755))
            .unwrap();
        t.insert("tmp", Entry::dir(0o1777, 0, 0)).unwrap();
        let tar = t.to_tar(1_700_000_000).unwrap();
        assert_eq!(tar.len() % BLOCK, 0);
        let names: Vec<String> = tar
            .chunks(BLOCK)
            .filter(|b| &b[257..262] == b"ustar")
            .map(|b| {
                String::from_utf8(b[..100].iter().copied().take_while(|&c| c != 0).collect())
                    .unwrap()
            })
            .collect();
        assert_eq!(
            names,
            [
                "tmp/",
                "usr/",
                "usr/local/",
                "usr/local/bin/",
                "usr/local/bin/x"
            ]
        );
        // Checksum of the first header.
        let h = &tar[..BLOCK];
        let mut copy = h.to_vec();
        copy[148..156].copy_from_slice(b"        ");
        let sum: u64 = copy.iter().map(|&b| u64::from(b)).sum();
        let field = std::str::from_utf8(&h[148..154]).unwrap();
        assert_eq!(u64::from_str_radix(field, 8).unwrap(), sum);
        assert_eq!(&h[100..107], b"0001777");
    }

    #[test]
    fn long_names_use_the_prefix_and_bad_paths_are_refused() {
        let long = format!("{}/{}", "d".repeat(120), "f".repeat(90));
        assert_eq!(split_name(&long).unwrap().0.len(), 120);
        assert!(split_name(&"x".repeat(300)).is_err());
        let mut t = Tree::new();
        assert!(t.insert("a/../b", Entry::dir(0o755, 0, 0)).is_err());
        assert!(t.insert("/", Entry::dir(0o755, 0, 0)).is_err());
    }
}
