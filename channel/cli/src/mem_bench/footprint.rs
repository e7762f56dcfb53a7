//! What one launch of footprint (channel/mpi-bench/footprint.c) left: the samples its rank 0
//! printed, whether it finished, and how many of diwarp's ranks reported at finalize.

/// The columns of raw.csv: the launch's, then footprint's `mem,RANK,...` line without "mem".
pub const RAW_HEADER: &str = "transport,ranks,run,rank,rss0_kb,rss1_kb,hwm_kb,anon0_kb,anon1_kb,\
                              pss1_kb,sock1,kheld0_kb,kheld1_kb,app_kb";

/// The fields after "mem," of every sample line of `log`: `mem,RANK,RSS0,...,APP`, 11 numbers.
pub fn samples(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(|l| l.strip_prefix("mem,"))
        .filter(|rest| {
            let f: Vec<&str> = rest.split(',').collect();
            f.len() == 11
                && f.iter()
                    .all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect()
}

/// Whether footprint got to its last line.
pub fn done(log: &str) -> bool {
    log.lines().any(|l| l.starts_with("# footprint: done"))
}

/// The lines of a diwarp report (FI_DIWARP_MEM_REPORT's JSON lines) written at finalize.
pub fn finalize_lines(report: &str) -> usize {
    report
        .lines()
        .filter(|l| {
            l.match_indices("\"at\":").any(|(i, m)| {
                l[i + m.len()..]
                    .trim_start_matches(' ')
                    .starts_with("\"finalize\"")
            })
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_lines() {
        let log = "# footprint\nmem,0,1,2,3,4,5,6,7,8,9,10\nmem,1,1,2,3,4,5,6,7,8,9\n\
                   mem,1,1,2,3,4,5,6,7,8,9,x\nmem,1,1,2,3,4,5,6,7,8,9,10,11\n\
                   mem,1,1,2,3,4,5,6,7,8,,10\nxmem,1,1,2,3,4,5,6,7,8,9,10\n\
                   mem,1,11,12,13,14,15,16,17,18,19,20\n# footprint: done (2 ranks, 1 rounds)\n";
        assert_eq!(
            samples(log),
            ["0,1,2,3,4,5,6,7,8,9,10", "1,11,12,13,14,15,16,17,18,19,20"]
        );
        assert!(done(log));
        assert!(!done("mem,0,1\n#footprint: done\n"));
        assert_eq!(RAW_HEADER.split(',').count(), 3 + 11);
    }

    #[test]
    fn finalize_lines_of_a_report() {
        let rep = "{\"at\":\"finalize\",\"pid\":1}\n{\"at\": \"interval\"}\n\
                   {\"pid\":2, \"at\":   \"finalize\"}\n{\"x\":\"at\",\"finalize\":1}\n";
        assert_eq!(finalize_lines(rep), 2);
        assert_eq!(finalize_lines(""), 0);
    }
}
