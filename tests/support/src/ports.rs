//! Loopback ports for the servers a test starts.
//!
//! A port is chosen by binding port 0 and letting the listener go, so the server can bind
//! it a moment later. Asking twice that way can give the same port twice (the kernel is
//! free to hand a released port out again at once): Pebble once got its ACME listener and
//! its DNS resolver on one port and never started. [`free_port`] therefore never gives out
//! a port it gave out before in this process. Another process can still take a port in the
//! gap; the harnesses that can tell (PostgreSQL) retry with another.

use std::collections::HashSet;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Mutex, PoisonError};

static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port of 127.0.0.1 nobody listens on now, distinct from every other port this
/// function returned in this process.
pub fn free_port() -> u16 {
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    let given = given.get_or_insert_with(HashSet::new);
    // Hold the listeners of ports already given out until a new one turns up, so the
    // kernel cannot offer the same one again in this loop.
    let mut held = Vec::new();
    loop {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap_or_else(|err| panic!("cannot find a free port on 127.0.0.1: {err}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|err| panic!("cannot read a bound port: {err}"))
            .port();
        if given.insert(port) {
            return port;
        }
        held.push(listener);
        assert!(held.len() < 1000, "no new loopback port after 1000 tries");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_port_is_given_out_twice() {
        // A thousand draws from the ~28,000 ephemeral ports: plain bind-and-release would
        // repeat one almost surely (the birthday bound).
        let ports: Vec<u16> = (0..1000).map(|_| free_port()).collect();
        let distinct: HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        for port in ports.iter().take(5) {
            // Free now: a server could bind it.
            TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).unwrap();
        }
    }
}
