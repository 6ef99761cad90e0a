//! `appliance-cli operator …`: the day-2 tasks, each one request signed for exactly the
//! deployment the client just verified (its app id and compose hash), sent over the
//! connection pinned to what was verified.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use appliance_client::api::operator::{
    ExportedRoot, OPERATOR_PREFIX, OperatorStatus, Resealed, SignedRequest,
};
use appliance_client::{Client, Credential, Verification};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use k256::ecdsa::SigningKey;
use operator_auth::{Action, OperatorRequest};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::CliError;
use crate::args::{ENV_OPERATOR_KEY, OperatorCommand, OperatorSigning};
use crate::output::{Table, clean};

/// What a command produced: a value for `--json`, and its text.
pub struct Outcome {
    pub json: serde_json::Value,
    pub text: String,
}

fn hex_array<const N: usize>(what: &str, text: &str) -> Result<[u8; N], CliError> {
    let mut out = [0u8; N];
    hex::decode_to_slice(text.trim().trim_start_matches("0x"), &mut out).map_err(|_| {
        CliError::Input(format!("{what} must be {} hex digits (0x optional)", 2 * N))
    })?;
    Ok(out)
}

/// The request for `action` on the deployment `verified` describes, issued now.
fn request_for(action: Action, verified: &Verification) -> Result<OperatorRequest, CliError> {
    let app = verified.app_id.as_deref().ok_or_else(|| {
        CliError::Input("the verified evidence names no app id: operator requests need one".into())
    })?;
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce)
        .map_err(|e| CliError::Input(format!("no randomness for the nonce: {e}")))?;
    Ok(OperatorRequest {
        action,
        app: hex_array("the app id", app)?,
        compose_hash: hex_array("the compose hash", &verified.compose_hash)?,
        issued_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        nonce,
    })
}

/// The signed body: from `--request-file`/`--signature`, or signed here with the key of
/// [`ENV_OPERATOR_KEY`]. `None` with `--print-request` (the text was returned to print).
fn signed(
    action: Action,
    verified: &Verification,
    signing: &OperatorSigning,
) -> Result<Result<SignedRequest, String>, CliError> {
    if let (Some(file), Some(signature)) = (&signing.request_file, &signing.signature) {
        let text = std::fs::read_to_string(file)
            .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
        let text = text.strip_suffix('\n').unwrap_or(&text).to_owned();
        let parsed = OperatorRequest::parse(&text)
            .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
        if parsed.action != action {
            return Err(CliError::Input(format!(
                "{} asks for `{}`, not for this command",
                file.display(),
                parsed.action.name()
            )));
        }
        return Ok(Ok(SignedRequest {
            request: text,
            signature: signature.trim().to_owned(),
        }));
    }
    let request = request_for(action, verified)?.render();
    if signing.print_request {
        return Ok(Err(request));
    }
    let key = Zeroizing::new(std::env::var(ENV_OPERATOR_KEY).map_err(|_| {
        CliError::Input(format!(
            "set {ENV_OPERATOR_KEY} to the operator's private key (0x + 64 hex digits), or sign elsewhere with --print-request"
        ))
    })?);
    let bytes = Zeroizing::new(hex_array::<32>(ENV_OPERATOR_KEY, &key)?);
    let key = SigningKey::from_slice(bytes.as_slice())
        .map_err(|_| CliError::Input(format!("{ENV_OPERATOR_KEY} is not a secp256k1 key")))?;
    let signature = operator_auth::sign(&key, request.as_bytes())
        .map_err(|e| CliError::Input(format!("signing: {e}")))?;
    Ok(Ok(SignedRequest {
        request,
        signature: format!("0x{}", hex::encode(signature)),
    }))
}

fn printed(text: String) -> Outcome {
    Outcome {
        json: serde_json::json!({ "request": text }),
        text: format!("{text}\n"),
    }
}

/// Runs one operator command on `client` (already verified as `verified`).
pub async fn run(
    client: &Client,
    verified: &Verification,
    cmd: &OperatorCommand,
) -> Result<Outcome, CliError> {
    let (action, signing) = match cmd {
        OperatorCommand::Status(signing) => (Action::Status, signing),
        OperatorCommand::ExportRoot { signing, .. } => (Action::ExportRoot, signing),
        OperatorCommand::BackupDatabase { signing, .. } => (Action::BackupDatabase, signing),
        OperatorCommand::Reseal { to, signing } => (
            Action::Reseal {
                target: hex_array::<32>("--to", to)?,
            },
            signing,
        ),
    };
    let body = match signed(action, verified, signing)? {
        Ok(body) => body,
        Err(text) => return Ok(printed(text)),
    };
    match cmd {
        OperatorCommand::Status(_) => {
            let status: OperatorStatus = client
                .post_json(
                    &format!("{OPERATOR_PREFIX}/status"),
                    &body,
                    Credential::None,
                )
                .await?;
            let mut t = Table::new(&["FILE", "BYTES", "SEALED FOR", "CURRENT"]);
            for f in &status.keyservice_files {
                t.row(vec![
                    clean(&f.name),
                    f.bytes.to_string(),
                    f.compose_hash.as_deref().map(clean).unwrap_or_default(),
                    if f.current { "yes" } else { "" }.to_owned(),
                ]);
            }
            let mut text = format!(
                "version {}\napp id {}\ncompose hash {}\nplatform {}\nroot id {}\nstore {}\ngovernance {}\noperators {}\n",
                clean(&status.version),
                clean(&status.app_id),
                clean(&status.compose_hash),
                clean(&status.platform),
                clean(&status.root_id),
                clean(&status.store_engine),
                status
                    .governance_address
                    .as_deref()
                    .map(clean)
                    .unwrap_or_else(|| "none".into()),
                status
                    .operators
                    .iter()
                    .map(|o| clean(o))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            text.push_str(&t.render());
            for r in &status.shared_roots {
                text.push_str(&format!(
                    "shared root sealed for {} (root id {})\n",
                    clean(&r.compose_hash),
                    clean(&r.root_id)
                ));
            }
            Ok(Outcome {
                json: serde_json::to_value(&status).unwrap_or_default(),
                text,
            })
        }
        OperatorCommand::ExportRoot { out, .. } => {
            prepare_dir(out)?;
            let exported: ExportedRoot = client
                .post_json(
                    &format!("{OPERATOR_PREFIX}/export-root"),
                    &body,
                    Credential::None,
                )
                .await?;
            let mut written = Vec::new();
            for (name, content) in &exported.keyservice_files {
                written.push(write_new(out, &safe_name(name)?, content)?);
            }
            for (hash, content) in &exported.shared_roots {
                let name = format!(
                    "shared-root.sealed.{}",
                    safe_name(hash.trim_start_matches("0x"))?
                );
                written.push(write_new(out, &name, content)?);
            }
            let text = format!(
                "root id {}: wrote {} file(s) to {}:\n{}\n",
                clean(&exported.root_id),
                written.len(),
                out.display(),
                written.join("\n")
            );
            Ok(Outcome {
                json: serde_json::json!({ "root_id": exported.root_id, "files": written }),
                text,
            })
        }
        OperatorCommand::BackupDatabase { out, .. } => {
            if out.exists() {
                return Err(CliError::Input(format!("{} exists", out.display())));
            }
            let bytes = serde_json::to_vec(&body).map_err(|e| CliError::Input(e.to_string()))?;
            let db = client
                .request_bytes(
                    http::Method::POST,
                    &format!("{OPERATOR_PREFIX}/backup-database"),
                    None,
                    Some(bytes),
                    Credential::None,
                )
                .await?;
            if !db.starts_with(b"SQLite format 3\0") {
                return Err(CliError::Input(
                    "the answer is not an SQLite database; nothing written".into(),
                ));
            }
            write_file(out, &db)?;
            let sha = hex::encode(Sha256::digest(&db));
            Ok(Outcome {
                json: serde_json::json!({ "file": out, "bytes": db.len(), "sha256": sha }),
                text: format!(
                    "database backup written to {}: {} bytes, sha256 {sha}\n",
                    out.display(),
                    db.len()
                ),
            })
        }
        OperatorCommand::Reseal { .. } => {
            let resealed: Resealed = client
                .post_json(
                    &format!("{OPERATOR_PREFIX}/reseal"),
                    &body,
                    Credential::None,
                )
                .await?;
            Ok(Outcome {
                text: format!(
                    "resealed root {} for compose hash {} (kept in {})\n",
                    clean(&resealed.root_id),
                    clean(&resealed.target),
                    clean(&resealed.stored)
                ),
                json: serde_json::to_value(&resealed).unwrap_or_default(),
            })
        }
    }
}

/// A server-chosen file name, kept only if it is a plain name.
fn safe_name(name: &str) -> Result<String, CliError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(CliError::Input(format!(
            "the server named a file {:?}; refusing it",
            clean(name)
        )))
    }
}

fn prepare_dir(dir: &Path) -> Result<(), CliError> {
    std::fs::create_dir_all(dir).map_err(|e| CliError::Input(format!("{}: {e}", dir.display())))?;
    let empty = std::fs::read_dir(dir)
        .map_err(|e| CliError::Input(format!("{}: {e}", dir.display())))?
        .next()
        .is_none();
    if !empty {
        return Err(CliError::Input(format!(
            "{} is not empty; give a new directory",
            dir.display()
        )));
    }
    Ok(())
}

fn write_new(dir: &Path, name: &str, base64: &str) -> Result<String, CliError> {
    let bytes = B64
        .decode(base64)
        .map_err(|_| CliError::Input(format!("the server's {name} is not base64")))?;
    let path = dir.join(name);
    write_file(&path, &bytes)?;
    Ok(path.display().to_string())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}
