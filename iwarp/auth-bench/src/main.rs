//! Nanoseconds per tag of each MAC candidate for authenticated mode, against CRC32c (README).

use std::hash::Hasher;
use std::hint::black_box;
use std::time::Instant;

use siphasher::sip128::Hasher128;

/// Best of 9 loops, in nanoseconds per call.
fn time(size: usize, mut f: impl FnMut(&[u8]) -> u64) -> f64 {
    let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let iters = (4_000_000 / (size + 64)).max(2000) as u32;
    let mut best = f64::MAX;
    for _ in 0..9 {
        let t = Instant::now();
        let mut acc = 0u64;
        for _ in 0..iters {
            acc ^= f(black_box(&data));
        }
        black_box(acc);
        best = best.min(t.elapsed().as_nanos() as f64 / f64::from(iters));
    }
    best
}

fn main() {
    let job = [7u8; 32];
    let pair = [9u8; 36];
    let sizes = [28usize, 64, 256, 1472, 8972, 65_491];
    type Candidate = (&'static str, Box<dyn Fn(&[u8]) -> u64>);
    let sip = siphasher::sip128::SipHasher24::new_with_key(&[7u8; 16]);
    let ring_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &job);
    let lc_key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &job);
    let blake = blake3::Hasher::new_keyed(&job);
    let siv = {
        use aws_lc_rs::aead::{LessSafeKey, UnboundKey, AES_128_GCM_SIV};
        LessSafeKey::new(UnboundKey::new(&AES_128_GCM_SIV, &job[..16]).unwrap())
    };
    let rc_siv = {
        use aes_gcm_siv::aead::KeyInit;
        aes_gcm_siv::Aes128GcmSiv::new_from_slice(&job[..16]).unwrap()
    };
    let cmac_key = {
        use cmac::Mac;
        cmac::Cmac::<aes::Aes128>::new_from_slice(&job[..16]).unwrap()
    };
    let hmac_key = {
        use hmac::Mac;
        hmac::Hmac::<sha2::Sha256>::new_from_slice(&job).unwrap()
    };
    let candidates: Vec<Candidate> = vec![
        ("CRC32c (crc32c), today's trailer", Box::new(|d| u64::from(crc32c::crc32c(d)))),
        (
            "SipHash-2-4-128 (siphasher)",
            Box::new(move |d| {
                let mut h = sip;
                h.write(&pair);
                h.write(d);
                h.finish128().h1
            }),
        ),
        (
            "AES-128-GCM-SIV, AAD only (aws-lc-rs)",
            Box::new(move |d| {
                use aws_lc_rs::aead::{Aad, Nonce};
                let mut none = [0u8; 0];
                let n = Nonce::assume_unique_for_key([1; 12]);
                let t = siv.seal_in_place_separate_tag(n, Aad::from(d), &mut none).unwrap();
                u64::from(t.as_ref()[0])
            }),
        ),
        (
            "AES-128-GCM-SIV, AAD only (RustCrypto)",
            Box::new(move |d| {
                use aes_gcm_siv::aead::AeadInPlace;
                let mut none: [u8; 0] = [];
                let t = rc_siv
                    .encrypt_in_place_detached(&[1u8; 12].into(), d, &mut none)
                    .unwrap();
                u64::from(t[0])
            }),
        ),
        (
            "HMAC-SHA256 (ring)",
            Box::new(move |d| {
                let mut c = ring::hmac::Context::with_key(&ring_key);
                c.update(&pair);
                c.update(d);
                u64::from(c.sign().as_ref()[0])
            }),
        ),
        (
            "HMAC-SHA256 (aws-lc-rs)",
            Box::new(move |d| {
                let mut c = aws_lc_rs::hmac::Context::with_key(&lc_key);
                c.update(&pair);
                c.update(d);
                u64::from(c.sign().as_ref()[0])
            }),
        ),
        (
            "HMAC-SHA256 (RustCrypto)",
            Box::new(move |d| {
                use hmac::Mac;
                let mut m = hmac_key.clone();
                m.update(&pair);
                m.update(d);
                u64::from(m.finalize().into_bytes()[0])
            }),
        ),
        (
            "BLAKE3 keyed (blake3)",
            Box::new(move |d| {
                let mut h = blake.clone();
                h.update(&pair);
                h.update(d);
                u64::from(h.finalize().as_bytes()[0])
            }),
        ),
        (
            "AES-128-CMAC (RustCrypto)",
            Box::new(move |d| {
                use cmac::Mac;
                let mut m = cmac_key.clone();
                m.update(&pair);
                m.update(d);
                u64::from(m.finalize().into_bytes()[0])
            }),
        ),
    ];
    print!("| tag (crate) |");
    for s in sizes {
        print!(" {s} B |");
    }
    println!();
    println!("|---|{}", "---:|".repeat(sizes.len()));
    for (name, f) in &candidates {
        print!("| {name} |");
        for &s in &sizes {
            print!(" {:.0} |", time(s, f));
        }
        println!();
    }
}
