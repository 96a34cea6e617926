//! A certificate authority of a test's own: its root, and leaf certificates under it
//! for host names (or IP addresses), for servers a client verifies.

use anyhow::Result;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

pub struct TestCa {
    issuer: Issuer<'static, KeyPair>,
    root_pem: String,
    root_der: Vec<u8>,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate()?;
        let root = params.self_signed(&key)?;
        Ok(TestCa {
            root_pem: root.pem(),
            root_der: root.der().to_vec(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The root certificate, PEM.
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }

    /// The root certificate, DER (for a client's trust store).
    pub fn root_der(&self) -> &[u8] {
        &self.root_der
    }

    /// A leaf for `names` (an IP address becomes an IP SAN): its certificate and its
    /// key, PEM.
    pub fn issue(&self, names: &[&str]) -> Result<(String, String)> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        for name in names {
            params.subject_alt_names.push(match name.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*name).try_into()?),
            });
        }
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, &self.issuer)?;
        Ok((leaf.pem(), key.serialize_pem()))
    }
}
