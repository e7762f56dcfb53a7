//! iWARP's wire (`iwarp::wire`: DDP, RDMAP, the datagram framing, MPA) and the RD queue pair's
//! hellos.

use iwarp::crc::crc32c;
use iwarp::verbs::{RdHello, RD_HELLO_LEN};
use iwarp::wire::datagram::{self, CRC_LEN};
use iwarp::wire::ddp::{Packet, Repr};
use iwarp::wire::mpa::{
    FpduDecoder, FpduSender, StartupFrame, StartupRepr, MAX_FPDU_LEN, MAX_ULPDU_MARKERS,
};
use iwarp::wire::rdmap::{OpHeader, Opcode, SegmentRepr};

/// DDP headers: arbitrary bytes never panic; whatever parses re-emits to the same bytes.
pub fn ddp(data: &[u8]) -> usize {
    let Ok(packet) = Packet::new_checked(data) else {
        return data.len();
    };
    let Ok(repr) = Repr::parse(&packet) else {
        return data.len();
    };
    let hl = repr.header_len();
    assert_eq!(hl, packet.header_len());
    let mut out = data.to_vec();
    out[..hl].fill(0xa5);
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, data);
    assert_eq!(Packet::new_unchecked(&out[..]).payload(), &data[hl..]);
    data.len()
}

fn op_header_round_trip(opcode: Opcode, bytes: &[u8]) {
    if let Ok((h, rest)) = OpHeader::parse(opcode, bytes) {
        let n = h.buffer_len();
        assert_eq!(n + rest.len(), bytes.len());
        let mut out = vec![0u8; n];
        assert_eq!(h.emit(&mut out), Ok(n));
        assert_eq!(out, &bytes[..n]);
        assert_eq!(OpHeader::parse(opcode, &out).map(|(h2, _)| h2), Ok(h));
    }
}

/// RDMAP segment and opcode headers: arbitrary bytes never panic; whatever parses re-emits to
/// the same bytes. The first byte also picks an opcode for the opcode headers on their own, so
/// that the fuzzer need not find a valid segment first.
pub fn rdmap(data: &[u8]) -> usize {
    if let Ok((seg, payload)) = SegmentRepr::parse(data) {
        let hl = seg.header_len();
        assert_eq!(hl + payload.len(), data.len());
        let mut out = vec![0u8; hl];
        assert_eq!(seg.emit(&mut out), Ok(hl));
        assert_eq!(out, &data[..hl]);
        op_header_round_trip(seg.opcode, payload);
    }
    if let Some((&sel, rest)) = data.split_first() {
        if let Some(&op) = Opcode::ALL.get(usize::from(sel) % Opcode::ALL.len()) {
            op_header_round_trip(op, rest);
        }
    }
    data.len()
}

/// Datagram framing: the first byte says whether the CRC is checked. Arbitrary bytes never
/// panic; whatever parses re-encodes to the same bytes.
pub fn datagram(data: &[u8]) -> usize {
    let Some((&mode, datagram)) = data.split_first() else {
        return 0;
    };
    let crc = mode & 1 != 0;
    let Ok((seg, range)) = datagram::parse(datagram, crc) else {
        return data.len();
    };
    let body = datagram.len() - CRC_LEN;
    assert_eq!(range.start, seg.header_len());
    assert_eq!(range.end, body);
    let again = datagram::encode(&seg, &datagram[range], crc);
    assert_eq!(again.len(), datagram.len());
    assert_eq!(again[..body], datagram[..body]);
    if crc {
        assert_eq!(again[body..], datagram[body..]);
        assert_eq!(datagram[body..], crc32c(&datagram[..body]).to_le_bytes());
    } else {
        assert_eq!(again[body..], [0; CRC_LEN]);
    }
    data.len()
}

/// MPA start-up frames: arbitrary bytes never panic; a parsed frame re-emits to the octets it
/// was parsed from, and every proper prefix of those asks for more.
pub fn mpa_startup(data: &[u8]) -> usize {
    let Ok(Some((repr, n))) = StartupRepr::parse(data) else {
        return data.len();
    };
    assert!(n <= data.len());
    let frame = &data[..n];
    assert_eq!(repr.emit().unwrap(), frame);
    assert_eq!(repr.buffer_len(), n);
    assert_eq!(StartupFrame::new_checked(frame).unwrap().frame_len(), n);
    for cut in [0, n / 2, n - 1] {
        assert_eq!(StartupRepr::parse(&frame[..cut]), Ok(None));
    }
    data.len()
}

fn drain(rx: &mut FpduDecoder, out: &mut Vec<Vec<u8>>) -> bool {
    loop {
        match rx.next_ulpdu() {
            Ok(Some(u)) => out.push(u.to_vec()),
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// MPA FPDU streams.
///
/// The first octet picks markers, CRC and a cut size. The rest is fed to a decoder as received
/// octets (it must never panic, and its buffer stays bounded), and is also read as a list of
/// ULPDUs that are framed, cut and decoded again, which must give them back unchanged. Returns
/// the octets the decoders were handed: a length octet can stand for up to 64 KiB of ULPDU.
pub fn mpa_stream(data: &[u8]) -> usize {
    let Some((&mode, rest)) = data.split_first() else {
        return 0;
    };
    let markers = mode & 1 != 0;
    let crc = mode & 2 != 0;
    let cut = usize::from(mode >> 2) * 37 + 1;

    // Raw octets as a received stream.
    let mut rx = FpduDecoder::new(markers, crc);
    let mut junk = Vec::new();
    for piece in rest.chunks(cut) {
        rx.push(piece);
        if !drain(&mut rx, &mut junk) {
            assert!(rx.next_ulpdu().is_err());
            break;
        }
        assert!(rx.buffered() < MAX_FPDU_LEN + piece.len());
    }

    // The same octets as ULPDUs: each takes a length octet and up to that many following octets,
    // repeated to the length. Length octets from 0xf0 up stand for large ULPDUs, so FPDUs with
    // many markers happen without slowing every run down.
    let mut ulpdus = Vec::new();
    let mut src = rest;
    while let Some((&n, tail)) = src.split_first() {
        let len = match n {
            0xf0.. => (usize::from(n - 0xef) * 4096).min(MAX_ULPDU_MARKERS),
            _ => usize::from(n),
        };
        let take = tail.len().min(usize::from(n));
        let seed = &tail[..take];
        let u: Vec<u8> = if seed.is_empty() {
            vec![n; len]
        } else {
            seed.iter().copied().cycle().take(len).collect()
        };
        ulpdus.push(u);
        src = &tail[take..];
    }
    let mut tx = FpduSender::new(markers, crc);
    let mut wire = Vec::new();
    for u in &ulpdus {
        let (a, b) = u.split_at(u.len() / 3);
        tx.encode(&[a, b], &mut wire).unwrap();
    }
    // Cut sizes cycle so that tiny pieces and whole FPDUs both happen, without 1-octet pushes
    // of a megabyte of stream.
    let cuts = [cut, 4093, cut * 5 + 2, 65536];
    let mut rx = FpduDecoder::new(markers, crc);
    let mut got = Vec::new();
    let mut rest_wire = &wire[..];
    for &n in cuts.iter().cycle() {
        if rest_wire.is_empty() {
            break;
        }
        let (piece, tail) = rest_wire.split_at(n.min(rest_wire.len()));
        rx.push(piece);
        assert!(drain(&mut rx, &mut got));
        rest_wire = tail;
    }
    assert_eq!(got, ulpdus);
    assert_eq!(rx.buffered(), 0);
    data.len() + wire.len()
}

/// The RD queue pair's HELLO and HELLO-ACK: arbitrary bytes never panic; an intact hello
/// re-emits to the same bytes, and one flipped bit anywhere makes it no hello.
pub fn rd_hello(data: &[u8]) -> usize {
    let Some(h) = RdHello::parse(data) else {
        return data.len();
    };
    assert_eq!(data.len(), RD_HELLO_LEN);
    let b = h.emit();
    assert_eq!(b[..], *data);
    for i in 0..RD_HELLO_LEN {
        let mut c = b;
        c[i] ^= 1 << (i % 8);
        assert_eq!(RdHello::parse(&c), None, "flip at {i}");
    }
    data.len()
}
