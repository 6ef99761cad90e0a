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
    assert_eq!(app["kms_enabled"], true);

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
