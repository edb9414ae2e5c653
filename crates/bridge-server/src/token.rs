//! The bearer token: 32 fresh random bytes per launch, hex-encoded, in a
//! `0600` file inside a new `0700` temporary directory that is removed when
//! the bridge exits. The token is never printed; only the file's path is.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use subtle::ConstantTimeEq;

pub struct TokenFile {
    /// Removed (with the file) on drop.
    dir: Mutex<Option<tempfile::TempDir>>,
    path: PathBuf,
    token: String,
}

impl TokenFile {
    pub fn create() -> std::io::Result<TokenFile> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
        let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let dir = tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .prefix("agentlane-bridge-")
            .tempdir()?;
        let path = dir.path().join("token");
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        file.write_all(token.as_bytes())?;
        file.sync_all()?;
        Ok(TokenFile {
            dir: Mutex::new(Some(dir)),
            path,
            token,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an `Authorization` header value carries the token, compared
    /// in constant time (only a length difference ends the comparison early,
    /// and the length is public).
    pub fn accepts(&self, authorization: &[u8]) -> bool {
        let Some(presented) = authorization.strip_prefix(b"Bearer ") else {
            return false;
        };
        presented.ct_eq(self.token.as_bytes()).into()
    }

    /// Removes the directory now (also done on drop).
    pub fn remove(&self) {
        let dir = self.dir.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(dir) = dir {
            let _ = dir.close();
        }
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_private_and_only_the_exact_token_is_accepted() {
        let token = TokenFile::create().unwrap();
        let mode = std::fs::metadata(token.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(token.path().parent().unwrap())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        let secret = std::fs::read_to_string(token.path()).unwrap();
        assert_eq!(secret.len(), 64);
        assert!(token.accepts(format!("Bearer {secret}").as_bytes()));
        assert!(!token.accepts(secret.as_bytes()));
        assert!(!token.accepts(format!("Bearer {}", &secret[1..]).as_bytes()));
        assert!(!token.accepts(format!("Bearer {secret}x").as_bytes()));
        let other = TokenFile::create().unwrap();
        assert_ne!(std::fs::read_to_string(other.path()).unwrap(), secret);
        let dir = token.path().parent().unwrap().to_owned();
        token.remove();
        assert!(!dir.exists());
    }
}
