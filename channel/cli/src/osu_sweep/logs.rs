//! What a run's log says: whether OSU's validation failed although the launch succeeded, and
//! the lines that show why a run failed.

/// OSU prints "Fail" as a word in its validation column, or a DATA VALIDATION ERROR line.
pub fn validation_failed(log: &str) -> bool {
    let space = |c: Option<char>| c.is_none_or(char::is_whitespace);
    log.contains("VALIDATION ERROR")
        || log.lines().any(|l| {
            l.match_indices("Fail").any(|(i, w)| {
                space(l[..i].chars().next_back()) && space(l[i + w.len()..].chars().next())
            })
        })
}

/// The lines of a failed run's log to show: the first 4 that name an error, else its last 4
/// that are not blank.
pub fn excerpt(log: &str) -> Vec<&str> {
    const MARKS: [&str; 6] = [
        "Fail",
        "ERROR",
        "Error",
        "Segmentation",
        "TIMEOUT",
        "signal",
    ];
    let marked: Vec<&str> = log
        .lines()
        .filter(|l| MARKS.iter().any(|m| l.contains(m)))
        .take(4)
        .collect();
    if !marked.is_empty() {
        return marked;
    }
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| !l.trim_start_matches(' ').is_empty())
        .collect();
    lines[lines.len().saturating_sub(4)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_failures() {
        assert!(validation_failed(
            "# Size Latency Validation\n1 2.50 Fail\n"
        ));
        assert!(validation_failed("Fail\n"));
        assert!(validation_failed("1\t2.5\tFail\t\n"));
        assert!(validation_failed("DATA VALIDATION ERROR at 3\n"));
        assert!(!validation_failed(
            "# Size Latency Validation\n1 2.50 Pass\n"
        ));
        assert!(!validation_failed("Failed to x\nFailure\nnoFail\n"));
    }

    #[test]
    fn excerpts() {
        let log =
            "a\nrank 1: Error x\n\nb\nkilled by signal 9\nc\nERROR 1\nFail 2\nSegmentation 3\n";
        assert_eq!(
            excerpt(log),
            ["rank 1: Error x", "killed by signal 9", "ERROR 1", "Fail 2"]
        );
        assert_eq!(excerpt("1\n2\n  \n3\n4\n5\n\n"), ["2", "3", "4", "5"]);
        assert_eq!(excerpt("only\n"), ["only"]);
        assert!(excerpt("").is_empty());
    }
}
