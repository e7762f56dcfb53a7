//! Datagram framing: arbitrary bytes never panic, with CRC checked or not; whatever parses
//! re-encodes to the same bytes.
#![no_main]

use iwarp::crc::crc32c;
use iwarp::wire::datagram::{self, CRC_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, datagram)) = data.split_first() else {
        return;
    };
    let crc = mode & 1 != 0;
    let Ok((seg, range)) = datagram::parse(datagram, crc) else {
        return;
    };
    let body = datagram.len() - CRC_LEN;
    assert_eq!(range.start, seg.header_len());
    assert_eq!(range.end, body);
    let again = datagram::encode(&seg, &datagram[range], crc);
    assert_eq!(again.len(), datagram.len());
    assert_eq!(again[..body], datagram[..body]);
    if crc {
        assert_eq!(again[body..], datagram[body..]);
        assert_eq!(datagram[body..], crc32c(&datagram[..body]).to_le_bytes());
    } else {
        assert_eq!(again[body..], [0; CRC_LEN]);
    }
});
