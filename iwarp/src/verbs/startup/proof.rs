//! Authenticated RC start-up: each end proves the job's key over both ends' fresh nonces.
//!
//! The initiator's Request carries its nonce after the ULP's private data; the responder's
//! Reply carries its own nonce and its proof; the initiator answers with its proof in one FPDU
//! before any other. Two legs cannot do: a Request alone proves nothing fresh to the
//! responder (a stranger could replay a captured one and then speak on the connection, whose
//! FPDUs carry only the CRC). The third leg is a well-formed FPDU (a DDP untagged segment on a
//! queue RDMAP does not use), so a capture still decodes as MPA and DDP, and the FPDUs after it
//! keep the standard CRC.
//!
//! A proof covers both frames as settled (flags, revision, IRD/ORD, both ULP private data,
//! which carry both endpoints' names) and both nonces, under a context that tells the
//! responder's proof from the initiator's, so neither can be reflected back.

use aws_lc_rs::rand::{SecureRandom, SystemRandom};

use crate::auth::{Context, JobKey, TAG_LEN};
use crate::wire::ddp::{self, Placement};
use crate::wire::mpa::{FpduDecoder, FpduSender, StartupRepr};
use crate::wire::rdmap::Opcode;

/// Bytes of a start-up nonce.
pub const NONCE_LEN: usize = 16;

/// The untagged queue the initiator's proof travels on: outside RDMAP's four (RFC 5040,
/// RFC 7306), so no receive queue of the connection can take it for a message.
pub const PROOF_QN: u32 = 0x4457_5052;

/// The proof FPDU's bytes on the wire without markers: length, untagged DDP header, proof,
/// CRC (no pad: 2 + 18 + 16 is a multiple of 4).
pub const PROOF_FRAME_LEN: usize = 2 + ddp::UNTAGGED_HEADER_LEN + TAG_LEN + 4;

/// Why an authenticated start-up failed.
pub const NO_NONCE: &str = "the Request carries no start-up nonce (the peer is not in \
                            authenticated mode)";
pub const BAD_REPLY: &str = "the responder did not prove the job's key";
pub const BAD_PROOF: &str = "the initiator did not prove the job's key";
pub const MARKERS: &str = "authenticated mode needs MPA markers off";

/// A fresh nonce from the system's generator.
pub fn fresh_nonce() -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut n)
        .expect("the system's random generator works");
    n
}

/// Splits a nonce off the end of `private_data`; `None` if it is too short to hold one.
pub fn split_nonce(private_data: &mut Vec<u8>) -> Option<[u8; NONCE_LEN]> {
    let at = private_data.len().checked_sub(NONCE_LEN)?;
    let mut n = [0u8; NONCE_LEN];
    n.copy_from_slice(&private_data[at..]);
    private_data.truncate(at);
    Some(n)
}

/// Splits the responder's nonce and proof off the end of a Reply's private data.
pub fn split_reply(private_data: &mut Vec<u8>) -> Option<([u8; NONCE_LEN], [u8; TAG_LEN])> {
    let at = private_data.len().checked_sub(TAG_LEN)?;
    let mut proof = [0u8; TAG_LEN];
    proof.copy_from_slice(&private_data[at..]);
    private_data.truncate(at);
    Some((split_nonce(private_data)?, proof))
}

/// What both ends' proofs cover: the two frames as settled, with only the ULP's private
/// data (nonces and proof are bound separately), and the two nonces.
pub struct Transcript {
    frames: Vec<u8>,
    nonces: [u8; 2 * NONCE_LEN],
}

impl Transcript {
    /// `request` and `reply` with the ULP's private data only.
    pub fn new(
        request: &StartupRepr,
        reply: &StartupRepr,
        initiator: &[u8; NONCE_LEN],
        responder: &[u8; NONCE_LEN],
    ) -> Transcript {
        let mut frames = request.emit().unwrap_or_default();
        frames.extend(reply.emit().unwrap_or_default());
        let mut nonces = [0u8; 2 * NONCE_LEN];
        nonces[..NONCE_LEN].copy_from_slice(initiator);
        nonces[NONCE_LEN..].copy_from_slice(responder);
        Transcript { frames, nonces }
    }

    /// The proof of the end that is the responder (`true`) or the initiator.
    pub fn proof(&self, key: &JobKey, responder: bool) -> [u8; TAG_LEN] {
        key.tag_with(
            &Context::Connection { responder },
            &self.nonces,
            &self.frames,
        )
    }

    /// Whether `proof` is that end's proof, in constant time.
    pub fn proves(&self, key: &JobKey, responder: bool, proof: &[u8]) -> bool {
        key.check(
            &Context::Connection { responder },
            &self.nonces,
            &self.frames,
            proof,
        )
    }
}

fn proof_header() -> ddp::Repr {
    ddp::Repr {
        last: true,
        ulp_ctrl: Opcode::Send.control_byte(),
        placement: Placement::Untagged {
            inval_stag: 0,
            qn: PROOF_QN,
            msn: 1,
            mo: 0,
        },
    }
}

/// The initiator's proof as its first FPDU (markers off; the CRC as negotiated).
pub fn proof_frame(proof: &[u8; TAG_LEN], crc: bool) -> Vec<u8> {
    let mut segment = [0u8; ddp::UNTAGGED_HEADER_LEN + TAG_LEN];
    proof_header().emit(&mut ddp::Packet::new_unchecked(&mut segment[..]));
    segment[ddp::UNTAGGED_HEADER_LEN..].copy_from_slice(proof);
    let mut out = Vec::with_capacity(PROOF_FRAME_LEN);
    FpduSender::new(false, crc)
        .encode(&[&segment], &mut out)
        .expect("a 34-byte ULPDU frames");
    debug_assert_eq!(out.len(), PROOF_FRAME_LEN);
    out
}

/// The proof in the first [`PROOF_FRAME_LEN`] bytes of the initiator's stream, if they are a
/// well-formed proof FPDU (CRC checked when negotiated).
pub fn parse_proof_frame(bytes: &[u8], crc: bool) -> Option<[u8; TAG_LEN]> {
    let mut d = FpduDecoder::new(false, crc);
    d.push(bytes.get(..PROOF_FRAME_LEN)?);
    let ulpdu = d.next_ulpdu().ok()??;
    let packet = ddp::Packet::new_checked(ulpdu).ok()?;
    if ddp::Repr::parse(&packet).ok()? != proof_header() {
        return None;
    }
    packet.payload().try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_frame_reads_back_and_every_flipped_bit_is_refused() {
        let proof = [0x5a; TAG_LEN];
        for crc in [true, false] {
            let f = proof_frame(&proof, crc);
            assert_eq!(f.len(), PROOF_FRAME_LEN);
            assert_eq!(parse_proof_frame(&f, crc), Some(proof));
            assert_eq!(parse_proof_frame(&f[..PROOF_FRAME_LEN - 1], crc), None);
        }
        // With the CRC, a flipped bit anywhere is refused (without it, the proof's own
        // check refuses a flipped proof; the header is compared whole).
        let f = proof_frame(&proof, true);
        for i in 0..f.len() * 8 {
            let mut c = f.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert_eq!(parse_proof_frame(&c, true), None, "bit {i}");
        }
    }

    #[test]
    fn nonces_and_proofs_split_off_the_end_of_private_data() {
        let mut pd = b"name".to_vec();
        pd.extend([7u8; NONCE_LEN]);
        assert_eq!(split_nonce(&mut pd), Some([7u8; NONCE_LEN]));
        assert_eq!(pd, b"name");
        assert_eq!(split_nonce(&mut pd), None);
        let mut pd = b"n".to_vec();
        pd.extend([1u8; NONCE_LEN]);
        pd.extend([2u8; TAG_LEN]);
        assert_eq!(
            split_reply(&mut pd),
            Some(([1u8; NONCE_LEN], [2u8; TAG_LEN]))
        );
        assert_eq!(pd, b"n");
        assert_ne!(fresh_nonce(), fresh_nonce());
    }
}
