//! The text of an operator request: rendering and strict parsing.

use std::fmt;

/// The first line of every request.
pub const PREAMBLE: &str = "appliance operator request";

/// Longest text accepted (a reseal request is about 300 bytes).
pub const MAX_TEXT_LEN: usize = 1024;

/// What the operator authorises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Read the deployment's state (versions, sealed roots, database counts).
    Status,
    /// Download keyservice's sealed root file(s) and the payer-contract record.
    ExportRoot,
    /// Download a consistent copy of the SQLite database.
    BackupDatabase,
    /// Reseal the root for the compose hash `target` (an upgrade).
    Reseal { target: [u8; 32] },
}

impl Action {
    /// The `action:` value, also the last segment of the HTTP route.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::ExportRoot => "export-root",
            Self::BackupDatabase => "backup-database",
            Self::Reseal { .. } => "reseal",
        }
    }
}

/// One request, as signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperatorRequest {
    pub action: Action,
    /// The app id (dstack: the app contract's address) the client verified.
    pub app: [u8; 20],
    /// The compose hash the client verified.
    pub compose_hash: [u8; 32],
    /// Unix seconds, by the client's clock.
    pub issued_at: u64,
    /// Random, never reused.
    pub nonce: [u8; 16],
}

/// Why a text is not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    #[error("the request is {0} bytes; at most {MAX_TEXT_LEN}")]
    TooLong(usize),
    #[error("line {line}: expected {expected:?}")]
    Line { line: usize, expected: &'static str },
    #[error("line {line}: unknown action {found:?}")]
    UnknownAction { line: usize, found: String },
    #[error("line {line} ({field}): {reason}")]
    Value {
        line: usize,
        field: &'static str,
        reason: &'static str,
    },
    #[error("the request has {0} lines after its last field")]
    TrailingLines(usize),
    #[error(
        "the request is not in canonical form (lower-case hex with 0x, decimal time without leading zeros, no trailing newline)"
    )]
    NotCanonical,
}

impl OperatorRequest {
    /// The exact text to sign.
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// Parses `text`, which must be exactly what [`Self::render`] gives for the request.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        if text.len() > MAX_TEXT_LEN {
            return Err(ParseError::TooLong(text.len()));
        }
        let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        let mut next = |expected: &'static str| -> Result<(usize, &str), ParseError> {
            let (line, content) = lines.next().ok_or(ParseError::Line { line: 0, expected })?;
            Ok((line, content))
        };
        let (line, first) = next(PREAMBLE)?;
        if first != PREAMBLE {
            return Err(ParseError::Line {
                line,
                expected: PREAMBLE,
            });
        }
        let (line, action) = field(next("action: …")?, "action")?;
        let action = match action {
            "status" => Action::Status,
            "export-root" => Action::ExportRoot,
            "backup-database" => Action::BackupDatabase,
            "reseal" => {
                let (line, target) = field(next("target: 0x…")?, "target")?;
                Action::Reseal {
                    target: hex_field(line, "target", target)?,
                }
            }
            other => {
                return Err(ParseError::UnknownAction {
                    line,
                    found: other.chars().take(40).collect(),
                });
            }
        };
        let (line, app) = field(next("app: 0x…")?, "app")?;
        let app = hex_field(line, "app", app)?;
        let (line, compose) = field(next("compose hash: 0x…")?, "compose hash")?;
        let compose_hash = hex_field(line, "compose hash", compose)?;
        let (line, issued) = field(next("issued at: …")?, "issued at")?;
        let issued_at = issued.parse::<u64>().map_err(|_| ParseError::Value {
            line,
            field: "issued at",
            reason: "not Unix seconds",
        })?;
        let (line, nonce) = field(next("nonce: 0x…")?, "nonce")?;
        let nonce = hex_field(line, "nonce", nonce)?;
        let rest = lines.count();
        if rest != 0 {
            return Err(ParseError::TrailingLines(rest));
        }
        let request = Self {
            action,
            app,
            compose_hash,
            issued_at,
            nonce,
        };
        if request.render() != text {
            return Err(ParseError::NotCanonical);
        }
        Ok(request)
    }
}

impl fmt::Display for OperatorRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{PREAMBLE}")?;
        writeln!(f, "action: {}", self.action.name())?;
        if let Action::Reseal { target } = &self.action {
            writeln!(f, "target: 0x{}", hex::encode(target))?;
        }
        writeln!(f, "app: 0x{}", hex::encode(self.app))?;
        writeln!(f, "compose hash: 0x{}", hex::encode(self.compose_hash))?;
        writeln!(f, "issued at: {}", self.issued_at)?;
        write!(f, "nonce: 0x{}", hex::encode(self.nonce))
    }
}

/// `name: value` on its line, the value returned.
fn field<'a>(
    (line, content): (usize, &'a str),
    name: &'static str,
) -> Result<(usize, &'a str), ParseError> {
    let value = content
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix(": "))
        .ok_or(ParseError::Line {
            line,
            expected: name,
        })?;
    Ok((line, value))
}

/// `0x` + exactly `2 N` hex digits.
fn hex_field<const N: usize>(
    line: usize,
    field: &'static str,
    value: &str,
) -> Result<[u8; N], ParseError> {
    let digits = value.strip_prefix("0x").ok_or(ParseError::Value {
        line,
        field,
        reason: "must start with 0x",
    })?;
    let mut out = [0u8; N];
    hex::decode_to_slice(digits, &mut out).map_err(|_| ParseError::Value {
        line,
        field,
        reason: "wrong length or not hex",
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reseal() -> OperatorRequest {
        OperatorRequest {
            action: Action::Reseal { target: [0xab; 32] },
            app: [0x11; 20],
            compose_hash: [0x22; 32],
            issued_at: 1_764_300_000,
            nonce: [0x33; 16],
        }
    }

    #[test]
    fn renders_the_documented_text_and_parses_it_back() {
        let text = reseal().render();
        assert_eq!(
            text,
            format!(
                "appliance operator request\naction: reseal\ntarget: 0x{}\napp: 0x{}\ncompose hash: 0x{}\nissued at: 1764300000\nnonce: 0x{}",
                "ab".repeat(32),
                "11".repeat(20),
                "22".repeat(32),
                "33".repeat(16)
            )
        );
        assert_eq!(OperatorRequest::parse(&text), Ok(reseal()));
        for action in [Action::Status, Action::ExportRoot, Action::BackupDatabase] {
            let r = OperatorRequest { action, ..reseal() };
            let text = r.render();
            assert!(!text.contains("target"), "{text}");
            assert_eq!(OperatorRequest::parse(&text), Ok(r));
        }
    }

    /// One request has one text: anything a lenient parser would also accept is refused.
    #[test]
    fn only_the_canonical_text_parses() {
        let text = reseal().render();
        let variants = [
            format!("{text}\n"),
            text.replace("0xabab", "0xABAB"),
            text.replace("issued at: 1764300000", "issued at: 01764300000"),
            text.replace("action: reseal", "action:  reseal"),
            text.replace("\n", "\r\n"),
            text.replace("appliance operator request", "Appliance operator request"),
        ];
        for variant in variants {
            assert!(OperatorRequest::parse(&variant).is_err(), "{variant:?}");
        }
    }

    #[test]
    fn says_what_is_wrong() {
        let text = reseal().render();
        assert_eq!(
            OperatorRequest::parse(&text.replace("action: reseal", "action: format-disk")),
            Err(ParseError::UnknownAction {
                line: 2,
                found: "format-disk".into()
            })
        );
        assert_eq!(
            OperatorRequest::parse(&text.replace(&format!("0x{}", "11".repeat(20)), "0x1111")),
            Err(ParseError::Value {
                line: 4,
                field: "app",
                reason: "wrong length or not hex"
            })
        );
        // A status request cannot smuggle a target.
        let status = OperatorRequest {
            action: Action::Status,
            ..reseal()
        }
        .render()
        .replace("app:", &format!("target: 0x{}\napp:", "ab".repeat(32)));
        assert!(matches!(
            OperatorRequest::parse(&status),
            Err(ParseError::Line { line: 3, .. })
        ));
        assert_eq!(
            OperatorRequest::parse(&format!("{text}\nextra: 1")),
            Err(ParseError::TrailingLines(1))
        );
        let long = "x".repeat(MAX_TEXT_LEN + 1);
        assert_eq!(
            OperatorRequest::parse(&long),
            Err(ParseError::TooLong(MAX_TEXT_LEN + 1))
        );
    }
}
