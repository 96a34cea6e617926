//! A partner's certificate (`certs_issuer: custom`) checked before it is stored: PEM
//! that parses, a private key that belongs to the leaf, a chain in order (each
//! certificate signed by the next), names that cover the website's domain and every
//! subdomain, and dates that hold now. Each refusal names what is wrong.

use crate::invalid::Invalid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};
use x509_parser::prelude::{ASN1Time, FromDer, GeneralName, X509Certificate};

/// The largest certificate bundle or private key accepted, in bytes.
pub const MAX_PEM_BYTES: usize = 64 * 1024;

/// A certificate supplied by the partner (`certs_issuer: custom`), PEM text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    /// The certificate bundle: the leaf first, then the chain.
    pub public: String,
    /// The private key. Never shown by the API or sent in a webhook.
    pub private: String,
}

/// The most certificates a bundle may hold (a leaf and its intermediates).
pub const MAX_CHAIN: usize = 8;

/// The largest RSA key a website's certificate may have: every handshake signs with
/// it, and an 8192-bit key costs about eight times a 4096-bit one (public CAs issue
/// for 2048 to 4096 bits).
pub const MAX_RSA_BITS: usize = 4096;

const PUBLIC: &str = "certificate.public";
const PRIVATE: &str = "certificate.private";

/// What a certificate that passed the checks says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateFacts {
    /// The leaf's DNS names (subjectAltName), as written (wildcards included).
    pub names: Vec<String>,
    /// When the leaf stops being valid, in seconds since the Unix epoch.
    pub not_after: i64,
}

/// Whether `pattern` (a certificate's DNS name, perhaps `*.example.com`) covers `host`:
/// an exact match, or a wildcard standing for exactly one leftmost label.
pub fn name_covers(pattern: &str, host: &str) -> bool {
    let pattern = pattern.trim_end_matches('.');
    let host = host.trim_end_matches('.');
    match pattern.strip_prefix("*.") {
        Some(parent) => host
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest.eq_ignore_ascii_case(parent)),
        None => pattern.eq_ignore_ascii_case(host),
    }
}

/// What the first certificate of a bundle says of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSummary {
    /// Validity, in seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
    /// DNS names (subjectAltName), as written.
    pub names: Vec<String>,
    /// The issuer's organisation and common name (`Let's Encrypt, R11`), or its whole
    /// distinguished name when it has neither.
    pub issuer: String,
}

/// The validity, DNS names and issuer of the first certificate in `public_pem`,
/// without any other check.
pub fn leaf_summary(public_pem: &str) -> Option<LeafSummary> {
    let der = CertificateDer::pem_slice_iter(public_pem.as_bytes())
        .next()?
        .ok()?;
    let (_, leaf) = X509Certificate::from_der(&der).ok()?;
    let names = dns_names(&leaf).unwrap_or_default();
    let validity = leaf.validity();
    let issuer = leaf.issuer();
    let parts: Vec<&str> = issuer
        .iter_organization()
        .chain(issuer.iter_common_name())
        .filter_map(|attribute| attribute.as_str().ok())
        .collect();
    Some(LeafSummary {
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
        names,
        issuer: if parts.is_empty() {
            issuer.to_string()
        } else {
            parts.join(", ")
        },
    })
}

/// Whether a certificate for `hosts` is due at `now_s`: `public_pem` does not cover
/// every host or cannot be read, or a third or less of its lifetime remains.
pub fn renewal_due(public_pem: &str, hosts: &[String], now_s: i64) -> bool {
    let Some(LeafSummary {
        not_before,
        not_after,
        names,
        ..
    }) = leaf_summary(public_pem)
    else {
        return true;
    };
    let covered = hosts
        .iter()
        .all(|host| names.iter().any(|name| name_covers(name, host)));
    let renew_from = not_after - (not_after - not_before) / 3;
    !covered || now_s >= renew_from
}

/// The DNS names in a certificate's subjectAltName (none without the extension).
fn dns_names(
    certificate: &X509Certificate<'_>,
) -> Result<Vec<String>, x509_parser::error::X509Error> {
    Ok(certificate
        .subject_alternative_name()?
        .map(|extension| {
            extension
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(name) => Some(name.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default())
}

/// A certificate's subject for a message: its common name, or the whole name.
fn subject(certificate: &X509Certificate<'_>) -> String {
    let name = certificate.subject();
    name.iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(|cn| format!("CN={cn}"))
        .unwrap_or_else(|| name.to_string())
}

/// Checks `certificate` for a website answering for `host_names`, at `now`.
pub fn check(
    certificate: &Certificate,
    host_names: &[String],
    now: SystemTime,
) -> Result<CertificateFacts, Invalid> {
    for (field, pem) in [
        (PUBLIC, &certificate.public),
        (PRIVATE, &certificate.private),
    ] {
        if pem.len() > MAX_PEM_BYTES {
            return Err(Invalid::too_large(
                field,
                format!("{} bytes, at most {MAX_PEM_BYTES}", pem.len()),
            ));
        }
    }
    let ders = CertificateDer::pem_slice_iter(certificate.public.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| {
            Invalid::unacceptable(PUBLIC, format!("`{PUBLIC}` is not readable PEM: {err}"))
        })?;
    if ders.is_empty() {
        return Err(Invalid::unacceptable(
            PUBLIC,
            format!("`{PUBLIC}` holds no `BEGIN CERTIFICATE` block"),
        ));
    }
    if ders.len() > MAX_CHAIN {
        return Err(Invalid::too_large(
            PUBLIC,
            format!(
                "{} certificates in the bundle, at most {MAX_CHAIN} (the leaf and its intermediates; leave out the root)",
                ders.len()
            ),
        ));
    }
    let mut chain = Vec::with_capacity(ders.len());
    for (index, der) in ders.iter().enumerate() {
        let (_, parsed) = X509Certificate::from_der(der).map_err(|err| {
            Invalid::unacceptable(
                PUBLIC,
                format!(
                    "certificate {} of the bundle is not a valid X.509 certificate: {err}",
                    index + 1
                ),
            )
        })?;
        chain.push(parsed);
    }

    if let Ok(x509_parser::public_key::PublicKey::RSA(rsa)) = chain[0].public_key().parsed()
        && rsa.key_size() > MAX_RSA_BITS
    {
        return Err(Invalid::unacceptable(
            PRIVATE,
            format!(
                "an RSA key of {} bits; at most {MAX_RSA_BITS}: every handshake signs with \
                 it (ECDSA P-256 costs the least)",
                rsa.key_size()
            ),
        ));
    }

    let key = PrivateKeyDer::from_pem_slice(certificate.private.as_bytes()).map_err(|err| {
        Invalid::unacceptable(
            PRIVATE,
            format!("`{PRIVATE}` holds no readable private key (PKCS#8, PKCS#1 RSA or SEC1 EC PEM): {err}"),
        )
    })?;
    let signing_key = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|err| {
        Invalid::unacceptable(
            PRIVATE,
            format!("the private key is of a kind the gateway cannot serve with: {err}"),
        )
    })?;
    let public_key = signing_key.public_key().ok_or_else(|| {
        Invalid::unacceptable(
            PRIVATE,
            "the private key's public half cannot be derived to compare it with the certificate",
        )
    })?;
    if chain[0].public_key().raw != public_key.as_ref() {
        let belongs_to = chain
            .iter()
            .position(|certificate| certificate.public_key().raw == public_key.as_ref());
        return Err(Invalid::unacceptable(
            PRIVATE,
            match belongs_to {
                Some(index) => format!(
                    "the private key belongs to certificate {} of the bundle ({}); the bundle \
                     must start with that certificate (the leaf), then each issuer",
                    index + 1,
                    subject(&chain[index])
                ),
                None => format!(
                    "the private key does not belong to the bundle's first certificate ({})",
                    subject(&chain[0])
                ),
            },
        ));
    }

    for (index, pair) in chain.windows(2).enumerate() {
        let (issued, issuer) = (&pair[0], &pair[1]);
        let signed = issued.issuer().as_raw() == issuer.subject().as_raw()
            && issued.verify_signature(Some(issuer.public_key())).is_ok();
        if !signed {
            return Err(Invalid::unacceptable(
                PUBLIC,
                format!(
                    "the chain is out of order: certificate {} ({}) did not issue certificate {} \
                     ({}, issued by {}); put the leaf first, then each issuer in turn",
                    index + 2,
                    subject(issuer),
                    index + 1,
                    subject(issued),
                    issued.issuer()
                ),
            ));
        }
    }

    let seconds = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let at = ASN1Time::from_timestamp(i64::try_from(seconds).unwrap_or(i64::MAX))
        .map_err(|err| Invalid::unacceptable(PUBLIC, format!("the clock is unusable: {err}")))?;
    for (index, certificate) in chain.iter().enumerate() {
        let validity = certificate.validity();
        if at < validity.not_before {
            return Err(Invalid::unacceptable(
                PUBLIC,
                format!(
                    "certificate {} of the bundle ({}) is not valid before {}",
                    index + 1,
                    subject(certificate),
                    validity.not_before
                ),
            ));
        }
        if at > validity.not_after {
            return Err(Invalid::unacceptable(
                PUBLIC,
                format!(
                    "certificate {} of the bundle ({}) expired on {}",
                    index + 1,
                    subject(certificate),
                    validity.not_after
                ),
            ));
        }
    }

    let names = dns_names(&chain[0]).map_err(|err| {
        Invalid::unacceptable(
            PUBLIC,
            format!("the leaf's subjectAltName cannot be read: {err}"),
        )
    })?;
    if let Some(uncovered) = host_names
        .iter()
        .find(|host| !names.iter().any(|name| name_covers(name, host)))
    {
        let named = if names.is_empty() {
            "it names no host (no DNS names in subjectAltName)".to_owned()
        } else {
            format!("it names {}", names.join(", "))
        };
        return Err(Invalid::unacceptable(
            PUBLIC,
            format!("the certificate does not cover `{uncovered}`; {named}"),
        ));
    }
    Ok(CertificateFacts {
        names,
        not_after: chain[0].validity().not_after.timestamp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use std::time::Duration;

    struct Authority {
        issuer: Issuer<'static, KeyPair>,
        pem: String,
    }

    fn authority(name: &str, parent: Option<&Authority>) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let certificate = match parent {
            Some(parent) => params.signed_by(&key, &parent.issuer).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        Authority {
            pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names` issued by `by`, valid from `days_from`..`days_to` around now.
    fn leaf(names: &[&str], by: &Authority, days: (i64, i64)) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        let now = rcgen::date_time_ymd(2026, 11, 21);
        params.not_before = now + time::Duration::days(days.0);
        params.not_after = now + time::Duration::days(days.1);
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &by.issuer).unwrap();
        (certificate.pem(), key.serialize_pem())
    }

    /// Noon on 2026-11-21, the day `leaf` counts from.
    fn today() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_795_262_400)
    }

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_good_bundle_passes_and_reports_its_names_and_expiry() {
        let root = authority("Test Root", None);
        let intermediate = authority("Test Intermediate", Some(&root));
        let (leaf_pem, key) = leaf(&["example.com", "*.example.com"], &intermediate, (-1, 89));
        let bundle = Certificate {
            public: format!("{leaf_pem}{}", intermediate.pem),
            private: key,
        };
        let facts = check(
            &bundle,
            &hosts(&["example.com", "www.example.com", "shop.example.com"]),
            today(),
        )
        .unwrap();
        assert_eq!(facts.names, ["example.com", "*.example.com"]);
        assert!(facts.not_after > 1_795_262_400);
    }

    #[test]
    fn each_problem_is_named() {
        let root = authority("Test Root", None);
        let intermediate = authority("Test Intermediate", Some(&root));
        let (leaf_pem, key) = leaf(&["example.com", "www.example.com"], &intermediate, (-1, 89));
        let site = hosts(&["example.com", "www.example.com"]);
        let refuse = |public: String, private: String, hosts: &[String]| {
            check(&Certificate { public, private }, hosts, today()).unwrap_err()
        };

        let err = refuse("no pem here".into(), key.clone(), &site);
        assert_eq!(err.field, PUBLIC);
        assert!(err.message.contains("no `BEGIN CERTIFICATE`"), "{err}");

        let err = refuse(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
            key.clone(),
            &site,
        );
        assert!(err.message.contains("not a valid X.509"), "{err}");

        let err = refuse(leaf_pem.clone(), "not a key".into(), &site);
        assert_eq!(err.field, PRIVATE);
        assert!(err.message.contains("no readable private key"), "{err}");

        let other_key = KeyPair::generate().unwrap().serialize_pem();
        let err = refuse(leaf_pem.clone(), other_key, &site);
        assert_eq!(err.field, PRIVATE);
        assert!(err.message.contains("does not belong"), "{err}");

        // The intermediate first, then the leaf: the key names where its leaf is.
        let err = refuse(
            format!("{}{leaf_pem}", intermediate.pem),
            key.clone(),
            &site,
        );
        assert!(err.message.contains("belongs to certificate 2"), "{err}");

        // The leaf followed by a certificate that did not issue it.
        let err = refuse(format!("{leaf_pem}{}", root.pem), key.clone(), &site);
        assert_eq!(err.field, PUBLIC);
        assert!(err.message.contains("out of order"), "{err}");
        assert!(err.message.contains("CN=Test Root"), "{err}");

        let with_shop = hosts(&["example.com", "www.example.com", "shop.example.com"]);
        let err = refuse(leaf_pem.clone(), key.clone(), &with_shop);
        assert!(
            err.message.contains("does not cover `shop.example.com`")
                && err
                    .message
                    .contains("it names example.com, www.example.com"),
            "{err}"
        );

        let (expired, expired_key) = leaf(&["example.com"], &intermediate, (-100, -10));
        let err = refuse(expired, expired_key, &hosts(&["example.com"]));
        assert!(err.message.contains("expired on"), "{err}");

        let (future, future_key) = leaf(&["example.com"], &intermediate, (10, 100));
        let err = refuse(future, future_key, &hosts(&["example.com"]));
        assert!(err.message.contains("not valid before"), "{err}");

        let err = refuse("x".repeat(MAX_PEM_BYTES + 1), key, &site);
        assert_eq!(err.kind, crate::InvalidKind::TooLarge);
    }

    /// Every handshake signs with the key: one past 4096 bits is refused, by its size.
    #[test]
    fn an_rsa_key_past_4096_bits_is_refused() {
        // `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:4160`, and `openssl
        // req -x509` for `big.example` with it, for 100 years.
        let bundle = Certificate {
            public: include_str!("../tests/data/rsa-4160.crt.pem").to_owned(),
            private: include_str!("../tests/data/rsa-4160.key.pem").to_owned(),
        };
        let refused = check(&bundle, &hosts(&["big.example"]), today()).unwrap_err();
        assert_eq!(refused.field, PRIVATE);
        assert!(
            refused
                .message
                .contains("an RSA key of 4160 bits; at most 4096"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn wildcards_stand_for_one_label() {
        assert!(name_covers("*.example.com", "www.example.com"));
        assert!(name_covers("*.example.com", "WWW.Example.com"));
        assert!(!name_covers("*.example.com", "example.com"));
        assert!(!name_covers("*.example.com", "a.b.example.com"));
        assert!(!name_covers("*.example.com", "wwwexample.com"));
        assert!(name_covers("example.com", "example.com."));
        assert!(!name_covers("example.com", "www.example.com"));
    }
}
