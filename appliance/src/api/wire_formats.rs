//! Each wire type's schema (`appliance_api`) held against the parser the server runs on
//! that value: what the schema allows, the server accepts; what it refuses, the server
//! refuses. The patterns are read from the schemas as the OpenAPI document carries them
//! and run by `regress`, an ECMAScript engine (JSON Schema's regular expressions are
//! ECMA-262). Besides named values at the edges, every type is fuzzed: mutations of valid
//! values (a character replaced, inserted or removed, whitespace or control characters
//! around) must get the same verdict from both. The only differences allowed are the
//! documented ones, each asserted as such:
//!
//! * a CIDv1 with a multihash other than sha2-256 is accepted but not described;
//! * `maxLength` counts characters where the server counts UTF-8 bytes;
//! * a JSON number written as a whole float (`2.0`) is read only up to 2^53.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use appliance_api::text::{MAX_EMAIL_BYTES, MAX_NAME_BYTES};
use appliance_api::{
    CID_V0_FIRST, CID_V0_LAST, Cid, HashedCid, MAX_WHOLE_FLOAT, PaymentIntentId, PermittedCidHash,
    PkpIdOrAddress, UsageKeyRef, WalletAddress, WireU64,
};
use serde_json::{Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;

use super::{
    MAX_DESCRIPTION_LEN, MAX_NAME_LEN, check_text, parse_cid_hash, parse_permitted_actions,
    parse_raw_cid, parse_wallet_ref,
};
use crate::api_keys::{ApiSecret, key_hash_from_reference};

fn json_of(schema: RefOr<Schema>) -> Value {
    serde_json::to_value(schema).unwrap()
}

/// A schema's `pattern`, compiled as ECMAScript.
struct Pattern {
    regex: regress::Regex,
}

impl Pattern {
    fn of(schema: &Value) -> Self {
        let source = schema["pattern"]
            .as_str()
            .unwrap_or_else(|| panic!("no pattern in {schema}"))
            .to_owned();
        let regex = regress::Regex::new(&source)
            .unwrap_or_else(|e| panic!("not an ECMAScript pattern ({e}): {source}"));
        Self { regex }
    }

    fn allows(&self, text: &str) -> bool {
        self.regex.find(text).is_some()
    }
}

/// xorshift64*: a fixed sequence, so a failure is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    fn hex(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| self.pick(b"0123456789abcdefABCDEF") as char)
            .collect()
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        std::array::from_fn(|_| self.next() as u8)
    }
}

/// What mutations draw from: the digits of every alphabet involved, the prefixes, every
/// kind of whitespace `str::trim` removes and some it does not, control characters.
const POOL: &[char] = &[
    '0', '1', '2', '7', '8', '9', 'a', 'b', 'f', 'g', 'l', 'z', 'A', 'F', 'G', 'I', 'O', 'Q', 'm',
    'x', 'X', '+', '/', '=', '_', '.', '@', '-', ' ', '\t', '\n', '\r', '\u{0B}', '\u{0C}',
    '\u{85}', '\u{A0}', '\u{1680}', '\u{2000}', '\u{200A}', '\u{2028}', '\u{202F}', '\u{3000}',
    '\u{200B}', '\u{FEFF}', '\u{0}', '\u{1}', '\u{1F}', '\u{7F}', '\u{9F}', 'é', '日',
];

/// `seed` with one to three random edits.
fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut chars: Vec<char> = seed.chars().collect();
    for _ in 0..=rng.below(3) {
        match rng.below(6) {
            0 if !chars.is_empty() => {
                let i = rng.below(chars.len());
                chars[i] = rng.pick(POOL);
            }
            1 => {
                let i = rng.below(chars.len() + 1);
                chars.insert(i, rng.pick(POOL));
            }
            2 if !chars.is_empty() => {
                chars.remove(rng.below(chars.len()));
            }
            3 => chars.insert(0, rng.pick(POOL)),
            4 => chars.push(rng.pick(POOL)),
            _ => {
                // A character of the value itself, elsewhere (stays in its alphabet).
                if !chars.is_empty() {
                    let c = chars[rng.below(chars.len())];
                    let i = rng.below(chars.len());
                    chars[i] = c;
                }
            }
        }
    }
    chars.into_iter().collect()
}

const ROUNDS: usize = 4000;

/// `allows` and `accepts` agree on every named value, on every seed and on mutations of
/// the seeds; `known_gap(text)` names the differences that are documented (the schema
/// refusing or allowing what the server does not), which are then let through.
fn agree(
    what: &str,
    allows: &dyn Fn(&str) -> bool,
    accepts: &dyn Fn(&str) -> bool,
    accepted: &[&str],
    refused: &[&str],
    seeds: &[String],
    known_gap: &dyn Fn(&str) -> bool,
) {
    for text in accepted {
        assert!(allows(text), "{what}: the schema refuses {text:?}");
        assert!(accepts(text), "{what}: the server refuses {text:?}");
    }
    for text in refused {
        assert!(!allows(text), "{what}: the schema allows {text:?}");
        assert!(!accepts(text), "{what}: the server accepts {text:?}");
    }
    let mut rng = Rng(0x5eed_0ff0_2a11);
    let (mut yes, mut no) = (0, 0);
    for seed in seeds {
        assert!(allows(seed) && accepts(seed), "{what}: seed {seed:?}");
        for _ in 0..ROUNDS / seeds.len() {
            let text = mutate(&mut rng, seed);
            let (schema, server) = (allows(&text), accepts(&text));
            if schema != server {
                assert!(
                    known_gap(&text),
                    "{what}: the schema {} {text:?} but the server {} it",
                    if schema { "allows" } else { "refuses" },
                    if server { "accepts" } else { "refuses" },
                );
            }
            if server { yes += 1 } else { no += 1 }
        }
    }
    // The mutations reach both sides of the line.
    assert!(yes > 0 && no > 0, "{what}: {yes} accepted, {no} refused");
}

fn no_gap(_: &str) -> bool {
    false
}

fn pattern_of<T: utoipa::PartialSchema>() -> Pattern {
    Pattern::of(&json_of(T::schema()))
}

/// The example a schema shows (which must then be accepted).
fn example_of<T: utoipa::PartialSchema>() -> String {
    json_of(T::schema())["examples"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn hashed_cids() {
    let p = pattern_of::<HashedCid>();
    let mut rng = Rng(1);
    let seeds: Vec<String> = vec![
        format!("0x{}", rng.hex(64)),
        format!("0X{}", rng.hex(64)),
        rng.hex(64),
        format!(" \u{3000}0x{}\n", rng.hex(64)),
    ];
    let hex = "ab".repeat(32);
    agree(
        "hashed CID",
        &|t| p.allows(t),
        &|t| parse_cid_hash("hashed_cid", t).is_ok(),
        &[
            &format!("0x{hex}"),
            &format!("\t{hex} "),
            &example_of::<HashedCid>(),
        ],
        &[
            "",
            "0x",
            &format!("0x{}", &hex[..62]),
            &format!("0x{hex}00"),
            &format!("0x{}g", &hex[..63]),
            &format!("\u{FEFF}0x{hex}"),
            &format!("x{hex}"),
        ],
        &seeds,
        &no_gap,
    );
}

#[test]
fn wallets_by_pkp_id_or_address() {
    let p = pattern_of::<PkpIdOrAddress>();
    let mut rng = Rng(2);
    let seeds = vec![
        format!("0x{}", rng.hex(64)),
        format!("0x{}", rng.hex(40)),
        rng.hex(40),
        format!("\u{2028}0X{}\u{85}", rng.hex(64)),
    ];
    agree(
        "pkp_id",
        &|t| p.allows(t),
        &|t| parse_wallet_ref("pkp_id", t).is_ok(),
        &[
            &format!("0x{}", "0".repeat(64)),
            &format!("0x{}", "0".repeat(40)),
            &example_of::<PkpIdOrAddress>(),
        ],
        &[
            "",
            "0x12",
            &format!("0x{}", "1".repeat(52)),
            &"1".repeat(41),
        ],
        &seeds,
        &no_gap,
    );
}

#[test]
fn usage_key_references() {
    let p = pattern_of::<UsageKeyRef>();
    let mut rng = Rng(3);
    let mut seeds: Vec<String> = (0..6)
        .map(|_| ApiSecret::generate().unwrap().to_base64().to_string())
        .collect();
    seeds.push(format!("0x{}", rng.hex(64)));
    seeds.push(format!(" 0X{} ", rng.hex(64)));
    let key = ApiSecret::from_bytes([0xff; 32]).to_base64().to_string();
    agree(
        "usage_api_key",
        &|t| p.allows(t),
        &|t| key_hash_from_reference(t).is_ok(),
        &[&key, &format!("\n{key}\t"), &example_of::<UsageKeyRef>()],
        &[
            "",
            &key[..43],
            // The last character before the padding carries two zero bits.
            &format!("{}/=", &key[..42]),
            &format!("{key}="),
            // A hash is 0x + 64 hex, never bare.
            &"a".repeat(64),
        ],
        &seeds,
        &no_gap,
    );
}

#[test]
fn new_admin_addresses() {
    let p = pattern_of::<WalletAddress>();
    let mut rng = Rng(4);
    let seeds = vec![
        format!("0x{}", rng.hex(40)),
        format!("0x{}1", "0".repeat(39)),
        format!("0x1{}", "0".repeat(39)),
        format!(" 0x{} ", rng.hex(40)),
    ];
    agree(
        "new_admin_wallet_address",
        &|t| p.allows(t),
        &|t| super::signatures::new_admin_address(t).is_ok(),
        &[&example_of::<WalletAddress>()],
        &[
            &format!("0x{}", "0".repeat(40)),
            // The prefix is lowercase only, and required.
            "0X70997970C51812dc3A010C7d01b50e0d17dc79C8",
            "70997970C51812dc3A010C7d01b50e0d17dc79C8",
        ],
        &seeds,
        &no_gap,
    );
}

#[test]
fn payment_intent_ids() {
    let p = pattern_of::<PaymentIntentId>();
    let longest = format!("pi_{}", "a".repeat(252));
    agree(
        "payment_intent_id",
        &|t| p.allows(t),
        &|t| crate::billing::is_intent_id(t.trim()),
        &[&example_of::<PaymentIntentId>(), &longest, " pi_1 "],
        &["pi_", "pi_a-b", "PI_abc", &format!("{longest}a"), "pi_é"],
        &["pi_3MtwBwLkdIwHu7ix28a3tqPa".to_owned(), longest.clone()],
        &no_gap,
    );
}

/// `0x01`, a codec's varint, a multihash: the bytes of a CIDv1 in base32 (`b…`).
fn cid_v1(codec: &[u8], hash_code: &[u8], digest: &[u8]) -> String {
    let mut bytes = vec![0x01];
    bytes.extend_from_slice(codec);
    bytes.extend_from_slice(hash_code);
    bytes.push(digest.len() as u8);
    bytes.extend_from_slice(digest);
    format!(
        "b{}",
        data_encoding::BASE32_NOPAD
            .encode(&bytes)
            .to_ascii_lowercase()
    )
}

/// A CIDv1 the server accepts whose multihash is not sha2-256 (the documented gap).
fn is_other_multihash_v1(text: &str) -> bool {
    let Some(body) = text.strip_prefix('b') else {
        return false;
    };
    let Ok(bytes) = data_encoding::BASE32_NOPAD.decode(body.to_ascii_uppercase().as_bytes()) else {
        return false;
    };
    // Version 1, then the codec's varint, then the hash code.
    let codec_len = match bytes.get(1) {
        Some(b) if b & 0x80 != 0 => 2,
        Some(_) => 1,
        None => return false,
    };
    crate::cid::parse_cid(text).is_ok() && bytes.get(1 + codec_len) != Some(&0x12)
}

#[test]
fn cids() {
    let p = pattern_of::<Cid>();
    let mut rng = Rng(5);
    let mut seeds: Vec<String> = (0..8)
        .map(|i| crate::cid::cid_v0(&rng.bytes::<24>()[..i * 3]))
        .collect();
    for codec in [&[0x55][..], &[0x70], &[0x71], &[0x72], &[0xa9, 0x02]] {
        seeds.push(cid_v1(codec, &[0x12], &rng.bytes::<32>()));
    }
    seeds.push(CID_V0_FIRST.to_owned());
    seeds.push(CID_V0_LAST.to_owned());
    let blake2b = cid_v1(&[0x71], &[0xa0, 0xe4, 0x02], &[7; 32]);
    assert!(
        crate::cid::parse_cid(&blake2b).is_ok() && !p.allows(&blake2b),
        "the documented gap: {blake2b}"
    );
    agree(
        "CID",
        &|t| p.allows(t),
        &|t| parse_raw_cid(t).is_ok(),
        &[
            &example_of::<Cid>(),
            "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
            "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku",
        ],
        &[
            "",
            // One below the first CIDv0 and one above the last (in base58 order).
            "QmNLei78zWmzUdbeRB3CiUfAizWUrbeeZh5K1rhAQKCh4z",
            "QmfZy5bvk7a3DQAjCbGNtmrPXWkyVvPrdnZMyBZ5q5ieKH",
            &format!("Qm{}", "1".repeat(44)),
            " QmZr5qtNmcxBdpXF7K7hSkLbxK2wUVhMhZn29PKzhynvcR",
            "BAFYBEIGDYRZT5SFP7UDM7HU76UH7Y26NF3EFUYLQABF3OCLGTQY55FBZDI",
            "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzd",
        ],
        &seeds,
        &is_other_multihash_v1,
    );
}

#[test]
fn permitted_cid_hashes() {
    let schema = json_of(<PermittedCidHash as utoipa::PartialSchema>::schema());
    let p = Pattern::of(&schema["oneOf"][1]);
    assert_eq!(schema["oneOf"][0], json!({"type": "integer", "enum": [0]}));
    let accepts = |v: Value| parse_permitted_actions("f", &[PermittedCidHash(v)]).is_ok();
    // Numbers: the integer 0 in any spelling JSON Schema reads as 0, nothing else.
    for zero in [json!(0), json!(0.0), json!(-0.0)] {
        assert!(accepts(zero.clone()), "{zero}");
    }
    for other in [
        json!(1),
        json!(0.5),
        json!(-1),
        json!(null),
        json!([0]),
        json!(true),
    ] {
        assert!(!accepts(other.clone()), "{other}");
    }
    let mut rng = Rng(6);
    agree(
        "cid_hashes_permitted",
        &|t| p.allows(t),
        &|t| accepts(Value::from(t)),
        &["0", " 0 ", &format!("0x{}", "0".repeat(64))],
        &["00", "0x0", "1", ""],
        &[format!("0x{}", rng.hex(64)), "0".to_owned()],
        &no_gap,
    );
}

#[test]
fn group_ids() {
    let schema = json_of(<WireU64 as utoipa::PartialSchema>::schema());
    let integer = &schema["oneOf"][0];
    assert_eq!(integer["minimum"], json!(0));
    assert_eq!(integer["maximum"], json!(u64::MAX));
    let p = Pattern::of(&schema["oneOf"][1]);
    let accepts = |v: Value| serde_json::from_value::<WireU64>(v).is_ok();
    // The integer branch: 0 to u64::MAX; whole floats up to 2^53.
    for yes in [
        json!(0),
        json!(7),
        json!(u64::MAX),
        json!(2.0),
        json!(MAX_WHOLE_FLOAT as f64),
    ] {
        assert!(accepts(yes.clone()), "{yes}");
    }
    for no in [
        json!(-1),
        json!(1.5),
        json!(-0.5),
        json!(18_446_744_073_709_551_616.0_f64),
    ] {
        assert!(!accepts(no.clone()), "{no}");
    }
    // The documented gap: a whole float above 2^53 is within the schema's bounds, but a
    // double that large may not be the integer the client wrote, so it is refused.
    assert!(!accepts(json!(1e19)));
    let max = u64::MAX.to_string();
    agree(
        "group_id",
        &|t| p.allows(t),
        &|t| accepts(Value::from(t)),
        &[
            "0",
            &max,
            &format!("000{max}"),
            "0x1",
            "0XFFFFFFFFFFFFFFFF",
            &format!(" {max}\u{3000}"),
        ],
        &[
            "",
            "0x",
            "18446744073709551616",
            "99999999999999999999",
            "0x10000000000000000",
            "+1",
            "-0",
            "1.0",
            "1e3",
        ],
        &[
            max.clone(),
            "18446744073709551609".to_owned(),
            "10000000000000000000".to_owned(),
            "42".to_owned(),
            "0x1f".to_owned(),
            "0xffffffffffffffff".to_owned(),
        ],
        &no_gap,
    );
}

/// A text schema's verdict: its pattern, and `maxLength` in characters.
fn text_allows(schema: &Value) -> impl Fn(&str) -> bool + use<> {
    let p = Pattern::of(schema);
    let max = schema["maxLength"].as_u64().unwrap() as usize;
    move |t: &str| p.allows(t) && t.chars().count() <= max
}

/// The documented gap of every text field: `maxLength` counts characters, the server
/// bytes (of the trimmed text, where it trims), so the two can differ only for a text
/// over the limit in bytes.
fn longer_in_bytes(max: usize) -> impl Fn(&str) -> bool {
    move |t: &str| t.len() > max
}

fn text_seeds() -> Vec<String> {
    vec![
        "ops".to_owned(),
        "a name with spaces".to_owned(),
        "line one\nline two\tand a tab".to_owned(),
        "été 日本".to_owned(),
        "x".repeat(250),
    ]
}

#[test]
fn names_and_descriptions() {
    for (schema, max) in [
        (appliance_api::text::name(), MAX_NAME_LEN),
        (appliance_api::text::description(), MAX_DESCRIPTION_LEN),
    ] {
        let schema = json_of(schema);
        assert_eq!(schema["maxLength"], json!(max));
        let allows = text_allows(&schema);
        agree(
            "text",
            &allows,
            &|t| check_text("f", t, max).is_ok(),
            &["", " ", &"a".repeat(max), "tab\there"],
            &[
                &"a".repeat(max + 1),
                "bell\u{7}",
                "cr\r",
                "\u{85}",
                "\u{9F}",
            ],
            &text_seeds(),
            &longer_in_bytes(max),
        );
        // The gap itself: within maxLength in characters, over the limit in bytes.
        let wide = "é".repeat(max / 2 + 1);
        assert!(allows(&wide) && check_text("f", &wide, max).is_err());
    }
}

#[test]
fn group_names() {
    let allows = text_allows(&json_of(appliance_api::text::group_name()));
    let accepts = |t: &str| {
        super::groups::check_group_name(t).is_ok() && check_text("name", t, MAX_NAME_LEN).is_ok()
    };
    agree(
        "group_name",
        &allows,
        &accepts,
        &["ops", " ops ", "a\tb", &"a".repeat(MAX_NAME_BYTES)],
        &["", " ", "\t\n", "\u{3000}", "ops\r", "\u{0}ops"],
        &text_seeds(),
        &longer_in_bytes(MAX_NAME_BYTES),
    );
}

#[test]
fn account_names() {
    let allows = text_allows(&json_of(appliance_api::text::account_name()));
    let accepts = |t: &str| super::accounts::account_name(t).is_ok();
    agree(
        "account_name",
        &allows,
        &accepts,
        // Trimmed first: whitespace control characters at the ends are removed.
        &["my-app", " my app\r\n", "\u{85}a\u{0B}", "a\tb"],
        &["", " \r\n ", "a\rb", "\u{1}a", "a\u{7F}"],
        &text_seeds(),
        &longer_in_bytes(MAX_NAME_BYTES),
    );
}

#[test]
fn emails() {
    let schema = json_of(appliance_api::text::email());
    assert_eq!(schema["type"], json!(["string", "null"]));
    let allows = text_allows(&schema);
    let accepts = |t: &str| super::accounts::email(Some(t.to_owned())).is_ok();
    let seeds: Vec<String> = [
        "a@b.co",
        "first.last@mail.example.org",
        "x@y.z",
        " u@d.io\n",
    ]
    .map(str::to_owned)
    .to_vec();
    agree(
        "email",
        &allows,
        &accepts,
        &["a@b.co", "", "   ", "a@b@c.d", "a@b."],
        &[
            "a",
            "@b.co",
            "a@b",
            "a@.co",
            "a b@c.co",
            "a@b.c\u{7F}",
            "a@\u{A0}b.c",
        ],
        &seeds,
        &longer_in_bytes(MAX_EMAIL_BYTES),
    );
    assert!(super::accounts::email(None).unwrap().is_none());
}

/// The paging parameters: integers from 0 to `u64::MAX`, nothing refused within (a large
/// `page_size` is read as the largest page).
#[tokio::test]
async fn paging_bounds() {
    use axum::extract::FromRequestParts as _;

    use crate::http::extract::{MAX_PAGE_SIZE, Paging};

    let doc = <appliance_api::PagingParams as utoipa::IntoParams>::into_params(|| None);
    assert_eq!(doc.len(), 2);
    for param in doc.iter().map(|p| serde_json::to_value(p).unwrap()) {
        assert_eq!(param["schema"]["minimum"], json!(0), "{param}");
        assert_eq!(param["schema"]["maximum"], json!(u64::MAX), "{param}");
    }
    let page = |query: String| async move {
        let (mut parts, ()) = http::Request::builder()
            .uri(format!("/x?{query}"))
            .body(())
            .unwrap()
            .into_parts();
        Paging::from_request_parts(&mut parts, &())
            .await
            .map(|p| p.0)
    };
    let max = u64::MAX.to_string();
    for name in ["page_number", "page_size"] {
        for yes in ["0", "1", "1001", max.as_str()] {
            assert!(page(format!("{name}={yes}")).await.is_ok(), "{name}={yes}");
        }
        for no in ["-1", "1.5", "18446744073709551616", "x"] {
            assert!(page(format!("{name}={no}")).await.is_err(), "{name}={no}");
        }
    }
    assert_eq!(
        page("page_size=5000".to_owned()).await.unwrap().size,
        MAX_PAGE_SIZE
    );
    assert_eq!(
        page(format!("page_size={max}")).await.unwrap().size,
        MAX_PAGE_SIZE
    );
    assert_eq!(page("page_size=0".to_owned()).await.unwrap().size, 1);
}
