//! TLS termination: the certificate for each handshake is chosen by SNI from the
//! mounted services' certificates ([`HostCertificates`], the API's host names), then the
//! websites' stored certificates (parsed once per certificate and cached, so a changed
//! certificate is served from the next handshake on, without a restart), with a
//! fallback certificate for names no website covers.

use arc_swap::ArcSwap;
use botgate_store::Follower;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Why a certificate could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("the certificate bundle holds no PEM certificate")]
    NoCertificate,
    #[error("unreadable PEM: {0}")]
    Pem(String),
    #[error("the private key does not fit the certificate or cannot sign: {0}")]
    Key(String),
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("generating the fallback certificate: {0}")]
    Generate(String),
}

/// A certificate and key from PEM text: the leaf first, then its chain.
pub fn certified_key(
    public_pem: &str,
    private_pem: &str,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertificateError> {
    let chain = CertificateDer::pem_slice_iter(public_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| CertificateError::Pem(err.to_string()))?;
    if chain.is_empty() {
        return Err(CertificateError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(private_pem.as_bytes())
        .map_err(|err| CertificateError::Pem(err.to_string()))?;
    CertifiedKey::from_der(chain, key, provider)
        .map_err(|err| CertificateError::Key(err.to_string()))
}

/// The fallback certificate: the operator's files, or a self-signed one made now.
pub fn fallback_key(
    files: Option<(&Path, &Path)>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, CertificateError> {
    let (public, private) = match files {
        Some((cert, key)) => {
            let read = |path: &Path| {
                std::fs::read_to_string(path).map_err(|source| CertificateError::Io {
                    path: path.display().to_string(),
                    source,
                })
            };
            (read(cert)?, read(key)?)
        }
        None => {
            let generated = rcgen::generate_simple_self_signed(vec!["botgate.invalid".into()])
                .map_err(|err| CertificateError::Generate(err.to_string()))?;
            (generated.cert.pem(), generated.signing_key.serialize_pem())
        }
    };
    certified_key(&public, &private, provider)
}

/// The certificates of host names the gateway answers for itself (the management
/// API's), by name; one is swapped whole when it is renewed. A reserved name without
/// a certificate yet gets the fallback, never a website's. Names whose certificate is
/// due are awaiting one: the CA's challenges for them are answered.
#[derive(Default)]
pub struct HostCertificates {
    keys: ArcSwap<HashMap<String, Option<Arc<CertifiedKey>>>>,
    awaiting: Mutex<Vec<String>>,
}

impl HostCertificates {
    /// Makes `names` this gateway's own, before any certificate of theirs is known.
    pub fn reserve(&self, names: &[String]) {
        self.keys.rcu(|keys| {
            let mut keys = HashMap::clone(keys);
            for name in names {
                keys.entry(name.clone()).or_insert(None);
            }
            keys
        });
    }

    /// Gives `names` back: from the next handshake on they are websites' names again.
    pub fn release(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        self.keys.rcu(|keys| {
            let mut keys = HashMap::clone(keys);
            for name in names {
                keys.remove(name);
            }
            keys
        });
        self.set_awaiting(names, false);
    }

    /// Whether `name` is one of these names.
    pub fn is_reserved(&self, name: &str) -> bool {
        let keys = self.keys.load();
        !keys.is_empty() && keys.contains_key(name)
    }

    /// Marks `names` as awaiting an ACME certificate, or not.
    pub fn set_awaiting(&self, names: &[String], awaiting: bool) {
        let mut list = self.awaiting.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|name| !names.contains(name));
        if awaiting {
            list.extend_from_slice(names);
        }
    }

    /// Whether `name` awaits an ACME certificate.
    pub fn awaits(&self, name: &str) -> bool {
        let list = self.awaiting.lock().unwrap_or_else(|e| e.into_inner());
        list.iter().any(|awaiting| awaiting == name)
    }

    /// Serves `key` for every reserved name of `names` from the next handshake on (a
    /// name released meanwhile stays a website's).
    pub fn install(&self, names: &[String], key: Arc<CertifiedKey>) {
        self.keys.rcu(|keys| {
            let mut keys = HashMap::clone(keys);
            for name in names {
                if let Some(slot) = keys.get_mut(name) {
                    *slot = Some(key.clone());
                }
            }
            keys
        });
    }

    /// `None` when `name` is not one of these names; else its certificate, if it has
    /// one yet.
    pub fn get(&self, name: &str) -> Option<Option<Arc<CertifiedKey>>> {
        let keys = self.keys.load();
        if keys.is_empty() {
            return None;
        }
        keys.get(name).cloned()
    }
}

/// A parsed website certificate, the index entry it was read from (held weakly, so its
/// address names no other entry while this lives) and the fingerprint of its PEM (a
/// write that left the certificate as it was parses nothing).
struct Cached {
    record: std::sync::Weak<botgate_store::WebsiteRecord>,
    fingerprint: u64,
    key: Option<Arc<CertifiedKey>>,
}

/// Picks the certificate of each handshake by SNI.
pub struct SniResolver {
    hosts: Arc<HostCertificates>,
    websites: Arc<Follower>,
    provider: Arc<CryptoProvider>,
    fallback: Arc<CertifiedKey>,
    parsed: Mutex<HashMap<String, Cached>>,
}

impl std::fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniResolver").finish_non_exhaustive()
    }
}

fn fingerprint(public: &str, private: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    public.hash(&mut hasher);
    private.hash(&mut hasher);
    hasher.finish()
}

impl SniResolver {
    pub fn new(
        hosts: Arc<HostCertificates>,
        websites: Arc<Follower>,
        provider: Arc<CryptoProvider>,
        fallback: CertifiedKey,
    ) -> SniResolver {
        SniResolver {
            hosts,
            websites,
            provider,
            fallback: Arc::new(fallback),
            parsed: Mutex::new(HashMap::new()),
        }
    }

    /// The certificate for `server_name`, when a website covering it has one that works.
    /// A handshake of a website whose index entry has not changed since its certificate
    /// was parsed reads the cache alone; the PEM is hashed and parsed outside the lock,
    /// so no handshake waits behind another website's parse.
    pub fn website_key(&self, server_name: &str) -> Option<Arc<CertifiedKey>> {
        let index = self.websites.index();
        let record = index.by_host(server_name)?;
        let certificate = record.website.certificate.as_ref()?;
        let domain = record.website.domain.as_str();
        let cached = |parsed: &HashMap<String, Cached>, fingerprint: Option<u64>| {
            parsed
                .get(domain)
                .filter(|c| match fingerprint {
                    None => std::ptr::eq(c.record.as_ptr(), Arc::as_ptr(record)),
                    Some(print) => c.fingerprint == print,
                })
                .map(|c| c.key.clone())
        };
        if let Some(key) = cached(&self.lock_parsed(), None) {
            return key;
        }
        let print = fingerprint(&certificate.public, &certificate.private);
        let key = match cached(&self.lock_parsed(), Some(print)) {
            Some(key) => key,
            None => {
                match certified_key(&certificate.public, &certificate.private, &self.provider) {
                    Ok(key) => Some(Arc::new(key)),
                    Err(err) => {
                        tracing::warn!(domain, %err, "website certificate unusable; serving the fallback");
                        None
                    }
                }
            }
        };
        let mut parsed = self.lock_parsed();
        // Forget certificates of websites that are gone, now and then.
        if parsed.len() > 2 * index.len() + 16 {
            parsed.retain(|domain, _| index.website(domain).is_some());
        }
        parsed.insert(
            domain.to_owned(),
            Cached {
                record: Arc::downgrade(record),
                fingerprint: print,
                key: key.clone(),
            },
        );
        key
    }

    fn lock_parsed(&self) -> std::sync::MutexGuard<'_, HashMap<String, Cached>> {
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = hello.server_name().and_then(|name| {
            let name = name.to_ascii_lowercase();
            match self.hosts.get(&name) {
                Some(own) => own,
                None => self.website_key(&name),
            }
        });
        Some(key.unwrap_or_else(|| self.fallback.clone()))
    }
}

/// The server configuration: TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`.
pub fn server_config(
    resolver: Arc<SniResolver>,
    provider: Arc<CryptoProvider>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The crypto provider every TLS part of the gateway uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mounted name is the gateway's own from its start: before its certificate
    /// exists it is still no website's (the fallback answers), and it awaits a
    /// certificate only while told so.
    #[test]
    fn mounted_names_are_reserved_before_their_certificate() {
        let hosts = HostCertificates::default();
        let names = ["api.example".to_owned()];
        assert_eq!(hosts.get("api.example").map(|key| key.is_some()), None);
        hosts.reserve(&names);
        assert!(hosts.is_reserved("api.example"));
        assert!(!hosts.is_reserved("shop.example"));
        assert_eq!(
            hosts.get("api.example").map(|key| key.is_some()),
            Some(false)
        );
        assert_eq!(hosts.get("shop.example").map(|key| key.is_some()), None);
        let key = fallback_key(None, &provider()).unwrap();
        hosts.install(&names, Arc::new(key));
        assert_eq!(
            hosts.get("api.example").map(|key| key.is_some()),
            Some(true)
        );
        assert!(!hosts.awaits("api.example"));
        hosts.set_awaiting(&names, true);
        assert!(hosts.awaits("api.example"));
        hosts.set_awaiting(&names, false);
        assert!(!hosts.awaits("api.example"));

        // Released, the name is no longer the gateway's, and a late certificate for it
        // (a keeper stopped mid-issuance) does not take it back.
        hosts.set_awaiting(&names, true);
        hosts.release(&names);
        assert!(!hosts.is_reserved("api.example"));
        assert!(!hosts.awaits("api.example"));
        hosts.install(&names, Arc::new(fallback_key(None, &provider()).unwrap()));
        assert_eq!(hosts.get("api.example").map(|key| key.is_some()), None);
    }
}
