//! The image is reproducible: the same inputs give the same digest and byte-identical
//! outputs, one changed byte of a binary gives another digest; the layout and the
//! `docker load` archive are consistent; a real binary gets exactly its shared libraries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use oci_image::{Binary, DEFAULT_BINARIES, ImageSpec, Libraries, build, write_layout};
use sha2::{Digest, Sha256};

const EPOCH: u64 = 1_700_000_000;

fn image_build() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_image-build"))
}

/// Small stand-in binaries (not executables: no libraries).
fn fake_bin_dir(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in DEFAULT_BINARIES {
        std::fs::write(bin.join(name), format!("#!/bin/false\n{name} build\n")).unwrap();
    }
    bin
}

fn spec(bin: &Path, epoch: u64) -> ImageSpec {
    ImageSpec {
        binaries: DEFAULT_BINARIES
            .iter()
            .map(|n| Binary {
                name: (*n).to_owned(),
                path: bin.join(n),
            })
            .collect(),
        source_date_epoch: epoch,
        libraries: Libraries::None,
        tag: "appliance:test".to_owned(),
    }
}

fn read_tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn same_inputs_same_digest_and_one_changed_byte_changes_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin_dir(dir.path());
    let a = build(&spec(&bin, EPOCH)).unwrap();
    let b = build(&spec(&bin, EPOCH)).unwrap();
    assert_eq!(a.digest(), b.digest());

    let (out_a, out_b) = (dir.path().join("a"), dir.path().join("b"));
    let wa = write_layout(&a, &out_a, EPOCH).unwrap();
    let wb = write_layout(&b, &out_b, EPOCH).unwrap();
    assert_eq!(
        std::fs::read(&wa.archive).unwrap(),
        std::fs::read(&wb.archive).unwrap()
    );
    assert_eq!(read_tree(&wa.layout_dir), read_tree(&wb.layout_dir));
    assert_eq!(
        std::fs::read_to_string(&wa.digest_file).unwrap(),
        format!("{}\n", a.digest_string())
    );

    // One byte of one binary.
    let target = bin.join("keyservice");
    let mut bytes = std::fs::read(&target).unwrap();
    bytes[3] ^= 1;
    std::fs::write(&target, &bytes).unwrap();
    let c = build(&spec(&bin, EPOCH)).unwrap();
    assert_ne!(c.digest(), a.digest());
    assert_eq!(c.layers[0], a.layers[0], "the base layer does not change");
    assert_ne!(c.layers[1], a.layers[1]);

    // The timestamp is an input too.
    bytes[3] ^= 1;
    std::fs::write(&target, &bytes).unwrap();
    assert_eq!(build(&spec(&bin, EPOCH)).unwrap().digest(), a.digest());
    assert_ne!(build(&spec(&bin, EPOCH + 1)).unwrap().digest(), a.digest());
}

/// `tar -tv` of a layer, as GNU tar shows it (numeric owners).
fn listing(tar_bytes: &[u8], dir: &Path) -> String {
    let path = dir.join("layer.tar");
    std::fs::write(&path, tar_bytes).unwrap();
    let out = Command::new("tar")
        .args(["--numeric-owner", "--full-time", "-tvf"])
        .arg(&path)
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn layers_have_fixed_owners_times_and_the_three_users() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin_dir(dir.path());
    let image = build(&spec(&bin, EPOCH)).unwrap();
    let base = listing(&image.layers[0].bytes, dir.path());
    let app = listing(&image.layers[1].bytes, dir.path());
    for line in base.lines().chain(app.lines()) {
        assert!(line.contains(" 2023-11-14 22:13:20 "), "{line}");
    }
    let find = |listing: &str, name: &str| -> String {
        listing
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not in\n{listing}"))
            .to_owned()
    };
    assert!(find(&base, "var/lib/keyservice/").starts_with("drwx------ 10001/10001 "));
    assert!(find(&base, "var/lib/appliance/").starts_with("drwx------ 10002/10002 "));
    assert!(find(&base, "run/keyservice/").starts_with("drwxr-x--- 10001/10001 "));
    assert!(find(&base, "run/worker-launcher/").starts_with("drwxr-x--- 10003/10002 "));
    assert!(find(&base, "var/empty/").starts_with("dr-xr-xr-x 0/0 "));
    assert!(find(&base, "tmp/").starts_with("drwxrwxrwt 0/0 "));
    assert!(find(&base, "etc/passwd").starts_with("-rw-r--r-- 0/0 "));
    for name in DEFAULT_BINARIES {
        assert!(find(&app, &format!("usr/local/bin/{name}")).starts_with("-rwxr-xr-x 0/0 "));
    }
    // Sorted entries.
    let names: Vec<&str> = app.lines().map(|l| l.rsplit(' ').next().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn the_archive_is_a_consistent_oci_layout_and_docker_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let bin = fake_bin_dir(dir.path());
    let image = build(&spec(&bin, EPOCH)).unwrap();
    let written = write_layout(&image, &dir.path().join("out"), EPOCH).unwrap();

    // Unpack the archive with GNU tar and check it against the layout directory.
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir_all(&unpacked).unwrap();
    let st = Command::new("tar")
        .arg("-xf")
        .arg(&written.archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(read_tree(&unpacked), read_tree(&written.layout_dir));

    let json = |p: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(unpacked.join(p)).unwrap()).unwrap()
    };
    assert_eq!(json("oci-layout")["imageLayoutVersion"], "1.0.0");
    // Every blob is named by its SHA-256.
    for entry in std::fs::read_dir(unpacked.join("blobs/sha256")).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_owned();
        assert_eq!(
            hex::encode(Sha256::digest(std::fs::read(&p).unwrap())),
            name
        );
    }
    let index = json("index.json");
    let m = &index["manifests"][0];
    assert_eq!(m["digest"], image.digest_string());
    assert_eq!(
        m["annotations"]["io.containerd.image.name"],
        "appliance:test"
    );
    let manifest = json(&format!("blobs/sha256/{}", hex::encode(image.digest())));
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config = json(&format!(
        "blobs/sha256/{}",
        config_digest.strip_prefix("sha256:").unwrap()
    ));
    let layer_digests: Vec<&str> = manifest["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["digest"].as_str().unwrap())
        .collect();
    let diff_ids: Vec<&str> = config["rootfs"]["diff_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        layer_digests, diff_ids,
        "uncompressed layers: digest = diff_id"
    );
    assert_eq!(config["created"], "2023-11-14T22:13:20Z");
    assert_eq!(config["config"]["User"], "10002:10002");
    assert_eq!(
        config["config"]["Cmd"],
        serde_json::json!(["/usr/local/bin/appliance", "serve"])
    );
    // docker load's manifest.json names the same config and layers.
    let docker = json("manifest.json");
    assert_eq!(docker[0]["RepoTags"], serde_json::json!(["appliance:test"]));
    assert_eq!(
        docker[0]["Config"],
        format!(
            "blobs/sha256/{}",
            config_digest.strip_prefix("sha256:").unwrap()
        )
    );
    let docker_layers: Vec<String> = docker[0]["Layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().replace("blobs/sha256/", "sha256:"))
        .collect();
    assert_eq!(docker_layers, layer_digests);
}

fn run_cli(bin_dir: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(image_build())
        .arg("--bin-dir")
        .arg(bin_dir)
        .arg("--out")
        .arg(out)
        .args(extra)
        .env("SOURCE_DATE_EPOCH", EPOCH.to_string())
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// A real dynamically linked Rust binary (image-build itself, standing in for each of the
/// appliance's binaries) through the CLI: its shared libraries are found and the build is
/// reproducible; one flipped byte changes the digest.
#[test]
fn cli_with_a_real_binary_is_reproducible_and_carries_its_libraries() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(image_build(), bin.join("appliance")).unwrap();
    std::fs::copy(image_build(), bin.join("keyservice")).unwrap();

    // Missing binaries are an error unless --allow-missing (development only).
    let out = run_cli(&bin, &dir.path().join("x"), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("binary action-worker not found"), "{err}");

    let build_once = |name: &str| {
        let out = run_cli(&bin, &dir.path().join(name), &["--allow-missing"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(stderr.contains("do NOT deploy"), "{stderr}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        let mut lines = stdout.lines();
        let digest = lines.next().unwrap().to_owned();
        assert_eq!(lines.next().unwrap(), format!("appliance@{digest}"));
        digest
    };
    let first = build_once("one");
    let second = build_once("two");
    assert_eq!(first, second);
    assert_eq!(
        std::fs::read(dir.path().join("one/appliance-image.tar")).unwrap(),
        std::fs::read(dir.path().join("two/appliance-image.tar")).unwrap()
    );

    // The base layer carries libc and the loader, as ldd resolves them.
    let libs = oci_image::shared_libraries(&bin.join("appliance")).unwrap();
    assert!(libs.iter().any(|l| l.ends_with("libc.so.6")), "{libs:?}");
    assert!(
        libs.iter()
            .any(|l| l.to_string_lossy().contains("ld-linux")),
        "{libs:?}"
    );
    let image = build(&ImageSpec {
        binaries: vec![Binary {
            name: "appliance".into(),
            path: bin.join("appliance"),
        }],
        source_date_epoch: EPOCH,
        libraries: Libraries::Ldd,
        tag: "appliance:test".into(),
    })
    .unwrap();
    assert_eq!(image.libraries, libs);
    let base = listing(&image.layers[0].bytes, dir.path());
    for lib in &libs {
        let name = lib.to_str().unwrap().trim_start_matches('/');
        assert!(
            base.lines().any(|l| l.ends_with(&format!(" {name}"))),
            "{name}"
        );
    }

    let mut bytes = std::fs::read(bin.join("keyservice")).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(bin.join("keyservice"), &bytes).unwrap();
    let third = build_once("three");
    assert_ne!(third, first);
}

/// The image's root file system is complete: unpacked, the binary runs under chroot with
/// only the libraries the image carries. Needs root (chroot); elsewhere it says so and
/// checks nothing.
#[test]
fn the_unpacked_image_runs_its_binary_in_a_chroot() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("not root: the chroot check is skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(image_build(), bin.join("appliance")).unwrap();
    let image = build(&ImageSpec {
        binaries: vec![Binary {
            name: "appliance".into(),
            path: bin.join("appliance"),
        }],
        source_date_epoch: EPOCH,
        libraries: Libraries::Ldd,
        tag: "appliance:test".into(),
    })
    .unwrap();
    let root = dir.path().join("rootfs");
    std::fs::create_dir_all(&root).unwrap();
    for (i, layer) in image.layers.iter().enumerate() {
        let p = dir.path().join(format!("layer{i}.tar"));
        std::fs::write(&p, &layer.bytes).unwrap();
        let st = Command::new("tar")
            .arg("--same-owner")
            .arg("-xpf")
            .arg(&p)
            .arg("-C")
            .arg(&root)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let out = Command::new("chroot")
        .arg(&root)
        .args(["/usr/local/bin/appliance", "--version"])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("image-build "));
    let meta = std::fs::metadata(root.join("var/lib/keyservice")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 10001);
}
