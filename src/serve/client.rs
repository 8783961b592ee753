//! Noticing that the client of a request went away while its search runs
//! (a page that typed on, a closed tab, an `<img>` on another site that
//! gave up), so that the search stops at once instead of using its whole
//! budget. tiny_http does not hand out a request's socket, so the socket
//! is found by its peer address among the process's descriptors
//! (`/proc/self/fd`, Linux), and a thread looks at its TCP state while the
//! search runs (the peer's FIN or reset); the guard ends the thread.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::store::Stop;

/// How often the socket is looked at.
const EVERY: Duration = Duration::from_millis(25);

/// Cancels `stop` when the client at `peer` hangs up, until dropped.
pub struct ClientWatch {
    done: Arc<AtomicBool>,
}

impl Drop for ClientWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

/// Starts watching the connection from `peer` (none found: nothing to
/// watch; the search's budget still bounds it).
pub fn watch(peer: Option<SocketAddr>, stop: &Stop) -> ClientWatch {
    let done = Arc::new(AtomicBool::new(false));
    if let Some(fd) = peer.and_then(socket_of) {
        let (done, stop) = (Arc::clone(&done), stop.clone());
        let _ = std::thread::Builder::new()
            .name("client-watch".into())
            .spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if hung_up(fd) {
                        stop.cancel();
                        return;
                    }
                    std::thread::sleep(EVERY);
                }
            });
    }
    ClientWatch { done }
}

/// The descriptor of the connected socket whose peer is `peer`.
#[cfg(target_os = "linux")]
fn socket_of(peer: SocketAddr) -> Option<i32> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .find(|&fd| peer_of(fd) == Some(peer))
}

#[cfg(not(target_os = "linux"))]
fn socket_of(_peer: SocketAddr) -> Option<i32> {
    None
}

/// The peer address of socket `fd`, if it is a connected IP socket.
#[cfg(target_os = "linux")]
fn peer_of(fd: i32) -> Option<SocketAddr> {
    // SAFETY: getpeername writes at most `len` bytes into `storage`, which
    // is large enough for any address; an fd that is not a socket fails.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let got = unsafe { libc::getpeername(fd, (&raw mut storage).cast(), &mut len) };
    if got != 0 {
        return None;
    }
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let addr: libc::sockaddr_in = unsafe { *(&raw const storage).cast() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(addr.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let addr: libc::sockaddr_in6 = unsafe { *(&raw const storage).cast() };
            let ip = std::net::Ipv6Addr::from(addr.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(addr.sin6_port))))
        }
        _ => None,
    }
}

/// The peer closed the connection (or reset it): the socket's TCP state
/// has left ESTABLISHED for CLOSE_WAIT (a FIN came), CLOSE (a reset),
/// LAST_ACK or CLOSING. Not `poll`'s `POLLRDHUP`, which tiny_http's own
/// `shutdown(SHUT_RD)` after a `Connection: close` request also raises.
#[cfg(target_os = "linux")]
fn hung_up(fd: i32) -> bool {
    /// `tcpi_state` values (linux/tcp_states.h).
    const CLOSE: u8 = 7;
    const CLOSE_WAIT: u8 = 8;
    const LAST_ACK: u8 = 9;
    const CLOSING: u8 = 11;
    // `struct tcp_info` starts with `tcpi_state`; the kernel copies as many
    // bytes as it is given.
    let mut info = [0u8; 8];
    let mut len = info.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let got = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            &mut len,
        )
    };
    got == 0 && matches!(info[0], CLOSE | CLOSE_WAIT | LAST_ACK | CLOSING)
}

#[cfg(not(target_os = "linux"))]
fn hung_up(_fd: i32) -> bool {
    false
}
