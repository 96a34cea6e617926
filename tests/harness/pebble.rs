//! `pebble` (Debian package `pebble`), Let's Encrypt's test ACME server, on loopback
//! ports: it checks HTTP-01 and TLS-ALPN-01 challenges by connecting to the ports it
//! is given (the gateway's listeners), resolving names through the DNS server it is
//! given (a dnsmasq), and issues real certificates under a root it makes at start.
//! Its own HTTPS listener uses a certificate from a CA the harness makes, written to
//! `directory_root` for the ACME client to trust.

use crate::ca::TestCa;
use crate::servers::{ServerGuard, free_port};
use anyhow::{Context, Result, bail};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running Pebble; stopped when dropped.
pub struct Pebble {
    guard: ServerGuard,
    /// The ACME directory URL.
    pub directory: String,
    /// The management listener (`/roots/0` gives the root it issues under).
    pub management: SocketAddr,
    /// The PEM file of the CA behind Pebble's own HTTPS certificate.
    pub directory_root: PathBuf,
    root_pem: String,
}

impl Pebble {
    /// Pebble checking HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port` of the
    /// names `dns` resolves.
    pub fn start(http_port: u16, tls_port: u16, dns: SocketAddr) -> Result<Pebble> {
        let dir = tempfile::tempdir().context("temporary directory for pebble")?;
        // Pebble's own listener certificate, for 127.0.0.1, under a CA of our own.
        let ca = TestCa::new("botgate test: pebble's listener CA")?;
        let (listener_cert, listener_key) = ca.issue(&["localhost", "127.0.0.1"])?;
        let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let directory_root = dir.path().join("ca.pem");
        std::fs::write(&cert_path, listener_cert)?;
        std::fs::write(&key_path, listener_key)?;
        std::fs::write(&directory_root, ca.root_pem())?;

        let (port, management_port) = (free_port(), free_port());
        let config = serde_json::json!({"pebble": {
            "listenAddress": format!("127.0.0.1:{port}"),
            "managementListenAddress": format!("127.0.0.1:{management_port}"),
            "certificate": cert_path,
            "privateKey": key_path,
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
        }});
        let config_path = dir.path().join("pebble.json");
        std::fs::write(&config_path, serde_json::to_vec_pretty(&config)?)?;
        let log = dir.path().join("pebble.log");
        let log_file = std::fs::File::create(&log)?;
        let child = Command::new("pebble")
            .arg("-config")
            .arg(&config_path)
            .arg("-dnsserver")
            .arg(dns.to_string())
            // No random waits before validating, no random nonce refusals.
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file)
            .spawn()
            .context("starting pebble (Debian package `pebble`)")?;
        let guard = ServerGuard::new("pebble", child, dir, log);
        let pebble = Pebble {
            guard,
            directory: format!("https://127.0.0.1:{port}/dir"),
            management: SocketAddr::from((Ipv4Addr::LOCALHOST, management_port)),
            directory_root,
            root_pem: ca.root_pem().to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        for address in [
            SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            pebble.management,
        ] {
            while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
                if Instant::now() > deadline {
                    bail!(
                        "pebble did not listen on {address}:\n{}",
                        pebble.guard.log_text()
                    );
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Ok(pebble)
    }

    /// The root (PEM) Pebble issues certificates under.
    pub fn issuing_root(&self) -> Result<String> {
        https_get(self.management, &self.root_pem, "/roots/0")
    }

    /// Pebble's log so far.
    pub fn log(&self) -> String {
        self.guard.log_text()
    }
}

/// A TLS client configuration that trusts only the roots in `root_pem`.
pub fn trusting_only(root_pem: &str) -> Result<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(root_pem.as_bytes()) {
        roots.add(certificate?)?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// A GET over HTTPS to `address` (named 127.0.0.1) trusting `root_pem`; the body.
fn https_get(address: SocketAddr, root_pem: &str, path: &str) -> Result<String> {
    let config = trusting_only(root_pem)?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?.to_owned();
    let connection = rustls::ClientConnection::new(Arc::new(config), name)?;
    let tcp = TcpStream::connect_timeout(&address, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    // Pebble closes without close_notify now and then: keep what arrived.
    let _ = tls.read_to_end(&mut response);
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("an HTTP response from pebble")?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!("pebble answered {head}");
    }
    Ok(body.to_owned())
}
