//! Message sizes as the benchmarks' options give them: "4M", "64K", "1".

/// "4M" → 4194304: digits, an optional K/M/G (powers of 1024), an optional "iB" or "B".
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("cannot read size '{s}' (e.g. 0, 64, 4K, 1M)");
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad());
    }
    let n: u64 = s[..digits].parse().map_err(|_| bad())?;
    let mut rest = &s[digits..];
    let mut mult: u64 = 1;
    if let Some(c) = rest.chars().next() {
        let m = match c.to_ascii_lowercase() {
            'k' => Some(1 << 10),
            'm' => Some(1 << 20),
            'g' => Some(1 << 30),
            _ => None,
        };
        if let Some(m) = m {
            mult = m;
            rest = &rest[1..];
        }
    }
    if !matches!(rest, "" | "i" | "B" | "iB") {
        return Err(bad());
    }
    n.checked_mul(mult).ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4M"), Ok(4 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("2GB"), Ok(2 << 30));
        assert_eq!(parse_size("17B"), Ok(17));
        for bad in [
            "",
            "M",
            "4X",
            "-1",
            "4 M",
            "4MiBs",
            "1.5M",
            "99999999999999999999",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
