//! `compose-pin render` / `hash` / `dev` as the operator guide uses them: the printed hash
//! is the SHA-256 of the written bytes, every image is pinned, unpinned ones are refused,
//! and the keyservice measures the same hash from the same file.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use sha2::{Digest, Sha256};
use test_support::binaries::workspace_binary;
use test_support::compose_pin::{compose_pin, image, render, stdout};

#[test]
fn the_rendered_file_hashes_to_what_the_tool_prints() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app-compose.json");
    let printed = render(&image(0xab), &file);
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(printed, hex::encode(Sha256::digest(&bytes)));
    assert_eq!(printed.len(), 64);

    // `hash` of the file says the same; rendering again gives the same bytes.
    let again = stdout(&compose_pin(&["hash", file.to_str().unwrap()]));
    assert_eq!(again.trim(), printed);
    let file2 = dir.path().join("again.json");
    assert_eq!(render(&image(0xab), &file2), printed);
    assert_eq!(std::fs::read(&file2).unwrap(), bytes);

    // Every image carries the digest.
    let app: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let compose = app["docker_compose_file"].as_str().unwrap();
    let images: Vec<&str> = compose
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .collect();
    // keyservice, appliance and workers.
    assert_eq!(images, [image(0xab), image(0xab), image(0xab)]);
    assert_eq!(app["runner"], "docker-compose");
    // The current dstack form: the KMS named as the key provider, no pin, no legacy fields.
    assert_eq!(app["key_provider"], "kms");
    assert_eq!(app["key_provider_id"], "");
    assert!(app.get("kms_enabled").is_none(), "{app}");
    assert!(app.get("local_key_provider_enabled").is_none(), "{app}");
    assert_eq!(app["gateway_enabled"], false);
    assert_eq!(app["secure_time"], false);

    // Without --output: the file on stdout, the hash on stderr.
    let out = compose_pin(&["render", "--image", &image(0xab)]);
    assert_eq!(stdout(&out).as_bytes(), bytes.as_slice());
    assert!(String::from_utf8_lossy(&out.stderr).contains(&printed));

    // The dev platform of the keyservice measures the same hash from the same file.
    let ks = std::process::Command::new(workspace_binary("keyservice"))
        .args(["compose-hash", "--platform", "dev", "--compose-file"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stdout(&ks).trim(), printed);
}

#[test]
fn unpinned_images_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app-compose.json");
    for unpinned in ["ghcr.io/example/appliance:latest", "appliance"] {
        let out = compose_pin(&[
            "render",
            "--image",
            unpinned,
            "--output",
            file.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is not pinned"), "{err}");
        assert!(err.contains(unpinned), "{err}");
        assert!(!file.exists());
    }

    // A template with an unpinned image of its own.
    let template = dir.path().join("compose.yml");
    std::fs::write(
        &template,
        "services:\n  app:\n    image: {{image}}\n  sidecar:\n    image: busybox:1.36\n",
    )
    .unwrap();
    let out = compose_pin(&[
        "render",
        "--image",
        &image(1),
        "--template",
        template.to_str().unwrap(),
        "--output",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"busybox:1.36\" is not pinned"));

    // `hash` refuses a file whose compose was changed to an unpinned image.
    render(&image(2), &file);
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen(&image(2), "appliance:dev", 1)).unwrap();
    let out = compose_pin(&["hash", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"appliance:dev\" is not pinned"));
}

#[test]
fn dev_renders_what_the_library_renders() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dev.json");
    let printed = stdout(&compose_pin(&["dev", "--output", file.to_str().unwrap()]));
    let dev = compose_pin::render_dev().unwrap();
    assert_eq!(printed.trim(), dev.hash_hex());
    assert_eq!(std::fs::read(&file).unwrap(), dev.bytes());
}

/// `compose-pin render --image IMAGE ARGS… --output FILE`: the printed hash and the file.
fn render_with(dir: &std::path::Path, name: &str, args: &[&str]) -> (String, serde_json::Value) {
    let file = dir.join(name);
    let image = image(0x5a);
    let mut all = vec!["render", "--image", image.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", file.to_str().unwrap()]);
    let printed = stdout(&compose_pin(&all)).trim().to_owned();
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(printed, hex::encode(Sha256::digest(&bytes)));
    // `hash` accepts every form `render` writes.
    let again = stdout(&compose_pin(&["hash", file.to_str().unwrap()]));
    assert_eq!(again.trim(), printed);
    (printed, serde_json::from_slice(&bytes).unwrap())
}

#[test]
fn the_flags_set_the_dstack_fields() {
    let dir = tempfile::tempdir().unwrap();
    let (default_hash, default) = render_with(dir.path(), "default.json", &[]);

    // --legacy-compose: today's older hosts' form.
    let (hash, legacy) = render_with(dir.path(), "legacy.json", &["--legacy-compose"]);
    assert_ne!(hash, default_hash);
    assert_eq!(legacy["kms_enabled"], true);
    assert_eq!(legacy["local_key_provider_enabled"], false);
    assert!(legacy.get("key_provider").is_none(), "{legacy}");
    assert!(legacy.get("key_provider_id").is_none(), "{legacy}");
    assert_eq!(
        legacy["docker_compose_file"],
        default["docker_compose_file"]
    );

    // --key-provider-id: the KMS pin, as lowercase hex without 0x.
    let (hash, pinned) = render_with(
        dir.path(),
        "pinned.json",
        &["--key-provider-id", "0x3059301306072A8648CE3D0201"],
    );
    assert_ne!(hash, default_hash);
    assert_eq!(pinned["key_provider"], "kms");
    assert_eq!(pinned["key_provider_id"], "3059301306072a8648ce3d0201");

    // --gateway and --secure-time, each alone.
    let (hash, gateway) = render_with(dir.path(), "gateway.json", &["--gateway"]);
    assert_ne!(hash, default_hash);
    assert_eq!(gateway["gateway_enabled"], true);
    assert_eq!(gateway["secure_time"], false);
    let (hash, secure) = render_with(dir.path(), "secure.json", &["--secure-time"]);
    assert_ne!(hash, default_hash);
    assert_eq!(secure["secure_time"], true);
    assert_eq!(secure["gateway_enabled"], false);
}

#[test]
fn bad_key_provider_ids_and_non_kms_composes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("app-compose.json");
    let out_arg = file.to_str().unwrap().to_owned();
    let image = image(3);
    for (id, why) in [
        ("abc", "odd number of hex digits"),
        ("0xzz", "only the hex digits"),
        ("30 59", "only the hex digits"),
    ] {
        let out = compose_pin(&[
            "render",
            "--image",
            &image,
            "--key-provider-id",
            id,
            "--output",
            &out_arg,
        ]);
        assert_eq!(out.status.code(), Some(2), "{id}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "compose-pin: key_provider_id {id:?} is not hex bytes"
            )),
            "{err}"
        );
        assert!(err.contains(why), "{err}");
        assert!(!file.exists());
    }
    // A pin has no place in the legacy form: refused before anything is written.
    let out = compose_pin(&[
        "render",
        "--image",
        &image,
        "--legacy-compose",
        "--key-provider-id",
        "00ff",
        "--output",
        &out_arg,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--legacy-compose"), "{err}");
    assert!(!file.exists());

    // `hash` refuses a compose whose keys would not come from the KMS, naming the provider.
    render(&image, &file);
    let text = std::fs::read_to_string(&file).unwrap();
    for (from, to, named) in [
        (
            "\"key_provider\":\"kms\"",
            "\"key_provider\":\"none\"",
            "key_provider \"none\"",
        ),
        (
            "\"key_provider\":\"kms\"",
            "\"key_provider\":\"local\"",
            "key_provider \"local\"",
        ),
        (
            "\"key_provider\":\"kms\"",
            "\"key_provider\":\"tpm\"",
            "key_provider \"tpm\"",
        ),
        (
            "\"key_provider\":\"kms\",\"key_provider_id\":\"\"",
            "\"kms_enabled\":false,\"local_key_provider_enabled\":true",
            "the local key provider",
        ),
    ] {
        assert!(text.contains(from), "{text}");
        let edited = dir.path().join("edited.json");
        std::fs::write(&edited, text.replacen(from, to, 1)).unwrap();
        let out = compose_pin(&["hash", edited.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{to}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(named), "{err}");
        assert!(err.contains("keys come from the KMS"), "{err}");
        assert!(out.stdout.is_empty());
    }
    // The legacy form with kms_enabled false is refused too.
    let legacy = dir.path().join("legacy.json");
    stdout(&compose_pin(&[
        "render",
        "--image",
        &image,
        "--legacy-compose",
        "--output",
        legacy.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(&legacy).unwrap();
    std::fs::write(
        &legacy,
        text.replacen("\"kms_enabled\":true", "\"kms_enabled\":false", 1),
    )
    .unwrap();
    let out = compose_pin(&["hash", legacy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("kms_enabled false"), "{err}");
}
