//! Signed components, when the operator asks for them: the ed25519 public keys a pushed
//! component must be signed with (`--ruleset-trusted-key`), and the check of a detached
//! signature (64 bytes, base64) over the component's bytes.

use base64::Engine;
use rustls::pki_types::SubjectPublicKeyInfoDer;
use rustls::pki_types::pem::PemObject;
use std::path::{Path, PathBuf};

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410), before the 32 key bytes.
const ED25519_SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// Why a key file or a signature was refused.
#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("reading the trusted key {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{0}: not an ed25519 public key (a PEM `PUBLIC KEY`, as `openssl pkey -pubout` writes, or 32 bytes in base64)"
    )]
    NotAKey(PathBuf),
    #[error("{name} {version} is not signed, and the gateways take signed components only")]
    Unsigned { name: String, version: String },
    #[error("the signature of {name} {version} is not one of a trusted key's")]
    BadSignature { name: String, version: String },
}

/// One trusted key.
#[derive(Debug, Clone)]
struct TrustedKey {
    /// The first 16 hex digits of the key's SHA-256, for logs.
    id: String,
    key: [u8; 32],
}

/// The keys whose signature a pushed component needs; none: signatures are not needed.
#[derive(Debug, Clone, Default)]
pub struct TrustedKeys {
    keys: Vec<TrustedKey>,
}

impl TrustedKeys {
    /// Reads each file: a PEM `PUBLIC KEY`, or the 32 key bytes in base64.
    pub fn read(files: &[PathBuf]) -> Result<TrustedKeys, SigningError> {
        let keys = files
            .iter()
            .map(|path| read_key(path))
            .collect::<Result<_, _>>()?;
        Ok(TrustedKeys { keys })
    }

    /// Whether components must be signed.
    pub fn required(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The id of the trusted key that made `signature` (base64) over `bytes`; `Ok(None)`
    /// when no key is trusted (anything goes).
    pub fn check(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
        signature: Option<&str>,
    ) -> Result<Option<String>, SigningError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let Some(signature) = signature else {
            return Err(SigningError::Unsigned {
                name: name.to_owned(),
                version: version.to_owned(),
            });
        };
        let signature = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .unwrap_or_default();
        self.keys
            .iter()
            .find(|trusted| {
                ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, trusted.key)
                    .verify(bytes, &signature)
                    .is_ok()
            })
            .map(|trusted| Some(trusted.id.clone()))
            .ok_or_else(|| SigningError::BadSignature {
                name: name.to_owned(),
                version: version.to_owned(),
            })
    }
}

fn read_key(path: &Path) -> Result<TrustedKey, SigningError> {
    let text = std::fs::read(path).map_err(|source| SigningError::Read {
        path: path.to_owned(),
        source,
    })?;
    let not_a_key = || SigningError::NotAKey(path.to_owned());
    let key: [u8; 32] = match SubjectPublicKeyInfoDer::from_pem_slice(&text) {
        Ok(spki) => spki
            .as_ref()
            .strip_prefix(ED25519_SPKI_PREFIX.as_slice())
            .and_then(|raw| raw.try_into().ok())
            .ok_or_else(not_a_key)?,
        Err(_) => base64::engine::general_purpose::STANDARD
            .decode(String::from_utf8_lossy(&text).trim())
            .ok()
            .and_then(|raw| raw.try_into().ok())
            .ok_or_else(not_a_key)?,
    };
    let id = botgate_store::sha256_hex(&key)[..16].to_owned();
    Ok(TrustedKey { id, key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::KeyPair;

    fn pair() -> ring::signature::Ed25519KeyPair {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap()
    }

    #[test]
    fn only_a_trusted_key_s_signature_of_these_bytes_passes() {
        let (trusted, other) = (pair(), pair());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("trusted.pub");
        let spki = [
            ED25519_SPKI_PREFIX.as_slice(),
            trusted.public_key().as_ref(),
        ]
        .concat();
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(spki)
        );
        std::fs::write(&file, pem).unwrap();
        let keys = TrustedKeys::read(std::slice::from_ref(&file)).unwrap();
        assert!(keys.required());
        let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
        let bytes = b"\0asm component";
        let good = b64(trusted.sign(bytes).as_ref());
        assert!(keys.check("x", "1", bytes, Some(&good)).unwrap().is_some());
        for (signature, why) in [
            (Some(b64(other.sign(bytes).as_ref())), "another key"),
            (
                Some(b64(trusted.sign(b"other bytes").as_ref())),
                "other bytes",
            ),
            (Some("not base64!".to_owned()), "not base64"),
            (None, "no signature"),
        ] {
            assert!(
                keys.check("x", "1", bytes, signature.as_deref()).is_err(),
                "{why}"
            );
        }
        // Without trusted keys anything goes.
        assert_eq!(
            TrustedKeys::default().check("x", "1", bytes, None).unwrap(),
            None
        );
        // A file that holds no ed25519 key is named.
        std::fs::write(
            &file,
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
        )
        .unwrap();
        let refused = TrustedKeys::read(std::slice::from_ref(&file)).unwrap_err();
        assert!(refused.to_string().contains("trusted.pub"), "{refused}");
    }
}
