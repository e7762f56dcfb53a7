//! CRC32c (Castagnoli) as iWARP uses it, through the `crc32c` crate (SSE4.2 where present).
//!
//! MPA and datagram-iWARP put the CRC on the wire as the little-endian bytes of the standard
//! CRC32c value (RFC 3720 B.4 byte order): 32 zero bytes give `aa 36 91 8a`.

/// CRC32c of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Continues a CRC32c over more data, so gathered buffers need no copy.
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// CRC32c over several buffers, as if they were one.
pub fn crc32c_parts(parts: &[&[u8]]) -> u32 {
    parts.iter().fold(0, |crc, p| crc32c_append(crc, p))
}

/// The four bytes MPA and datagram-iWARP carry for `crc`.
pub fn to_wire(crc: u32) -> [u8; 4] {
    crc.to_le_bytes()
}

/// The CRC value carried by four wire bytes.
pub fn from_wire(bytes: [u8; 4]) -> u32 {
    u32::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 3720 appendix B.4 vectors, as bytes on the wire.
    #[test]
    fn rfc3720_vectors() {
        let zeros = [0u8; 32];
        let ones = [0xffu8; 32];
        let inc: Vec<u8> = (0..32).collect();
        let dec: Vec<u8> = (0..32).rev().collect();
        assert_eq!(to_wire(crc32c(&zeros)), [0xaa, 0x36, 0x91, 0x8a]);
        assert_eq!(to_wire(crc32c(&ones)), [0x43, 0xab, 0xa8, 0x62]);
        assert_eq!(to_wire(crc32c(&inc)), [0x4e, 0x79, 0xdd, 0x46]);
        assert_eq!(to_wire(crc32c(&dec)), [0x5c, 0xdb, 0x3f, 0x11]);
    }

    #[test]
    fn parts_equal_whole() {
        let data: Vec<u8> = (0..=255).collect();
        for cut in [0, 1, 7, 128, 255, 256] {
            let (a, b) = data.split_at(cut);
            assert_eq!(crc32c_parts(&[a, b]), crc32c(&data));
        }
        assert_eq!(from_wire(to_wire(0x1234_5678)), 0x1234_5678);
    }
}
