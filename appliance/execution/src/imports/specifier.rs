//! Import specifiers → module URLs under the CDN, without I/O.
//!
//! What an action may write (the reference's forms):
//! * `name@x.y.z` or `@scope/name@x.y.z`, with an exact version (`1.2.3`, `1.2.3-rc.1`,
//!   `1.2.3+build`), optionally followed by `/path/in/the/package`; without a path the
//!   configured entry suffix is appended (`/+esm` for jsDelivr);
//! * a full `https://` URL under the CDN base;
//! * either with a `#sha384-<base64>` fragment: the inline pin, never sent to the CDN.
//!
//! A module may also import a path relative to its own URL (`./<file>.js`, `../<file>.js`,
//! `/v135/x@1.0.0/es2022/x.mjs`: what CDN modules contain); the action itself has no URL,
//! so it may not. Whatever the form, the URL must stay under the CDN base (same scheme,
//! host and port, below its path, after `..` is resolved): an import never reaches
//! anything but the CDN the operator chose.

use std::fmt;

use base64::Engine as _;
use reqwest::Url;

/// A resolved import: the module's URL and, if the specifier had one, its inline pin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub url: Url,
    pub pin: Option<[u8; 48]>,
}

/// Why a specifier was refused. The text is what the action sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecifierError {
    #[error(
        "`{0}` names no version: import an exact version, such as `{0}@1.2.3` (find it on npm)"
    )]
    Unpinned(String),
    #[error(
        "`{version}` is not an exact version of `{name}`: ranges, tags and partial versions (`^3`, `~3.2`, `latest`, `3`) are refused; write all three numbers, such as `{name}@1.2.3`"
    )]
    NotExact { name: String, version: String },
    #[error("`{0}` is not a valid npm package name")]
    BadName(String),
    #[error(
        "a relative import needs a module to be relative to, and the action itself has no URL: import a pinned package (`name@x.y.z`) or a full URL under {0}"
    )]
    Relative(String),
    #[error("modules come only from the configured CDN, {base}: {url} is outside it")]
    OffCdn { base: String, url: String },
    #[error(
        "the only fragment an import may carry is an inline pin, `#sha384-<base64 of 48 bytes>`"
    )]
    BadPin,
    #[error("not a valid module specifier: {0}")]
    Invalid(String),
}

/// The CDN base URL: https, ending in `/`, with no query, fragment or credentials.
pub fn cdn_base(text: &str) -> Result<Url, String> {
    let url = Url::parse(text).map_err(|e| e.to_string())?;
    if url.scheme() != "https" {
        return Err("must be an https URL".into());
    }
    if !url.path().ends_with('/') {
        return Err("must end with `/`".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("must have no query or fragment".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must carry no credentials".into());
    }
    if url.host_str().is_none() {
        return Err("must name a host".into());
    }
    Ok(url)
}

/// `sha384-<base64>` of `hash`: a Subresource Integrity string.
pub fn integrity(hash: &[u8; 48]) -> String {
    format!(
        "sha384-{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// A printable `hash`, for messages.
pub struct Sri<'a>(pub &'a [u8; 48]);

impl fmt::Display for Sri<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&integrity(self.0))
    }
}

/// Resolves `specifier`, written in the module at `referrer` (`None`: in the action).
pub fn resolve(
    base: &Url,
    entry_suffix: &str,
    specifier: &str,
    referrer: Option<&Url>,
) -> Result<Resolved, SpecifierError> {
    if specifier.is_empty()
        || specifier
            .chars()
            .any(|c| c.is_control() || c == '\\' || c == ' ')
    {
        return Err(SpecifierError::Invalid(
            "empty, or holds spaces, backslashes or control characters".into(),
        ));
    }
    let (text, pin) = match specifier.split_once('#') {
        Some((text, fragment)) => (text, Some(parse_pin(fragment)?)),
        None => (specifier, None),
    };
    let url = if text.starts_with("./") || text.starts_with("../") || text.starts_with('/') {
        let Some(referrer) = referrer else {
            return Err(SpecifierError::Relative(base.to_string()));
        };
        referrer
            .join(text)
            .map_err(|e| SpecifierError::Invalid(e.to_string()))?
    } else if let Ok(url) = Url::parse(text) {
        url
    } else {
        let (package, path) = package(text)?;
        let path = match path {
            Some(path) => path.to_owned(),
            None => entry_suffix.to_owned(),
        };
        base.join(&format!("{package}{path}"))
            .map_err(|e| SpecifierError::Invalid(e.to_string()))?
    };
    if !under(base, &url) {
        return Err(SpecifierError::OffCdn {
            base: base.to_string(),
            url: url.to_string(),
        });
    }
    Ok(Resolved { url, pin })
}

/// Whether `url` is `base` or below it: the same origin, and a path starting with the
/// base's (which ends in `/`), with no credentials or fragment.
fn under(base: &Url, url: &Url) -> bool {
    url.scheme() == base.scheme()
        && url.host_str() == base.host_str()
        && url.port_or_known_default() == base.port_or_known_default()
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none()
        && url.path().starts_with(base.path())
        && url.path().len() > base.path().len()
}

fn parse_pin(fragment: &str) -> Result<[u8; 48], SpecifierError> {
    let b64 = fragment
        .strip_prefix("sha384-")
        .ok_or(SpecifierError::BadPin)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| SpecifierError::BadPin)?;
    <[u8; 48]>::try_from(bytes.as_slice()).map_err(|_| SpecifierError::BadPin)
}

/// Splits `name@version[/path]` (or `@scope/name@version[/path]`) into the package with
/// its exact version, and the path with its leading `/`.
fn package(text: &str) -> Result<(&str, Option<&str>), SpecifierError> {
    let (scope, rest) = match text.strip_prefix('@') {
        Some(rest) => {
            let (scope, rest) = rest
                .split_once('/')
                .ok_or_else(|| SpecifierError::BadName(text.to_owned()))?;
            (Some(scope), rest)
        }
        None => (None, text),
    };
    let (name_and_version, path) = match rest.find('/') {
        Some(i) => (&rest[..i], Some(&rest[i..])),
        None => (rest, None),
    };
    let (name, version) = match name_and_version.split_once('@') {
        Some((name, version)) => (name, Some(version)),
        None => (name_and_version, None),
    };
    let full_name = match scope {
        Some(scope) => format!("@{scope}/{name}"),
        None => name.to_owned(),
    };
    if !scope.is_none_or(valid_name_part) || !valid_name_part(name) || full_name.len() > 214 {
        return Err(SpecifierError::BadName(full_name));
    }
    let Some(version) = version else {
        return Err(SpecifierError::Unpinned(full_name));
    };
    if !exact_version(version) {
        return Err(SpecifierError::NotExact {
            name: full_name,
            version: version.to_owned(),
        });
    }
    let package_len = text.len() - path.map_or(0, str::len);
    Ok((&text[..package_len], path))
}

/// One part of an npm name (the scope or the name): URL-safe characters, not starting
/// with `.` or `_`.
fn valid_name_part(part: &str) -> bool {
    !part.is_empty()
        && !part.starts_with(['.', '_'])
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// `MAJOR.MINOR.PATCH`, with an optional `-prerelease` and `+build` (semver 2.0).
fn exact_version(version: &str) -> bool {
    let (version, build) = match version.split_once('+') {
        Some((v, build)) => (v, Some(build)),
        None => (version, None),
    };
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (version, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    let number = |n: &&str| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && (n.len() == 1 || !n.starts_with('0'))
    };
    let identifiers = |s: &str| {
        s.split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    numbers.len() == 3
        && numbers.iter().all(number)
        && pre.is_none_or(identifiers)
        && build.is_none_or(identifiers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esm_sh() -> Url {
        cdn_base("https://esm.sh/").unwrap()
    }

    fn jsdelivr() -> Url {
        cdn_base("https://cdn.jsdelivr.net/npm/").unwrap()
    }

    fn url(
        base: &Url,
        suffix: &str,
        spec: &str,
        referrer: Option<&str>,
    ) -> Result<String, SpecifierError> {
        let referrer = referrer.map(|r| Url::parse(r).unwrap());
        resolve(base, suffix, spec, referrer.as_ref()).map(|r| r.url.to_string())
    }

    #[test]
    fn pinned_packages_resolve_under_the_cdn() {
        let (esm, jsd) = (esm_sh(), jsdelivr());
        assert_eq!(
            url(&esm, "", "zod@3.22.4", None).unwrap(),
            "https://esm.sh/zod@3.22.4"
        );
        assert_eq!(
            url(&jsd, "/+esm", "zod@3.22.4", None).unwrap(),
            "https://cdn.jsdelivr.net/npm/zod@3.22.4/+esm"
        );
        assert_eq!(
            url(&jsd, "/+esm", "date-fns@3.6.0/esm/index.js", None).unwrap(),
            "https://cdn.jsdelivr.net/npm/date-fns@3.6.0/esm/index.js"
        );
        assert_eq!(
            url(&jsd, "/+esm", "@preact/render-to-string@6.4.1", None).unwrap(),
            "https://cdn.jsdelivr.net/npm/@preact/render-to-string@6.4.1/+esm"
        );
        assert_eq!(
            url(&esm, "", "@noble/hashes@1.4.0/sha3", None).unwrap(),
            "https://esm.sh/@noble/hashes@1.4.0/sha3"
        );
        for version in ["1.2.3-rc.1", "1.2.3+build.5", "0.0.0-next-2024", "10.20.30"] {
            let spec = format!("x@{version}");
            assert!(url(&esm, "", &spec, None).is_ok(), "{spec}");
        }
    }

    #[test]
    fn unpinned_and_ranged_versions_are_refused_with_the_fix() {
        let esm = esm_sh();
        let err = url(&esm, "", "zod", None).unwrap_err();
        assert_eq!(err, SpecifierError::Unpinned("zod".into()));
        assert!(err.to_string().contains("`zod@1.2.3`"), "{err}");
        assert_eq!(
            url(&esm, "", "@scope/pkg/sub.js", None).unwrap_err(),
            SpecifierError::Unpinned("@scope/pkg".into())
        );
        for version in [
            "^3", "~3.2.0", "latest", "3", "3.22", "3.22.x", ">=3.0.0", "03.1.1", "3.1.1-", "",
        ] {
            let spec = format!("zod@{version}");
            match url(&esm, "", &spec, None) {
                Err(SpecifierError::NotExact { .. }) => {}
                other => panic!("{spec}: {other:?}"),
            }
        }
        for bad in [
            "Zod thing@1.0.0",
            ".hidden@1.0.0",
            "@/x@1.0.0",
            "a\\b@1.0.0",
            "",
        ] {
            assert!(url(&esm, "", bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn full_urls_must_lie_under_the_cdn() {
        let jsd = jsdelivr();
        assert_eq!(
            url(
                &jsd,
                "/+esm",
                "https://cdn.jsdelivr.net/npm/zod@3.22.4/+esm",
                None
            )
            .unwrap(),
            "https://cdn.jsdelivr.net/npm/zod@3.22.4/+esm"
        );
        for off in [
            "https://evil.example/npm/zod@3.22.4/+esm",
            "http://cdn.jsdelivr.net/npm/zod@3.22.4/+esm",
            "https://cdn.jsdelivr.net:8443/npm/zod@3.22.4/+esm",
            "https://cdn.jsdelivr.net/gh/user/repo@1.0.0/x.js",
            "https://cdn.jsdelivr.net/npm/../gh/x.js",
            "https://cdn.jsdelivr.net/npm/%2e%2e/gh/x.js",
            "https://user@cdn.jsdelivr.net/npm/zod@3.22.4/+esm",
            "https://cdn.jsdelivr.net/npm/",
            "file:///etc/passwd",
            "node:fs",
            "data:text/javascript,export%20default%201",
        ] {
            match url(&jsd, "/+esm", off, None) {
                Err(SpecifierError::OffCdn { .. }) => {}
                other => panic!("{off}: {other:?}"),
            }
        }
    }

    #[test]
    fn relative_paths_need_a_module_and_stay_under_the_cdn() {
        let esm = esm_sh();
        let module = Some("https://esm.sh/zod@3.22.4/es2022/zod.mjs");
        assert_eq!(
            url(
                &esm,
                "",
                "/v135/zod@3.22.4/es2022/zod.mjs",
                Some("https://esm.sh/zod@3.22.4")
            )
            .unwrap(),
            "https://esm.sh/v135/zod@3.22.4/es2022/zod.mjs"
        );
        assert_eq!(
            url(&esm, "", "./util.mjs", module).unwrap(),
            "https://esm.sh/zod@3.22.4/es2022/util.mjs"
        );
        assert_eq!(
            url(&esm, "", "../lib/a.mjs", module).unwrap(),
            "https://esm.sh/zod@3.22.4/lib/a.mjs"
        );
        for relative in ["./util.js", "../x.js", "/x@1.0.0"] {
            assert!(matches!(
                url(&esm, "", relative, None),
                Err(SpecifierError::Relative(_))
            ));
        }
        let jsd = jsdelivr();
        assert!(matches!(
            url(
                &jsd,
                "",
                "../../gh/x.js",
                Some("https://cdn.jsdelivr.net/npm/a@1.0.0/b.js")
            ),
            Err(SpecifierError::OffCdn { .. })
        ));
        assert!(matches!(
            url(
                &jsd,
                "",
                "/gh/x.js",
                Some("https://cdn.jsdelivr.net/npm/a@1.0.0/b.js")
            ),
            Err(SpecifierError::OffCdn { .. })
        ));
        // A bare specifier inside a module is held to the same rules as in the action.
        assert_eq!(
            url(&esm, "", "zod", module).unwrap_err(),
            SpecifierError::Unpinned("zod".into())
        );
    }

    #[test]
    fn inline_pins_are_split_off_and_checked() {
        let esm = esm_sh();
        let hash = [7u8; 48];
        let spec = format!("zod@3.22.4{}", format_args!("#{}", integrity(&hash)));
        let resolved = resolve(&esm, "", &spec, None).unwrap();
        assert_eq!(resolved.url.as_str(), "https://esm.sh/zod@3.22.4");
        assert_eq!(resolved.pin, Some(hash));
        let full = format!("https://esm.sh/zod@3.22.4#{}", integrity(&hash));
        assert_eq!(resolve(&esm, "", &full, None).unwrap().pin, Some(hash));
        for bad in [
            "zod@3.22.4#main",
            "zod@3.22.4#sha384-",
            "zod@3.22.4#sha384-AAAA",
            "zod@3.22.4#sha256-AAAA",
        ] {
            assert_eq!(
                resolve(&esm, "", bad, None).unwrap_err(),
                SpecifierError::BadPin,
                "{bad}"
            );
        }
    }
}
