//! Authenticated datagrams: a tag from the job's key on every datagram a queue pair sends, so
//! that a stranger who can see and send datagrams (on the network, or another user of the host)
//! cannot forge, alter or redirect any.
//!
//! The tag is AES-128-GCM-SIV (RFC 8452, aws-lc-rs) over the datagram as associated data, with
//! nothing encrypted: a deterministic MAC whose nonce need not be unique (GCM-SIV resists nonce
//! reuse; a repeated datagram only repeats its tag, and replay is the sequence window's and the
//! epochs' business). It was chosen by measurement against SipHash, HMAC-SHA256, BLAKE3 and
//! AES-CMAC (`iwarp/BENCHMARKS.md`, "Authenticated datagrams"): the fastest from a few hundred
//! bytes up, where bandwidth is decided, and within a hundred nanoseconds at the smallest.
//!
//! A pair's key is the job key bound to where the datagram goes: the nonce is a keyed hash of
//! the datagram's kind and its receiver's address (and, for a handshake, its sender's), so a
//! tag made for one receiver is worthless at another, and no key per peer is stored anywhere.
//! The receiver checks a datagram before it reads any field of it and allocates nothing for
//! one that fails.

use std::fmt;
use std::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM_SIV, NONCE_LEN};
use aws_lc_rs::digest;
use siphasher::sip128::{Hasher128, SipHasher24};

/// Bytes of the tag that ends an authenticated datagram.
pub const TAG_LEN: usize = 16;
/// The shortest job secret taken: 128 bits.
pub const MIN_SECRET_LEN: usize = 16;

/// What a tag covers besides the datagram's own bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// A reliability datagram (data, ACK, probe) to the queue pair at this address. Only the
    /// receiver is named: data may leave from a socket of its own (an ephemeral port), and the
    /// session id the receiver chose, which the tag covers, names the sender.
    Datagram { to: SocketAddr },
    /// A session handshake (HELLO, HELLO-ACK) between these two queue pairs' addresses.
    Hello { from: SocketAddr, to: SocketAddr },
    /// An RC connection's start-up proof: the side that proves, and both start-up nonces.
    Connection { responder: bool },
}

/// The job's key, derived from its secret; one per endpoint, shared by its queue pairs.
pub struct JobKey {
    aead: LessSafeKey,
    /// Folds a context into the AEAD's nonce.
    fold: SipHasher24,
    /// Tells keys apart (equality, logs) without showing them: a hash under a label of its own.
    id: [u8; 8],
}

/// A job secret that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the key is {0} bytes; it must be at least {MIN_SECRET_LEN}")]
    TooShort(usize),
}

impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobKey({:02x?})", self.id)
    }
}

impl PartialEq for JobKey {
    fn eq(&self, other: &JobKey) -> bool {
        self.id == other.id
    }
}

impl Eq for JobKey {}

impl JobKey {
    /// Derives the job's keys from `secret` (any bytes, at least [`MIN_SECRET_LEN`]): SHA-256
    /// under two labels, so that a secret shared with something else yields unrelated keys.
    pub fn new(secret: &[u8]) -> Result<JobKey, KeyError> {
        if secret.len() < MIN_SECRET_LEN {
            return Err(KeyError::TooShort(secret.len()));
        }
        let derive = |label: &[u8]| {
            let mut c = digest::Context::new(&digest::SHA256);
            c.update(label);
            c.update(secret);
            c.finish()
        };
        let aead = derive(b"diwarp datagram key v1\0");
        let fold = derive(b"diwarp nonce key v1\0");
        let mut id = [0u8; 8];
        id.copy_from_slice(&derive(b"diwarp key id v1\0").as_ref()[..8]);
        let unbound = UnboundKey::new(&AES_128_GCM_SIV, &aead.as_ref()[..16])
            .expect("16 bytes is AES-128's key length");
        let mut k = [0u8; 16];
        k.copy_from_slice(&fold.as_ref()[..16]);
        Ok(JobKey {
            aead: LessSafeKey::new(unbound),
            fold: SipHasher24::new_with_key(&k),
            id,
        })
    }

    fn nonce(&self, ctx: &Context, extra: &[u8]) -> Nonce {
        let mut h = self.fold;
        match *ctx {
            Context::Datagram { to } => {
                h.write_u8(1);
                put_addr(&mut h, to);
            }
            Context::Hello { from, to } => {
                h.write_u8(2);
                put_addr(&mut h, from);
                put_addr(&mut h, to);
            }
            Context::Connection { responder } => h.write_u8(3 + u8::from(responder)),
        }
        h.write(extra);
        let wide = h.finish128().as_bytes();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&wide[..NONCE_LEN]);
        Nonce::assume_unique_for_key(n)
    }

    /// The tag of `data` in `ctx`.
    pub fn tag(&self, ctx: &Context, data: &[u8]) -> [u8; TAG_LEN] {
        self.tag_with(ctx, &[], data)
    }

    /// The tag of `data` in `ctx`, with `extra` (a connection's nonces) bound as well.
    pub fn tag_with(&self, ctx: &Context, extra: &[u8], data: &[u8]) -> [u8; TAG_LEN] {
        let mut empty = [0u8; 0];
        let tag = self
            .aead
            .seal_in_place_separate_tag(self.nonce(ctx, extra), Aad::from(data), &mut empty)
            .expect("sealing nothing cannot fail");
        let mut out = [0u8; TAG_LEN];
        out.copy_from_slice(tag.as_ref());
        out
    }

    /// A fingerprint of the key (not the key): equal for equal secrets.
    pub fn id(&self) -> [u8; 8] {
        self.id
    }

    /// Checks the tag that ends `datagram`; returns the length of what it covers, or `None`
    /// if the datagram is too short to hold a tag or its tag is not the job's.
    pub fn open(&self, ctx: &Context, datagram: &[u8]) -> Option<usize> {
        let body = datagram.len().checked_sub(TAG_LEN)?;
        let (data, tag) = datagram.split_at(body);
        self.check(ctx, &[], data, tag).then_some(body)
    }

    /// Whether `tag` is the tag of `data` in `ctx` with `extra`, compared in constant time.
    pub fn check(&self, ctx: &Context, extra: &[u8], data: &[u8], tag: &[u8]) -> bool {
        let want = self.tag_with(ctx, extra, data);
        tag.len() == TAG_LEN
            && aws_lc_rs::constant_time::verify_slices_are_equal(&want, tag).is_ok()
    }
}

fn put_addr(h: &mut SipHasher24, a: SocketAddr) {
    match a.ip() {
        IpAddr::V4(ip) => {
            h.write_u8(4);
            h.write(&ip.octets());
        }
        IpAddr::V6(ip) => {
            h.write_u8(6);
            h.write(&ip.octets());
        }
    }
    h.write_u16(a.port());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn key(b: u8) -> JobKey {
        JobKey::new(&[b; 32]).unwrap()
    }

    #[test]
    fn a_tagged_datagram_opens_with_the_same_key_only() {
        let ctx = Context::Datagram {
            to: addr("10.0.0.2:4000"),
        };
        let data = b"reliability header and payload".to_vec();
        let mut d = data.clone();
        d.extend_from_slice(&key(1).tag(&ctx, &data));
        assert_eq!(key(1).open(&ctx, &d), Some(data.len()));
        assert_eq!(key(2).open(&ctx, &d), None);
        // A key made from the same secret is the same key.
        assert_eq!(
            JobKey::new(&[1; 32]).unwrap().open(&ctx, &d),
            Some(data.len())
        );
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let ctx = Context::Datagram {
            to: addr("[fe80::1]:4000"),
        };
        let k = key(3);
        let data: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
        let mut d = data.clone();
        d.extend_from_slice(&k.tag(&ctx, &data));
        for i in 0..d.len() * 8 {
            let mut c = d.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert_eq!(k.open(&ctx, &c), None, "bit {i}");
        }
        for len in 0..d.len() {
            assert_eq!(k.open(&ctx, &d[..len]), None, "cut to {len}");
        }
    }

    #[test]
    fn a_tag_is_bound_to_its_receiver_and_kind() {
        let k = key(4);
        let data = b"same bytes".to_vec();
        let to = Context::Datagram {
            to: addr("10.0.0.2:4000"),
        };
        let mut d = data.clone();
        d.extend_from_slice(&k.tag(&to, &data));
        for other in [
            Context::Datagram {
                to: addr("10.0.0.3:4000"),
            },
            Context::Datagram {
                to: addr("10.0.0.2:4001"),
            },
            Context::Hello {
                from: addr("10.0.0.1:4000"),
                to: addr("10.0.0.2:4000"),
            },
            Context::Connection { responder: true },
        ] {
            assert_eq!(k.open(&other, &d), None, "{other:?}");
        }
        let hello = Context::Hello {
            from: addr("10.0.0.1:4000"),
            to: addr("10.0.0.2:4000"),
        };
        let swapped = Context::Hello {
            from: addr("10.0.0.2:4000"),
            to: addr("10.0.0.1:4000"),
        };
        let t = k.tag(&hello, &data);
        assert!(k.check(&hello, &[], &data, &t));
        assert!(!k.check(&swapped, &[], &data, &t));
        let conn = Context::Connection { responder: false };
        let t = k.tag_with(&conn, b"nonces", &data);
        assert!(k.check(&conn, b"nonces", &data, &t));
        assert!(!k.check(&conn, b"nonceS", &data, &t));
        assert!(!k.check(
            &Context::Connection { responder: true },
            b"nonces",
            &data,
            &t
        ));
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert_eq!(JobKey::new(&[0; 15]).unwrap_err(), KeyError::TooShort(15));
        assert!(JobKey::new(&[0; 16]).is_ok());
        assert_eq!(
            KeyError::TooShort(3).to_string(),
            "the key is 3 bytes; it must be at least 16"
        );
    }
}
