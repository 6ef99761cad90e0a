//! Test-only stand-in for `action-worker` (`tests/uid.rs`): started by the launcher in its
//! place, it does what a worker whose sandbox failed could try with its credentials alone
//! (no seccomp, no Landlock): connect to `ks.sock` and open `state` in its working
//! directory. It prints one line to stdout and waits for stdin to end. Not in the image.
//!
//! `uid_probe --ask-launcher SOCKET`: asks the launcher at SOCKET for a worker, as a
//! worker that escaped its sandbox might, and prints the answer.

use std::io::{Read as _, Write as _};

fn attempt<T>(result: std::io::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(err) => format!("denied({})", err.kind()),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, socket] = args.as_slice()
        && flag == "--ask-launcher"
    {
        use worker_launcher::protocol::{Request, Response, encode_request};
        let answer = match worker_launcher::client::raw_exchange(
            std::path::Path::new(socket),
            &encode_request(Request::Spawn),
        ) {
            Ok(Response::Refused { reason, message }) => format!("{reason}: {message}"),
            other => format!("{other:?}"),
        };
        let _ = writeln!(std::io::stdout(), "{answer}");
        return;
    }
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    let groups: Vec<u32> = rustix::process::getgroups()
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    let connect = attempt(std::os::unix::net::UnixStream::connect("ks.sock"));
    let open = attempt(std::fs::File::open("state"));
    let line = format!("uid={uid} gid={gid} groups={groups:?} connect={connect} open={open}\n");
    let mut out = std::io::stdout();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
}
