//! UDP sockets with the options std does not offer: SO_REUSEADDR, so that any number of
//! subscribers on one host join the same feed group and port, and SO_RCVBUF, so that a
//! collector or subscriber absorbs exporters' bursts (both through rustix's safe wrappers);
//! batched sends ([`SendBatch`]: `sendmmsg`, and UDP segmentation offload where the kernel
//! takes it) and batched receives ([`RecvBatch`]: `recvmmsg`, in `sys.rs`).
use std::io;
use std::net::{SocketAddr, UdpSocket};

use std::io::IoSlice;

pub use crate::sys::{set_udp_gro, set_udp_segment, RecvBatch};

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

/// Datagrams handed to the kernel per `sendmmsg` call (with segmentation offload: trains of
/// datagrams, each one send).
pub const SEND_BATCH: usize = 32;

/// Datagrams a collector receives per `recvmmsg` call.
pub const RECV_BATCH: usize = 64;

/// Most payload bytes of one segmented send: an IPv4 datagram's 65,535 bytes minus the IP
/// and UDP headers, rounded down for IPv6 extension headers' sake.
const GSO_MAX_BYTES: usize = 65_000;

/// Most segments of one send (the kernel's UDP_MAX_SEGMENTS is 64 on older kernels).
const GSO_MAX_SEGMENTS: usize = 64;

/// Datagrams gathered for one `sendmmsg` on a connected UDP socket: at 1472-byte messages
/// the per-call cost of `send` was most of an exporter's time, one call per 32 datagrams
/// leaves the kernel's per-datagram work.
///
/// With segmentation offload on ([`SendBatch::with_gso`]) consecutive datagrams of exactly
/// the segment size are joined into one *train*, handed to the kernel as a single send that
/// it (or the NIC) cuts back into those datagrams after the routing and the socket layer, so
/// the per-datagram work above the device is paid once per train. A shorter datagram ends
/// its train (the kernel's rule: every segment but the last is exactly the segment size);
/// a longer one is sent alone with segmentation switched off for that send. When the kernel
/// refuses a segmented send (a route whose MTU is smaller than the segment, a device without
/// checksum offload, an old kernel) the batch switches offload off for good and resends
/// those datagrams one by one: nothing is lost to the attempt.
#[derive(Debug)]
pub struct SendBatch {
    bytes: Vec<u8>,
    /// End offset of each train in `bytes`.
    ends: Vec<usize>,
    count: usize,
    /// Segment size while segmentation offload is on.
    gso: Option<u16>,
    /// Whether the last train takes another segment (all of its segments are full).
    open: bool,
    /// Why offload was switched off, once it was.
    gso_refused: Option<io::Error>,
}

impl Default for SendBatch {
    fn default() -> Self {
        SendBatch {
            bytes: Vec::with_capacity(SEND_BATCH * 1500),
            ends: vec![0; SEND_BATCH],
            count: 0,
            gso: None,
            open: false,
            gso_refused: None,
        }
    }
}

/// Whether a send error means the kernel will not segment on this path.
fn gso_refusal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EIO | libc::EINVAL | libc::EOPNOTSUPP | libc::ENOPROTOOPT | libc::EMSGSIZE)
    )
}

impl SendBatch {
    /// A batch that asks the kernel for UDP segmentation offload on `socket` (connected UDP)
    /// with `segment`-byte datagrams; when the socket option is refused (Linux before 4.18)
    /// the batch sends datagrams one by one as [`SendBatch::default`] does.
    pub fn with_gso(socket: &UdpSocket, segment: u16) -> SendBatch {
        let mut b = SendBatch::default();
        match set_udp_segment(socket, segment) {
            Ok(()) => {
                b.gso = Some(segment);
                // Room for a whole batch of trains, so that no send reallocates.
                b.bytes.reserve(SEND_BATCH * GSO_MAX_BYTES);
            }
            Err(e) => b.gso_refused = Some(e),
        }
        b
    }

    /// The segment size while segmentation offload is on: datagrams of exactly this size
    /// travel in trains.
    pub fn gso_segment(&self) -> Option<u16> {
        self.gso
    }

    /// Why segmentation offload is off after [`SendBatch::with_gso`] asked for it.
    pub fn gso_refused(&self) -> Option<&io::Error> {
        self.gso_refused.as_ref()
    }

    /// Queues a datagram; sends the batch when it is full. Returns how many datagrams of
    /// the batch the kernel refused, with the error.
    pub fn push(&mut self, socket: &UdpSocket, datagram: &[u8]) -> Result<(), (usize, io::Error)> {
        let mut result = Ok(());
        if let Some(seg) = self.gso.map(usize::from) {
            if datagram.len() > seg {
                // Would be cut into segments: alone, with offload off for this send.
                result = self.flush(socket);
                let r = self.send_unsegmented(socket, datagram);
                return result.and(r);
            }
            if self.open {
                let start = if self.count > 1 {
                    self.ends[self.count - 2]
                } else {
                    0
                };
                let train = self.bytes.len() - start;
                if train + datagram.len() <= GSO_MAX_BYTES && train / seg < GSO_MAX_SEGMENTS {
                    self.bytes.extend_from_slice(datagram);
                    self.ends[self.count - 1] = self.bytes.len();
                    self.open = datagram.len() == seg;
                    return Ok(());
                }
            }
            if self.count == SEND_BATCH {
                result = self.flush(socket);
            }
            self.open = datagram.len() == seg;
        }
        self.bytes.extend_from_slice(datagram);
        self.ends[self.count] = self.bytes.len();
        self.count += 1;
        if self.count == SEND_BATCH && self.gso.is_none() {
            result = result.and(self.flush(socket));
        }
        result
    }

    /// One datagram longer than the segment size, with offload off for the one send.
    fn send_unsegmented(
        &mut self,
        socket: &UdpSocket,
        datagram: &[u8],
    ) -> Result<(), (usize, io::Error)> {
        let _ = set_udp_segment(socket, 0);
        let r = socket.send(datagram).map(|_| ()).map_err(|e| (1, e));
        if let Some(seg) = self.gso {
            if let Err(e) = set_udp_segment(socket, seg) {
                self.gso = None;
                self.gso_refused = Some(e);
            }
        }
        r
    }

    /// Trains waiting (datagrams, without offload).
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
        self.open = false;
        if n == 0 {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.bytes);
        let mut starts = [0usize; SEND_BATCH];
        starts[1..n].copy_from_slice(&self.ends[..n - 1]);
        let trains: [&[u8]; SEND_BATCH] = std::array::from_fn(|i| {
            if i < n {
                &bytes[starts[i]..self.ends[i]]
            } else {
                &[]
            }
        });
        let mut result: Result<(), (usize, io::Error)> = Ok(());
        let mut done = 0;
        while done < n {
            match send_many(socket, &trains[done..n]) {
                Ok(()) => break,
                Err((k, e)) => {
                    // Trains before k went out; train k did not.
                    let failed = trains[done + k];
                    let seg = self.gso.map_or(usize::MAX, usize::from);
                    if self.gso.is_some() && gso_refusal(&e) {
                        // The kernel will not segment here: off for good, and everything not
                        // yet sent goes again datagram by datagram.
                        let _ = set_udp_segment(socket, 0);
                        self.gso = None;
                        self.gso_refused = Some(e);
                        for t in &trains[done + k..n] {
                            let pieces: Vec<&[u8]> = t.chunks(seg).collect();
                            for chunk in pieces.chunks(SEND_BATCH) {
                                if let Err(err) = send_all(socket, chunk) {
                                    result = merge(result, err);
                                }
                            }
                        }
                        break;
                    }
                    let lost = failed.len().div_ceil(seg.min(failed.len()).max(1));
                    result = merge(result, (lost, e));
                    done += k + 1;
                }
            }
        }
        self.bytes = bytes;
        self.bytes.clear();
        self.count = 0;
        result
    }
}

fn merge(
    result: Result<(), (usize, io::Error)>,
    (k, e): (usize, io::Error),
) -> Result<(), (usize, io::Error)> {
    match result {
        Err((j, first)) => Err((j + k, first)),
        Ok(()) => Err((k, e)),
    }
}

/// Sends up to [`SEND_BATCH`] datagrams, skipping (and counting) those the kernel refuses.
fn send_all(socket: &UdpSocket, datagrams: &[&[u8]]) -> Result<(), (usize, io::Error)> {
    let mut result = Ok(());
    let mut done = 0;
    while done < datagrams.len() {
        match send_many(socket, &datagrams[done..]) {
            Ok(()) => break,
            Err((k, e)) => {
                result = merge(result, (1, e));
                done += k + 1;
            }
        }
    }
    result
}

/// One `sendmmsg` loop over up to [`SEND_BATCH`] messages. On an error, returns the index
/// of the message that failed (those before it were sent).
fn send_many(socket: &UdpSocket, messages: &[&[u8]]) -> Result<(), (usize, io::Error)> {
    let n = messages.len().min(SEND_BATCH);
    let slices: [[IoSlice<'_>; 1]; SEND_BATCH] =
        std::array::from_fn(|i| [IoSlice::new(if i < n { messages[i] } else { &[] })]);
    let mut controls: [SendAncillaryBuffer<'_, '_, '_>; SEND_BATCH] =
        std::array::from_fn(|_| SendAncillaryBuffer::default());
    // Built on the stack: no allocation per batch.
    let mut pairs = slices.iter().zip(controls.iter_mut());
    let mut headers: [MMsgHdr<'_>; SEND_BATCH] = std::array::from_fn(|_| {
        let (iov, control) = pairs.next().expect("as many slices as headers");
        MMsgHdr::new(iov, control)
    });
    let mut sent = 0;
    while sent < n {
        match sendmmsg(socket, &mut headers[sent..n], SendFlags::empty()) {
            Ok(0) => return Err((sent, io::Error::other("sendmmsg sent nothing"))),
            Ok(k) => sent += k,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err((sent, io::Error::from(e))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams of every size class through a batch with offload, received by a UDP_GRO
    /// socket: the same datagrams in the same order, full-size ones joined into trains.
    #[test]
    fn trains_keep_every_datagram_and_its_order() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_udp_gro(&rx, true).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut batch = SendBatch::with_gso(&tx, 1000);
        assert_eq!(batch.gso_segment(), Some(1000));
        // 5 full + 1 short (ends a train), 3 full, 1 longer than the segment (alone), 70
        // full (more than one train holds), 1 short.
        let mut sizes = vec![1000; 5];
        sizes.push(500);
        sizes.extend([1000; 3]);
        sizes.push(1400);
        sizes.extend([1000; 70]);
        sizes.push(10);
        let sent: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8; n])
            .collect();
        for d in &sent {
            batch.push(&tx, d).unwrap();
        }
        batch.flush(&tx).unwrap();
        assert_eq!(batch.gso_segment(), Some(1000), "offload stayed on");
        let mut r = RecvBatch::new(RECV_BATCH);
        let (mut got, mut trains) = (Vec::new(), 0);
        while got.len() < sent.len() {
            let n = r.recv(&rx).unwrap();
            for i in 0..n {
                let (d, _) = r.get(i);
                match r.segment(i) {
                    Some(seg) => {
                        trains += 1;
                        got.extend(d.chunks(seg).map(<[u8]>::to_vec));
                    }
                    None => got.push(d.to_vec()),
                }
            }
        }
        assert_eq!(got, sent);
        // [5 full + short], [3 full], [64 full], [6 full + short]; the long one alone.
        assert_eq!(trains, 4);
    }
}
