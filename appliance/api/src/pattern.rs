//! The regular expressions of the wire types' schemas (`pattern` in the OpenAPI document),
//! built from the rules they describe rather than written out: a range of numbers in a
//! fixed-width numeral, the base32 text of bytes with a fixed prefix, Rust's `str::trim`.
//!
//! Every pattern is ECMA-262 syntax as JSON Schema requires, restricted to what Python's
//! `re` and the Rust ECMAScript engine `regress` read the same way: anchors, groups,
//! alternation, character classes with ranges and `\t`, `\xHH`, `\uHHHH` escapes, and
//! counted repetition. The appliance's tests hold each pattern against the parser it
//! describes (`appliance/src/api/wire_formats.rs`).

/// What Rust's `str::trim` removes (Unicode `White_Space`), as the inside of a character
/// class: the server trims these around ids, keys and hex values before parsing them.
pub(crate) const WHITESPACE: &str =
    r"\t-\r \u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// What `char::is_control` is (Unicode `Cc`) minus newline and tab, the two control
/// characters text fields may hold, as the inside of a character class.
pub(crate) const CONTROL: &str = r"\x00-\x08\x0B-\x1F\x7F-\x9F";

/// [`WHITESPACE`] and every control character (`Cc`), as the inside of a character class:
/// what a text field's first visible character is not.
pub(crate) const CONTROL_OR_WHITESPACE: &str =
    r"\x00-\x20\x7F-\x9F\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// `core`, whole, with any amount of [`WHITESPACE`] around it.
pub(crate) fn trimmed(core: &str) -> String {
    format!("^[{WHITESPACE}]*(?:{core})[{WHITESPACE}]*$")
}

/// `core`, whole.
pub(crate) fn whole(core: &str) -> String {
    format!("^(?:{core})$")
}

/// The decimal digits of any `u64`, leading zeros allowed (what `str::parse::<u64>`
/// takes, without a sign).
pub(crate) fn decimal_u64() -> String {
    const DIGITS: &[char] = &['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'];
    // Below 10^19 every 1-to-19-digit number fits; of the 20-digit ones, those up to
    // u64::MAX.
    let twenty = between(
        DIGITS,
        &digits(DIGITS, "10000000000000000000"),
        &digits(DIGITS, &u64::MAX.to_string()),
    );
    format!("0*(?:0|[1-9][0-9]{{0,18}}|{twenty})")
}

/// `0x` + 40 hex digits, not all zero (a non-zero address).
pub(crate) fn nonzero_address() -> String {
    let alternatives: Vec<String> = (0..40)
        .map(|zeros| {
            let lead = match zeros {
                0 => String::new(),
                1 => "0".to_owned(),
                n => format!("0{{{n}}}"),
            };
            let rest = match 39 - zeros {
                0 => String::new(),
                1 => "[0-9a-fA-F]".to_owned(),
                n => format!("[0-9a-fA-F]{{{n}}}"),
            };
            format!("{lead}[1-9a-fA-F]{rest}")
        })
        .collect();
    format!("0x(?:{})", alternatives.join("|"))
}

/// The base58btc (Bitcoin) alphabet, in digit order.
const BASE58: &[char] = &[
    '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'J', 'K',
    'L', 'M', 'N', 'P', 'Q', 'R', 'S', 'T', 'U', 'V', 'W', 'X', 'Y', 'Z', 'a', 'b', 'c', 'd', 'e',
    'f', 'g', 'h', 'i', 'j', 'k', 'm', 'n', 'o', 'p', 'q', 'r', 's', 't', 'u', 'v', 'w', 'x', 'y',
    'z',
];

/// base58btc of `0x12 0x20` + 32 zero bytes and of `0x12 0x20` + 32 `0xff` bytes: the
/// smallest and largest CIDv0 (a sha2-256 multihash). Every 46-character text between
/// them, in base58 order, decodes to such a multihash, and no other text does.
pub const CID_V0_FIRST: &str = "QmNLei78zWmzUdbeRB3CiUfAizWUrbeeZh5K1rhAQKCh51";
pub const CID_V0_LAST: &str = "QmfZy5bvk7a3DQAjCbGNtmrPXWkyVvPrdnZMyBZ5q5ieKG";

/// Every CIDv0: `Qm` and 44 base58btc characters decoding to a sha2-256 multihash.
pub(crate) fn cid_v0() -> String {
    between(
        BASE58,
        &digits(BASE58, CID_V0_FIRST),
        &digits(BASE58, CID_V0_LAST),
    )
}

/// The lowercase RFC 4648 base32 alphabet, in digit order.
const BASE32: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n', 'o', 'p', 'q', 'r', 's',
    't', 'u', 'v', 'w', 'x', 'y', 'z', '2', '3', '4', '5', '6', '7',
];

/// The multicodec codes a CIDv1 may carry (raw, dag-pb, dag-cbor, libp2p-key, dag-json),
/// as their varints.
const CID_V1_CODECS: &[&[u8]] = &[&[0x55], &[0x70], &[0x71], &[0x72], &[0xa9, 0x02]];

/// Every CIDv1 with a sha2-256 multihash, in multibase base32 (`b…`): version 1, one of
/// the [`CID_V1_CODECS`], `0x12 0x20` and a 32-byte digest, canonical (zero trailing bits).
pub(crate) fn cid_v1_sha256() -> String {
    let alternatives: Vec<String> = CID_V1_CODECS
        .iter()
        .map(|codec| {
            let mut prefix = vec![0x01];
            prefix.extend_from_slice(codec);
            prefix.extend_from_slice(&[0x12, 0x20]);
            base32_of_prefixed(&prefix, 32)
        })
        .collect();
    format!("b(?:{})", alternatives.join("|"))
}

/// The unpadded base32 texts of `prefix` followed by any `free` bytes.
fn base32_of_prefixed(prefix: &[u8], free: usize) -> String {
    let bits = 8 * (prefix.len() + free);
    let chars = bits.div_ceil(5);
    let fixed_bits = 8 * prefix.len();
    let mut out = String::new();
    let mut run = 0usize;
    for i in 0..chars {
        let allowed: Vec<char> = (0u8..32)
            .filter(|&v| {
                (0..5).all(|j| {
                    let bit = 5 * i + j;
                    let value = (v >> (4 - j)) & 1;
                    if bit < fixed_bits {
                        value == (prefix[bit / 8] >> (7 - bit % 8)) & 1
                    } else if bit < bits {
                        true
                    } else {
                        value == 0
                    }
                })
            })
            .map(|v| BASE32[usize::from(v)])
            .collect();
        if allowed.len() == BASE32.len() {
            run += 1;
            continue;
        }
        out.push_str(&repeat(BASE32, run));
        run = 0;
        out.push_str(&class(&allowed));
    }
    out.push_str(&repeat(BASE32, run));
    out
}

/// The digit indexes of `text` in `alphabet`.
fn digits(alphabet: &[char], text: &str) -> Vec<usize> {
    text.chars()
        .map(|c| alphabet.iter().position(|&a| a == c).unwrap_or_default())
        .collect()
}

/// One character among `chars`: the character itself, or a class with ranges of
/// consecutive code points.
fn class(chars: &[char]) -> String {
    if let [only] = chars {
        return only.to_string();
    }
    let mut sorted = chars.to_vec();
    sorted.sort_unstable();
    let mut out = String::from("[");
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && u32::from(sorted[i + 1]) == u32::from(end) + 1 {
            i += 1;
            end = sorted[i];
        }
        match u32::from(end) - u32::from(start) {
            0 => out.push(start),
            1 => {
                out.push(start);
                out.push(end);
            }
            _ => {
                out.push(start);
                out.push('-');
                out.push(end);
            }
        }
        i += 1;
    }
    out.push(']');
    out
}

/// `n` characters of `alphabet`.
fn repeat(alphabet: &[char], n: usize) -> String {
    match n {
        0 => String::new(),
        1 => class(alphabet),
        n => format!("{}{{{n}}}", class(alphabet)),
    }
}

fn group(alternatives: Vec<String>) -> String {
    if alternatives.len() == 1 {
        alternatives.into_iter().next().unwrap_or_default()
    } else {
        format!("(?:{})", alternatives.join("|"))
    }
}

/// The texts of `lo.len()` digits of `alphabet` from `lo` to `hi` (digit indexes, the
/// same length, `lo <= hi`), in numeric order.
fn between(alphabet: &[char], lo: &[usize], hi: &[usize]) -> String {
    match (lo.split_first(), hi.split_first()) {
        (Some((&l, lo_rest)), Some((&h, hi_rest))) if l == h => {
            format!("{}{}", alphabet[l], between(alphabet, lo_rest, hi_rest))
        }
        (Some((&l, lo_rest)), Some((&h, hi_rest))) => {
            // A first digit whose rest may be anything joins the middle class.
            let lo_any = lo_rest.iter().all(|&d| d == 0);
            let hi_any = hi_rest.iter().all(|&d| d == alphabet.len() - 1);
            let middle = (if lo_any { l } else { l + 1 })..(if hi_any { h + 1 } else { h });
            let mut alternatives = Vec::new();
            if !lo_any {
                alternatives.push(format!("{}{}", alphabet[l], at_least(alphabet, lo_rest)));
            }
            if !middle.is_empty() {
                alternatives.push(format!(
                    "{}{}",
                    class(&alphabet[middle]),
                    repeat(alphabet, lo_rest.len())
                ));
            }
            if !hi_any {
                alternatives.push(format!("{}{}", alphabet[h], at_most(alphabet, hi_rest)));
            }
            group(alternatives)
        }
        _ => String::new(),
    }
}

/// The texts of `lo.len()` digits that are at least `lo`.
fn at_least(alphabet: &[char], lo: &[usize]) -> String {
    let Some((&first, rest)) = lo.split_first() else {
        return String::new();
    };
    if rest.iter().all(|&d| d == 0) {
        return format!(
            "{}{}",
            class(&alphabet[first..]),
            repeat(alphabet, rest.len())
        );
    }
    let mut alternatives = vec![format!("{}{}", alphabet[first], at_least(alphabet, rest))];
    if first + 1 < alphabet.len() {
        alternatives.push(format!(
            "{}{}",
            class(&alphabet[first + 1..]),
            repeat(alphabet, rest.len())
        ));
    }
    group(alternatives)
}

/// The texts of `hi.len()` digits that are at most `hi`.
fn at_most(alphabet: &[char], hi: &[usize]) -> String {
    let Some((&first, rest)) = hi.split_first() else {
        return String::new();
    };
    let top = alphabet.len() - 1;
    if rest.iter().all(|&d| d == top) {
        return format!(
            "{}{}",
            class(&alphabet[..=first]),
            repeat(alphabet, rest.len())
        );
    }
    let mut alternatives = Vec::new();
    if first > 0 {
        alternatives.push(format!(
            "{}{}",
            class(&alphabet[..first]),
            repeat(alphabet, rest.len())
        ));
    }
    alternatives.push(format!("{}{}", alphabet[first], at_most(alphabet, rest)));
    group(alternatives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_merge_consecutive_code_points() {
        assert_eq!(class(&['a']), "a");
        assert_eq!(class(BASE58), "[1-9A-HJ-NP-Za-km-z]");
        assert_eq!(class(BASE32), "[2-7a-z]");
        assert_eq!(class(&['e', 'f']), "[ef]");
    }

    #[test]
    fn ranges_of_fixed_width_numbers() {
        const D: &[char] = &['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'];
        assert_eq!(between(D, &digits(D, "12"), &digits(D, "12")), "12");
        assert_eq!(between(D, &digits(D, "10"), &digits(D, "29")), "[12][0-9]");
        assert_eq!(
            between(D, &digits(D, "13"), &digits(D, "47")),
            "(?:1[3-9]|[23][0-9]|4[0-7])"
        );
        let u64s = decimal_u64();
        assert!(
            u64s.starts_with("0*(?:0|[1-9][0-9]{0,18}|1(?:[0-7][0-9]{18}|8"),
            "{u64s}"
        );
        assert!(u64s.contains("|6(?:0[0-9]|1[0-5])"), "{u64s}");
    }

    #[test]
    fn a_cid_v1_prefix_fixes_its_first_characters() {
        // `bafybei…`: dag-pb, sha2-256, the CIDv1 every IPFS tool prints.
        let pattern = cid_v1_sha256();
        assert!(pattern.contains("afybei"), "{pattern}");
        assert!(pattern.starts_with("b(?:"), "{pattern}");
    }
}
