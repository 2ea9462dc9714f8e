//! The kernel interfaces rustix does not wrap, and the only `unsafe` code of this crate:
//! UDP generic segmentation offload (`UDP_SEGMENT`, Linux 4.18) for exporters, and batched
//! receives (`recvmmsg`, with `UDP_GRO` trains, Linux 5.0) for collectors. Every block states
//! why it is sound.
#![allow(unsafe_code)] // The reason this module exists: see above.
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Sets `UDP_SEGMENT` on a UDP socket: every later send longer than `size` bytes is split by
/// the kernel (or the NIC) into datagrams of exactly `size` bytes, the last one shorter.
/// `size` 0 turns it off.
pub fn set_udp_segment(socket: &UdpSocket, size: u16) -> io::Result<()> {
    let value: libc::c_int = size.into();
    // SAFETY: the fd is a valid open socket for the duration of the call (borrowed from
    // `socket`); the option value points to a live c_int and its exact size is passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_SEGMENT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets `UDP_GRO` on a UDP socket: the kernel may then hand over several datagrams of one
/// sender in one receive (a train: all of one size but the last, which may be shorter), with
/// the size in a control message; [`RecvBatch::segment`] gives it.
pub fn set_udp_gro(socket: &UdpSocket, on: bool) -> io::Result<()> {
    let value: libc::c_int = on.into();
    // SAFETY: as in `set_udp_segment`: a valid fd, a live c_int and its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_UDP,
            libc::UDP_GRO,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Room for the control messages of one receive (a `UDP_GRO` segment size needs 20 bytes).
const CONTROL_LEN: usize = 64;

/// A sender address as the kernel writes it (room for any `sockaddr`), read back as bytes.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct AddrBuf([u8; 128]);

/// Receive buffers for up to `slots` datagrams per `recvmmsg` call. The message headers
/// point into the buffers, which live on the heap and are never resized, so the batch can
/// move freely.
pub struct RecvBatch {
    data: Vec<u8>,
    slot_len: usize,
    addrs: Vec<AddrBuf>,
    controls: Vec<AddrBuf>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    count: usize,
}

// SAFETY: the raw pointers inside `iovs` and `hdrs` only ever point into the batch's own
// heap buffers (`data`, `addrs`, `iovs`), which move with it between threads.
unsafe impl Send for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.hdrs.len())
            .field("slot_len", &self.slot_len)
            .field("count", &self.count)
            .finish()
    }
}

impl RecvBatch {
    /// Room for `slots` datagrams of up to 65,535 bytes each (the pages of a slot are only
    /// touched as far as datagrams fill it).
    pub fn new(slots: usize) -> Self {
        let slots = slots.max(1);
        let slot_len = 65_536;
        let mut b = RecvBatch {
            data: vec![0; slots * slot_len],
            slot_len,
            addrs: vec![AddrBuf([0; 128]); slots],
            controls: vec![AddrBuf([0; 128]); slots],
            iovs: Vec::with_capacity(slots),
            hdrs: Vec::with_capacity(slots),
            count: 0,
        };
        let base = b.data.as_mut_ptr();
        for i in 0..slots {
            b.iovs.push(libc::iovec {
                // In bounds: slot i is data[i * slot_len..(i + 1) * slot_len].
                iov_base: base.wrapping_add(i * slot_len).cast(),
                iov_len: slot_len,
            });
        }
        for i in 0..slots {
            // SAFETY: mmsghdr is a plain C struct for which all-zero bytes are a valid value
            // (null pointers, zero lengths); the fields that matter are set below.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_name = b.addrs[i].0.as_mut_ptr().cast();
            h.msg_hdr.msg_namelen = 128;
            h.msg_hdr.msg_iov = b.iovs.as_mut_ptr().wrapping_add(i);
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = b.controls[i].0.as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = CONTROL_LEN;
            b.hdrs.push(h);
        }
        b
    }

    /// Receives at least one datagram (blocking as the socket does: its read timeout or
    /// non-blocking mode apply to the first) and whatever else is queued, up to the number of
    /// slots. Returns how many; read them with [`RecvBatch::get`].
    pub fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.count = 0;
        for h in &mut self.hdrs {
            h.msg_hdr.msg_namelen = 128;
            h.msg_hdr.msg_controllen = CONTROL_LEN;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points to a live iovec describing a distinct slot of `data`
        // (slot_len bytes, in bounds) and to a distinct 128-byte address buffer whose size is
        // in msg_namelen, and to a distinct control buffer of at least msg_controllen bytes.
        // `hdrs.len()` headers are passed. The kernel writes only into those buffers and into
        // the headers' msg_len/namelen/controllen/flags.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.count = n as usize;
        Ok(self.count)
    }

    /// Datagrams of the last [`RecvBatch::recv`].
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the last receive returned nothing.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Datagram `i` of the last receive and its sender (`None` for a family other than IPv4
    /// and IPv6).
    ///
    /// # Panics
    /// If `i` is not below [`RecvBatch::len`].
    pub fn get(&self, i: usize) -> (&[u8], Option<SocketAddr>) {
        assert!(i < self.count, "datagram {i} of {}", self.count);
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.slot_len);
        let start = i * self.slot_len;
        let addr = &self.addrs[i].0[..(h.msg_hdr.msg_namelen as usize).min(128)];
        (&self.data[start..start + len], sockaddr(addr))
    }
}

impl RecvBatch {
    /// The segment size of datagram `i` when it is a `UDP_GRO` train (several datagrams of
    /// that size back to back, the last one possibly shorter); `None` for a single datagram.
    ///
    /// # Panics
    /// If `i` is not below [`RecvBatch::len`].
    pub fn segment(&self, i: usize) -> Option<usize> {
        assert!(i < self.count, "datagram {i} of {}", self.count);
        // size_t on glibc, socklen_t on musl.
        #[allow(clippy::unnecessary_cast)]
        let len = (self.hdrs[i].msg_hdr.msg_controllen as usize).min(CONTROL_LEN);
        udp_gro_segment(&self.controls[i].0[..len])
    }
}

/// The `UDP_GRO` segment size among control messages as the kernel lays them out: each a
/// `cmsghdr` (length, level, type) and its data, aligned to the size of a `usize`.
fn udp_gro_segment(mut c: &[u8]) -> Option<usize> {
    const WORD: usize = std::mem::size_of::<usize>();
    let header = std::mem::size_of::<libc::cmsghdr>();
    while c.len() >= header {
        let len = usize::from_ne_bytes(c[..WORD].try_into().ok()?);
        let level = i32::from_ne_bytes(c[WORD..WORD + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(c[WORD + 4..WORD + 8].try_into().ok()?);
        if len < header || len > c.len() {
            return None;
        }
        if level == libc::SOL_UDP && kind == libc::UDP_GRO && len >= header + 4 {
            let seg = i32::from_ne_bytes(c[header..header + 4].try_into().ok()?);
            return usize::try_from(seg).ok().filter(|s| *s > 0);
        }
        c = &c[len.next_multiple_of(WORD).min(c.len())..];
    }
    None
}

/// A `sockaddr_in` / `sockaddr_in6` as the kernel wrote it (family in native byte order, port
/// and address in network order).
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    if b.len() < 2 {
        return None;
    }
    let family = libc::sa_family_t::from_ne_bytes([b[0], b[1]]);
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    match i32::from(family) {
        libc::AF_INET if b.len() >= 8 => {
            let ip = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        libc::AF_INET6 if b.len() >= 28 => {
            let flow = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            let scope = u32::from_ne_bytes([b[24], b[25], b[26], b[27]]);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a),
                port,
                flow,
                scope,
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recv_batch_gets_every_datagram_and_its_sender() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx6 = UdpSocket::bind("[::1]:0").ok();
        let rx6 = UdpSocket::bind("[::1]:0").ok();
        for i in 0..10u8 {
            tx.send_to(&vec![i; 100 + usize::from(i)], rx.local_addr().unwrap())
                .unwrap();
        }
        let mut b = RecvBatch::new(4);
        let mut got = Vec::new();
        while got.len() < 10 {
            let n = b.recv(&rx).unwrap();
            assert!((1..=4).contains(&n));
            for i in 0..n {
                let (d, from) = b.get(i);
                assert_eq!(from, Some(tx.local_addr().unwrap()));
                got.push(d.to_vec());
            }
        }
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d, &vec![i as u8; 100 + i]);
        }
        if let (Some(tx6), Some(rx6)) = (tx6, rx6) {
            tx6.send_to(&[7; 9000], rx6.local_addr().unwrap()).unwrap();
            assert_eq!(b.recv(&rx6).unwrap(), 1);
            let (d, from) = b.get(0);
            assert_eq!(d, &[7; 9000][..]);
            assert_eq!(from, Some(tx6.local_addr().unwrap()));
        }
        assert_eq!(b.segment(0), None);
        // Non-blocking and nothing queued: WouldBlock, not a hang.
        rx.set_nonblocking(true).unwrap();
        let e = b.recv(&rx).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_segmented_send_arrives_as_one_gro_train_or_as_its_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_udp_gro(&rx, true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        set_udp_segment(&tx, 1000).unwrap();
        let mut train = Vec::new();
        for i in 0..10u8 {
            train.extend(std::iter::repeat_n(i, if i == 9 { 321 } else { 1000 }));
        }
        tx.send(&train).unwrap();
        let mut b = RecvBatch::new(16);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut trains = 0;
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        while got.len() < 10 {
            let n = b.recv(&rx).unwrap();
            for i in 0..n {
                let (d, _) = b.get(i);
                match b.segment(i) {
                    Some(seg) => {
                        trains += 1;
                        got.extend(d.chunks(seg).map(<[u8]>::to_vec));
                    }
                    None => got.push(d.to_vec()),
                }
            }
        }
        // On loopback the kernel hands a GRO socket the segmented send whole.
        assert_eq!(trains, 1);
        assert_eq!(got.len(), 10);
        for (i, d) in got.iter().enumerate() {
            let len = if i == 9 { 321 } else { 1000 };
            assert_eq!(d, &vec![i as u8; len]);
        }
    }
}
