//! DDP, RDMAP and datagram codecs against hand-built frames, malformed input and properties.

use iwarp::crc::crc32c;
use iwarp::wire::datagram::{self, qn_for, split_qn, CRC_LEN, MAX_DATAGRAM, MAX_QPN};
use iwarp::wire::ddp::{self, Placement, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use iwarp::wire::rdmap::{
    term, AtomicOp, AtomicRequestRepr, AtomicResponseRepr, ImmediateDataRepr, OpHeader, Opcode,
    ReadRequestRepr, SegmentRepr, TerminateRepr, TerminatedDdp, ERR_ATOMIC_OPCODE,
    ERR_MODEL_MISMATCH, ERR_WRONG_QUEUE,
};
use iwarp::wire::Error;
use proptest::prelude::*;

/// Parses `bytes` as a segment plus opcode header, compares with the expectation, then emits
/// the expectation and compares with `bytes`.
fn check_frame(bytes: &[u8], seg: SegmentRepr, op: OpHeader, data: &[u8]) {
    let (got_seg, rest) = SegmentRepr::parse(bytes).unwrap();
    assert_eq!(got_seg, seg);
    let (got_op, got_data) = OpHeader::parse(seg.opcode, rest).unwrap();
    assert_eq!(got_op, op);
    assert_eq!(got_data, data);

    let mut out = vec![0xa5u8; bytes.len()];
    let hl = seg.emit(&mut out).unwrap();
    assert_eq!(hl, seg.header_len());
    let ol = op.emit(&mut out[hl..]).unwrap();
    assert_eq!(ol, op.buffer_len());
    out[hl + ol..].copy_from_slice(data);
    assert_eq!(out, bytes);

    // Every shorter buffer is refused as truncated, never misread.
    for n in 0..hl {
        assert_eq!(
            SegmentRepr::parse(&bytes[..n]),
            Err(Error::Truncated {
                need: if n == 0 { TAGGED_HEADER_LEN } else { hl },
                have: n
            })
        );
    }
    for n in 0..ol {
        assert!(matches!(
            OpHeader::parse(seg.opcode, &rest[..n]),
            Err(Error::Truncated { .. })
        ));
    }
    let mut short = vec![0u8; hl - 1];
    assert_eq!(
        seg.emit(&mut short),
        Err(Error::Truncated {
            need: hl,
            have: hl - 1
        })
    );
}

#[rustfmt::skip]
const WRITE: [u8; 17] = [
    0xc1, 0x40,                                     // T L DV=1 | RV=1 RDMA Write
    0x00, 0x00, 0x12, 0x34,                         // STag
    0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00, // TO
    0xde, 0xad, 0x01,                               // payload
];

#[test]
fn tagged_write() {
    let seg = SegmentRepr::tagged(Opcode::RdmaWrite, true, 0x1234, 0x7f00_0000_1000);
    check_frame(&WRITE, seg, OpHeader::None, &[0xde, 0xad, 0x01]);
    let mut middle = WRITE;
    middle[0] = 0x81; // not last
    check_frame(
        &middle,
        SegmentRepr { last: false, ..seg },
        OpHeader::None,
        &[0xde, 0xad, 0x01],
    );
}

#[test]
fn read_response() {
    #[rustfmt::skip]
    let bytes = [
        0xc1, 0x42,
        0xff, 0xee, 0xdd, 0xcc,
        0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];
    let seg = SegmentRepr::tagged(Opcode::ReadResponse, true, 0xffee_ddcc, 1 << 63 | 1);
    check_frame(&bytes, seg, OpHeader::None, &[]);
}

#[test]
fn untagged_sends() {
    for (ctrl, op, inval) in [
        (0x43, Opcode::Send, 0),
        (0x44, Opcode::SendInvalidate, 0x0bad_f00d),
        (0x45, Opcode::SendSolicited, 0),
        (0x46, Opcode::SendSolicitedInvalidate, 0x0000_0001),
    ] {
        let iv = u32::to_be_bytes(inval);
        #[rustfmt::skip]
        let bytes = [
            0x41, ctrl,
            iv[0], iv[1], iv[2], iv[3],             // RsvdULP[8:39] = Invalidate STag
            0x00, 0x00, 0x01, 0x00,                 // QN 256 = QP 64, queue 0
            0x00, 0x00, 0x00, 0x01,                 // MSN 1
            0x00, 0x01, 0x00, 0x00,                 // MO 65536
            b'm', b'p', b'i',
        ];
        let seg = SegmentRepr {
            opcode: op,
            last: true,
            placement: Placement::Untagged {
                inval_stag: inval,
                qn: 256,
                msn: 1,
                mo: 65536,
            },
        };
        check_frame(&bytes, seg, OpHeader::None, b"mpi");
        assert_eq!(op.carries_inval_stag(), inval != 0);
        assert_eq!(op.solicited(), ctrl == 0x45 || ctrl == 0x46);
    }
}

#[test]
fn read_request() {
    #[rustfmt::skip]
    let bytes = [
        0x41, 0x41,
        0, 0, 0, 0,
        0x00, 0x00, 0x00, 0x01,                         // QN 1
        0x00, 0x00, 0x00, 0x02,                         // MSN 2
        0x00, 0x00, 0x00, 0x00,                         // MO 0
        0x00, 0x00, 0xab, 0xcd,                         // sink STag
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, // sink TO
        0x00, 0x10, 0x00, 0x00,                         // RDMARDSZ 1 MiB
        0x11, 0x22, 0x33, 0x44,                         // source STag
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // source TO
    ];
    let seg = SegmentRepr::untagged(Opcode::ReadRequest, true, 1, 2, 0);
    let rr = ReadRequestRepr {
        sink_stag: 0xabcd,
        sink_to: 0x2000,
        len: 1 << 20,
        src_stag: 0x1122_3344,
        src_to: 0x0123_4567_89ab_cdef,
    };
    check_frame(&bytes, seg, OpHeader::ReadRequest(rr), &[]);
    assert_eq!(bytes.len(), 18 + ReadRequestRepr::LEN);
}

#[test]
fn terminate_bare_and_with_headers() {
    #[rustfmt::skip]
    let bare = [
        0x41, 0x47, 0, 0, 0, 0,
        0x00, 0x00, 0x00, 0x02,                         // QN 2
        0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00,
        0x00, 0xff, 0x00, 0x00,                         // RDMAP, catastrophic, unspecified
    ];
    let seg = SegmentRepr::untagged(Opcode::Terminate, true, 2, 1, 0);
    let t = TerminateRepr::new(term::LAYER_RDMAP, term::RDMAP_CATASTROPHIC, 0xff);
    check_frame(&bare, seg, OpHeader::Terminate(t), &[]);

    // A DDP-layer error on a tagged Write: M and D set, length then the 14-byte header.
    let mut full = bare[..18].to_vec();
    full.extend_from_slice(&[0x11, 0x01, 0xc0, 0x00]); // DDP, tagged, base/bounds, M D
    full.extend_from_slice(&[0x05, 0xdc]); // segment length 1500
    full.extend_from_slice(&WRITE[..14]);
    let t = TerminateRepr {
        layer: term::LAYER_DDP,
        etype: term::DDP_TAGGED,
        ecode: term::DDP_T_BASE_BOUNDS,
        segment_len_valid: true,
        ddp: Some(TerminatedDdp::new(1500, &WRITE).unwrap()),
        rdmap: None,
    };
    check_frame(&full, seg, OpHeader::Terminate(t), &[]);

    // A protection error on a Read Request: M D R, untagged header then its 28-byte header.
    let rr = ReadRequestRepr {
        sink_stag: 1,
        sink_to: 2,
        len: 3,
        src_stag: 4,
        src_to: 5,
    };
    let mut rr_bytes = [0u8; 28];
    rr.emit(&mut rr_bytes).unwrap();
    let rr_seg = SegmentRepr::untagged(Opcode::ReadRequest, true, 1, 9, 0);
    let mut rr_hdr = [0u8; 18];
    rr_seg.emit(&mut rr_hdr).unwrap();
    let mut full = bare[..18].to_vec();
    full.extend_from_slice(&[0x01, 0x00, 0xe0, 0x00]); // RDMAP, protection, invalid STag, M D R
    full.extend_from_slice(&[0x00, 0x2e]);
    full.extend_from_slice(&rr_hdr);
    full.extend_from_slice(&rr_bytes);
    let t = TerminateRepr {
        layer: term::LAYER_RDMAP,
        etype: term::RDMAP_REMOTE_PROTECTION,
        ecode: term::RDMAP_INVALID_STAG,
        segment_len_valid: true,
        ddp: Some(TerminatedDdp::new(46, &rr_hdr).unwrap()),
        rdmap: Some(rr_bytes),
    };
    assert_eq!(t.buffer_len(), TerminateRepr::MAX_LEN);
    check_frame(&full, seg, OpHeader::Terminate(t), &[]);
    assert_eq!(t.ddp.unwrap().header(), &rr_hdr);
}

#[test]
fn immediate_data() {
    for (ctrl, op) in [
        (0x48, Opcode::ImmediateData),
        (0x49, Opcode::ImmediateDataSolicited),
    ] {
        #[rustfmt::skip]
        let bytes = [
            0x41, ctrl, 0, 0, 0, 0,
            0x00, 0x00, 0x00, 0x04,                         // QN 4 = QP 1, queue 0
            0x00, 0x00, 0x00, 0x03,
            0x00, 0x00, 0x00, 0x00,
            0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10,
        ];
        let seg = SegmentRepr::untagged(op, true, qn_for(1, 0), 3, 0);
        let imm = ImmediateDataRepr {
            data: 0xfedc_ba98_7654_3210,
        };
        check_frame(&bytes, seg, OpHeader::ImmediateData(imm), &[]);
    }
}

#[test]
fn atomic_request_and_response() {
    #[rustfmt::skip]
    let req = [
        0x41, 0x4a, 0, 0, 0, 0,
        0x00, 0x00, 0x00, 0x03,                         // QN 3
        0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x02,                         // reserved | CompareSwap
        0xca, 0xfe, 0x00, 0x01,                         // request id
        0x00, 0x00, 0x77, 0x77,                         // remote STag
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, // remote TO
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, // swap data
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // swap mask
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, // compare data
        0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, // compare mask
    ];
    let seg = SegmentRepr::untagged(Opcode::AtomicRequest, true, 3, 1, 0);
    let a = AtomicRequestRepr {
        op: AtomicOp::CompareSwap,
        request_id: 0xcafe_0001,
        stag: 0x7777,
        offset: 0x40,
        add_swap_data: 9,
        add_swap_mask: u64::MAX,
        compare_data: 8,
        compare_mask: 0xffff_ffff,
    };
    check_frame(&req, seg, OpHeader::AtomicRequest(a), &[]);

    #[rustfmt::skip]
    let resp = [
        0x41, 0x4b, 0, 0, 0, 0,
        0x00, 0x00, 0x00, 0x07,                         // QN 7 = QP 1, queue 3
        0x00, 0x00, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00,
        0xca, 0xfe, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08,
    ];
    let seg = SegmentRepr::untagged(Opcode::AtomicResponse, true, qn_for(1, 3), 1, 0);
    let r = AtomicResponseRepr {
        request_id: 0xcafe_0001,
        original: 8,
    };
    check_frame(&resp, seg, OpHeader::AtomicResponse(r), &[]);
}

fn send_header() -> [u8; 18] {
    let mut b = [0u8; 18];
    SegmentRepr::untagged(Opcode::Send, true, 0, 1, 0)
        .emit(&mut b)
        .unwrap();
    b
}

#[test]
fn versions_and_reserved_bits() {
    for dv in [0u8, 2, 3] {
        let mut b = send_header();
        b[0] = (b[0] & !3) | dv;
        assert_eq!(SegmentRepr::parse(&b), Err(Error::BadDdpVersion(dv)));
    }
    for rv in [0u8, 2, 3] {
        let mut b = send_header();
        b[1] = (b[1] & 0x3f) | rv << 6;
        assert_eq!(SegmentRepr::parse(&b), Err(Error::BadRdmapVersion(rv)));
    }
    for bit in [0x04u8, 0x08, 0x10, 0x20] {
        let mut b = send_header();
        b[0] |= bit;
        assert_eq!(
            SegmentRepr::parse(&b),
            Err(Error::ReservedBits("DDP control"))
        );
    }
    for bit in [0x10u8, 0x20] {
        let mut b = send_header();
        b[1] |= bit;
        assert_eq!(
            SegmentRepr::parse(&b),
            Err(Error::ReservedBits("RDMAP control"))
        );
    }
    for i in 2..6 {
        let mut b = send_header();
        b[i] = 1;
        assert_eq!(
            SegmentRepr::parse(&b),
            Err(Error::ReservedBits("RDMAP RsvdULP[8:39]"))
        );
    }
    for v in 0xcu8..=0xf {
        let mut b = send_header();
        b[1] = 0x40 | v;
        assert_eq!(SegmentRepr::parse(&b), Err(Error::UnknownOpcode(v)));
    }
}

#[test]
fn buffer_model_and_queue_must_match_opcode() {
    for op in Opcode::ALL {
        // The opposite buffer model, with a buffer long enough for either.
        let mut b = [0u8; 18];
        b[0] = if op.is_tagged() { 0x41 } else { 0xc1 };
        b[1] = op.control_byte();
        b[9] = op.queue() as u8;
        assert_eq!(
            SegmentRepr::parse(&b),
            Err(Error::Malformed(ERR_MODEL_MISMATCH)),
            "{op:?}"
        );
        if op.is_tagged() {
            continue;
        }
        for qpn in [0, 1, MAX_QPN] {
            for queue in 0..4 {
                let mut b = [0u8; 18];
                b[0] = 0x41;
                b[1] = op.control_byte();
                b[6..10].copy_from_slice(&qn_for(qpn, queue).to_be_bytes());
                let r = SegmentRepr::parse(&b);
                if queue == op.queue() {
                    assert_eq!(
                        split_qn(match r.unwrap().0.placement {
                            Placement::Untagged { qn, .. } => qn,
                            Placement::Tagged { .. } => unreachable!(),
                        }),
                        (qpn, queue)
                    );
                } else {
                    assert_eq!(r, Err(Error::Malformed(ERR_WRONG_QUEUE)), "{op:?} {queue}");
                }
            }
        }
    }
    assert_eq!(Opcode::Send.queue(), 0);
    assert_eq!(Opcode::ImmediateDataSolicited.queue(), 0);
    assert_eq!(Opcode::ReadRequest.queue(), 1);
    assert_eq!(Opcode::Terminate.queue(), 2);
    assert_eq!(Opcode::AtomicRequest.queue(), 3);
    assert_eq!(Opcode::AtomicResponse.queue(), 3);
}

#[test]
fn emit_refuses_inconsistent_reprs() {
    let mut buf = [0u8; 64];
    let cases = [
        (
            SegmentRepr::untagged(Opcode::RdmaWrite, true, 0, 0, 0),
            Error::Malformed(ERR_MODEL_MISMATCH),
        ),
        (
            SegmentRepr::tagged(Opcode::Send, true, 0, 0),
            Error::Malformed(ERR_MODEL_MISMATCH),
        ),
        (
            SegmentRepr::untagged(Opcode::Send, true, 1, 0, 0),
            Error::Malformed(ERR_WRONG_QUEUE),
        ),
        (
            SegmentRepr::untagged(Opcode::ReadRequest, true, 0, 0, 0),
            Error::Malformed(ERR_WRONG_QUEUE),
        ),
        (
            SegmentRepr {
                opcode: Opcode::Send,
                last: true,
                placement: Placement::Untagged {
                    inval_stag: 5,
                    qn: 0,
                    msn: 0,
                    mo: 0,
                },
            },
            Error::ReservedBits("RDMAP RsvdULP[8:39]"),
        ),
    ];
    for (seg, err) in cases {
        assert_eq!(seg.emit(&mut buf), Err(err), "{seg:?}");
    }
    let mut t = TerminateRepr::new(16, 0, 0);
    assert_eq!(t.emit(&mut buf), Err(Error::OutOfRange("Terminate layer")));
    t.layer = 0;
    t.etype = 16;
    assert_eq!(t.emit(&mut buf), Err(Error::OutOfRange("Terminate etype")));
}

#[test]
fn op_header_reserved_fields() {
    let mut b = [0u8; TerminateRepr::MIN_LEN];
    for bit in 0..13 {
        b[2..4].copy_from_slice(&(1u16 << bit).to_be_bytes());
        assert_eq!(
            TerminateRepr::parse(&b),
            Err(Error::ReservedBits("Terminate control"))
        );
    }
    let mut a = [0u8; AtomicRequestRepr::LEN];
    for bit in 4..32 {
        a[0..4].copy_from_slice(&(1u32 << bit).to_be_bytes());
        assert_eq!(
            AtomicRequestRepr::parse(&a),
            Err(Error::ReservedBits("Atomic Request"))
        );
    }
    for op in 3u32..16 {
        a[0..4].copy_from_slice(&op.to_be_bytes());
        assert_eq!(
            AtomicRequestRepr::parse(&a),
            Err(Error::Malformed(ERR_ATOMIC_OPCODE))
        );
    }
    // D announces a copied header that is not all there: its own T bit sets the length.
    let mut t = vec![0x10, 0x02, 0x40, 0x00, 0x00, 0x10, 0x41];
    t.resize(4 + 2 + 17, 0);
    assert_eq!(
        TerminateRepr::parse(&t),
        Err(Error::Truncated { need: 24, have: 23 })
    );
    t[6] = 0xc1;
    assert!(TerminateRepr::parse(&t).is_ok());
    assert_eq!(
        TerminateRepr::parse(&[0x00, 0x00, 0x20, 0x00, 1, 2]),
        Err(Error::Truncated { need: 32, have: 6 })
    );
    assert_eq!(
        TerminatedDdp::new(0, &[]),
        Err(Error::Truncated { need: 14, have: 0 })
    );
}

#[test]
fn ddp_repr_is_ulp_agnostic() {
    // DDP alone does not interpret byte 1, so a non-RDMAP ULP value round-trips.
    let r = ddp::Repr {
        last: false,
        ulp_ctrl: 0xff,
        placement: Placement::Untagged {
            inval_stag: 1,
            qn: 2,
            msn: 3,
            mo: 4,
        },
    };
    let mut b = [0u8; UNTAGGED_HEADER_LEN + 2];
    r.emit(&mut ddp::Packet::new_unchecked(&mut b[..]));
    let p = ddp::Packet::new_checked(&b[..]).unwrap();
    assert_eq!(ddp::Repr::parse(&p), Ok(r));
    assert_eq!(p.payload().len(), 2);
    assert!(SegmentRepr::parse(&b).is_err());
}

fn sample_datagram(crc: bool) -> (SegmentRepr, Vec<u8>) {
    let seg = SegmentRepr::untagged(Opcode::Send, true, qn_for(77, 0), 12, 0);
    (seg, datagram::encode(&seg, b"payload bytes", crc))
}

#[test]
fn datagram_crc_byte_order_and_every_corruption() {
    let (seg, d) = sample_datagram(true);
    let n = d.len();
    assert_eq!(d[n - CRC_LEN..], crc32c(&d[..n - CRC_LEN]).to_le_bytes());
    assert_eq!(
        datagram::trailer(true, &[&d[..10], &d[10..n - CRC_LEN]]),
        d[n - CRC_LEN..]
    );
    assert_eq!(datagram::parse(&d, true), Ok((seg, 18..n - CRC_LEN)));
    for i in 0..n {
        for bit in 0..8 {
            let mut bad = d.clone();
            bad[i] ^= 1 << bit;
            match datagram::parse(&bad, true) {
                Err(Error::BadCrc { computed, received }) => {
                    assert_eq!(computed, crc32c(&bad[..n - CRC_LEN]));
                    assert_eq!(
                        received,
                        u32::from_le_bytes(bad[n - CRC_LEN..].try_into().unwrap())
                    );
                }
                other => panic!("byte {i} bit {bit}: {other:?}"),
            }
        }
        let mut bad = d.clone();
        bad[i] = !bad[i];
        assert!(matches!(
            datagram::parse(&bad, true),
            Err(Error::BadCrc { .. })
        ));
    }
    // CRC off: the trailer is zero when sent and ignored when received.
    let (_, plain) = sample_datagram(false);
    assert_eq!(plain[n - CRC_LEN..], [0; 4]);
    assert_eq!(datagram::parse(&plain, false), Ok((seg, 18..n - CRC_LEN)));
    assert_eq!(datagram::parse(&d, false), Ok((seg, 18..n - CRC_LEN)));
    assert!(matches!(
        datagram::parse(&plain, true),
        Err(Error::BadCrc { received: 0, .. })
    ));
}

#[test]
fn datagram_lengths() {
    let (_, d) = sample_datagram(true);
    for n in 0..UNTAGGED_HEADER_LEN + CRC_LEN {
        let want = Error::Truncated {
            need: if n == 0 { 18 } else { 22 },
            have: n,
        };
        assert_eq!(datagram::parse(&d[..n], true), Err(want.clone()));
        assert_eq!(datagram::parse(&d[..n], false), Err(want));
    }
    let seg = SegmentRepr::tagged(Opcode::RdmaWrite, true, 1, 0);
    let max = vec![7u8; MAX_DATAGRAM - TAGGED_HEADER_LEN - CRC_LEN];
    let big = datagram::encode(&seg, &max, true);
    assert_eq!(big.len(), MAX_DATAGRAM);
    assert_eq!(
        datagram::parse(&big, true),
        Ok((seg, TAGGED_HEADER_LEN..MAX_DATAGRAM - CRC_LEN))
    );
    let over = [max.as_slice(), &[0]].concat();
    assert_eq!(
        datagram::try_encode(&seg, &over, true),
        Err(Error::BadLength(MAX_DATAGRAM + 1))
    );
    let mut huge = big.clone();
    huge.push(0);
    assert_eq!(
        datagram::parse(&huge, false),
        Err(Error::BadLength(MAX_DATAGRAM + 1))
    );
}

// ---- properties ----

fn arb_segment() -> impl Strategy<Value = SegmentRepr> {
    (
        prop::sample::select(Opcode::ALL.to_vec()),
        any::<bool>(),
        any::<u32>(),
        any::<u64>(),
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(|(opcode, last, stag, to, qpn_bits, msn, mo)| {
            let placement = if opcode.is_tagged() {
                Placement::Tagged { stag, offset: to }
            } else {
                Placement::Untagged {
                    inval_stag: if opcode.carries_inval_stag() { stag } else { 0 },
                    qn: (qpn_bits & !3) | opcode.queue(),
                    msn,
                    mo,
                }
            };
            SegmentRepr {
                opcode,
                last,
                placement,
            }
        })
}

fn arb_placement() -> impl Strategy<Value = Placement> {
    prop_oneof![
        (any::<u32>(), any::<u64>()).prop_map(|(stag, offset)| Placement::Tagged { stag, offset }),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()).prop_map(
            |(inval_stag, qn, msn, mo)| Placement::Untagged {
                inval_stag,
                qn,
                msn,
                mo
            }
        ),
    ]
}

fn arb_terminate() -> impl Strategy<Value = TerminateRepr> {
    (
        0u8..16,
        0u8..16,
        any::<u8>(),
        any::<bool>(),
        prop::option::of((any::<u16>(), any::<bool>(), any::<[u8; 18]>())),
        prop::option::of(any::<[u8; 28]>()),
    )
        .prop_map(|(layer, etype, ecode, m, d, rdmap)| TerminateRepr {
            layer,
            etype,
            ecode,
            segment_len_valid: m,
            ddp: d.map(|(len, tagged, mut h)| {
                h[0] = if tagged { h[0] | 0x80 } else { h[0] & 0x7f };
                TerminatedDdp::new(len, &h).unwrap()
            }),
            rdmap,
        })
}

fn arb_atomic_request() -> impl Strategy<Value = AtomicRequestRepr> {
    (
        prop::sample::select(vec![
            AtomicOp::FetchAdd,
            AtomicOp::Swap,
            AtomicOp::CompareSwap,
        ]),
        any::<(u32, u32, u64)>(),
        any::<(u64, u64, u64, u64)>(),
    )
        .prop_map(
            |(op, (request_id, stag, offset), (asd, asm, cd, cm))| AtomicRequestRepr {
                op,
                request_id,
                stag,
                offset,
                add_swap_data: asd,
                add_swap_mask: asm,
                compare_data: cd,
                compare_mask: cm,
            },
        )
}

fn arb_op_header() -> impl Strategy<Value = (Opcode, OpHeader)> {
    prop_oneof![
        any::<(u32, u64, u32, u32, u64)>().prop_map(|(a, b, c, d, e)| (
            Opcode::ReadRequest,
            OpHeader::ReadRequest(ReadRequestRepr {
                sink_stag: a,
                sink_to: b,
                len: c,
                src_stag: d,
                src_to: e
            })
        )),
        arb_terminate().prop_map(|t| (Opcode::Terminate, OpHeader::Terminate(t))),
        arb_atomic_request().prop_map(|a| (Opcode::AtomicRequest, OpHeader::AtomicRequest(a))),
        any::<(u32, u64)>().prop_map(|(request_id, original)| (
            Opcode::AtomicResponse,
            OpHeader::AtomicResponse(AtomicResponseRepr {
                request_id,
                original
            })
        )),
        (any::<bool>(), any::<u64>()).prop_map(|(se, data)| (
            if se {
                Opcode::ImmediateDataSolicited
            } else {
                Opcode::ImmediateData
            },
            OpHeader::ImmediateData(ImmediateDataRepr { data })
        )),
        prop::sample::select(vec![Opcode::RdmaWrite, Opcode::Send, Opcode::ReadResponse])
            .prop_map(|op| (op, OpHeader::None)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ddp_repr_round_trip(last in any::<bool>(), ulp_ctrl in any::<u8>(), placement in arb_placement(),
                           payload in prop::collection::vec(any::<u8>(), 0..32)) {
        let r = ddp::Repr { last, ulp_ctrl, placement };
        let mut b = vec![0xffu8; r.header_len()];
        b.extend_from_slice(&payload);
        r.emit(&mut ddp::Packet::new_unchecked(&mut b[..]));
        let p = ddp::Packet::new_checked(&b[..]).unwrap();
        prop_assert_eq!(ddp::Repr::parse(&p), Ok(r));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn segment_round_trip(seg in arb_segment(), payload in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut b = vec![0u8; seg.header_len() + payload.len()];
        let hl = seg.emit(&mut b).unwrap();
        b[hl..].copy_from_slice(&payload);
        let (got, rest) = SegmentRepr::parse(&b).unwrap();
        prop_assert_eq!(got, seg);
        prop_assert_eq!(rest, &payload[..]);
    }

    #[test]
    fn op_header_round_trip((opcode, h) in arb_op_header(), tail in prop::collection::vec(any::<u8>(), 0..8)) {
        let mut b = vec![0u8; h.buffer_len()];
        prop_assert_eq!(h.emit(&mut b), Ok(h.buffer_len()));
        b.extend_from_slice(&tail);
        let (got, rest) = OpHeader::parse(opcode, &b).unwrap();
        prop_assert_eq!(got, h);
        prop_assert_eq!(rest, &tail[..]);
    }

    #[test]
    fn datagram_round_trip(seg in arb_segment(), crc in any::<bool>(),
                           payload in prop::collection::vec(any::<u8>(), 0..256)) {
        let d = datagram::encode(&seg, &payload, crc);
        let n = d.len();
        let want = if crc { crc32c(&d[..n - CRC_LEN]).to_le_bytes() } else { [0; 4] };
        prop_assert_eq!(&d[n - CRC_LEN..], &want[..]);
        let (got, range) = datagram::parse(&d, crc).unwrap();
        prop_assert_eq!(got, seg);
        prop_assert_eq!(&d[range], &payload[..]);
    }

    #[test]
    fn qn_split_round_trip(qpn in 0..=MAX_QPN, queue in 0u32..4) {
        prop_assert_eq!(split_qn(qn_for(qpn, queue)), (qpn, queue));
    }

    /// Arbitrary bytes never panic a decoder, and whatever decodes re-encodes to the same bytes.
    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..96), crc in any::<bool>()) {
        if let Ok((seg, rest)) = SegmentRepr::parse(&bytes) {
            let mut out = vec![0u8; seg.header_len()];
            seg.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..], &bytes[..seg.header_len()]);
            if let Ok((h, _)) = OpHeader::parse(seg.opcode, rest) {
                let mut out = vec![0u8; h.buffer_len()];
                h.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..], &rest[..h.buffer_len()]);
            }
        }
        for op in Opcode::ALL {
            if let Ok((h, _)) = OpHeader::parse(op, &bytes) {
                let mut out = vec![0u8; h.buffer_len()];
                h.emit(&mut out).unwrap();
                prop_assert_eq!(&out[..], &bytes[..h.buffer_len()]);
            }
        }
        if let Ok((seg, range)) = datagram::parse(&bytes, crc) {
            let again = datagram::encode(&seg, &bytes[range], crc);
            let body = bytes.len() - CRC_LEN;
            prop_assert_eq!(&again[..body], &bytes[..body]);
        }
        let _ = ddp::Packet::new_checked(&bytes[..]).map(|p| ddp::Repr::parse(&p));
    }

    /// Arbitrary bytes behind a valid RDMAP control word, so the deeper checks are reached.
    #[test]
    fn plausible_segments(mut bytes in prop::collection::vec(any::<u8>(), 14..40),
                          op in prop::sample::select(Opcode::ALL.to_vec())) {
        bytes[0] = (bytes[0] & 0xc0) | 1;
        bytes[1] = op.control_byte();
        match SegmentRepr::parse(&bytes) {
            Ok((seg, _)) => prop_assert_eq!(seg.opcode, op),
            Err(Error::Truncated { .. } | Error::Malformed(_) | Error::ReservedBits(_)) => {}
            Err(e) => prop_assert!(false, "unexpected {:?}", e),
        }
    }
}
