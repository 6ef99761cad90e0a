//! Little-endian fields of the binary formats the verifier reads (TDVF metadata, PE
//! headers): a field that does not fit in the buffer is `None`, never a panic.

/// The `N` bytes at `at`, if the buffer holds them.
pub(crate) fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    bytes(b, at).map(u16::from_le_bytes)
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    bytes(b, at).map(u32::from_le_bytes)
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    bytes(b, at).map(u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_inside_the_buffer_are_read_and_others_are_none() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(u16_at(&b, 0), Some(0x0201));
        assert_eq!(u32_at(&b, 5), Some(0x0908_0706));
        assert_eq!(u64_at(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(u32_at(&b, 6), None);
        assert_eq!(u64_at(&b, usize::MAX - 2), None);
    }
}
