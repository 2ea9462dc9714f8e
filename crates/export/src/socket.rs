//! UDP sockets with the options std does not offer, through rustix's safe wrappers (this
//! crate has no unsafe code): SO_REUSEADDR, so that any number of subscribers on one host
//! join the same feed group and port, and SO_RCVBUF, so that a collector or subscriber
//! absorbs exporters' bursts.
use std::io;
use std::net::{SocketAddr, UdpSocket};

use rustix::net::{sockopt, AddressFamily, SocketType};

/// A UDP socket bound to `addr`; `reuse` sets SO_REUSEADDR before binding, `recv_buffer`
/// asks for that receive buffer (the kernel caps it at net.core.rmem_max).
pub fn udp_socket(
    addr: SocketAddr,
    reuse: bool,
    recv_buffer: Option<usize>,
) -> io::Result<UdpSocket> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket(family, SocketType::DGRAM, None)?;
    if reuse {
        sockopt::set_socket_reuseaddr(&fd, true)?;
    }
    if let Some(size) = recv_buffer {
        sockopt::set_socket_recv_buffer_size(&fd, size)?;
    }
    rustix::net::bind(&fd, &addr)?;
    Ok(UdpSocket::from(fd))
}

/// The receive buffer a collector or subscriber asks for: 8 MiB, enough for about 3,500
/// full-size datagrams in flight.
pub const RECV_BUFFER: usize = 8 << 20;
