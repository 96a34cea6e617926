//! The management API on the gateway's HTTPS listener under its own host name, behind a
//! real HAProxy (PROXY v2, as the cluster has it): a client that verifies the
//! certificate reaches it over HTTP/1.1 and HTTP/2; plain HTTP answers 301 to HTTPS; a
//! changed certificate file is served without a restart (an unusable one is refused);
//! no website can take the name.

use super::*;
use anyhow::Context;
use botgate_tests::ca::TestCa;
use botgate_tests::servers::HaproxyForGateway;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

const NAME: &str = "api.gateway.test";

/// A request for the API through `port` (HAProxy's), verified against `roots`.
fn api_request(
    port: u16,
    key: &str,
    roots: Option<&TestCa>,
    http2: bool,
) -> Result<visitor::Answer> {
    let visit = Visit {
        tls_name: Some(NAME.to_owned()),
        http2,
        trusted_roots: roots.map(|ca| vec![ca.root_der().to_vec()]),
        ..Visit::default()
    };
    visitor::send(
        SocketAddr::from(([127, 0, 0, 1], port)),
        &visit,
        Outgoing::get(NAME, "/v1.0/user").header("authorization", format!("Bearer {key}")),
    )
}

#[test]
fn the_api_answers_on_its_host_name_over_https_behind_haproxy() -> Result<()> {
    let ca = TestCa::new("botgate test: the API's CA")?;
    let files = tempfile::tempdir()?;
    let (cert_path, key_path) = (files.path().join("api.pem"), files.path().join("api.key"));
    let (first, first_key) = ca.issue(&[NAME])?;
    std::fs::write(&cert_path, &first)?;
    std::fs::write(&key_path, &first_key)?;
    let (cert_arg, key_arg) = (
        cert_path.display().to_string(),
        key_path.display().to_string(),
    );
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            "--api-host",
            "API.Gateway.Test",
            "--api-cert",
            &cert_arg,
            "--api-key",
            &key_arg,
            "--trusted-proxy",
            "127.0.0.1/32",
            "--setup-check-ms",
            "100",
        ],
    )?;
    let key = gateway.partner_keys[0].clone();
    let partner = partner(&gateway);
    assert_eq!(
        partner.post_form("/v1.0/user", &[("id", "ann")])?.status,
        201
    );
    let haproxy = HaproxyForGateway::start(gateway.http, gateway.https)?;

    // HTTPS through HAProxy, the certificate verified: the API, over HTTP/1.1 and h2.
    for http2 in [false, true] {
        let answer = api_request(haproxy.https_port, &key, Some(&ca), http2)
            .with_context(|| haproxy.log())?;
        assert_eq!(answer.status, 200, "{}\n{}", answer.text(), gateway.log());
        assert_eq!(answer.json()["items"][0]["id"], "ann", "{}", answer.text());
    }
    // A client that trusts another CA refuses the handshake.
    let stranger = TestCa::new("botgate test: another CA")?;
    assert!(api_request(haproxy.https_port, &key, Some(&stranger), false).is_err());
    // Plain HTTP sends the name to HTTPS before any key is read.
    let plain = visitor::send(
        SocketAddr::from(([127, 0, 0, 1], haproxy.http_port)),
        &Visit::default(),
        Outgoing::get(NAME, "/v1.0/user?limit=1"),
    )?;
    assert_eq!(plain.status, 301, "{}", plain.text());
    assert_eq!(
        plain.header("location"),
        Some("https://api.gateway.test/v1.0/user?limit=1")
    );
    // No website can take the name.
    let taken = partner.post_json(
        "/v1.0/website",
        &json!({"user_id": "ann", "domain": "gateway.test", "subdomain": ["api"],
                "ip": ["192.0.2.1"]}),
    )?;
    assert_eq!(taken.status, 409, "{taken:?}");
    assert!(taken.text.contains("already exists"), "{taken:?}");

    // A renewed certificate in the files is served from the next handshakes on.
    let served = |port: u16| -> Result<Vec<u8>> {
        let answer = api_request(port, &key, Some(&ca), false)?;
        Ok(answer.certificate.unwrap_or_default())
    };
    let der = |pem: &str| -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .map(|c| c.to_vec())
            .unwrap_or_default()
    };
    assert_eq!(served(haproxy.https_port)?, der(&first));
    let (second, second_key) = ca.issue(&[NAME])?;
    std::fs::write(&key_path, &second_key)?;
    std::fs::write(&cert_path, &second)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while served(haproxy.https_port)? != der(&second) {
        assert!(Instant::now() < deadline, "{}", gateway.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    // One that does not cover the name is refused, and the one in use stays.
    let (wrong, wrong_key) = ca.issue(&["elsewhere.test"])?;
    std::fs::write(&key_path, &wrong_key)?;
    std::fs::write(&cert_path, &wrong)?;
    log_line(&gateway, |line| {
        line.contains("API certificate is refused") && line.contains("does not cover")
    });
    assert_eq!(served(haproxy.https_port)?, der(&second));
    Ok(())
}
