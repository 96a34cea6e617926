//! Certificates from ACME against a real CA: Pebble (Let's Encrypt's test server)
//! checks the gateway's own HTTP-01 answers, then its TLS-ALPN-01 answers, and issues;
//! the website goes online, its webhook says so, and a TLS client that trusts only
//! Pebble's root gets the issued certificate from the gateway for every name.

use crate::{ALLOW_LOOPBACK, binary, create_user, post_website, wait_for_status};
use anyhow::{Context, Result, ensure};
use botgate_tests::http::{Client, self_signed};
use botgate_tests::pebble::{Pebble, trusting_only};
use botgate_tests::receiver::Receiver;
use botgate_tests::servers::{Dnsmasq, Gateway, GatewayStore, free_port};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// The certificate the gateway at `https` presents for `name` to a client that trusts
/// only `root_pem`, once it verifies: the gateway serves what its snapshot holds, which
/// follows the store within a second or so.
fn verified_leaf(https: SocketAddr, name: &str, root_pem: &str) -> Result<Vec<u8>> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match handshake(https, name, root_pem) {
            Ok(leaf) => return Ok(leaf),
            Err(err) if std::time::Instant::now() > deadline => return Err(err),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// One handshake for `name` trusting only `root_pem`; the leaf presented.
fn handshake(https: SocketAddr, name: &str, root_pem: &str) -> Result<Vec<u8>> {
    handshake_offering(https, name, root_pem, &[])
}

/// As [`handshake`], offering the ALPN protocols `alpn`.
fn handshake_offering(
    https: SocketAddr,
    name: &str,
    root_pem: &str,
    alpn: &[&[u8]],
) -> Result<Vec<u8>> {
    let mut config = trusting_only(root_pem)?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let mut connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(name.to_owned())?)?;
    let mut tcp = TcpStream::connect_timeout(&https, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    while connection.is_handshaking() {
        connection
            .complete_io(&mut tcp)
            .with_context(|| format!("TLS handshake for {name} trusting only Pebble's root"))?;
    }
    let leaf = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .context("no certificate presented")?;
    Ok(leaf.as_ref().to_vec())
}

/// A gateway on `http` and `https` getting its certificates from `pebble` with
/// `challenge`, its websites' names checked against `dns` (127.0.0.1 is its address).
fn pebble_gateway(
    pebble: &Pebble,
    dns: &Dnsmasq,
    challenge: &str,
    http: SocketAddr,
    https: SocketAddr,
) -> Result<Gateway> {
    let (dns_server, root) = (
        dns.address.to_string(),
        pebble.directory_root.display().to_string(),
    );
    Gateway::start_on(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            "--acme-directory",
            &pebble.directory,
            "--acme-directory-root",
            &root,
            "--acme-challenge",
            challenge,
            "--public-address",
            "127.0.0.1",
            "--dns-server",
            &dns_server,
            "--setup-check-ms",
            "200",
            ALLOW_LOOPBACK[0],
            ALLOW_LOOPBACK[1],
        ],
        http,
        https,
    )
}

#[test]
fn certificates_are_issued_through_http01_and_tls_alpn01() -> Result<()> {
    for challenge in ["http-01", "tls-alpn-01"] {
        let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let dns = Dnsmasq::start(
            &[
                ("secure.example", here),
                ("www.secure.example", here),
                ("switched.example", here),
            ],
            &[],
        )?;
        let local = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let (http, https) = (local(free_port()), local(free_port()));
        let pebble = Pebble::start(http.port(), https.port(), dns.address)?;
        let receiver = Receiver::start(0)?;
        let gateway = pebble_gateway(&pebble, &dns, challenge, http, https)?;
        let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
        create_user(&partner, "ann")?;
        let created = post_website(
            &partner,
            &json!({"user_id": "ann", "domain": "secure.example", "subdomain": ["www"],
                    "ip": ["192.0.2.10"], "callbackUrl": receiver.url("/issued")}),
        )?;
        assert_eq!(created["status"], "setup");
        let online = wait_for_status(&partner, "secure.example", "online", &|| pebble.log())?;
        let issued = online["certificate"]["public"].as_str().unwrap_or_default();
        let issued_leaf = CertificateDer::pem_slice_iter(issued.as_bytes())
            .next()
            .context("an issued certificate")??;
        let hooks = receiver.wait_for(1, Duration::from_secs(20))?;
        let hook: Value = serde_json::from_str(&hooks[0].body)?;
        assert_eq!(hook["status"], "online", "{challenge}");

        let pebble_root = pebble.issuing_root()?;
        for name in ["secure.example", "www.secure.example"] {
            assert_eq!(
                verified_leaf(https, name, &pebble_root)?,
                issued_leaf.as_ref(),
                "{challenge}: the issued certificate for {name}"
            );
        }
        let log = gateway.log();
        if challenge == "tls-alpn-01" {
            assert!(log.contains("answered a TLS-ALPN-01 challenge"), "{log}");
            // A browser offering `acme-tls/1` among its protocols is no CA: it gets an
            // ordinary handshake with the website's certificate.
            let leaf = handshake_offering(
                https,
                "secure.example",
                &pebble_root,
                &[b"h2", b"acme-tls/1"],
            )?;
            assert_eq!(leaf, issued_leaf.as_ref());
        } else {
            assert!(log.contains("acme_challenge"), "{log}");
            // A challenge path for a name that is no website's is not looked up: the
            // ordinary page for an unknown website answers.
            for (host, page) in [
                ("nobody.example", "No website named nobody.example"),
                ("secure.example", "No certificate issuance is waiting"),
            ] {
                let answer = http_get(http, host, "/.well-known/acme-challenge/abc")?;
                assert!(answer.starts_with("HTTP/1.1 404"), "{host}: {answer}");
                assert!(answer.contains(page), "{host}: {answer}");
            }
        }

        // Switching a website from its own certificate to ACME starts issuance.
        if challenge == "http-01" {
            let (public, private) = self_signed(&["switched.example"])?;
            post_website(
                &partner,
                &json!({"user_id": "ann", "domain": "switched.example", "ip": ["192.0.2.10"],
                        "certificate": {"public": public, "private": private}}),
            )?;
            wait_for_status(&partner, "switched.example", "online", &|| pebble.log())?;
            let switched = partner.put_json(
                "/v1.0/website/switched.example",
                &json!({"settings": {"loadbalancer": {"certs_issuer": "acme"}},
                        "callbackUrl": receiver.url("/switched")}),
            )?;
            ensure!(switched.status == 200, "{switched:?}");
            assert_eq!(switched.json()["status"], "setup");
            let online = wait_for_status(&partner, "switched.example", "online", &|| pebble.log())?;
            assert_ne!(
                online["certificate"]["public"].as_str(),
                Some(public.as_str())
            );
            verified_leaf(https, "switched.example", &pebble_root)?;
            let hooks = receiver.wait_for(2, Duration::from_secs(20))?;
            assert_eq!(hooks[1].path, "/switched");
        }
    }
    Ok(())
}

/// The whole answer (head and body, as text) to one `GET` of `target` on `host`.
fn http_get(listener: SocketAddr, host: &str, target: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut tcp = TcpStream::connect_timeout(&listener, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        tcp,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = Vec::new();
    tcp.read_to_end(&mut answer)?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[test]
fn certificate_issuances_are_limited_per_website_and_per_partner() {
    // ACME on (a directory nobody answers): every website with `certs_issuer: acme`,
    // the default, starts an issuance.
    crate::on_both_backends(
        &[
            "--acme-directory",
            "https://127.0.0.1:9/directory",
            "--acme-orders-per-website-per-day",
            "1",
            "--acme-orders-per-partner-per-hour",
            "3",
        ],
        |gateway| {
            let (hoster, rival) = crate::partners(gateway);
            create_user(&hoster, "ann")?;
            create_user(&rival, "eve")?;
            let create = |partner: &Client, user: &str, domain: &str, status: &str| {
                partner.post_json(
                    "/v1.0/website",
                    &json!({"user_id": user, "domain": domain, "ip": ["192.0.2.10"],
                            "status": status}),
                )
            };
            let limited = |reply: botgate_tests::http::Reply, per: &str| {
                crate::assert_error(&reply, 429, Some("settings.loadbalancer.certs_issuer"));
                let message = reply.json()["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                assert!(message.contains(per), "{message}");
                assert!(reply.header("retry-after").is_some(), "{reply:?}");
            };
            // A paused website starts no issuance. Another partner's refused attempts at
            // its domain count against nothing: its own first issuance goes ahead.
            assert_eq!(create(&hoster, "ann", "own.example", "paused")?.status, 201);
            for _ in 0..3 {
                assert_eq!(create(&rival, "eve", "own.example", "online")?.status, 409);
            }
            let reply = hoster.put_json(
                "/v1.0/website/own.example",
                &json!({"status": "online", "subdomain": ["www"]}),
            )?;
            assert_eq!(reply.status, 200, "{reply:?}");
            // One website deleted and created again: its second issuance of the day is
            // refused, and nothing is created.
            assert_eq!(
                create(&hoster, "ann", "again.example", "online")?.status,
                201
            );
            assert_eq!(hoster.delete("/v1.0/website/again.example")?.status, 200);
            limited(
                create(&hoster, "ann", "again.example", "online")?,
                "limit of 1 per website per day",
            );
            assert_eq!(hoster.get("/v1.0/website/again.example")?.status, 404);
            // The partner's third of the hour, then a refusal.
            assert_eq!(
                create(&hoster, "ann", "three.example", "online")?.status,
                201
            );
            limited(
                create(&hoster, "ann", "four.example", "online")?,
                "limit of 3 per partner per hour",
            );
            // The other partner has its own allowance.
            assert_eq!(
                create(&rival, "eve", "rival.example", "online")?.status,
                201
            );
            Ok(())
        },
    );
}

#[test]
fn challenge_answers_are_looked_up_only_for_websites_awaiting_a_certificate() -> Result<()> {
    // An answer planted in the store under a token is served for a website whose
    // issuance is under way, and never looked up for one whose certificate is its own:
    // its challenge paths reach its origin (its owner may validate there), and a
    // TLS-ALPN-01 handshake for it is an ordinary one.
    let redis = botgate_tests::servers::RedisServer::start()?;
    let origin =
        botgate_tests::origin::Origin::start("own-validation", Ipv4Addr::LOCALHOST.into(), 0)?;
    let port = origin.address.port().to_string();
    let gateway = Gateway::start(
        crate::binary(),
        GatewayStore::Redis(&redis),
        &["hoster"],
        &[
            "--acme-directory",
            "https://127.0.0.1:9/directory",
            "--origin-http-port",
            &port,
        ],
    )?;
    let hoster = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&hoster, "ann")?;
    let (cert, key) = self_signed(&["custom.example"])?;
    post_website(
        &hoster,
        &json!({"user_id": "ann", "domain": "custom.example", "ip": ["127.0.0.1"],
                "certificate": {"public": cert, "private": key},
                "settings": {"loadbalancer": {"certs_issuer": "custom", "bot_protection": false}}}),
    )?;
    post_website(
        &hoster,
        &json!({"user_id": "ann", "domain": "issuing.example", "ip": ["192.0.2.10"]}),
    )?;
    redis.command(&[
        "SET",
        "botgate:ephemeral:acme-http-01:planted-token",
        "planted-token.thumbprint",
        "PX",
        "600000",
    ])?;
    let fetch = |host: &str| -> Result<(u16, String)> {
        let mut stream = TcpStream::connect(gateway.http)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        use std::io::{Read, Write};
        write!(
            stream,
            "GET /.well-known/acme-challenge/planted-token HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let status = answer.get(9..12).unwrap_or_default().parse().unwrap_or(0);
        Ok((status, answer))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, answer) = fetch("issuing.example")?;
        if status == 200 {
            ensure!(answer.ends_with("planted-token.thumbprint"), "{answer}");
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "never served: {answer}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let reads = || redis.calls("get");
    let before = reads();
    let (status, answer) = fetch("custom.example")?;
    ensure!(
        status == 200 && answer.contains("own-validation"),
        "not the origin's answer: {answer}"
    );
    // An ordinary handshake: no protocol in common, refused without a look-up.
    for _ in 0..5 {
        let refused = acme_only_handshake(gateway.https, "custom.example").unwrap_err();
        ensure!(
            refused.to_string().contains("NoApplicationProtocol"),
            "{refused}"
        );
    }
    ensure!(
        reads() == before,
        "the store was asked for a website not awaiting one"
    );
    Ok(())
}

/// A handshake for `name` offering only `acme-tls/1`, as a CA does; the leaf it got.
fn acme_only_handshake(https: SocketAddr, name: &str) -> Result<Vec<u8>> {
    let mut config = botgate_tests::visitor::client_tls(b"acme-tls/1")?;
    config.alpn_protocols = vec![b"acme-tls/1".to_vec()];
    let mut connection =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from(name.to_owned())?)?;
    let mut tcp = TcpStream::connect_timeout(&https, Duration::from_secs(5))?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    while connection.is_handshaking() {
        connection.complete_io(&mut tcp)?;
    }
    let leaf = connection
        .peer_certificates()
        .and_then(|chain| chain.first())
        .context("no certificate presented")?;
    Ok(leaf.as_ref().to_vec())
}

/// The API's own host name gets its certificate from ACME (both challenge types): two
/// gateways share one Redis, one of them issues, the store carries the certificate to
/// the other, and a client that trusts only Pebble's root reaches the API on either.
#[test]
fn the_api_host_name_gets_its_certificate_from_acme_for_every_gateway() -> Result<()> {
    use botgate_tests::servers::RedisServer;
    use botgate_tests::visitor::{self, Outgoing, Visit};
    for challenge in ["http-01", "tls-alpn-01"] {
        let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let dns = Dnsmasq::start(&[("api.hoster.example", here)], &[])?;
        let local = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let (http, https) = (local(free_port()), local(free_port()));
        let pebble = Pebble::start(http.port(), https.port(), dns.address)?;
        let redis = RedisServer::start()?;
        let (dns_server, root) = (
            dns.address.to_string(),
            pebble.directory_root.display().to_string(),
        );
        let options = [
            "--api-host",
            "api.hoster.example",
            "--acme-directory",
            &pebble.directory,
            "--acme-directory-root",
            &root,
            "--acme-challenge",
            challenge,
            "--dns-server",
            &dns_server,
            "--setup-check-ms",
            "200",
        ];
        // The second gateway starts first: whichever takes the lease issues, and the CA
        // reaches the first (Pebble checks its ports), which answers from the store.
        let second = Gateway::start(binary(), GatewayStore::Redis(&redis), &["hoster"], &options)?;
        let first = Gateway::start_on(
            binary(),
            GatewayStore::Redis(&redis),
            &[],
            &options,
            http,
            https,
        )?;
        let pebble_root = pebble.issuing_root()?;
        let logs = || format!("{}\n{}\n{}", first.log(), second.log(), pebble.log());
        let leaf = verified_leaf(https, "api.hoster.example", &pebble_root)
            .or_else(|_| verified_leaf(https, "api.hoster.example", &pebble_root))
            .with_context(logs)?;
        assert_eq!(
            verified_leaf(second.https, "api.hoster.example", &pebble_root).with_context(logs)?,
            leaf,
            "{challenge}: one certificate, shared through the store"
        );
        let root_der = CertificateDer::from_pem_slice(pebble_root.as_bytes())?.to_vec();
        let key = second.partner_keys[0].clone();
        let visit = Visit {
            tls_name: Some("api.hoster.example".to_owned()),
            trusted_roots: Some(vec![root_der]),
            ..Visit::default()
        };
        let answer = visitor::send(
            https,
            &visit,
            Outgoing::get("api.hoster.example", "/v1.0/user")
                .header("authorization", format!("Bearer {key}")),
        )?;
        assert_eq!(answer.status, 200, "{challenge}: {}", answer.text());
        // One certificate is issued; the other gateway takes it from the store. (A
        // gateway may try first and fail while the one the CA checks is not up yet.)
        let issued = [first.log(), second.log()]
            .iter()
            .filter(|log| {
                log.lines().any(|line| {
                    line.contains("serving a new API certificate")
                        && line.contains("source=\"ACME\"")
                })
            })
            .count();
        assert_eq!(issued, 1, "{challenge}: one gateway issues\n{}", logs());
    }
    Ok(())
}

/// A self-signed certificate for `names` a tenth of whose lifetime remains: due for
/// renewal.
fn expiring(names: &[&str]) -> Result<(String, String)> {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())?;
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(90);
    params.not_after = now + time::Duration::days(10);
    let key = rcgen::KeyPair::generate()?;
    Ok((params.self_signed(&key)?.pem(), key.serialize_pem()))
}

/// Renewals count in the issuance limits as the API's issuances do, a paused website's
/// too: a partner cannot have the gateway place orders past them (with the CA account
/// every partner shares) by holding websites whose certificates are due. A paused
/// website given a new name is not renewed: the name waits for its DNS check.
#[test]
fn renewals_count_in_the_issuance_limits() -> Result<()> {
    // Websites with due certificates, made while ACME is off; then ACME is turned on.
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("botgate.toml");
    std::fs::write(&file, "no-acme = true\n")?;
    let config = file.display().to_string();
    let mut gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            "--config",
            &config,
            "--acme-directory",
            "https://127.0.0.1:9/directory",
            "--acme-orders-per-partner-per-hour",
            "1",
            "--setup-check-ms",
            "100",
        ],
    )?;
    let hoster = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&hoster, "ann")?;
    for domain in ["due1.example", "due2.example", "renamed.example"] {
        // The third's is not due until a name it lacks is added.
        let (cert, key) = match domain {
            "renamed.example" => self_signed(&[domain])?,
            _ => expiring(&[domain])?,
        };
        let created = hoster.post_json(
            "/v1.0/website",
            &json!({"user_id": "ann", "domain": domain, "ip": ["192.0.2.10"],
                    "status": "paused", "certificate": {"public": cert, "private": key},
                    "settings": {"loadbalancer": {"certs_issuer": "acme"}}}),
        )?;
        ensure!(created.status == 201, "{created:?}");
        assert_eq!(created.json()["status"], "paused");
    }
    std::fs::write(&file, "")?;
    gateway.restart()?;
    let renamed = hoster.put_json(
        "/v1.0/website/renamed.example",
        &json!({"subdomain": ["new"]}),
    )?;
    ensure!(renamed.status == 200, "{renamed:?}");
    assert_eq!(renamed.json()["status"], "paused");
    // One renewal is counted (and fails: nobody answers there); the other waits.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !gateway.log().contains("the partner's limit is reached") {
        ensure!(std::time::Instant::now() < deadline, "{}", gateway.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let log = gateway.log();
    ensure!(
        !log.lines().any(|l| l.contains("renamed.example")
            && (l.contains("issuing a certificate") || l.contains("limit is reached"))),
        "a paused website's unchecked name was ordered:\n{log}"
    );
    // The partner's hour is spent: a change that would start an issuance is refused.
    let refused = hoster.post_json(
        "/v1.0/website",
        &json!({"user_id": "ann", "domain": "new.example", "ip": ["192.0.2.10"]}),
    )?;
    crate::assert_error(&refused, 429, Some("settings.loadbalancer.certs_issuer"));
    Ok(())
}

/// A TCP relay to `target` that holds every connection until [`HeldRelay::release`]:
/// a CA's validation, and so an issuance, waits on it.
struct HeldRelay {
    port: u16,
    state: Arc<(std::sync::Mutex<(bool, usize)>, std::sync::Condvar)>,
}

impl HeldRelay {
    fn start(target: SocketAddr) -> Result<HeldRelay> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let state = Arc::new((std::sync::Mutex::new((false, 0)), std::sync::Condvar::new()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let (lock, changed) = &*shared;
                    let mut held = lock.lock().unwrap();
                    held.1 += 1;
                    changed.notify_all();
                    while !held.0 {
                        held = changed.wait(held).unwrap();
                    }
                    drop(held);
                    let Ok(server) = TcpStream::connect(target) else {
                        return;
                    };
                    let (mut client_in, mut server_out) =
                        (client.try_clone().unwrap(), server.try_clone().unwrap());
                    std::thread::spawn(move || std::io::copy(&mut client_in, &mut server_out));
                    let (mut server_in, mut client_out) = (server, client);
                    let _ = std::io::copy(&mut server_in, &mut client_out);
                });
            }
        });
        Ok(HeldRelay { port, state })
    }

    /// Waits (up to `within`) until a connection is held.
    fn wait_held(&self, within: Duration) -> Result<()> {
        let (lock, changed) = &*self.state;
        let (held, _) = changed
            .wait_timeout_while(lock.lock().unwrap(), within, |held| held.1 == 0)
            .unwrap();
        ensure!(held.1 > 0, "no connection came to the relay");
        Ok(())
    }

    fn release(&self) {
        let (lock, changed) = &*self.state;
        lock.lock().unwrap().0 = true;
        changed.notify_all();
    }
}

/// A website given a new subdomain while an ACME issuance for it runs waits for the
/// new name's DNS: the issuance's result belongs to the website as it was, and does not
/// end the new setup.
#[test]
fn an_issuance_that_ends_after_the_names_changed_changes_nothing() -> Result<()> {
    let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let dns = Dnsmasq::start(&[("race.example", here)], &[])?;
    let local = |port| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let (http, https) = (local(free_port()), local(free_port()));
    let relay = HeldRelay::start(http)?;
    let pebble = Pebble::start(relay.port, https.port(), dns.address)?;
    let gateway = pebble_gateway(&pebble, &dns, "http-01", http, https)?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    let created = post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "race.example", "ip": ["192.0.2.10"]}),
    )?;
    assert_eq!(created["status"], "setup");
    // Pebble's validation is under way (held); the partner adds a subdomain, whose
    // name does not resolve.
    relay.wait_held(Duration::from_secs(30))?;
    let changed = partner.put_json("/v1.0/website/race.example", &json!({"subdomain": ["new"]}))?;
    ensure!(changed.status == 200, "{changed:?}");
    assert_eq!(changed.json()["status"], "setup");
    relay.release();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ended = |log: &str| {
        log.contains("the issuance's result is not used")
            || log.contains("certificate issuance finished")
    };
    while !ended(&gateway.log()) {
        ensure!(
            std::time::Instant::now() < deadline,
            "the issuance did not end:\n{}\n{}",
            gateway.log(),
            pebble.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let website = partner.get("/v1.0/website/race.example")?.json();
    assert_eq!(website["status"], "setup", "{website}");
    assert!(website["certificate"].is_null(), "{website}");
    Ok(())
}

/// One website owner's own key cannot spend its partner's issuances for every other
/// owner: a user key starts at most so many an hour (the partner's key is not bound
/// by it, nor another user's).
#[test]
fn a_user_key_starts_at_most_its_own_share_of_issuances() -> Result<()> {
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            "--acme-directory",
            "https://127.0.0.1:9/directory",
            "--acme-orders-per-user-key-per-hour",
            "3",
        ],
    )?;
    let hoster = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    let ann = hoster.with_key(&create_user(&hoster, "ann")?);
    let ben = hoster.with_key(&create_user(&hoster, "ben")?);
    let custom = |user: &str, domain: &str| -> Result<()> {
        let (public, private) = self_signed(&[domain])?;
        let created = hoster.post_json(
            "/v1.0/website",
            &json!({"user_id": user, "domain": domain, "ip": ["192.0.2.10"],
                    "certificate": {"public": public, "private": private},
                    "settings": {"loadbalancer": {"certs_issuer": "custom"}}}),
        )?;
        ensure!(created.status == 201, "{created:?}");
        Ok(())
    };
    for n in 0..5 {
        custom("ann", &format!("ann{n}.example"))?;
    }
    custom("ben", "ben.example")?;
    let to_acme = |client: &Client, domain: &str| {
        client.put_json(
            &format!("/v1.0/website/{domain}"),
            &json!({"settings": {"loadbalancer": {"certs_issuer": "acme"}}}),
        )
    };
    for n in 0..3 {
        let switched = to_acme(&ann, &format!("ann{n}.example"))?;
        ensure!(switched.status == 200, "{switched:?}");
    }
    let refused = to_acme(&ann, "ann3.example")?;
    crate::assert_error(&refused, 429, Some("settings.loadbalancer.certs_issuer"));
    let message = refused.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(message.contains("3 per user key per hour"), "{message}");
    // Another owner, and the partner itself, go on.
    let switched = to_acme(&ben, "ben.example")?;
    ensure!(switched.status == 200, "{switched:?}");
    let switched = to_acme(&hoster, "ann4.example")?;
    ensure!(switched.status == 200, "{switched:?}");
    Ok(())
}
