//! DNS readiness: with the gateway's public addresses configured, a new website waits
//! in `setup` until its domain and subdomains resolve to them (checked against a real
//! dnsmasq), then goes `online`; one whose names point elsewhere ends in `error` with
//! the reason; either way the change's webhook carries the final status.

use crate::{create_user, dns_checking_gateway, post_website, wait_for_status};
use anyhow::{Result, ensure};
use botgate_tests::http::Client;
use botgate_tests::receiver::Receiver;
use botgate_tests::servers::Dnsmasq;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::Duration;

#[test]
fn websites_wait_in_setup_until_their_names_resolve_to_the_gateway() -> Result<()> {
    let here: IpAddr = "127.0.0.1".parse()?;
    let elsewhere: IpAddr = "192.0.2.99".parse()?;
    let dns = Dnsmasq::start(
        &[
            ("ready.example", here),
            ("www.ready.example", here),
            ("split.example", here),
            ("www.split.example", elsewhere),
        ],
        &[],
    )?;
    let receiver = Receiver::start(0)?;
    let gateway = dns_checking_gateway(&dns, &["--dns-wait-seconds", "3"])?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;

    // Every name points here: setup, then online, then the webhook says so.
    let created = post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "ready.example", "subdomain": ["www"],
                "ip": ["192.0.2.10"], "callbackUrl": receiver.url("/ready")}),
    )?;
    assert_eq!(created["status"], "setup");
    let online = wait_for_status(&partner, "ready.example", "online", &String::new)?;
    assert_eq!(online["status_reason"], Value::Null);
    let got = receiver.wait_for(1, Duration::from_secs(20))?;
    let hook: Value = serde_json::from_str(&got[0].body)?;
    assert_eq!(hook["domain"], "ready.example");
    assert_eq!(
        hook["status"], "online",
        "the status when the work finished"
    );

    // One name points elsewhere: it waits (saying why), then ends in error.
    post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "split.example", "subdomain": ["www"],
                "ip": ["192.0.2.10"], "callbackUrl": receiver.url("/split")}),
    )?;
    let failed = wait_for_status(&partner, "split.example", "error", &String::new)?;
    let reason = failed["status_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("`www.split.example` resolves to 192.0.2.99"),
        "{reason}"
    );
    let got = receiver.wait_for(2, Duration::from_secs(20))?;
    let hook: Value = serde_json::from_str(&got[1].body)?;
    assert_eq!(got[1].path, "/split");
    assert_eq!(hook["status"], "error");
    assert_eq!(hook["status_reason"], failed["status_reason"]);

    // Changing the names of a website in error checks again; without the stray name
    // it is ready.
    let retried = partner.put_json(
        "/v1.0/website/split.example",
        &json!({"subdomain": [], "callbackUrl": receiver.url("/retried")}),
    )?;
    ensure!(retried.status == 200, "{retried:?}");
    assert_eq!(retried.json()["status"], "setup");
    wait_for_status(&partner, "split.example", "online", &String::new)?;
    let got = receiver.wait_for(3, Duration::from_secs(20))?;
    assert_eq!(got[2].path, "/retried");

    // A paused website does not wait; a settings change finishes at once.
    let paused = partner.post_json(
        "/v1.0/website",
        &json!({"user_id": "ann", "domain": "quiet.example", "ip": ["192.0.2.10"],
                "status": "paused"}),
    )?;
    assert_eq!(paused.json()["status"], "paused");
    let changed = partner.put_json(
        "/v1.0/website/ready.example",
        &json!({"settings": {"rules": {"humans": "captcha"}}}),
    )?;
    assert_eq!(changed.json()["status"], "online");
    Ok(())
}

/// Names given to a paused website, or a website created paused, are checked when it
/// is asked to be online again: it waits in `setup` for them, and a name that does
/// not resolve here ends in `error`, not `online`.
#[test]
fn names_given_while_paused_wait_for_dns_when_online_again() -> Result<()> {
    let here: IpAddr = "127.0.0.1".parse()?;
    let dns = Dnsmasq::start(&[("calm.example", here), ("born.example", here)], &[])?;
    let gateway = dns_checking_gateway(&dns, &["--dns-wait-seconds", "2"])?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "calm.example", "ip": ["192.0.2.10"]}),
    )?;
    wait_for_status(&partner, "calm.example", "online", &String::new)?;
    let paused = partner.put_json(
        "/v1.0/website/calm.example",
        &json!({"subdomain": ["stray"], "status": "paused"}),
    )?;
    assert_eq!(paused.json()["status"], "paused", "{paused:?}");
    let resumed = partner.put_json("/v1.0/website/calm.example", &json!({"status": "online"}))?;
    assert_eq!(resumed.json()["status"], "setup", "{resumed:?}");
    let failed = wait_for_status(&partner, "calm.example", "error", &String::new)?;
    let reason = failed["status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("stray.calm.example"), "{reason}");

    // Created paused: nothing is checked until it is asked to be online.
    let born = post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "born.example", "subdomain": ["nowhere"],
                "ip": ["192.0.2.10"], "status": "paused"}),
    )?;
    assert_eq!(born["status"], "paused");
    let resumed = partner.put_json("/v1.0/website/born.example", &json!({"status": "online"}))?;
    assert_eq!(resumed.json()["status"], "setup", "{resumed:?}");
    wait_for_status(&partner, "born.example", "error", &String::new)?;
    Ok(())
}
