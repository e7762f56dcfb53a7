//! The provider's headers: the per-peer header in front of every message, and the data path's
//! message header behind it.

use diwarp_fi::fuzzing::{parse, Repr};
use diwarp_fi::peer::header;

/// The data path's message header: arbitrary bytes never panic; whatever parses writes out as
/// a message that parses back the same (not always to the same bytes: a field its flags leave
/// out is read as absent and written as zero).
pub fn message(data: &[u8]) -> usize {
    if let Ok((qpn, msg)) = parse(data) {
        let repr = Repr { qpn, msg };
        let mut out = Vec::new();
        repr.append(&mut out);
        assert_eq!(out.len(), repr.buffer_len());
        assert!(out.len() <= data.len());
        let (qpn2, msg2) = parse(&out).expect("what parsed, written out, parses");
        assert_eq!(
            Repr {
                qpn: qpn2,
                msg: msg2
            },
            repr
        );
    }
    data.len()
}

/// The per-peer header and the message behind it, as a receiving endpoint reads them: no
/// panic; a header that parses encodes to the same bytes.
pub fn peer_header(data: &[u8]) -> usize {
    if let Ok((h, body)) = header::split(data) {
        assert_eq!(h.encode()[..], data[..header::LEN]);
        assert_eq!(body, &data[header::LEN..]);
        message(body);
    }
    data.len()
}
