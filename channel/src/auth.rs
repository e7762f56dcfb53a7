//! Where authenticated mode's job key comes from, and whether the mode is on
//! (`FI_DIWARP_AUTH`, `FI_DIWARP_AUTH_KEY`, `FI_DIWARP_AUTH_KEY_FILE`; `diwarp run` makes a
//! fresh key per job). The tag itself is iwarp's (`iwarp::auth`).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use iwarp::auth::{JobKey, MIN_SECRET_LEN};

/// The settings as given, before any file is read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthParams {
    /// `FI_DIWARP_AUTH`: `Some(true)` on, `Some(false)` off, `None` on if a key is given.
    pub mode: Option<bool>,
    /// `FI_DIWARP_AUTH_KEY`: the secret itself (its bytes, at least 16).
    pub key: Option<String>,
    /// `FI_DIWARP_AUTH_KEY_FILE`: a file holding it, readable by its owner only.
    pub key_file: Option<String>,
}

/// Why the job key cannot be had; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error(
        "FI_DIWARP_AUTH=on needs the job's key: set FI_DIWARP_AUTH_KEY, or \
         FI_DIWARP_AUTH_KEY_FILE to a file only its owner can read (diwarp run makes one per job)"
    )]
    NoKey,
    #[error("FI_DIWARP_AUTH_KEY and FI_DIWARP_AUTH_KEY_FILE are both set; give one")]
    TwoKeys,
    #[error("FI_DIWARP_AUTH_KEY_FILE={0}: cannot read it: {1}")]
    Unreadable(String, String),
    #[error(
        "FI_DIWARP_AUTH_KEY_FILE={0}: its mode is {1:03o}, so others may read it; it must be \
         readable by its owner only (chmod 600 {0})"
    )]
    Loose(String, u32),
    #[error("FI_DIWARP_AUTH_KEY_FILE={0}: it belongs to uid {1}, not to this user ({2})")]
    NotOwner(String, u32, u32),
    #[error("{0}: the key is {1} bytes; it must be at least {MIN_SECRET_LEN}")]
    Short(&'static str, usize),
}

impl AuthParams {
    /// The job key if authenticated mode is on; `Ok(None)` if it is off.
    pub fn job_key(&self) -> Result<Option<Arc<JobKey>>, AuthError> {
        if self.mode == Some(false) {
            return Ok(None);
        }
        let (secret, from) = match (&self.key, &self.key_file) {
            (Some(_), Some(_)) => return Err(AuthError::TwoKeys),
            (Some(k), None) => (k.trim().as_bytes().to_vec(), "FI_DIWARP_AUTH_KEY"),
            (None, Some(f)) => (read_key_file(Path::new(f))?, "FI_DIWARP_AUTH_KEY_FILE"),
            (None, None) if self.mode == Some(true) => return Err(AuthError::NoKey),
            (None, None) => return Ok(None),
        };
        JobKey::new(&secret)
            .map(|k| Some(Arc::new(k)))
            .map_err(|_| AuthError::Short(from, secret.len()))
    }
}

/// A key file's secret (its bytes, without the line end), refused, as ssh refuses a private
/// key, unless only its owner, who must be this user, can read it.
fn read_key_file(path: &Path) -> Result<Vec<u8>, AuthError> {
    let shown = || path.display().to_string();
    let meta = fs::metadata(path).map_err(|e| AuthError::Unreadable(shown(), e.to_string()))?;
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(AuthError::Loose(shown(), mode));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(AuthError::NotOwner(shown(), meta.uid(), me));
    }
    let mut bytes = fs::read(path).map_err(|e| AuthError::Unreadable(shown(), e.to_string()))?;
    while bytes.last().is_some_and(|b| b.is_ascii_whitespace()) {
        bytes.pop();
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SECRET: &str = "0123456789abcdef0123456789abcdef";

    fn params(mode: Option<bool>, key: Option<&str>, file: Option<&Path>) -> AuthParams {
        AuthParams {
            mode,
            key: key.map(String::from),
            key_file: file.map(|p| p.display().to_string()),
        }
    }

    fn key_file(name: &str, mode: u32, body: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("diwarp-auth-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        fs::write(&p, body).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_key_turns_the_mode_on_unless_it_is_off() {
        assert_eq!(params(None, None, None).job_key(), Ok(None));
        let k = params(None, Some(SECRET), None).job_key().unwrap().unwrap();
        assert_eq!(*k, JobKey::new(SECRET.as_bytes()).unwrap());
        assert_eq!(params(Some(false), Some(SECRET), None).job_key(), Ok(None));
        assert_eq!(
            params(Some(true), None, None).job_key(),
            Err(AuthError::NoKey)
        );
        assert_eq!(
            params(Some(true), Some("short"), None).job_key(),
            Err(AuthError::Short("FI_DIWARP_AUTH_KEY", 5))
        );
    }

    #[test]
    fn a_key_file_gives_the_same_key_as_its_contents() {
        let f = key_file("good", 0o600, &format!("{SECRET}\n"));
        let k = params(Some(true), None, Some(&f))
            .job_key()
            .unwrap()
            .unwrap();
        assert_eq!(*k, JobKey::new(SECRET.as_bytes()).unwrap());
        let f = key_file("read-only", 0o400, SECRET);
        assert!(params(None, None, Some(&f)).job_key().unwrap().is_some());
        assert_eq!(
            params(None, Some(SECRET), Some(&f)).job_key(),
            Err(AuthError::TwoKeys)
        );
    }

    #[test]
    fn a_key_file_others_may_read_is_refused() {
        for mode in [0o644, 0o640, 0o604, 0o660] {
            let f = key_file(&format!("loose-{mode:o}"), mode, SECRET);
            let e = params(None, None, Some(&f)).job_key().unwrap_err();
            assert_eq!(e, AuthError::Loose(f.display().to_string(), mode));
            assert!(e.to_string().contains("chmod 600"), "{e}");
        }
        let missing = Path::new("/nonexistent/diwarp.key");
        assert!(matches!(
            params(None, None, Some(missing)).job_key(),
            Err(AuthError::Unreadable(..))
        ));
        if nix::unistd::geteuid().is_root() {
            let f = key_file("theirs", 0o600, SECRET);
            std::os::unix::fs::chown(&f, Some(12_345), None).unwrap();
            assert_eq!(
                params(None, None, Some(&f)).job_key(),
                Err(AuthError::NotOwner(f.display().to_string(), 12_345, 0))
            );
        }
        let f = key_file("short", 0o600, "tiny\n");
        assert_eq!(
            params(None, None, Some(&f)).job_key(),
            Err(AuthError::Short("FI_DIWARP_AUTH_KEY_FILE", 4))
        );
    }
}
