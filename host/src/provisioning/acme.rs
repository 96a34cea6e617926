//! Certificates from an ACME certificate authority (instant-acme): the account kept in
//! the store (one per directory, shared by every gateway), an order per website for its
//! domain and subdomains, answered by HTTP-01 (every gateway answers
//! `/.well-known/acme-challenge/{token}` from the store) or TLS-ALPN-01 (every gateway
//! answers an `acme-tls/1` handshake with the challenge certificate from the store).
//! `Retry-After` is honoured while the order is polled.

use botgate_model::Certificate;
use botgate_store::{Store, StoreError};
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Let's Encrypt's production directory, the default.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// Which challenge proves control of a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcmeChallenge {
    /// A plain-HTTP request to port 80 for `/.well-known/acme-challenge/{token}`.
    Http01,
    /// A TLS handshake on port 443 offering only the `acme-tls/1` protocol.
    TlsAlpn01,
}

/// How certificates are obtained.
#[derive(Debug, Clone)]
pub struct AcmeConfig {
    /// The CA's directory URL.
    pub directory: String,
    /// `mailto:` contacts for the account.
    pub contact: Vec<String>,
    /// A root (PEM) to trust for the directory itself, for a test CA (Pebble).
    pub directory_root: Option<PathBuf>,
    pub challenge: AcmeChallenge,
    /// The longest an order may take to become ready, and its certificate to come.
    pub order_timeout: Duration,
}

impl Default for AcmeConfig {
    fn default() -> Self {
        AcmeConfig {
            directory: LETS_ENCRYPT.to_owned(),
            contact: Vec::new(),
            directory_root: None,
            challenge: AcmeChallenge::Http01,
            order_timeout: Duration::from_secs(300),
        }
    }
}

/// Far in the future: how long the account's credentials are kept (they do not expire).
const FOREVER_MS: u64 = 253_402_300_799_000;
/// How long a challenge's answer is kept.
const ANSWER_MS: u64 = 3_600_000;

/// The store key of an HTTP-01 answer.
pub fn http01_key(token: &str) -> String {
    format!("acme-http-01:{token}")
}

/// The store key of a TLS-ALPN-01 challenge certificate (PEM certificate, then key).
pub fn tls_alpn01_key(domain: &str) -> String {
    format!("acme-tls-alpn-01:{}", domain.to_ascii_lowercase())
}

/// The HTTP-01 answer for `token`, if an issuance is waiting for it.
pub async fn http01_answer<S: Store>(store: &S, token: &str) -> Option<String> {
    if token.is_empty() || token.len() > 256 || !token.bytes().all(is_token_byte) {
        return None;
    }
    store
        .ephemeral(&http01_key(token), botgate_webhooks::now_ms())
        .await
        .ok()
        .flatten()
}

/// ACME tokens are base64url.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_'
}

/// The TLS-ALPN-01 challenge certificate for `domain`, if an issuance is waiting for it.
pub async fn tls_alpn01_certificate<S: Store>(
    store: &S,
    domain: &str,
    provider: &Arc<CryptoProvider>,
) -> Option<Arc<CertifiedKey>> {
    let stored = store
        .ephemeral(&tls_alpn01_key(domain), botgate_webhooks::now_ms())
        .await
        .ok()
        .flatten()?;
    let chain = CertificateDer::pem_slice_iter(stored.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let key = PrivateKeyDer::from_pem_slice(stored.as_bytes()).ok()?;
    // Not `from_der`: its key check parses the certificate, which refuses the critical
    // acmeIdentifier extension this certificate exists to carry.
    let key = provider.key_provider.load_private_key(key).ok()?;
    Some(Arc::new(CertifiedKey::new(chain, key)))
}

/// Obtains certificates.
pub struct Acme<S> {
    store: Arc<S>,
    config: AcmeConfig,
    account: tokio::sync::OnceCell<Account>,
}

/// Why a certificate was not issued. Its report (with sources) is the website's
/// `status_reason` when the issuance ends its `setup`.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
    #[error("the ACME client")]
    Client(#[source] instant_acme::Error),
    #[error("the store")]
    Store(#[from] StoreError),
    #[error("creating the ACME account at {directory}")]
    CreateAccount {
        directory: String,
        #[source]
        source: instant_acme::Error,
    },
    #[error("the ACME account's credentials")]
    Credentials(#[source] serde_json::Error),
    #[error("the ACME account vanished from the store")]
    AccountVanished,
    #[error("the stored ACME credentials are unreadable")]
    StoredCredentials(#[source] serde_json::Error),
    #[error("restoring the ACME account")]
    Restore(#[source] instant_acme::Error),
    #[error("the CA refused the order")]
    Order(#[source] instant_acme::Error),
    #[error("reading an authorization")]
    Authorization(#[source] instant_acme::Error),
    #[error("the CA's authorization for {identifier} is {status}")]
    AuthorizationStatus { identifier: String, status: String },
    #[error("the CA offers no {kind} challenge for {identifier}")]
    NoChallenge {
        kind: &'static str,
        identifier: String,
    },
    #[error("telling the CA the {kind} answer for {identifier} is ready")]
    SetReady {
        kind: &'static str,
        identifier: String,
        #[source]
        source: instant_acme::Error,
    },
    #[error("waiting for the CA to validate")]
    Validate(#[source] instant_acme::Error),
    #[error("the CA did not validate the names ({status}){problem}")]
    NotValidated { status: String, problem: String },
    #[error("finalizing the order")]
    Finalize(#[source] instant_acme::Error),
    #[error("downloading the certificate")]
    Download(#[source] instant_acme::Error),
    #[error("the TLS-ALPN-01 certificate for {domain}")]
    AlpnCertificate {
        domain: String,
        #[source]
        source: rcgen::Error,
    },
}

impl<S: Store> Acme<S> {
    pub fn new(store: Arc<S>, config: AcmeConfig) -> Acme<S> {
        Acme {
            store,
            config,
            account: tokio::sync::OnceCell::new(),
        }
    }

    fn builder(&self) -> Result<instant_acme::AccountBuilder, AcmeError> {
        match &self.config.directory_root {
            Some(root) => Account::builder_with_root(root),
            None => Account::builder(),
        }
        .map_err(AcmeError::Client)
    }

    /// The account: the one in the store for this directory, or a new one (stored; if
    /// another gateway stored one first, that one).
    async fn account(&self) -> Result<&Account, AcmeError> {
        self.account
            .get_or_try_init(|| async {
                let key = format!("acme-account:{}", self.config.directory);
                let now = botgate_webhooks::now_ms();
                if let Some(stored) = self.store.ephemeral(&key, now).await? {
                    return self.restore(&stored).await;
                }
                let contact: Vec<&str> = self.config.contact.iter().map(String::as_str).collect();
                let (account, credentials) = self
                    .builder()?
                    .create(
                        &NewAccount {
                            contact: &contact,
                            terms_of_service_agreed: true,
                            only_return_existing: false,
                        },
                        self.config.directory.clone(),
                        None,
                    )
                    .await
                    .map_err(|source| AcmeError::CreateAccount {
                        directory: self.config.directory.clone(),
                        source,
                    })?;
                let json = serde_json::to_string(&credentials).map_err(AcmeError::Credentials)?;
                if self.store.lease(&key, &json, now, FOREVER_MS).await? {
                    tracing::info!(directory = %self.config.directory, "ACME account created");
                    return Ok(account);
                }
                let stored = self
                    .store
                    .ephemeral(&key, now)
                    .await?
                    .ok_or(AcmeError::AccountVanished)?;
                self.restore(&stored).await
            })
            .await
    }

    async fn restore(&self, stored: &str) -> Result<Account, AcmeError> {
        let credentials: AccountCredentials =
            serde_json::from_str(stored).map_err(AcmeError::StoredCredentials)?;
        self.builder()?
            .from_credentials(credentials)
            .await
            .map_err(AcmeError::Restore)
    }

    /// A certificate for `names` (the first is the website's domain).
    pub async fn issue(&self, names: &[String]) -> Result<Certificate, AcmeError> {
        let account = self.account().await?;
        let identifiers: Vec<Identifier> = names
            .iter()
            .map(|name| Identifier::Dns(name.clone()))
            .collect();
        let mut order = account
            .new_order(&NewOrder::new(&identifiers))
            .await
            .map_err(AcmeError::Order)?;
        let mut answers = Vec::new();
        let outcome = self.answer_and_finish(&mut order, &mut answers).await;
        for key in answers {
            let _ = self.store.remove_ephemeral(&key).await;
        }
        outcome
    }

    async fn answer_and_finish(
        &self,
        order: &mut instant_acme::Order,
        answers: &mut Vec<String>,
    ) -> Result<Certificate, AcmeError> {
        let (kind, name) = match self.config.challenge {
            AcmeChallenge::Http01 => (ChallengeType::Http01, "http-01"),
            AcmeChallenge::TlsAlpn01 => (ChallengeType::TlsAlpn01, "tls-alpn-01"),
        };
        let until = botgate_webhooks::now_ms() + ANSWER_MS;
        let mut authorizations = order.authorizations();
        while let Some(authorization) = authorizations.next().await {
            let mut authorization = authorization.map_err(AcmeError::Authorization)?;
            match authorization.status {
                AuthorizationStatus::Pending => {}
                AuthorizationStatus::Valid => continue,
                other => {
                    return Err(AcmeError::AuthorizationStatus {
                        identifier: authorization.identifier().to_string(),
                        status: format!("{other:?}"),
                    });
                }
            }
            let identifier = authorization.identifier().to_string();
            let mut challenge =
                authorization
                    .challenge(kind.clone())
                    .ok_or_else(|| AcmeError::NoChallenge {
                        kind: name,
                        identifier: identifier.clone(),
                    })?;
            let key_authorization = challenge.key_authorization();
            match self.config.challenge {
                AcmeChallenge::Http01 => {
                    let key = http01_key(&challenge.token);
                    self.store
                        .put_ephemeral(&key, key_authorization.as_str(), until)
                        .await?;
                    answers.push(key);
                }
                AcmeChallenge::TlsAlpn01 => {
                    let pem = tls_alpn01_pem(&identifier, key_authorization.digest().as_ref())?;
                    let key = tls_alpn01_key(&identifier);
                    self.store.put_ephemeral(&key, &pem, until).await?;
                    answers.push(key);
                }
            }
            challenge
                .set_ready()
                .await
                .map_err(|source| AcmeError::SetReady {
                    kind: name,
                    identifier,
                    source,
                })?;
        }
        let patience = RetryPolicy::new()
            .initial_delay(Duration::from_millis(250))
            .backoff(1.5)
            .timeout(self.config.order_timeout);
        let status = order
            .poll_ready(&patience)
            .await
            .map_err(AcmeError::Validate)?;
        if status != OrderStatus::Ready {
            let problem = order
                .state()
                .error
                .as_ref()
                .map(|problem| format!(": {problem}"))
                .unwrap_or_default();
            return Err(AcmeError::NotValidated {
                status: format!("{status:?}"),
                problem,
            });
        }
        let private = order.finalize().await.map_err(AcmeError::Finalize)?;
        let public = order
            .poll_certificate(&patience)
            .await
            .map_err(AcmeError::Download)?;
        Ok(Certificate { public, private })
    }
}

/// The self-signed TLS-ALPN-01 certificate for `domain` carrying `digest` in its
/// acmeIdentifier extension (RFC 8737), PEM certificate then PEM key.
fn tls_alpn01_pem(domain: &str, digest: &[u8]) -> Result<String, AcmeError> {
    let failed = |source| AcmeError::AlpnCertificate {
        domain: domain.to_owned(),
        source,
    };
    let mut params = rcgen::CertificateParams::new(vec![domain.to_owned()]).map_err(failed)?;
    params
        .custom_extensions
        .push(rcgen::CustomExtension::new_acme_identifier(digest));
    let key = rcgen::KeyPair::generate().map_err(failed)?;
    let certificate = params.self_signed(&key).map_err(failed)?;
    Ok(format!("{}{}", certificate.pem(), key.serialize_pem()))
}

/// The data plane's view of the challenge answers in the store.
pub struct StoreAnswers<S> {
    store: Arc<S>,
    provider: Arc<CryptoProvider>,
}

impl<S> StoreAnswers<S> {
    pub fn new(store: Arc<S>, provider: Arc<CryptoProvider>) -> StoreAnswers<S> {
        StoreAnswers { store, provider }
    }
}

impl<S: Store> crate::gateway::AcmeAnswers for StoreAnswers<S> {
    fn http01<'a>(
        &'a self,
        token: &'a str,
    ) -> crate::gateway::service::BoxFuture<'a, Option<String>> {
        Box::pin(http01_answer(self.store.as_ref(), token))
    }

    fn tls_alpn01<'a>(
        &'a self,
        domain: &'a str,
    ) -> crate::gateway::service::BoxFuture<'a, Option<Arc<CertifiedKey>>> {
        Box::pin(tls_alpn01_certificate(
            self.store.as_ref(),
            domain,
            &self.provider,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use botgate_store::SharedState;

    #[test]
    fn the_tls_alpn01_certificate_reads_back_as_a_served_key() {
        let pem = tls_alpn01_pem("secure.example", &[7u8; 32]).unwrap();
        let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        assert_eq!(chain.len(), 1);
        assert!(PrivateKeyDer::from_pem_slice(pem.as_bytes()).is_ok());
    }

    #[tokio::test]
    async fn a_stored_tls_alpn01_certificate_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let store = botgate_store::EmbeddedStore::open(dir.path()).unwrap();
        let provider = crate::gateway::tls::provider();
        assert!(
            tls_alpn01_certificate(&store, "secure.example", &provider)
                .await
                .is_none()
        );
        let pem = tls_alpn01_pem("secure.example", &[7u8; 32]).unwrap();
        store
            .put_ephemeral(
                &tls_alpn01_key("Secure.Example"),
                &pem,
                botgate_webhooks::now_ms() + 60_000,
            )
            .await
            .unwrap();
        let key = tls_alpn01_certificate(&store, "secure.example", &provider)
            .await
            .expect("the stored challenge certificate");
        assert_eq!(key.cert.len(), 1);
    }
}
