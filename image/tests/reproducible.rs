//! The image is reproducible: the same inputs give the same digest and byte-identical
//! outputs, one changed byte of a binary gives another digest; the layout and the
//! `docker load` archive are consistent; the image carries no file of the build host:
//! dynamic binaries are refused, and a real static binary (compiled by the test as the
//! release build compiles the appliance's) runs from the unpacked image alone and
//! resolves names there without glibc's NSS modules.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use oci_image::{Binary, DEFAULT_BINARIES, ImageSpec, Libraries, build, write_layout};
use sha2::{Digest, Sha256};

const EPOCH: u64 = 1_700_000_000;

fn image_build() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_image-build"))
}

/// Small stand-in binaries (not executables: unchecked).
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
        libraries: Libraries::Unchecked,
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

/// `image-build` with `umask` for the process (so for the layout files it writes).
fn run_cli(bin_dir: &Path, out: &Path, umask: &str, extra: &[&str]) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(image_build())
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

const PROBE_SOURCE: &str = r#"
use std::net::ToSocketAddrs;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("resolve") {
        for name in &args[1..] {
            match (name.as_str(), 0).to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        println!("{name} {}", a.ip());
                    }
                }
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            }
        }
    } else {
        println!("static-probe {}", args.join(" "));
    }
}
"#;

/// A static executable built the way the release build links the appliance's binaries
/// (the gnu target, `+crt-static`), with the pinned toolchain. It resolves names with
/// the C library's `getaddrinfo` (what std, tokio and the PostgreSQL client use).
fn static_probe(dir: &Path) -> PathBuf {
    let src = dir.join("probe.rs");
    std::fs::write(&src, PROBE_SOURCE).unwrap();
    let out = dir.join("static-probe");
    let built = oci_image::reproduce::rustc_static(&src, &out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    out
}

/// Every binary of the image is the static probe, in the bin directory under `dir`, with `mode`.
fn static_bin_dir(probe: &Path, dir: &Path, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in DEFAULT_BINARIES {
        let to = bin.join(name);
        std::fs::copy(probe, &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    bin
}

/// The image's files, as `tar -t` lists both layers.
fn names(image: &oci_image::Image, dir: &Path) -> Vec<String> {
    let mut all: Vec<String> = image
        .layers
        .iter()
        .flat_map(|l| {
            listing(&l.bytes, dir)
                .lines()
                .map(|line| line.rsplit(' ').next().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort();
    all
}

/// The CLI refuses a dynamically linked binary (it would need the build host's
/// libraries); with static binaries the image holds exactly the generated base files and
/// the binaries, and two builds from copies at other paths, with other file modes and
/// other umasks, give the same digest and the same archive bytes.
#[test]
fn static_binaries_give_an_image_with_no_host_file_and_one_digest() {
    let dir = tempfile::tempdir().unwrap();

    // A dynamic binary (image-build itself): refused, with the reason.
    let dynamic = dir.path().join("dynamic");
    std::fs::create_dir_all(&dynamic).unwrap();
    std::fs::copy(image_build(), dynamic.join("appliance")).unwrap();
    let out = run_cli(
        &dynamic,
        &dir.path().join("x"),
        "022",
        &["--binaries", "appliance"],
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("dynamically linked"), "{err}");
    assert!(err.contains("must be statically linked"), "{err}");

    // Missing binaries are an error unless --allow-missing (development only).
    let out = run_cli(&dynamic, &dir.path().join("x"), "022", &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("binary keyservice not found"), "{err}");

    let probe = static_probe(dir.path());
    let one = tempfile::Builder::new()
        .prefix("build-one")
        .tempdir()
        .unwrap();
    let two = tempfile::Builder::new()
        .prefix("another-place")
        .tempdir()
        .unwrap();
    let bin_one = static_bin_dir(&probe, one.path(), 0o755);
    let bin_two = static_bin_dir(&probe, two.path(), 0o700);
    let build_once = |bin: &Path, out: &Path, umask: &str| {
        let o = run_cli(bin, out, umask, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let stdout = String::from_utf8(o.stdout).unwrap();
        let mut lines = stdout.lines();
        let digest = lines.next().unwrap().to_owned();
        assert_eq!(lines.next().unwrap(), format!("appliance@{digest}"));
        digest
    };
    let first = build_once(&bin_one, &one.path().join("out"), "022");
    let second = build_once(&bin_two, &two.path().join("image"), "077");
    assert_eq!(first, second);
    assert_eq!(
        std::fs::read(one.path().join("out/appliance-image.tar")).unwrap(),
        std::fs::read(two.path().join("image/appliance-image.tar")).unwrap()
    );

    // No file of this machine: only what the image generates, and the binaries.
    let image = build(&ImageSpec {
        binaries: DEFAULT_BINARIES
            .iter()
            .map(|n| Binary {
                name: (*n).to_owned(),
                path: bin_one.join(n),
            })
            .collect(),
        source_date_epoch: EPOCH,
        libraries: Libraries::StaticOnly,
        tag: "appliance:test".into(),
    })
    .unwrap();
    assert_eq!(image.digest_string(), first);
    let mut expected: Vec<String> = [
        "etc/",
        "etc/appliance/",
        "etc/group",
        "etc/nsswitch.conf",
        "etc/passwd",
        "run/",
        "run/keyservice/",
        "run/worker-launcher/",
        "tmp/",
        "var/",
        "var/empty/",
        "var/lib/",
        "var/lib/appliance/",
        "var/lib/keyservice/",
        "usr/",
        "usr/local/",
        "usr/local/bin/",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain(
        DEFAULT_BINARIES
            .iter()
            .map(|n| format!("usr/local/bin/{n}")),
    )
    .collect();
    expected.sort();
    assert_eq!(names(&image, dir.path()), expected);

    // The binary is an input: one flipped byte, another digest.
    let target = bin_one.join("keyservice");
    let mut bytes = std::fs::read(&target).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    std::fs::write(&target, &bytes).unwrap();
    let third = build_once(&bin_one, &one.path().join("three"), "022");
    assert_ne!(third, first);
}

fn unpack(image: &oci_image::Image, dir: &Path, root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    for (i, layer) in image.layers.iter().enumerate() {
        let p = dir.join(format!("layer{i}.tar"));
        std::fs::write(&p, &layer.bytes).unwrap();
        let st = Command::new("tar")
            .arg("--same-owner")
            .arg("-xpf")
            .arg(&p)
            .arg("-C")
            .arg(root)
            .status()
            .unwrap();
        assert!(st.success());
    }
}

fn chroot(root: &Path, args: &[&str]) -> std::process::Output {
    Command::new("chroot")
        .arg(root)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .unwrap()
}

/// The image's root file system is complete: unpacked, a static binary runs under
/// chroot with nothing but the image's files, and resolves a name from the `/etc/hosts`
/// a container engine provides (glibc's built-in `files` source: the image's
/// `nsswitch.conf` names no NSS module to load). Control: a dynamic binary in the same
/// kind of root does not start. Needs root (chroot); elsewhere it says so and checks
/// nothing.
#[test]
fn the_unpacked_image_runs_its_static_binary_in_a_chroot() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("not root: the chroot check is skipped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let probe = static_probe(dir.path());
    let image = build(&ImageSpec {
        binaries: vec![Binary {
            name: "appliance".into(),
            path: probe,
        }],
        source_date_epoch: EPOCH,
        libraries: Libraries::StaticOnly,
        tag: "appliance:test".into(),
    })
    .unwrap();
    let root = dir.path().join("rootfs");
    unpack(&image, dir.path(), &root);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/nsswitch.conf")).unwrap(),
        "passwd: files\ngroup: files\nhosts: files dns\n",
        "glibc's built-in sources only: no NSS module to load"
    );
    assert!(!root.join("lib").exists() && !root.join("lib64").exists());
    let out = chroot(&root, &["/usr/local/bin/appliance", "--version"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "static-probe --version\n"
    );
    let meta = std::fs::metadata(root.join("var/lib/keyservice")).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 10001);

    // As a container engine does: /etc/hosts and /etc/resolv.conf provided at run time
    // (a name server that answers nothing: /etc/hosts is read first).
    std::fs::write(
        root.join("etc/hosts"),
        "127.0.0.1 localhost\n10.9.8.7 keys.internal\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/resolv.conf"),
        "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
    )
    .unwrap();
    let out = chroot(
        &root,
        &["/usr/local/bin/appliance", "resolve", "keys.internal"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("keys.internal 10.9.8.7\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Control: a dynamic binary needs the loader, which the image does not carry.
    let dynamic = build(&ImageSpec {
        binaries: vec![Binary {
            name: "appliance".into(),
            path: image_build(),
        }],
        source_date_epoch: EPOCH,
        libraries: Libraries::Unchecked,
        tag: "appliance:test".into(),
    })
    .unwrap();
    let droot = dir.path().join("dynamic-rootfs");
    unpack(&dynamic, dir.path(), &droot);
    let out = chroot(&droot, &["/usr/local/bin/appliance", "--version"]);
    assert!(
        !out.status.success(),
        "a dynamic binary ran without its libraries"
    );
}
