//! Large datagrams sent by reference: the payload's pages go into a pipe with `vmsplice` and
//! from there into the peer's connected socket with `splice`, so the kernel takes them as they
//! are instead of copying them into fresh socket-buffer pages. That copy is where RD's sender
//! spent two thirds of its time streaming on loopback, at about 1.8 times what TCP's costs per
//! byte (`iwarp/BENCHMARKS.md`, "RD as the provider runs it").
//!
//! The kernel reads the pages when the receiver copies the datagram out, not when `splice`
//! returns. That is safe here because a payload stays unchanged until the peer acknowledges
//! it: the engine keeps it for retransmission until then, and a peer acknowledges a datagram
//! only once it has read it from its socket. A retransmission still queued when the original's
//! ACK gives the buffer back may carry changed bytes; it is a duplicate, and its receiver
//! drops it by sequence number before looking at the payload.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, splice, vmsplice, FcntlArg, OFlag, SpliceFFlags};
use nix::unistd::{pipe2, write};

use reliability::header::{CRC_LEN, SEGMENT_LEN};

/// Payload bytes from which a datagram goes by reference; below, the copy costs less than the
/// three system calls.
pub(crate) const MIN_PAYLOAD: usize = 16 << 10;
/// Largest payload a datagram carries where sends go by reference: 14 pages, which span at most
/// 15 pipe buffers wherever they start, so header and payload fit in [`MAX_BUFFERS`]; one page
/// less when a CRC trailer takes a buffer too.
pub(crate) const fn max_payload(trailer: bool) -> usize {
    if trailer {
        13 * PAGE
    } else {
        14 * PAGE
    }
}

/// The datagram size that gives a SEGMENT [`max_payload`] bytes.
pub(crate) const fn max_datagram(trailer: bool) -> usize {
    SEGMENT_LEN + max_payload(trailer) + if trailer { CRC_LEN } else { 0 }
}
/// Pipe buffers one datagram may fill: `splice` hands a socket at most 16 at a time, and only a
/// datagram taken in one such call is all-or-nothing (a longer one would be sent in parts).
const MAX_BUFFERS: usize = 16;
/// The smallest page size Linux uses; larger pages only make fewer buffers.
const PAGE: usize = 4096;
/// Room in the pipe: one datagram at a time, with margin.
const PIPE_BYTES: i32 = 256 << 10;

/// A pipe holding at most one datagram on its way into a socket.
pub(crate) struct Splicer {
    rd: OwnedFd,
    wr: OwnedFd,
    /// Bytes of the datagram loaded into the pipe and not yet taken by a socket: a `splice`
    /// that found the socket full leaves them there for the next try.
    loaded: usize,
}

impl Splicer {
    /// `None` where the kernel has no pipes to spare or will not grow one.
    pub(crate) fn new() -> Option<Splicer> {
        let (rd, wr) = pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK).ok()?;
        fcntl(wr.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(PIPE_BYTES)).ok()?;
        Some(Splicer { rd, wr, loaded: 0 })
    }

    /// Whether a datagram of these pieces (header, payload pieces, trailer) goes by reference:
    /// large enough to gain, and few enough pipe buffers for one all-or-nothing send.
    pub(crate) fn suits(header: &[u8], payload: [&[u8]; 2], trailer: &[u8]) -> bool {
        let bytes: usize = payload.iter().map(|p| p.len()).sum();
        let buffers = usize::from(!header.is_empty())
            + payload.iter().map(|p| pages(p)).sum::<usize>()
            + usize::from(!trailer.is_empty());
        bytes >= MIN_PAYLOAD && buffers <= MAX_BUFFERS
    }

    /// Whether a datagram is waiting in the pipe.
    pub(crate) fn loaded(&self) -> bool {
        self.loaded > 0
    }

    /// Sends one datagram into `sock` (connected), loading it into the pipe unless a previous
    /// call that hit a full socket left it there. Header and trailer are copied into the pipe;
    /// the payload goes by reference. On `EAGAIN` (or another error a retry may cure) the
    /// datagram stays loaded: the next call must be for the same datagram, or [`discard`]
    /// must come first.
    ///
    /// [`discard`]: Splicer::discard
    pub(crate) fn send(
        &mut self,
        sock: impl AsFd,
        header: &[u8],
        payload: [&[u8]; 2],
        trailer: &[u8],
    ) -> Result<(), Errno> {
        if self.loaded == 0 {
            self.load(header, payload, trailer)?;
        }
        let n = splice(
            &self.rd,
            None,
            sock,
            None,
            self.loaded,
            SpliceFFlags::SPLICE_F_NONBLOCK,
        )?;
        if n != self.loaded {
            // Cannot happen within MAX_BUFFERS; if it did, the datagram left cut short and the
            // peer refuses it as malformed (a loss to the engine). The rest must not follow.
            self.discard()?;
            return Err(Errno::EMSGSIZE);
        }
        self.loaded = 0;
        Ok(())
    }

    fn load(&mut self, header: &[u8], payload: [&[u8]; 2], trailer: &[u8]) -> Result<(), Errno> {
        let mut want = 0;
        let mut put = 0;
        if !header.is_empty() {
            want += header.len();
            put += write(&self.wr, header)?;
        }
        let iov: Vec<IoSlice<'_>> = payload
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| IoSlice::new(p))
            .collect();
        want += payload.iter().map(|p| p.len()).sum::<usize>();
        put += vmsplice(&self.wr, &iov, SpliceFFlags::empty())?;
        if !trailer.is_empty() {
            want += trailer.len();
            put += write(&self.wr, trailer)?;
        }
        self.loaded = put;
        if put != want {
            // The pipe would not take it all (it is sized for several datagrams, so this is a
            // kernel refusing to grow it as asked): send this one by copy.
            self.discard()?;
            return Err(Errno::ENOSPC);
        }
        Ok(())
    }

    /// Empties the pipe of a datagram that is not to be sent: a new pipe, the old one and the
    /// page references it held closed with it.
    pub(crate) fn discard(&mut self) -> Result<(), Errno> {
        self.loaded = 0;
        let fresh = Splicer::new().ok_or(Errno::EMFILE)?;
        *self = fresh;
        Ok(())
    }
}

/// Pipe buffers `vmsplice` makes of `p`: one per page it touches.
fn pages(p: &[u8]) -> usize {
    if p.is_empty() {
        return 0;
    }
    let start = p.as_ptr() as usize % PAGE;
    (start + p.len()).div_ceil(PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn a_datagram_suits_when_large_and_within_sixteen_buffers() {
        let buf = vec![7u8; 20 * PAGE];
        let base = buf.as_ptr() as usize % PAGE;
        let aligned = &buf[(PAGE - base) % PAGE..];
        let h = [1u8; SEGMENT_LEN];
        // 14 pages from anywhere: at most 15 buffers, plus the header.
        assert!(Splicer::suits(
            &h,
            [&aligned[100..100 + max_payload(false)], &[]],
            &[]
        ));
        let t = [0u8; CRC_LEN];
        assert!(Splicer::suits(
            &h,
            [&aligned[100..100 + max_payload(true)], &[]],
            &t
        ));
        assert!(!Splicer::suits(
            &h,
            [&aligned[100..100 + max_payload(false)], &[]],
            &t
        ));
        // 15 pages unaligned: 16 page buffers and the header are one too many.
        assert!(!Splicer::suits(
            &h,
            [&aligned[100..100 + 15 * PAGE], &[]],
            &[]
        ));
        // ... but page-aligned they fit.
        assert!(Splicer::suits(&h, [&aligned[..15 * PAGE], &[]], &[]));
        // Small payloads go by copy.
        assert!(!Splicer::suits(&h, [&aligned[..MIN_PAYLOAD - 1], &[]], &[]));
        assert_eq!(pages(&aligned[PAGE - 1..PAGE + 1]), 2);
        assert_eq!(pages(&[]), 0);
    }

    /// What leaves is the datagram byte for byte, however its pieces lie in memory.
    #[test]
    fn datagrams_arrive_whole_and_in_place() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.set_nonblocking(true).unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut s = Splicer::new().expect("a pipe");
        let data: Vec<u8> = (0..20 * PAGE).map(|i| (i * 13 + i / 4096) as u8).collect();
        let a0 = (PAGE - data.as_ptr() as usize % PAGE) % PAGE;
        let mut got = vec![0u8; 1 << 16];
        let cases = [
            (a0, max_payload(false), 0, true),
            (a0 + 17, max_payload(true), 0, true),
            (a0 + 333, 30_000, 5_000, true),
            (a0 + 4095, max_payload(false), 0, false),
        ];
        for (k, (at, len, tail, crc)) in cases.into_iter().enumerate() {
            let header = [k as u8; SEGMENT_LEN];
            let trailer = if crc {
                &[0xc0 | k as u8; CRC_LEN][..]
            } else {
                &[][..]
            };
            let (p, t) = (&data[at..at + len], &data[at + len..at + len + tail]);
            assert!(Splicer::suits(&header, [p, t], trailer), "datagram {k}");
            s.send(&tx, &header, [p, t], trailer).unwrap();
            assert!(!s.loaded());
            let mut want = header.to_vec();
            want.extend_from_slice(p);
            want.extend_from_slice(t);
            want.extend_from_slice(trailer);
            let n = rx.recv(&mut got).unwrap();
            assert_eq!(&got[..n], &want[..], "datagram {k}");
        }
    }

    #[test]
    fn a_discarded_datagram_never_leaves() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_nonblocking(true).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let mut s = Splicer::new().unwrap();
        let data = vec![5u8; max_payload(false)];
        s.load(&[1; 8], [&data, &[]], &[]).unwrap();
        assert!(s.loaded());
        s.discard().unwrap();
        assert!(!s.loaded());
        s.send(&tx, &[2; 8], [&data[..MIN_PAYLOAD], &[]], &[])
            .unwrap();
        let mut got = vec![0u8; 1 << 16];
        let n = rx.recv(&mut got).unwrap();
        assert_eq!(n, 8 + MIN_PAYLOAD);
        assert_eq!(got[0], 2);
        assert!(rx.recv(&mut got).is_err(), "only the datagram sent");
    }
}
