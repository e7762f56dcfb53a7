//! Hand-built MPA FPDUs, with markers and without, and the decoder, checked octet by octet
//! (the start-up frames are `startup_tests`').

use super::*;
use crate::wire::Error;

/// CRC32c computed bit by bit (reflected polynomial 0x82F63B78), independent of the `crc32c`
/// crate, so the byte order on the wire is checked against first principles.
fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

pub(super) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

pub(super) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// Appends the CRC the RFC asks for: CRC32c of everything before it, little-endian octets.
fn with_crc(mut fpdu: Vec<u8>) -> Vec<u8> {
    let crc = crc32c_bitwise(&fpdu);
    fpdu.extend_from_slice(&crc.to_le_bytes());
    fpdu
}

fn encode_all(markers: bool, crc: bool, ulpdus: &[&[u8]]) -> Vec<u8> {
    let mut tx = FpduSender::new(markers, crc);
    let mut out = Vec::new();
    for u in ulpdus {
        tx.encode(&[u], &mut out).unwrap();
    }
    out
}

fn decode_all(markers: bool, crc: bool, wire: &[u8], chunk: usize) -> Vec<Vec<u8>> {
    let mut rx = FpduDecoder::new(markers, crc);
    let mut got = Vec::new();
    for piece in wire.chunks(chunk.max(1)) {
        rx.push(piece);
        while let Some(u) = rx.next_ulpdu().unwrap() {
            got.push(u.to_vec());
        }
    }
    assert_eq!(rx.buffered(), 0);
    got
}

// ---- FPDUs without markers ----

#[test]
fn fpdus_without_markers_every_pad() {
    // (ULPDU, expected pad)
    for (len, pad) in [
        (0, 2),
        (1, 1),
        (2, 0),
        (3, 3),
        (4, 2),
        (5, 1),
        (6, 0),
        (7, 3),
    ] {
        assert_eq!(pad_len(len), pad);
        let u = pattern(len);
        let body = cat(&[&(len as u16).to_be_bytes(), &u, &[0; 3][..pad]]);
        assert_eq!(body.len() % 4, 0);

        let off = cat(&[&body, &[0; 4]]);
        assert_eq!(encode_all(false, false, &[&u]), off, "len {len} crc off");
        let on = with_crc(body);
        assert_eq!(encode_all(false, true, &[&u]), on, "len {len} crc on");

        let tx = FpduSender::new(false, true);
        assert_eq!(tx.wire_len(len), on.len());
        assert_eq!(decode_all(false, true, &on, 1), vec![u.clone()]);
        assert_eq!(decode_all(false, false, &off, 3), vec![u]);
    }
}

#[test]
fn crc_is_little_endian_crc32c_of_length_ulpdu_and_pad() {
    // The smallest FPDU: ULPDU_Length 0 and two pad octets, four zero octets in all.
    let fpdu = encode_all(false, true, &[&[]]);
    assert_eq!(fpdu, [0, 0, 0, 0, 0xc7, 0x4b, 0x67, 0x48]);
    assert_eq!(crc32c_bitwise(&[0; 4]), 0x4867_4bc7);

    let zeros = [0u8; 32];
    let fpdu = encode_all(false, true, &[&zeros]);
    assert_eq!(fpdu.len(), 2 + 32 + 2 + 4);
    assert_eq!(&fpdu[..2], &[0x00, 0x20]);
    let crc = crc32c_bitwise(&fpdu[..36]);
    assert_eq!(&fpdu[36..], &crc.to_le_bytes());
    // Check the reference itself against RFC 3720 B.4: 32 zero octets give aa 36 91 8a.
    assert_eq!(
        crc32c_bitwise(&zeros).to_le_bytes(),
        [0xaa, 0x36, 0x91, 0x8a]
    );
}

#[test]
fn gathered_parts_make_one_ulpdu() {
    let mut tx = FpduSender::new(false, true);
    let mut a = Vec::new();
    tx.encode(&[b"ab", b"", b"cde"], &mut a).unwrap();
    assert_eq!(a, with_crc(cat(&[&[0, 5], b"abcde", &[0]])));
}

#[test]
fn zero_copy_frame_matches_encode() {
    for len in 0..12 {
        let u = pattern(len);
        let (a, b) = u.split_at(len / 2);
        for crc in [false, true] {
            let mut tx = FpduSender::new(false, crc);
            let f = tx.frame(&[a, b]).unwrap();
            let framed = cat(&[&f.prefix, a, b, f.suffix()]);
            assert_eq!(framed, encode_all(false, crc, &[&u]));
            assert_eq!(tx.stream_pos(), framed.len() as u64);
            assert_eq!(f.suffix().len(), pad_len(len) + CRC_LEN);
        }
    }
    let mut tx = FpduSender::new(true, true);
    assert!(matches!(tx.frame(&[b"x"]), Err(Error::Malformed(_))));
}

#[test]
fn oversized_ulpdus_are_refused() {
    let big = vec![0u8; MAX_ULPDU + 1];
    let mut out = Vec::new();
    let mut tx = FpduSender::new(false, true);
    assert_eq!(
        tx.encode(&[&big], &mut out),
        Err(Error::BadLength(MAX_ULPDU + 1))
    );
    assert_eq!(
        tx.frame(&[&big[..MAX_ULPDU], b"x"]),
        Err(Error::BadLength(MAX_ULPDU + 1))
    );
    assert!(out.is_empty());
    assert_eq!(tx.stream_pos(), 0);
    tx.encode(&[&big[..MAX_ULPDU]], &mut out).unwrap();
    assert_eq!(out.len(), 2 + MAX_ULPDU + 3 + 4);

    // With markers, 65535 octets at stream offset 0 would need a 66044-octet FPDUPTR.
    let mut tx = FpduSender::new(true, true);
    let mut out = Vec::new();
    assert_eq!(
        tx.encode(&[&big[..MAX_ULPDU]], &mut out),
        Err(Error::BadLength(MAX_ULPDU))
    );
    tx.encode(&[&big[..MAX_ULPDU_MARKERS]], &mut out).unwrap();
    assert_eq!(
        decode_all(true, true, &out, 4096),
        vec![big[..MAX_ULPDU_MARKERS].to_vec()]
    );
}

// ---- FPDUs with markers ----

fn marker(ptr: u16) -> [u8; 4] {
    let p = ptr.to_be_bytes();
    [0, 0, p[0], p[1]]
}

#[test]
fn first_fpdu_starts_with_a_zero_marker() {
    let u = [1, 2, 3, 4];
    let want = with_crc(cat(&[&marker(0), &[0, 4, 1, 2, 3, 4, 0, 0]]));
    assert_eq!(want.len(), 16);
    assert_eq!(encode_all(true, true, &[&u]), want);
    assert_eq!(FpduSender::new(true, true).wire_len(4), 16);
    assert_eq!(decode_all(true, true, &want, 1), vec![u.to_vec()]);
}

#[test]
fn fpdu_spanning_one_marker() {
    let u = pattern(600);
    let want = with_crc(cat(&[
        &marker(0),
        &[0x02, 0x58],
        &u[..506],
        &marker(508), // at stream offset 512, 508 octets after ULPDU_Length (offset 4)
        &u[506..],
        &[0, 0],
    ]));
    assert_eq!(want.len(), 616);
    assert_eq!(&want[512..516], &[0, 0, 0x01, 0xfc]);
    assert_eq!(encode_all(true, true, &[&u]), want);
    assert_eq!(decode_all(true, true, &want, 7), vec![u]);
}

#[test]
fn fpdu_spanning_several_markers() {
    let u = pattern(1500);
    let want = cat(&[
        &marker(0),
        &[0x05, 0xdc],
        &u[..506],
        &marker(508),
        &u[506..1014],
        &marker(1020),
        &u[1014..],
        &[0, 0],
        &[0; 4],
    ]);
    assert_eq!(want.len(), 1520);
    assert_eq!(encode_all(true, false, &[&u]), want);
    assert_eq!(decode_all(true, false, &want, 100), vec![u.clone()]);
    assert_eq!(decode_all(true, false, &want, 1), vec![u]);
}

#[test]
fn second_fpdu_mid_period_has_inner_markers_only() {
    // The first FPDU takes 16 octets, so the second starts at stream offset 16: its first
    // marker is 496 octets in, FPDUPTR 496, and there is no leading marker.
    let a = [9u8; 4];
    let b = pattern(700);
    let want = cat(&[
        &with_crc(cat(&[&marker(0), &[0, 4], &a, &[0, 0]])),
        &with_crc(cat(&[
            &[0x02, 0xbc],
            &b[..494],
            &marker(496),
            &b[494..],
            &[0, 0],
        ])),
    ]);
    assert_eq!(&want[512..516], &[0, 0, 0x01, 0xf0]);
    assert_eq!(encode_all(true, true, &[&a, &b]), want);
    assert_eq!(decode_all(true, true, &want, 5), vec![a.to_vec(), b]);
}

#[test]
fn marker_on_an_fpdu_boundary_leads_the_next_fpdu() {
    // 502 octets: 4 (marker) + 2 + 502 + 0 pad + 4 (CRC) = 512, so the next FPDU starts exactly
    // on the marker at offset 512, which then has FPDUPTR 0 and is covered by the next CRC.
    let a = pattern(502);
    let b = [0xab, 0xcd];
    let first = with_crc(cat(&[&marker(0), &[0x01, 0xf6], &a]));
    assert_eq!(first.len(), 512);
    let second = with_crc(cat(&[&marker(0), &[0, 2], &b]));
    let want = cat(&[&first, &second]);
    assert_eq!(&want[512..518], &[0, 0, 0, 0, 0, 2]);
    assert_eq!(second.len(), 4 + 4 + 4);
    assert_eq!(encode_all(true, true, &[&a, &b]), want);
    for chunk in [1, 3, 512, 513, 4096] {
        assert_eq!(
            decode_all(true, true, &want, chunk),
            vec![a.clone(), b.to_vec()]
        );
    }
}

#[test]
fn marker_between_pad_and_crc() {
    // After the leading marker, 2 + 505 + 1 pad = 508 octets end exactly at offset 512: the
    // marker there goes before the CRC, points back 508 octets, and the CRC covers it.
    let u = pattern(505);
    let want = with_crc(cat(&[&marker(0), &[0x01, 0xf9], &u, &[0], &marker(508)]));
    assert_eq!(want.len(), 520);
    assert_eq!(&want[512..516], &[0, 0, 0x01, 0xfc]);
    assert_eq!(encode_all(true, true, &[&u]), want);
    assert_eq!(decode_all(true, true, &want, 1), vec![u.clone()]);

    // Without pad: 506 octets end on the same spot.
    let u = pattern(506);
    let want = cat(&[&marker(0), &[0x01, 0xfa], &u, &marker(508), &[0; 4]]);
    assert_eq!(encode_all(true, false, &[&u]), want);
    assert_eq!(decode_all(true, false, &want, 64), vec![u]);
}

#[test]
fn markers_never_split_the_length_or_the_crc() {
    for start in (0..512u64).step_by(4) {
        for len in 0..1100 {
            let l = marker::Layout::new(true, start, len);
            for m in l.marker_offsets() {
                assert_eq!(m % 4, 0);
                assert!(
                    m + MARKER_LEN <= l.wire_len - CRC_LEN,
                    "marker in CRC: {start} {len}"
                );
                assert!(
                    m == 0 || m >= l.header_off + LENGTH_LEN,
                    "marker in length: {start}"
                );
            }
        }
    }
}

// ---- decoder: damaged streams ----

#[test]
fn every_flipped_octet_is_caught_by_the_crc() {
    for markers in [false, true] {
        let a = pattern(700);
        let wire = encode_all(markers, true, &[&a, b"tail"]);
        for i in 0..wire.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut bad = wire.clone();
                bad[i] ^= flip;
                let mut rx = FpduDecoder::new(markers, true);
                rx.push(&bad);
                let mut out = Vec::new();
                let end = loop {
                    match rx.next_ulpdu() {
                        Ok(Some(u)) => out.push(u.to_vec()),
                        other => break other.map(|_| ()),
                    }
                };
                // Whatever was delivered is intact, and the damaged FPDU never is.
                let originals = [a.clone(), b"tail".to_vec()];
                assert!(out.len() < 2, "markers {markers} octet {i} flip {flip:#x}");
                assert!(out.iter().zip(&originals).all(|(g, w)| g == w));
                // A longer length just waits for octets that never come; anything else fails.
                if end.is_ok() {
                    assert!(rx.buffered() > 0);
                }
            }
        }
    }
}

#[test]
fn a_bad_fpduptr_is_refused_without_crc() {
    let u = pattern(1500);
    let wire = encode_all(true, false, &[&u]);
    let mut bad = wire.clone();
    bad[1024 + 2] ^= 0x10;
    let mut rx = FpduDecoder::new(true, false);
    rx.push(&bad);
    assert_eq!(rx.next_ulpdu(), Err(Error::BadMarker { offset: 1024 }));
    // Fatal: the same error again, whatever arrives.
    rx.push(&[0; 64]);
    assert_eq!(rx.next_ulpdu(), Err(Error::BadMarker { offset: 1024 }));

    let mut lead = wire.clone();
    lead[3] = 4;
    let mut rx = FpduDecoder::new(true, false);
    rx.push(&lead[..4]);
    assert_eq!(rx.next_ulpdu(), Err(Error::BadMarker { offset: 0 }));

    // The low two bits of FPDUPTR and the reserved half are ignored on receipt (RFC 5044 §4.3).
    let mut lax = wire.clone();
    lax[512 + 3] |= 3;
    lax[512] = 0xff;
    lax[3] = 2;
    assert_eq!(decode_all(true, false, &lax, 9), vec![u]);
}

#[test]
fn inconsistent_lengths_are_refused() {
    // ULPDU_Length shortened by 4 with CRCs off: that FPDU cannot be told from a good one, but
    // the stream after it is framed 4 octets early and the next markers give it away.
    let a = pattern(1500);
    let b = pattern(900);
    let wire = encode_all(true, false, &[&a, &b, &b, &b, &b, &b]);
    let mut bad = wire.clone();
    bad[4..6].copy_from_slice(&1496u16.to_be_bytes());
    let mut rx = FpduDecoder::new(true, false);
    rx.push(&bad);
    let err = loop {
        match rx.next_ulpdu() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("damaged stream accepted"),
            Err(e) => break e,
        }
    };
    assert!(
        matches!(err, Error::BadMarker { .. } | Error::BadLength(_)),
        "{err:?}"
    );

    // With CRC the damaged FPDU itself is refused.
    let wire = encode_all(true, true, &[&a]);
    let mut bad = wire.clone();
    bad[4..6].copy_from_slice(&1496u16.to_be_bytes());
    let mut rx = FpduDecoder::new(true, true);
    rx.push(&bad);
    assert!(matches!(rx.next_ulpdu(), Err(Error::BadCrc { .. })));

    // A length no marker could point back over fails as soon as it is read.
    let mut rx = FpduDecoder::new(true, true);
    rx.push(&[0, 0, 0, 0, 0xff, 0xff]);
    assert_eq!(rx.next_ulpdu(), Err(Error::BadLength(65535)));

    // And so does one above the advertised MULPDU.
    let mut rx = FpduDecoder::new(false, true);
    rx.set_max_ulpdu(1024);
    rx.push(&[0x04, 0x01]);
    assert_eq!(rx.next_ulpdu(), Err(Error::BadLength(1025)));
}

#[test]
fn decoder_reads_straight_from_a_reader() {
    let wire = encode_all(true, true, &[&pattern(3000), b"x", &pattern(40)]);
    let mut src = &wire[..];
    let mut rx = FpduDecoder::new(true, true);
    let mut got = Vec::new();
    while rx.read_from(&mut src, 333).unwrap() > 0 {
        while let Some(u) = rx.next_ulpdu().unwrap() {
            got.push(u.to_vec());
        }
    }
    assert_eq!(got, vec![pattern(3000), b"x".to_vec(), pattern(40)]);
    assert_eq!(rx.stream_pos(), wire.len() as u64);
    assert_eq!(rx.buffered(), 0);
}

// ---- ULPDUs taken past the decoder ----

/// Decodes `wire` pushed `chunk` octets at a time; every `every`-th incomplete FPDU seen is
/// bypassed, its rest taken from the stream in runs of at most `run` octets.
fn decode_bypassing(
    crc: bool,
    wire: &[u8],
    chunk: usize,
    every: usize,
    run: usize,
) -> std::result::Result<(Vec<Vec<u8>>, usize), Error> {
    let mut rx = FpduDecoder::new(false, crc);
    let (mut got, mut at, mut seen, mut bypassed) = (Vec::new(), 0, 0, 0);
    loop {
        let n = chunk.min(wire.len() - at);
        rx.push(&wire[at..at + n]);
        at += n;
        loop {
            while let Some(u) = rx.next_ulpdu()? {
                got.push(u.to_vec());
            }
            let Some((len, so_far)) = rx.partial() else {
                break;
            };
            seen += 1;
            if seen % every != 0 {
                break;
            }
            let mut ulpdu = so_far.to_vec();
            let mut b = rx.bypass();
            assert_eq!(b.rest(), len - ulpdu.len());
            assert!(rx.partial().is_none() && rx.next_ulpdu()?.is_none());
            while b.rest() > 0 {
                let k = b.rest().min(run);
                b.took(&wire[at..at + k]);
                ulpdu.extend_from_slice(&wire[at..at + k]);
                at += k;
            }
            rx.resume(b);
            got.push(ulpdu);
            bypassed += 1;
        }
        if at == wire.len() {
            while let Some(u) = rx.next_ulpdu()? {
                got.push(u.to_vec());
            }
            assert_eq!(rx.buffered(), 0);
            assert_eq!(rx.stream_pos(), wire.len() as u64);
            return Ok((got, bypassed));
        }
    }
}

#[test]
fn ulpdus_taken_past_the_decoder_come_out_whole_at_every_cut() {
    let ulpdus: Vec<Vec<u8>> = [1, 2, 3, 4, 5, 1000, 60_000, 7, 65_000, 0, 4093]
        .iter()
        .map(|&n| pattern(n))
        .collect();
    let parts: Vec<&[u8]> = ulpdus.iter().map(Vec::as_slice).collect();
    for crc in [false, true] {
        let wire = encode_all(false, crc, &parts);
        for chunk in [1, 3, 6, 100, 4096, 70_000] {
            for every in [1, 2, 3] {
                for run in [1, 5, 65_536] {
                    let (got, bypassed) = decode_bypassing(crc, &wire, chunk, every, run)
                        .unwrap_or_else(|e| panic!("crc {crc} chunk {chunk}: {e:?}"));
                    assert!(
                        got == ulpdus,
                        "crc {crc} chunk {chunk} every {every} run {run}"
                    );
                    if chunk < 60_000 && every == 1 {
                        assert!(bypassed >= 2, "chunk {chunk}: {bypassed}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_flipped_octet_in_a_bypassed_ulpdu_fails_the_crc() {
    let big = pattern(5000);
    let parts: [&[u8]; 3] = [b"ab", &big, b"cd"];
    let clean = encode_all(false, true, &parts);
    let (got, bypassed) = decode_bypassing(true, &clean, 1000, 1, 300).unwrap();
    assert_eq!((got.len(), bypassed), (3, 1));
    // Octets of the big FPDU: its length, the part in the decoder, the part taken past it,
    // the pad and the CRC.
    let start = 2 + 2 + super::pad_len(2) + 4;
    for at in [
        start,
        start + 2 + 10,
        start + 2 + 2000,
        start + 2 + 5000 + 3,
    ] {
        let mut wire = clean.clone();
        wire[at] ^= 0x10;
        match decode_bypassing(true, &wire, 1000, 1, 300) {
            Err(Error::BadCrc { .. }) | Err(Error::BadLength(_)) => {}
            other => panic!("octet {at}: {other:?}"),
        }
        // Unchecked, the flip passes.
        if at > start + 1 {
            let wire = {
                let mut w = encode_all(false, false, &parts);
                w[at] ^= 0x10;
                w
            };
            assert!(decode_bypassing(false, &wire, 1000, 1, 300).is_ok());
        }
    }
}

#[test]
fn nothing_is_bypassed_with_markers_or_before_the_length_arrives() {
    let wire = encode_all(true, true, &[&pattern(3000)]);
    let mut rx = FpduDecoder::new(true, true);
    rx.push(&wire[..1000]);
    assert_eq!(rx.next_ulpdu(), Ok(None));
    assert!(rx.partial().is_none());
    let wire = encode_all(false, true, &[&pattern(3000)]);
    let mut rx = FpduDecoder::new(false, true);
    rx.push(&wire[..1]);
    assert!(rx.partial().is_none());
    rx.push(&wire[1..2]);
    assert_eq!(rx.partial(), Some((3000, &[][..])));
    // Complete but for its pad and CRC: nothing of the ULPDU is left to take.
    rx.push(&wire[2..3002]);
    assert!(rx.partial().is_none());
}

#[test]
fn a_bypassed_rest_and_what_follows_come_in_one_read() {
    let big = pattern(5000);
    let wire = encode_all(false, true, &[&big, b"next"]);
    let mut rx = FpduDecoder::new(false, true);
    rx.push(&wire[..100]);
    assert_eq!(rx.next_ulpdu(), Ok(None));
    let (len, so_far) = rx.partial().unwrap();
    let mut ulpdu = so_far.to_vec();
    let mut b = rx.bypass();
    let mut rest = vec![0; len - ulpdu.len()];
    let mut src = &wire[100..];
    let (mine, after) = rx.read_after(&mut src, &mut rest, 64 * 1024).unwrap();
    assert_eq!((mine, mine + after), (rest.len(), wire.len() - 100));
    b.took(&rest);
    ulpdu.extend_from_slice(&rest);
    assert!(ulpdu == big);
    rx.resume(b);
    assert_eq!(rx.check_bypassed(), Ok(true));
    assert_eq!(rx.next_ulpdu(), Ok(Some(&b"next"[..])));
    assert_eq!(rx.next_ulpdu(), Ok(None));
    assert_eq!(rx.stream_pos(), wire.len() as u64);
}
