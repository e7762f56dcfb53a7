//! Quoting for commands shown to the user (`--dry-run`, `-v`), so they can be pasted into a shell.

/// `s` as one shell word.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `words` as one command line.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quote("FI_PROVIDER=tcp"), "FI_PROVIDER=tcp");
        assert_eq!(quote("tcp;ofi_rxm"), "'tcp;ofi_rxm'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(join(&["a b", "c"]), "'a b' c");
    }
}
