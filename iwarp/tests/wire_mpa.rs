//! Property tests of MPA framing: whatever the ULPDUs, flags and TCP cut points, the decoder
//! gives back exactly what the sender framed, refuses damage, and never panics or grows without
//! bound.

use iwarp::wire::mpa::{
    FpduDecoder, FpduSender, StartupRepr, MAX_FPDU_LEN, MAX_ULPDU, MAX_ULPDU_MARKERS,
};
use iwarp::wire::Error;
use proptest::prelude::*;

/// ULPDU sizes biased small, with the occasional large one up to `max`.
fn ulpdu(max: usize) -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        6 => 0..64usize,
        3 => 0..2048usize,
        1 => 0..=max,
    ];
    (len, any::<u8>()).prop_map(|(n, seed)| (0..n).map(|i| seed.wrapping_add(i as u8)).collect())
}

fn ulpdus() -> impl Strategy<Value = (bool, bool, Vec<Vec<u8>>)> {
    (any::<bool>(), any::<bool>()).prop_flat_map(|(markers, crc)| {
        let max = if markers {
            MAX_ULPDU_MARKERS
        } else {
            MAX_ULPDU
        };
        (
            Just(markers),
            Just(crc),
            prop::collection::vec(ulpdu(max), 0..10),
        )
    })
}

/// Frames every ULPDU, cutting each into two gathered parts at `split`.
fn encode(markers: bool, crc: bool, ulpdus: &[Vec<u8>], split: usize) -> Vec<u8> {
    let mut tx = FpduSender::new(markers, crc);
    let mut wire = Vec::new();
    for u in ulpdus {
        let (a, b) = u.split_at(split.min(u.len()));
        let expect = tx.wire_len(u.len());
        let before = wire.len();
        tx.encode(&[a, b], &mut wire).unwrap();
        assert_eq!(wire.len() - before, expect);
    }
    assert_eq!(tx.stream_pos(), wire.len() as u64);
    wire
}

/// Cuts `wire` into chunks of the given sizes (cycled), pushes them one by one and drains the
/// decoder after each; checks the buffer bound on the way.
fn decode(markers: bool, crc: bool, wire: &[u8], cuts: &[usize]) -> Result<Vec<Vec<u8>>, Error> {
    let mut rx = FpduDecoder::new(markers, crc);
    let mut got = Vec::new();
    let mut rest = wire;
    let mut i = 0;
    let mut biggest = 0;
    while !rest.is_empty() {
        let n = cuts[i % cuts.len()].clamp(1, rest.len());
        i += 1;
        biggest = biggest.max(n);
        rx.push(&rest[..n]);
        rest = &rest[n..];
        while let Some(u) = rx.next_ulpdu()? {
            got.push(u.to_vec());
        }
        assert!(
            rx.buffered() < MAX_FPDU_LEN + n,
            "buffered {}",
            rx.buffered()
        );
        assert!(
            rx.capacity() <= 2 * (MAX_FPDU_LEN + biggest),
            "capacity {}",
            rx.capacity()
        );
    }
    assert_eq!(rx.buffered(), 0);
    assert_eq!(rx.stream_pos(), wire.len() as u64);
    Ok(got)
}

proptest! {
    #[test]
    fn any_cut_of_the_stream_decodes_to_the_same_ulpdus(
        (markers, crc, ulpdus) in ulpdus(),
        split in 0..100usize,
        cuts in prop::collection::vec(
            prop_oneof![4 => 1..16usize, 3 => 1..1500usize, 1 => 1..70000usize], 1..20),
    ) {
        let wire = encode(markers, crc, &ulpdus, split);
        prop_assert_eq!(decode(markers, crc, &wire, &cuts).unwrap(), ulpdus);
    }

    #[test]
    fn zero_copy_framing_equals_encode(
        crc in any::<bool>(),
        ulpdus in prop::collection::vec(ulpdu(MAX_ULPDU), 0..6),
        split in 0..3000usize,
    ) {
        let mut tx = FpduSender::new(false, crc);
        let mut framed = Vec::new();
        for u in &ulpdus {
            let (a, b) = u.split_at(split.min(u.len()));
            let f = tx.frame(&[a, b]).unwrap();
            framed.extend_from_slice(&f.prefix);
            framed.extend_from_slice(a);
            framed.extend_from_slice(b);
            framed.extend_from_slice(f.suffix());
        }
        prop_assert_eq!(&framed, &encode(false, crc, &ulpdus, 0));
        prop_assert_eq!(tx.stream_pos(), framed.len() as u64);
    }

    #[test]
    fn one_damaged_octet_never_gets_through_the_crc(
        (markers, _, ulpdus) in ulpdus(),
        at in any::<prop::sample::Index>(),
        flip in 1..=255u8,
        cut in 1..3000usize,
    ) {
        prop_assume!(!ulpdus.is_empty());
        let wire = encode(markers, true, &ulpdus, 0);
        let mut bad = wire.clone();
        let i = at.index(bad.len());
        bad[i] ^= flip;
        let mut rx = FpduDecoder::new(markers, true);
        let mut got = Vec::new();
        let mut failed = false;
        'feed: for piece in bad.chunks(cut) {
            rx.push(piece);
            loop {
                match rx.next_ulpdu() {
                    Ok(Some(u)) => got.push(u.to_vec()),
                    Ok(None) => break,
                    Err(_) => { failed = true; break 'feed; }
                }
            }
        }
        // Everything delivered is an intact prefix, and the damaged FPDU is not in it.
        prop_assert!(got.len() < ulpdus.len());
        prop_assert_eq!(&got[..], &ulpdus[..got.len()]);
        prop_assert!(failed || rx.buffered() > 0);
    }

    #[test]
    fn arbitrary_octets_never_panic_and_stay_bounded(
        markers in any::<bool>(),
        crc in any::<bool>(),
        bytes in prop::collection::vec(any::<u8>(), 0..20000),
        cuts in prop::collection::vec(1..5000usize, 1..8),
    ) {
        let mut rx = FpduDecoder::new(markers, crc);
        let mut rest = &bytes[..];
        let mut i = 0;
        let mut error = None;
        while !rest.is_empty() {
            let n = cuts[i % cuts.len()].min(rest.len());
            i += 1;
            rx.push(&rest[..n]);
            rest = &rest[n..];
            loop {
                match rx.next_ulpdu() {
                    Ok(Some(u)) => prop_assert!(u.len() <= MAX_ULPDU),
                    Ok(None) => break,
                    Err(e) => { error = Some(e); break; }
                }
            }
            if let Some(e) = &error {
                // Errors are fatal and sticky.
                prop_assert_eq!(rx.next_ulpdu().unwrap_err(), e.clone());
                break;
            }
            prop_assert!(rx.buffered() < MAX_FPDU_LEN + n);
        }
    }

    #[test]
    fn startup_parse_never_panics_and_round_trips(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        key in 0..3u8,
        flags in any::<u8>(),
        rev in 0..4u8,
    ) {
        // Mostly well-keyed input, so the parser gets past the key.
        let mut buf = match key {
            0 => b"MPA ID Req Frame".to_vec(),
            1 => b"MPA ID Rep Frame".to_vec(),
            _ => Vec::new(),
        };
        if key < 2 {
            buf.push(flags & 0xf0);
            buf.push(rev);
            let pd = (bytes.len().saturating_sub(2) % 530) as u16;
            buf.extend_from_slice(&pd.to_be_bytes());
        }
        buf.extend_from_slice(&bytes);
        if let Ok(Some((repr, n))) = StartupRepr::parse(&buf) {
            prop_assert!(n <= buf.len());
            prop_assert_eq!(repr.emit().unwrap(), &buf[..n]);
        }
    }
}
