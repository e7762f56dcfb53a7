//! Numbers as the tables and ledger.csv have always written them (the shell harness's Python):
//! `%g` for counts that may be a median of two, and a float's shortest form, which keeps ".0"
//! on a whole number, for the ledger's fractions.

/// The median of `v` (the mean of the middle two for an even count); `None` for none.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

/// `x` as printf's `%g`: 6 significant digits, no trailing zeros, an exponent below 1e-4 and
/// from 1e6.
pub fn g(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp) as usize;
        trim(&format!("{x:.decimals$}")).to_owned()
    } else {
        format!(
            "{}e{}{:02}",
            trim(mant),
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

fn trim(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `x` in the shortest form that reads back as the same float, ".0" on whole numbers, an
/// exponent below 1e-4 and from 1e16.
pub fn shortest(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if x.fract() == 0.0 && a < 1e16 {
        format!("{x:.1}")
    } else if (1e-4..1e16).contains(&a) {
        format!("{x}")
    } else {
        let s = format!("{x:e}");
        let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        format!("{mant}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// `x` rounded to one decimal, halves to even as printed.
pub fn round1(x: f64) -> f64 {
    format!("{x:.1}").parse().unwrap_or(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn like_printf_g() {
        for (x, s) in [
            (0.0, "0"),
            (6.0, "6"),
            (6.5, "6.5"),
            (4096.0, "4096"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (1e6, "1e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (2.25, "2.25"),
            (999999.5, "1e+06"),
            (-3.5, "-3.5"),
        ] {
            assert_eq!(g(x), s, "{x}");
        }
    }

    #[test]
    fn shortest_forms() {
        for (x, s) in [
            (6227.0, "6227.0"),
            (0.0, "0.0"),
            (0.9876340283676349, "0.9876340283676349"),
            (1e-7, "1e-07"),
            (1.5e-7, "1.5e-07"),
            (1e16, "1e+16"),
            (0.5, "0.5"),
        ] {
            assert_eq!(shortest(x), s, "{x}");
        }
        assert_eq!(round1(6226.96), 6227.0);
        assert_eq!(round1(0.25), 0.2);
    }
}
