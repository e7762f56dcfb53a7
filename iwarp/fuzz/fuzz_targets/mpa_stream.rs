//! MPA FPDU streams.
//!
//! The first octet picks markers, CRC and a cut size. The rest is fed to a decoder as received
//! octets (it must never panic, and its buffer stays bounded), and is also read as a list of
//! ULPDUs that are framed, cut and decoded again, which must give them back unchanged.
#![no_main]

use iwarp::wire::mpa::{FpduDecoder, FpduSender, MAX_FPDU_LEN, MAX_ULPDU_MARKERS};
use libfuzzer_sys::fuzz_target;

fn drain(rx: &mut FpduDecoder, out: &mut Vec<Vec<u8>>) -> bool {
    loop {
        match rx.next_ulpdu() {
            Ok(Some(u)) => out.push(u.to_vec()),
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
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
    let mut rest = &wire[..];
    for &n in cuts.iter().cycle() {
        if rest.is_empty() {
            break;
        }
        let (piece, tail) = rest.split_at(n.min(rest.len()));
        rx.push(piece);
        assert!(drain(&mut rx, &mut got));
        rest = tail;
    }
    assert_eq!(got, ulpdus);
    assert_eq!(rx.buffered(), 0);
});
