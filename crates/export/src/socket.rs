//! UDP sockets with the options std does not offer, through rustix's safe wrappers (this
//! crate has no unsafe code): SO_REUSEADDR, so that any number of subscribers on one host
//! join the same feed group and port, and SO_RCVBUF, so that a collector or subscriber
//! absorbs exporters' bursts.
use std::io;
use std::net::{SocketAddr, UdpSocket};

use std::io::IoSlice;

use rustix::net::{
    sendmmsg, sockopt, AddressFamily, MMsgHdr, SendAncillaryBuffer, SendFlags, SocketType,
};

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

/// Datagrams handed to the kernel per `sendmmsg` call.
pub const SEND_BATCH: usize = 32;

/// Datagrams gathered for one `sendmmsg` on a connected UDP socket: at 1472-byte messages
/// the per-call cost of `send` was most of an exporter's time, one call per 32 datagrams
/// leaves the kernel's per-datagram work.
#[derive(Debug)]
pub struct SendBatch {
    bytes: Vec<u8>,
    /// End offset of each datagram in `bytes`.
    ends: Vec<usize>,
    count: usize,
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch {
            bytes: Vec::with_capacity(SEND_BATCH * 1500),
            ends: vec![0; SEND_BATCH],
            count: 0,
        }
    }
}

impl SendBatch {
    /// Queues a datagram; sends the batch when it is full. Returns how many datagrams of
    /// the batch the kernel refused, with the error.
    pub fn push(&mut self, socket: &UdpSocket, datagram: &[u8]) -> Result<(), (usize, io::Error)> {
        self.bytes.extend_from_slice(datagram);
        self.ends[self.count] = self.bytes.len();
        self.count += 1;
        if self.count == SEND_BATCH {
            self.flush(socket)
        } else {
            Ok(())
        }
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Sends what waits.
    pub fn flush(&mut self, socket: &UdpSocket) -> Result<(), (usize, io::Error)> {
        let n = self.count;
        if n == 0 {
            return Ok(());
        }
        let mut slices: [[IoSlice<'_>; 1]; SEND_BATCH] =
            std::array::from_fn(|_| [IoSlice::new(&[])]);
        let mut start = 0;
        for (i, slot) in slices.iter_mut().enumerate().take(n) {
            slot[0] = IoSlice::new(&self.bytes[start..self.ends[i]]);
            start = self.ends[i];
        }
        let mut controls: [SendAncillaryBuffer<'_, '_, '_>; SEND_BATCH] =
            std::array::from_fn(|_| SendAncillaryBuffer::default());
        // Built on the stack: no allocation per batch.
        let mut pairs = slices.iter().zip(controls.iter_mut());
        let mut headers: [MMsgHdr<'_>; SEND_BATCH] = std::array::from_fn(|_| {
            let (iov, control) = pairs.next().expect("as many slices as headers");
            MMsgHdr::new(iov, control)
        });
        let mut result = Ok(());
        let mut sent = 0;
        while sent < n {
            match sendmmsg(socket, &mut headers[sent..n], SendFlags::empty()) {
                Ok(0) => {
                    result = Err((n - sent, io::Error::other("sendmmsg sent nothing")));
                    break;
                }
                Ok(k) => sent += k,
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => {
                    // The first datagram failed (a refused port, a full buffer): skip it.
                    let e = io::Error::from(e);
                    result = match result {
                        Err((k, first)) => Err((k + 1, first)),
                        Ok(()) => Err((1, e)),
                    };
                    sent += 1;
                }
            }
        }
        self.bytes.clear();
        self.count = 0;
        result
    }
}
