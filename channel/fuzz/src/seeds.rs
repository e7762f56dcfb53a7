//! The seed corpus: real messages of every kind, made by the encoders that send them, so that
//! mutations start from inputs that get deep into each parser. `corpus/<target>/` holds them as
//! files (the runner checks that they are what this module makes now).

use std::sync::Arc;
use std::time::{Duration, Instant};

use diwarp_fi::fuzzing::{AtomicRequest, Kind, Matching, Msg, Repr as MsgRepr};
use diwarp_fi::peer::header::{self, Repr as PeerRepr};
use iwarp::verbs::{RdHello, RdHelloKind};
use iwarp::wire::datagram;
use iwarp::wire::mpa::{FpduSender, FrameKind, IrdOrd, StartupRepr};
use iwarp::wire::rdmap::{
    AtomicOp, AtomicRequestRepr, AtomicResponseRepr, Opcode, ReadRequestRepr, SegmentRepr,
    TerminateRepr,
};
use reliability::{Config, Session, SessionIds};

use crate::reliability_targets::IDS;

/// A named seed.
pub type Seed = (String, Vec<u8>);

fn named(prefix: &str, items: impl IntoIterator<Item = Vec<u8>>) -> Vec<Seed> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, b)| (format!("{prefix}-{i:02}"), b))
        .collect()
}

/// A segment's DDP and RDMAP headers followed by `payload`.
fn segment(seg: &SegmentRepr, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; seg.header_len()];
    seg.emit(&mut out).unwrap();
    out.extend_from_slice(payload);
    out
}

/// Each opcode's header, emitted, behind the segment that carries it.
fn op_headers() -> Vec<(Opcode, Vec<u8>)> {
    let read = ReadRequestRepr {
        sink_stag: 0x1234,
        sink_to: 4096,
        len: 65536,
        src_stag: 0x5678,
        src_to: 1 << 40,
    };
    let mut rr = vec![0u8; ReadRequestRepr::LEN];
    read.emit(&mut rr).unwrap();
    let term = TerminateRepr::new(1, 2, 3);
    let mut t = vec![0u8; term.buffer_len()];
    term.emit(&mut t).unwrap();
    let atomic = AtomicRequestRepr {
        op: AtomicOp::CompareSwap,
        request_id: 9,
        stag: 0x77,
        offset: 64,
        add_swap_data: 5,
        add_swap_mask: u64::MAX,
        compare_data: 4,
        compare_mask: u64::MAX,
    };
    let mut a = vec![0u8; AtomicRequestRepr::LEN];
    atomic.emit(&mut a).unwrap();
    let answer = AtomicResponseRepr {
        request_id: 9,
        original: 4,
    };
    let mut r = vec![0u8; AtomicResponseRepr::LEN];
    answer.emit(&mut r).unwrap();
    vec![
        (Opcode::ReadRequest, rr),
        (Opcode::Terminate, t),
        (Opcode::AtomicRequest, a),
        (Opcode::AtomicResponse, r),
    ]
}

fn segments() -> Vec<Vec<u8>> {
    let mut v = vec![
        segment(
            &SegmentRepr::tagged(Opcode::RdmaWrite, true, 0x1000, 8192),
            b"written",
        ),
        segment(
            &SegmentRepr::tagged(Opcode::ReadResponse, false, 7, 0),
            &[0xab; 40],
        ),
        segment(
            &SegmentRepr::untagged(Opcode::Send, true, 0, 3, 0),
            b"hello",
        ),
        segment(
            &SegmentRepr::untagged(Opcode::SendSolicited, false, 0, 4, 1400),
            &[1; 9],
        ),
        segment(
            &SegmentRepr::untagged(Opcode::ImmediateData, true, 0, 5, 0),
            &[2; 8],
        ),
    ];
    for (op, h) in op_headers() {
        let qn = op.queue();
        v.push(segment(&SegmentRepr::untagged(op, true, qn, 1, 0), &h));
    }
    v
}

fn ddp() -> Vec<Seed> {
    named("segment", segments())
}

fn rdmap() -> Vec<Seed> {
    let mut v = named("segment", segments());
    // The opcode headers alone, behind the byte that picks the opcode.
    for (op, h) in op_headers() {
        let sel = Opcode::ALL.iter().position(|&o| o == op).unwrap() as u8;
        v.push((format!("op-{sel:02}"), [&[sel][..], &h].concat()));
    }
    v
}

fn datagram() -> Vec<Seed> {
    let mut v = Vec::new();
    for crc in [false, true] {
        for (i, seg) in segments().iter().enumerate() {
            let (repr, payload) = SegmentRepr::parse(seg).unwrap();
            let d = datagram::encode(&repr, payload, crc);
            v.push((
                format!("crc{}-{i:02}", u8::from(crc)),
                [&[u8::from(crc)][..], &d].concat(),
            ));
        }
    }
    v
}

fn mpa_startup() -> Vec<Seed> {
    let ird_ord = IrdOrd {
        ird: 16,
        ord: 16,
        peer_to_peer: true,
        zero_length_rtr: true,
        write_rtr: false,
        read_rtr: false,
    };
    let frame = |kind, markers, crc, reject, revision, ird_ord, pd: &[u8]| StartupRepr {
        kind,
        markers,
        crc,
        reject,
        revision,
        ird_ord,
        private_data: pd.to_vec(),
    };
    let frames = [
        frame(
            FrameKind::Request,
            false,
            true,
            false,
            1,
            None,
            b"diwarp-sockets/1",
        ),
        frame(FrameKind::Reply, false, true, false, 1, None, b""),
        frame(
            FrameKind::Request,
            true,
            true,
            false,
            2,
            Some(ird_ord),
            b"pd",
        ),
        frame(
            FrameKind::Reply,
            true,
            false,
            false,
            2,
            Some(ird_ord),
            &[7; 100],
        ),
        frame(FrameKind::Reply, false, false, true, 2, None, b"no"),
    ];
    named("frame", frames.iter().map(|f| f.emit().unwrap()))
}

fn mpa_stream() -> Vec<Seed> {
    let mut v = Vec::new();
    for mode in [0u8, 1, 2, 3, 3 | (4 * 9)] {
        let mut tx = FpduSender::new(mode & 1 != 0, mode & 2 != 0);
        let mut wire = vec![mode];
        for s in segments().iter().take(3) {
            tx.encode(&[s], &mut wire).unwrap();
        }
        v.push((format!("stream-{mode:02}"), wire));
    }
    v
}

fn rd_hello() -> Vec<Seed> {
    let hello = |kind, checksum, echo| RdHello {
        kind,
        checksum,
        dst_qpn: 3,
        src_qpn: 5,
        id: 0x1234_5678,
        epoch: 0x9abc_def0,
        echo,
    };
    named(
        "hello",
        [
            hello(RdHelloKind::Hello, true, (0, 0)),
            hello(RdHelloKind::Hello, false, (0, 0)),
            hello(RdHelloKind::Ack, true, (0x1111, 0x2222)),
        ]
        .iter()
        .map(|h| h.emit().to_vec()),
    )
}

/// The datagrams a peer sends to [`crate::reliability_targets::session`]'s session: its ACKs of
/// that session's data and data of its own, one of them in segments.
fn peer_datagrams() -> Vec<Vec<u8>> {
    let peer_ids = SessionIds {
        local_id: IDS.remote_id,
        local_epoch: IDS.remote_epoch,
        remote_id: IDS.local_id,
        remote_epoch: IDS.local_epoch,
    };
    let now = Instant::now();
    let cfg = Arc::new(Config {
        max_held_bytes: 8192,
        ..Config::default()
    });
    let mut ours = Session::new(cfg.clone(), IDS, now).unwrap();
    let mut peer = Session::new(cfg, peer_ids, now).unwrap();
    for i in 0..4u8 {
        let _ = ours.send(now, vec![i; 300 * usize::from(i)]);
    }
    let mut buf = Vec::new();
    while ours.poll_transmit(now, &mut buf).is_some() {
        let _ = peer.handle_datagram(now, &buf, &mut ());
    }
    let mut out = Vec::new();
    let mut drain = |peer: &mut Session, at| {
        while peer.poll_transmit(at, &mut buf).is_some() {
            out.push(buf.clone());
        }
    };
    // A delayed ACK alone, then each message in datagrams of its own, then several coalesced.
    let later = now + Duration::from_millis(50);
    peer.handle_timeout(later);
    drain(&mut peer, later);
    for len in [0, 5, 200, 3000] {
        let _ = peer.send(later, vec![0x5a; len]);
        drain(&mut peer, later);
    }
    for len in [1, 2, 3] {
        let _ = peer.send(later, vec![0xa5; len]);
    }
    drain(&mut peer, later);
    out
}

fn reliability_header() -> Vec<Seed> {
    named("datagram", peer_datagrams())
}

fn reliability_session() -> Vec<Seed> {
    let frames: Vec<Vec<u8>> = peer_datagrams()
        .into_iter()
        .filter(|d| d.len() <= 510)
        .collect();
    let frame = |d: &[u8]| [&[d.len().div_ceil(2) as u8, 2][..], d].concat();
    // Each datagram alone (an odd-length one must be last), then every even-length one in turn.
    let mut v = named("one", frames.iter().map(|d| [&[0][..], &frame(d)].concat()));
    let mut all = vec![0u8];
    for d in frames.iter().filter(|d| d.len() % 2 == 0) {
        all.extend_from_slice(&frame(d));
    }
    v.push(("all".into(), all));
    v
}

fn messages() -> Vec<Vec<u8>> {
    let m = Matching {
        kind: Kind::Tagged,
        tag: 0x8000_0000_0000_0001,
        data: Some(7),
        len: 3,
    };
    let msgs = [
        Msg::Eager { m, payload: b"abc" },
        Msg::Eager {
            m: Matching {
                kind: Kind::Msg,
                data: None,
                len: 0,
                ..m
            },
            payload: b"",
        },
        Msg::Rts {
            m: Matching { len: 1 << 40, ..m },
            handle: 99,
            pushed: true,
        },
        Msg::Cts {
            handle: 1,
            recv_id: 2,
            wanted: 3,
            taken: true,
        },
        Msg::Data {
            recv_id: 5,
            offset: 6,
            payload: &[9],
        },
        Msg::Push {
            handle: 7,
            offset: 6,
            payload: &[9, 8],
        },
        Msg::Ping,
        Msg::Write {
            key: (1 << 63) | 5,
            addr: 4096,
            id: 77,
            last: true,
            payload: b"xy",
        },
        Msg::Read {
            id: 8,
            key: 9,
            addr: 10,
            len: 1 << 40,
        },
        Msg::ReadData {
            id: 8,
            offset: 61440,
            payload: &[1],
        },
        Msg::RmaAnswer {
            id: 8,
            errno: 13,
            last: true,
        },
        Msg::Atomic(AtomicRequest {
            id: 8,
            key: (1 << 63) | 5,
            addr: 24,
            count: 1,
            datatype: 9,
            op: 18,
            fetch: true,
            operands: b"abcdefgh",
        }),
        Msg::AtomicAnswer {
            id: 8,
            errno: 0,
            fetched: b"old",
        },
    ];
    msgs.into_iter()
        .map(|msg| {
            let mut out = Vec::new();
            MsgRepr {
                qpn: 0x0102_0304,
                msg,
            }
            .append(&mut out);
            out
        })
        .collect()
}

fn channel_message() -> Vec<Seed> {
    named("message", messages())
}

fn peer_header() -> Vec<Seed> {
    let h = |flags, seq| PeerRepr {
        flags,
        seq,
        ack: seq.wrapping_sub(1),
        src_epoch: 0x0bad_cafe,
        dst_epoch: 0x1234_5678,
    };
    let mut v = vec![h(header::ACK_ONLY | header::ACK_NOW, 0).encode().to_vec()];
    for (i, m) in messages().into_iter().enumerate() {
        let flags = if i % 2 == 0 {
            header::NAMED
        } else {
            header::ACK_NOW
        };
        v.push([&h(flags, i as u32 + 1).encode()[..], &m].concat());
    }
    named("message", v)
}

fn sockets_hello() -> Vec<Seed> {
    use diwarp_sockets::handshake::Hello;
    let h = |qpn, has_yours| Hello { qpn, has_yours }.emit();
    named("hello", [h(7, false).to_vec(), h(0xfffe, true).to_vec()])
}

/// The seeds of the target named `target`.
pub fn for_target(target: &str) -> Vec<Seed> {
    match target {
        "ddp" => ddp(),
        "rdmap" => rdmap(),
        "datagram" => datagram(),
        "mpa_startup" => mpa_startup(),
        "mpa_stream" => mpa_stream(),
        "rd_hello" => rd_hello(),
        "reliability_header" => reliability_header(),
        // The same frames: datagrams for the session the endpoint has open.
        "reliability_session" | "reliability_endpoint" => reliability_session(),
        "channel_message" => channel_message(),
        "peer_header" => peer_header(),
        "sockets_hello" => sockets_hello(),
        _ => Vec::new(),
    }
}
