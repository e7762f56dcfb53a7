//! `diwarp run --auth`: a fresh key for the job, handed to every rank in the environment
//! (`FI_DIWARP_AUTH_KEY`), which the launchers forward to every host.

use std::io::Read;

const KEY_VAR: &str = "FI_DIWARP_AUTH_KEY";
const FILE_VAR: &str = "FI_DIWARP_AUTH_KEY_FILE";
const MODE_VAR: &str = "FI_DIWARP_AUTH";
/// Random bytes per key (written as twice as many hex digits).
const KEY_BYTES: usize = 32;

/// Turns authenticated mode on in `env` (the caller's environment, as the launch plan reads
/// it) with a fresh random key, unless the caller gave a key of their own, which is kept.
pub fn add_fresh(env: &mut Vec<(String, String)>) -> Result<(), String> {
    let has = |env: &[(String, String)], k: &str| env.iter().any(|(n, _)| n == k);
    let off = env
        .iter()
        .any(|(k, v)| k == MODE_VAR && (v.trim().eq_ignore_ascii_case("off") || v.trim() == "0"));
    if off {
        return Err(format!("--auth and {MODE_VAR}=off contradict each other"));
    }
    env.retain(|(k, _)| k != MODE_VAR);
    env.push((MODE_VAR.into(), "on".into()));
    if has(env, KEY_VAR) || has(env, FILE_VAR) {
        return Ok(());
    }
    let mut bytes = [0u8; KEY_BYTES];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("--auth: cannot read /dev/urandom for a key: {e}"))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    env.push((KEY_VAR.into(), hex));
    Ok(())
}

/// `k=v` as the verbose and dry-run output show it: a key is not printed.
pub fn shown(k: &str, v: &str) -> String {
    if k == KEY_VAR {
        format!("{k}=<{} bytes, not shown>", v.len())
    } else {
        format!("{k}={v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn get<'a>(e: &'a [(String, String)], k: &str) -> Option<&'a str> {
        e.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn every_job_gets_a_fresh_key_unless_the_caller_gave_one() {
        let (mut a, mut b) = (env(&[("PATH", "/bin")]), env(&[]));
        add_fresh(&mut a).unwrap();
        add_fresh(&mut b).unwrap();
        let (ka, kb) = (get(&a, KEY_VAR).unwrap(), get(&b, KEY_VAR).unwrap());
        assert_eq!(ka.len(), 2 * KEY_BYTES);
        assert!(ka.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(ka, kb, "two jobs, two keys");
        assert_eq!(get(&a, MODE_VAR), Some("on"));
        let mut mine = env(&[(FILE_VAR, "/home/me/job.key"), (MODE_VAR, "1")]);
        add_fresh(&mut mine).unwrap();
        assert_eq!(get(&mine, KEY_VAR), None);
        assert_eq!(get(&mine, MODE_VAR), Some("on"));
        assert_eq!(mine.iter().filter(|(k, _)| k == MODE_VAR).count(), 1);
        assert!(add_fresh(&mut env(&[(MODE_VAR, "off")])).is_err());
        assert_eq!(
            shown(KEY_VAR, ka),
            format!("{KEY_VAR}=<64 bytes, not shown>")
        );
        assert_eq!(shown("A", "b"), "A=b");
    }
}
