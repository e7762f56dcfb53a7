//! The little CSV the benchmarks write and read back: comma-separated, a field in double
//! quotes when it may hold commas (the reasons), "" for a quote inside one.

/// `s` as a quoted field; its double quotes become single ones, as the shell harness wrote
/// them, so the file stays readable to the eye.
pub fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "'"))
}

/// The fields of one line.
pub fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// The rows of a CSV text with a header line, as (header, rows).
pub fn rows(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = text.lines().filter(|l| !l.is_empty());
    let head = lines.next().map(fields).unwrap_or_default();
    (head, lines.map(fields).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_keep_their_commas() {
        assert_eq!(fields("a,\"b, c\",,d"), ["a", "b, c", "", "d"]);
        assert_eq!(fields("\"x \"\"y\"\"\""), ["x \"y\""]);
        assert_eq!(quote("say \"no\", twice"), "\"say 'no', twice\"");
        assert_eq!(fields(&quote("a, b")), ["a, b"]);
    }
}
