//! `container-probe`: test scaffolding that the container test (`tests/e2e/container.rs`)
//! bind-mounts read-only into each service's container and runs with `docker exec`, so
//! that it acts with exactly the container's user, groups, mounts and root filesystem.
//! The image has no shell; this is the smallest thing that can try an access and say
//! what happened.
//!
//! ```text
//! container-probe id              uid=U gid=G groups=A,B  (from /proc/self/status)
//! container-probe open PATH       opens PATH for reading and reads it
//! container-probe list DIR        lists DIR (names, sorted, comma-separated)
//! container-probe connect SOCKET  connects to a Unix stream socket
//! container-probe write PATH      creates PATH (must not exist), writes, removes it
//! container-probe mounts          the mount points of this process (/proc/self/mountinfo)
//! ```
//!
//! One line on standard output: `ok[ DETAIL]` (exit 0) or `err errno=N KIND` (exit 1);
//! usage errors exit 2.

#![allow(
    clippy::print_stdout,
    reason = "a command-line probe: its answer is its output"
)]

use std::io::Read as _;
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["id"] => id(),
        ["open", path] => open(path),
        ["list", dir] => list(dir),
        ["connect", socket] => UnixStream::connect(socket).map(|_| String::new()),
        ["write", path] => write(path),
        ["mounts"] => mounts(),
        _ => {
            eprintln!(
                "usage: container-probe id | open PATH | list DIR | connect SOCKET | write PATH | mounts"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(detail) if detail.is_empty() => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Ok(detail) => {
            println!("ok {detail}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            println!(
                "err errno={} {:?}",
                err.raw_os_error().unwrap_or(0),
                err.kind()
            );
            ExitCode::from(1)
        }
    }
}

fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

fn id() -> std::io::Result<String> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    // "Uid:\treal\teffective\tsaved\tfs": the effective id is the second.
    let effective = |name| {
        status_field(&status, name)
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    let groups: Vec<String> = status_field(&status, "Groups:")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    Ok(format!(
        "uid={} gid={} groups={}",
        effective("Uid:"),
        effective("Gid:"),
        groups.join(",")
    ))
}

fn open(path: &str) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(format!("{} bytes", bytes.len()))
}

fn list(dir: &str) -> std::io::Result<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        names.push(entry?.file_name().to_string_lossy().into_owned());
    }
    names.sort();
    Ok(names.join(","))
}

fn write(path: &str) -> std::io::Result<String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let mut file = options.open(path)?;
    std::io::Write::write_all(&mut file, b"probe")?;
    drop(file);
    std::fs::remove_file(path)?;
    Ok(String::new())
}

fn mounts() -> std::io::Result<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    // Field 5 of each line is the mount point.
    let mut points: Vec<&str> = info
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .collect();
    points.sort_unstable();
    points.dedup();
    Ok(points.join(","))
}
