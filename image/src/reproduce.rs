//! The reproducible release build (`image-build build` / `image-build verify`): what the
//! binaries of the image may depend on is the source tree, the Rust toolchain
//! `rust-toolchain.toml` pins, and the C toolchain and static C library of the build
//! system (see "What the digest depends on" in `image/README.md`); not where the
//! checkout, the cargo home or the target directory are, who builds, when, or with
//! which umask.
//!
//! * `-C target-feature=+crt-static` on the gnu target, given as `--target`, so that only
//!   the shipped binaries are static (build scripts and proc-macros stay host
//!   executables): the image then needs no shared library of the build host; and
//!   [`GETRANDOM_CFG`].
//! * `--remap-path-prefix` (Rust) and `-ffile-prefix-map` (C code compiled by build
//!   scripts) replace the checkout, cargo home, rustup home and target directory by
//!   fixed names under `/build/`.
//! * `SOURCE_DATE_EPOCH` = the commit's time, `CARGO_INCREMENTAL=0`, `TZ=UTC`,
//!   `LC_ALL=C`, `--locked`; rust flags from the environment (`RUSTFLAGS` and the like)
//!   are removed so that a developer's settings cannot leak into the release.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::ImageError;

/// The target the release binaries are built for (given explicitly: see the module doc).
pub const TARGET_TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// The packages whose binaries the image carries ([`crate::DEFAULT_BINARIES`]).
pub const PACKAGES: &[&str] = &[
    "appliance",
    "keyservice",
    "action-runtime",
    "worker-launcher",
    "evidence",
];

/// The `getrandom` crate (0.3, 0.4) finds glibc's `getrandom` with `dlsym`, which finds
/// nothing in a static binary, and then falls back to opening `/dev/urandom` (which the
/// action workers' Landlock and seccomp lockdown does not let them open): this makes it
/// call `getrandom(2)` through the statically linked glibc, as the dynamic binaries did.
pub const GETRANDOM_CFG: &str = "--cfg=getrandom_backend=\"linux_getrandom\"";

/// Environment variables removed from the build: each could change the binaries.
const CLEARED_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
    "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "CFLAGS",
    "CXXFLAGS",
    "TARGET_CFLAGS",
    "CFLAGS_x86_64-unknown-linux-gnu",
    "CARGO_PROFILE_RELEASE_DEBUG",
    "CARGO_PROFILE_RELEASE_STRIP",
    "CARGO_PROFILE_RELEASE_LTO",
    "CARGO_PROFILE_RELEASE_CODEGEN_UNITS",
    "CARGO_PROFILE_RELEASE_OPT_LEVEL",
];

/// The machine-specific paths of one build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildPaths {
    /// The checkout (workspace root).
    pub source: PathBuf,
    /// `CARGO_TARGET_DIR` of the build.
    pub target_dir: PathBuf,
    /// `CARGO_HOME` (the registry's sources are extracted under it).
    pub cargo_home: PathBuf,
    /// `RUSTUP_HOME` (the toolchain).
    pub rustup_home: PathBuf,
}

fn absolute(path: &Path) -> Result<PathBuf, ImageError> {
    std::path::absolute(path).map_err(|source| ImageError::Io {
        path: path.to_owned(),
        source,
    })
}

impl BuildPaths {
    /// The paths for a build of `source` into `target_dir` (created if missing), with
    /// the cargo and rustup homes of this environment (`CARGO_HOME`, `RUSTUP_HOME`, or
    /// their defaults under `HOME`).
    pub fn for_build(source: &Path, target_dir: &Path) -> Result<Self, ImageError> {
        std::fs::create_dir_all(target_dir).map_err(|source| ImageError::Io {
            path: target_dir.to_owned(),
            source,
        })?;
        let home = || {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .ok_or(ImageError::Build("HOME is not set".into()))
        };
        let cargo_home = match std::env::var_os("CARGO_HOME") {
            Some(p) => PathBuf::from(p),
            None => home()?.join(".cargo"),
        };
        let rustup_home = match std::env::var_os("RUSTUP_HOME") {
            Some(p) => PathBuf::from(p),
            None => home()?.join(".rustup"),
        };
        Ok(Self {
            source: absolute(source)?,
            target_dir: absolute(target_dir)?,
            cargo_home: absolute(&cargo_home)?,
            rustup_home: absolute(&rustup_home)?,
        })
    }

    /// The release binaries' directory.
    pub fn release_dir(&self) -> PathBuf {
        self.target_dir.join(TARGET_TRIPLE).join("release")
    }

    /// (path as given, then its canonical form if that differs, → fixed name), in the
    /// order source, cargo home, rustup home, target directory: when several prefixes
    /// match, rustc and GCC apply the last one, and the target directory commonly lies
    /// inside the checkout.
    fn remaps(&self, with_rustup: bool) -> Vec<(PathBuf, &'static str)> {
        let mut all = vec![
            (&self.source, "/build/appliance"),
            (&self.cargo_home, "/build/cargo"),
        ];
        if with_rustup {
            all.push((&self.rustup_home, "/build/rustup"));
        }
        all.push((&self.target_dir, "/build/target"));
        let mut out = Vec::new();
        for (path, to) in all {
            out.push((path.clone(), to));
            if let Ok(real) = path.canonicalize()
                && real != *path
            {
                out.push((real, to));
            }
        }
        out
    }

    /// The rustc flags of the release build, in order.
    pub fn rustflags(&self) -> Vec<OsString> {
        let mut flags = vec![
            OsString::from("-Ctarget-feature=+crt-static"),
            OsString::from(GETRANDOM_CFG),
            // The symbol table names ThinLTO-promoted symbols `NAME.llvm.<module hash>`,
            // and the hash of a module taken from the toolchain's rlibs depends on where
            // the toolchain is installed (RUSTUP_HOME): two builds differed in nothing
            // else (and in the build id computed over it). No symbol table, no difference.
            OsString::from("-Cstrip=symbols"),
        ];
        for (from, to) in self.remaps(true) {
            let mut flag = OsString::from("--remap-path-prefix=");
            flag.push(from.as_os_str());
            flag.push(format!("={to}"));
            flags.push(flag);
        }
        flags
    }

    /// `CARGO_ENCODED_RUSTFLAGS`: [`Self::rustflags`] separated by 0x1f.
    pub fn encoded_rustflags(&self) -> OsString {
        let mut out = OsString::new();
        for (i, flag) in self.rustflags().iter().enumerate() {
            if i > 0 {
                out.push("\u{1f}");
            }
            out.push(flag);
        }
        out
    }

    /// The C flags for code that build scripts compile into the binaries (ring,
    /// SQLite): the same remapping for `__FILE__` and debug information.
    pub fn cflags(&self) -> OsString {
        let mut out = OsString::new();
        for (i, (from, to)) in self.remaps(false).iter().enumerate() {
            if i > 0 {
                out.push(" ");
            }
            out.push("-ffile-prefix-map=");
            out.push(from.as_os_str());
            out.push(format!("={to}"));
        }
        out
    }

    /// The `cargo build` of the release binaries, ready to run.
    pub fn cargo_build(&self, source_date_epoch: u64) -> Command {
        self.cargo_build_packages(source_date_epoch, PACKAGES)
    }

    /// The same build restricted to `packages` (each one of [`PACKAGES`]): the quick
    /// reproducibility check compiles one binary the way the image's are compiled.
    pub fn cargo_build_packages(&self, source_date_epoch: u64, packages: &[&str]) -> Command {
        let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
        cmd.current_dir(&self.source).args([
            "build",
            "--release",
            "--locked",
            "--target",
            TARGET_TRIPLE,
        ]);
        for p in packages {
            cmd.args(["-p", p]);
        }
        for var in CLEARED_ENV {
            cmd.env_remove(var);
        }
        cmd.env("CARGO_ENCODED_RUSTFLAGS", self.encoded_rustflags())
            .env("CFLAGS_x86_64_unknown_linux_gnu", self.cflags())
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("CARGO_HOME", &self.cargo_home)
            .env("RUSTUP_HOME", &self.rustup_home)
            .env("CARGO_INCREMENTAL", "0")
            .env("SOURCE_DATE_EPOCH", source_date_epoch.to_string())
            .env("TZ", "UTC")
            .env("LC_ALL", "C");
        cmd
    }
}

/// `rustc` (`$RUSTC`, else from `PATH`) compiling the one-file program `source` into `out`
/// linked as the image's binaries are (the gnu target, `+crt-static`, no debug
/// information): for tests that need a small executable that starts in the image, which
/// carries no loader. Run it inside the checkout, so that rustup picks the pinned toolchain.
pub fn rustc_static(source: &Path, out: &Path) -> Command {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.args([
        "--edition=2024",
        "-Cdebuginfo=0",
        "-Ctarget-feature=+crt-static",
        "--target",
        TARGET_TRIPLE,
    ])
    .arg("-o")
    .arg(out)
    .arg(source);
    cmd
}

fn git(source: &Path, args: &[&str]) -> Result<String, ImageError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(source)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| ImageError::Build(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(ImageError::Build(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The checked-out commit of `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceState {
    pub commit: String,
    /// The commit's time (committer date), the image's `SOURCE_DATE_EPOCH`.
    pub commit_time: u64,
    /// Tracked files changed, or untracked files present: the build is of the work
    /// tree, not of `commit`.
    pub dirty: bool,
}

/// What `git` says about the checkout `source`.
pub fn source_state(source: &Path) -> Result<SourceState, ImageError> {
    let commit = git(source, &["rev-parse", "HEAD"])?;
    let time = git(source, &["log", "-1", "--format=%ct", "HEAD"])?;
    let commit_time = time
        .parse()
        .map_err(|_| ImageError::Build(format!("git commit time {time:?} is not a number")))?;
    let status = git(
        source,
        &["status", "--porcelain", "--untracked-files=normal"],
    )?;
    Ok(SourceState {
        commit,
        commit_time,
        dirty: !status.is_empty(),
    })
}

/// One line saying which compilers this machine has, for a report that did not match
/// (the C compiler and static C library are inputs of the binaries too).
pub fn toolchain_summary(source: &Path) -> String {
    let first_line = |program: &str, args: &[&str]| -> String {
        Command::new(program)
            .args(args)
            .current_dir(source)
            .env("LC_ALL", "C")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| format!("{program}: not found"))
    };
    format!(
        "{}; {}; glibc {}",
        first_line("rustc", &["--version"]),
        first_line("cc", &["--version"]),
        first_line("getconf", &["GNU_LIBC_VERSION"])
            .trim_start_matches("glibc ")
            .to_owned()
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn paths(source: &str, target: &str) -> BuildPaths {
        BuildPaths {
            source: source.into(),
            target_dir: target.into(),
            cargo_home: "/home/u/.cargo".into(),
            rustup_home: "/home/u/.rustup".into(),
        }
    }

    #[test]
    fn flags_are_static_and_remap_every_build_path_the_target_dir_last() {
        let p = paths("/srv/checkout", "/srv/checkout/target");
        let flags: Vec<String> = p
            .rustflags()
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            flags,
            [
                "-Ctarget-feature=+crt-static",
                "--cfg=getrandom_backend=\"linux_getrandom\"",
                "-Cstrip=symbols",
                "--remap-path-prefix=/srv/checkout=/build/appliance",
                "--remap-path-prefix=/home/u/.cargo=/build/cargo",
                "--remap-path-prefix=/home/u/.rustup=/build/rustup",
                "--remap-path-prefix=/srv/checkout/target=/build/target",
            ]
        );
        assert_eq!(
            p.encoded_rustflags().to_string_lossy(),
            flags.join("\u{1f}")
        );
        assert_eq!(
            p.cflags().to_string_lossy(),
            "-ffile-prefix-map=/srv/checkout=/build/appliance \
             -ffile-prefix-map=/home/u/.cargo=/build/cargo \
             -ffile-prefix-map=/srv/checkout/target=/build/target"
        );
        // Two checkouts at other paths map onto the same names.
        let q = paths("/tmp/other", "/var/cache/t");
        let names = |p: &BuildPaths| -> Vec<&'static str> {
            p.remaps(true).into_iter().map(|(_, to)| to).collect()
        };
        assert_eq!(names(&p), names(&q));
    }

    #[test]
    fn the_build_command_clears_rustflags_and_sets_the_epoch() {
        let p = paths("/srv/checkout", "/srv/t");
        let cmd = p.cargo_build(1_700_000_000);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.starts_with(&[
            "build".into(),
            "--release".into(),
            "--locked".into(),
            "--target".into(),
            TARGET_TRIPLE.into()
        ]));
        for p in PACKAGES {
            assert!(args.windows(2).any(|w| w[0] == "-p" && w[1] == *p), "{p}");
        }
        let env: std::collections::BTreeMap<String, Option<String>> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert_eq!(env["RUSTFLAGS"], None, "removed");
        assert_eq!(env["CFLAGS"], None, "removed");
        assert_eq!(env["SOURCE_DATE_EPOCH"].as_deref(), Some("1700000000"));
        assert_eq!(env["CARGO_INCREMENTAL"].as_deref(), Some("0"));
        assert!(
            env["CARGO_ENCODED_RUSTFLAGS"]
                .as_deref()
                .unwrap()
                .starts_with("-Ctarget-feature=+crt-static\u{1f}")
        );
        assert_eq!(
            cmd.get_current_dir(),
            Some(Path::new("/srv/checkout")),
            "cargo runs in the checkout (its rust-toolchain.toml picks the compiler)"
        );
    }
}
