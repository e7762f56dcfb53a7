//! CRC32c (Castagnoli) for the datagram trailer.
//!
//! The `crc32c` crate (SSE 4.2, three interleaved streams), and with the `simd-crc` feature
//! (on by default), inputs of `FAST_MIN` bytes and more go to `crc-fast` (carry-less multiply folding,
//! AVX-512 where present), which is faster on segments and Ethernet-sized datagrams alike
//! (`BENCHMARKS.md`); the CRC is otherwise a large share of each end's work. Both compute the
//! same CRC.

/// Below this, the fixed cost of a call decides, and `crc32c` is as good (`BENCHMARKS.md`).
#[cfg(feature = "simd-crc")]
const FAST_MIN: usize = 256;

/// CRC32c of the concatenation of `parts`.
pub(crate) fn crc32c(parts: &[&[u8]]) -> u32 {
    #[cfg(feature = "simd-crc")]
    if parts.iter().map(|p| p.len()).sum::<usize>() >= FAST_MIN {
        let mut d = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
        for p in parts {
            d.update(p);
        }
        // A 32-bit CRC in the low half.
        return d.finalize() as u32;
    }
    let mut c = 0;
    for (i, p) in parts.iter().enumerate() {
        c = if i == 0 {
            crc32c::crc32c(p)
        } else {
            crc32c::crc32c_append(c, p)
        };
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_and_sizes_agree_with_the_reference() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i * 131 + 7) as u8).collect();
        for len in [0, 1, 28, 255, 256, 1472, 4096, 65_536, 70_000] {
            let want = crc32c::crc32c(&data[..len]);
            assert_eq!(crc32c(&[&data[..len]]), want, "{len}");
            let cut = len / 3;
            assert_eq!(crc32c(&[&data[..cut], &data[cut..len]]), want, "{len}");
            assert_eq!(crc32c(&[&[], &data[..len], &[]]), want, "{len}");
        }
    }
}
