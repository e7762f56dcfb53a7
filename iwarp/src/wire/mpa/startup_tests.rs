//! Hand-built MPA start-up frames, checked octet by octet, and their negotiation.

use super::tests::{cat, pattern};
use super::*;
use crate::wire::Error;

// ---- start-up frames ----

fn request(flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
    let len = (pd.len() as u16).to_be_bytes();
    cat(&[REQ_KEY, &[flags, rev], &len, pd])
}

fn reply(flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
    let len = (pd.len() as u16).to_be_bytes();
    cat(&[REP_KEY, &[flags, rev], &len, pd])
}

fn repr(kind: FrameKind, markers: bool, crc: bool) -> StartupRepr {
    StartupRepr {
        kind,
        markers,
        crc,
        reject: false,
        revision: 1,
        ird_ord: None,
        private_data: Vec::new(),
    }
}

/// Emits `r`, compares with `bytes`, parses `bytes` back (also with trailing octets) and checks
/// that every proper prefix asks for more.
fn check_frame(r: &StartupRepr, bytes: &[u8]) {
    assert_eq!(r.emit().unwrap(), bytes);
    assert_eq!(r.buffer_len(), bytes.len());
    assert_eq!(
        StartupRepr::parse(bytes).unwrap(),
        Some((r.clone(), bytes.len()))
    );
    let mut more = bytes.to_vec();
    more.extend_from_slice(&[0, 4, 1, 2, 3, 4, 0, 0]);
    assert_eq!(
        StartupRepr::parse(&more).unwrap(),
        Some((r.clone(), bytes.len()))
    );
    for cut in 0..bytes.len() {
        assert_eq!(StartupRepr::parse(&bytes[..cut]), Ok(None), "cut at {cut}");
    }
}

#[test]
fn request_rev1_crc_no_private_data() {
    let bytes = [
        0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6d,
        0x65, 0x40, 0x01, 0x00, 0x00,
    ];
    check_frame(&repr(FrameKind::Request, false, true), &bytes);
}

#[test]
fn reply_rev1_all_flags_with_private_data() {
    let mut r = repr(FrameKind::Reply, true, true);
    r.reject = true;
    r.private_data = b"hello".to_vec();
    let mut bytes = b"MPA ID Rep Frame".to_vec();
    bytes.extend_from_slice(&[0xe0, 0x01, 0x00, 0x05, b'h', b'e', b'l', b'l', b'o']);
    check_frame(&r, &bytes);
    let f = StartupFrame::new_checked(&bytes[..]).unwrap();
    assert!(f.markers() && f.crc() && f.reject() && !f.enhanced());
    assert_eq!(
        (f.revision(), f.pd_len(), f.private_data()),
        (1, 5, &b"hello"[..])
    );
}

#[test]
fn request_rev2_enhanced_ird_ord() {
    let r = StartupRepr {
        kind: FrameKind::Request,
        markers: false,
        crc: true,
        reject: false,
        revision: 2,
        ird_ord: Some(IrdOrd {
            ird: 16,
            ord: 8,
            peer_to_peer: true,
            zero_length_rtr: true,
            write_rtr: false,
            read_rtr: true,
        }),
        private_data: b"xy".to_vec(),
    };
    let bytes = request(0x50, 2, &[0xc0, 0x10, 0x40, 0x08, b'x', b'y']);
    check_frame(&r, &bytes);

    let mut w = r.clone();
    w.ird_ord = Some(IrdOrd {
        ird: 0x3fff,
        ord: 0x3fff,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: true,
        read_rtr: false,
    });
    w.private_data.clear();
    check_frame(&w, &request(0x50, 2, &[0x3f, 0xff, 0xbf, 0xff]));
}

#[test]
fn rev2_without_enhanced_flag_has_plain_private_data() {
    let mut r = repr(FrameKind::Reply, false, false);
    r.revision = 2;
    r.private_data = vec![1, 2, 3, 4, 5];
    check_frame(&r, &reply(0x00, 2, &[1, 2, 3, 4, 5]));
}

#[test]
fn private_data_of_512_octets() {
    let pd = pattern(512);
    let mut r = repr(FrameKind::Request, true, false);
    r.private_data = pd.clone();
    let bytes = request(0x80, 1, &pd);
    assert_eq!(&bytes[16..20], &[0x80, 0x01, 0x02, 0x00]);
    check_frame(&r, &bytes);

    // IRD/ORD count toward the 512.
    r.revision = 2;
    r.ird_ord = Some(IrdOrd {
        ird: 1,
        ord: 1,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: false,
        read_rtr: false,
    });
    assert_eq!(r.emit(), Err(Error::PrivateDataTooLong(516)));
    r.private_data.truncate(508);
    let mut pd2 = vec![0, 1, 0, 1];
    pd2.extend_from_slice(&pd[..508]);
    check_frame(&r, &request(0x90, 2, &pd2));
}

#[test]
fn emit_rejects_what_cannot_be_sent() {
    let mut r = repr(FrameKind::Request, false, false);
    r.private_data = vec![0; 513];
    assert_eq!(r.emit(), Err(Error::PrivateDataTooLong(513)));
    let mut r = repr(FrameKind::Request, false, false);
    r.revision = 3;
    assert_eq!(r.emit(), Err(Error::BadMpaRevision(3)));
    let io = IrdOrd {
        ird: 0x4000,
        ord: 0,
        peer_to_peer: false,
        zero_length_rtr: false,
        write_rtr: false,
        read_rtr: false,
    };
    let mut r = repr(FrameKind::Request, false, false);
    r.revision = 2;
    r.ird_ord = Some(io);
    assert!(matches!(r.emit(), Err(Error::OutOfRange(_))));
    r.revision = 1;
    r.ird_ord = Some(IrdOrd { ird: 1, ..io });
    assert!(matches!(r.emit(), Err(Error::Malformed(_))));
    let mut out = vec![9];
    assert!(r.emit_into(&mut out).is_err());
    assert_eq!(out, [9]);
}

#[test]
fn parse_errors() {
    // A wrong key is refused from its first wrong octet.
    assert_eq!(StartupRepr::parse(b"X"), Err(Error::BadMpaKey));
    assert_eq!(StartupRepr::parse(b"MPA ID Rx"), Err(Error::BadMpaKey));
    assert_eq!(StartupRepr::parse(b""), Ok(None));
    assert_eq!(StartupRepr::parse(b"MPA ID Re"), Ok(None));
    let mut bad = request(0, 1, &[]);
    bad[15] = b'E';
    assert_eq!(StartupRepr::parse(&bad), Err(Error::BadMpaKey));

    for bit in [0x01, 0x02, 0x04, 0x08] {
        assert!(matches!(
            StartupRepr::parse(&request(bit, 1, &[])),
            Err(Error::ReservedBits(_))
        ));
        assert!(matches!(
            StartupRepr::parse(&reply(bit, 2, &[])),
            Err(Error::ReservedBits(_))
        ));
    }
    for rev in [0, 3, 255] {
        assert_eq!(
            StartupRepr::parse(&request(0, rev, &[])),
            Err(Error::BadMpaRevision(rev))
        );
    }
    // Enhanced flag: reserved in revision 1, needs room for IRD/ORD in revision 2.
    let enhanced_rev1 = request(0x10, 1, &[0, 1, 0, 1]);
    assert!(matches!(
        StartupRepr::parse(&enhanced_rev1),
        Err(Error::ReservedBits(_))
    ));
    assert!(matches!(
        StartupRepr::parse(&request(0x10, 2, &[0, 1, 0])),
        Err(Error::Malformed(_))
    ));

    // PD_Length 513 is refused from the header alone, before any private data arrives.
    let mut big = request(0, 1, &[]);
    big[18..20].copy_from_slice(&513u16.to_be_bytes());
    assert_eq!(
        StartupRepr::parse(&big),
        Err(Error::PrivateDataTooLong(513))
    );
    big[18..20].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        StartupRepr::parse(&big),
        Err(Error::PrivateDataTooLong(65535))
    );
    assert!(matches!(
        StartupFrame::new_checked(&big[..]),
        Err(Error::Truncated { .. })
    ));
}

// ---- negotiation ----

#[test]
fn negotiate_truth_table() {
    for local_is_request in [true, false] {
        for bits in 0..16u8 {
            let (ml, mr, cl, cr) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
            let (lk, rk) = if local_is_request {
                (FrameKind::Request, FrameKind::Reply)
            } else {
                (FrameKind::Reply, FrameKind::Request)
            };
            let n = negotiate(&repr(lk, ml, cl), &repr(rk, mr, cr)).unwrap();
            let want = Negotiated {
                markers_tx: mr,
                markers_rx: ml,
                crc: cl || cr,
            };
            assert_eq!(
                n, want,
                "local request {local_is_request} M {ml}/{mr} C {cl}/{cr}"
            );
        }
    }
}

#[test]
fn negotiate_reject_and_misuse() {
    let req = repr(FrameKind::Request, false, false);
    let mut rej = repr(FrameKind::Reply, false, false);
    rej.reject = true;
    assert_eq!(negotiate(&req, &rej), Err(Error::MpaRejected));
    assert_eq!(negotiate(&rej, &req), Err(Error::MpaRejected));
    // R means nothing in a Request.
    let mut req_r = req.clone();
    req_r.reject = true;
    assert!(negotiate(&req_r, &repr(FrameKind::Reply, false, false)).is_ok());

    assert!(matches!(negotiate(&req, &req), Err(Error::Malformed(_))));
    let rep = repr(FrameKind::Reply, false, false);
    assert!(matches!(negotiate(&rep, &rep), Err(Error::Malformed(_))));

    let mut rep2 = rep.clone();
    rep2.revision = 2;
    assert_eq!(negotiate(&req, &rep2), Err(Error::BadMpaRevision(2)));
    let mut req2 = req.clone();
    req2.revision = 2;
    assert!(negotiate(&req2, &rep).is_ok());
    assert!(negotiate(&rep2, &req2).is_ok());
}
