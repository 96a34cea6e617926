//! The flow of clients written for GateKeeper, as they send it: a form-encoded create
//! in `setup` with a separate `ipv6` list, a DNS check on the partner's side, then a
//! PUT of `online`; and a 409 whose message says "already exists".

use crate::{create_user, dns_checking_gateway, wait_for_status};
use anyhow::Result;
use botgate_tests::http::Client;
use botgate_tests::receiver::Receiver;
use botgate_tests::servers::Dnsmasq;
use serde_json::{Value, json};
use std::net::IpAddr;
use std::time::{Duration, Instant};

#[test]
fn a_website_created_in_setup_waits_for_its_dns_and_the_partners_online() -> Result<()> {
    let here: IpAddr = "127.0.0.1".parse()?;
    let dns = Dnsmasq::start(&[("panel.example", here), ("www.panel.example", here)], &[])?;
    let receiver = Receiver::start(0)?;
    let gateway = dns_checking_gateway(&dns, &[])?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    let callback = receiver.url("/created");
    let created = partner.post_form(
        "/v1.0/website",
        &[
            ("user_id", "ann"),
            ("domain", "panel.example"),
            ("subdomain", "www"),
            ("ip", "192.0.2.10"),
            ("ipv6", "2001:db8::10, 2001:db8::11"),
            ("status", "setup"),
            ("callbackUrl", &callback),
        ],
    )?;
    assert_eq!(created.status, 201, "{created:?}");
    let site = created.json();
    assert_eq!(site["status"], "setup");
    assert_eq!(
        site["ip"],
        json!(["192.0.2.10", "2001:db8::10", "2001:db8::11"]),
        "every origin address shows in `ip`"
    );
    assert!(site.get("ipv6").is_none(), "{site}");

    // The names resolve here: the gateway's work ends, and the website still waits.
    let deadline = Instant::now() + Duration::from_secs(30);
    let held = loop {
        let site = partner.get("/v1.0/website/panel.example")?.json();
        let reason = site["status_reason"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if reason.contains("until the partner asks for `online`") {
            break site;
        }
        assert!(Instant::now() < deadline, "still {site}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(held["status"], "setup");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        receiver.received().is_empty(),
        "no webhook while the website is held"
    );

    // The partner's PUT of `online` (form-encoded, `ipv6` again) ends the setup.
    let online = partner.put_form(
        "/v1.0/website/panel.example",
        &[("status", "online"), ("ipv6", "2001:db8::12")],
    )?;
    assert_eq!(online.status, 200, "{online:?}");
    assert_eq!(online.json()["status"], "online");
    assert_eq!(online.json()["ip"], json!(["192.0.2.10", "2001:db8::12"]));
    let got = receiver.wait_for(1, Duration::from_secs(20))?;
    assert_eq!(got[0].path, "/created");
    let hook: Value = serde_json::from_str(&got[0].body)?;
    assert_eq!(hook["status"], "online");
    wait_for_status(&partner, "panel.example", "online", &String::new)?;

    // `setup` is for creates; the same domain again is a 409 that says "already exists".
    let refused = partner.put_form("/v1.0/website/panel.example", &[("status", "setup")])?;
    assert_eq!(refused.status, 422, "{refused:?}");
    let again = partner.post_form(
        "/v1.0/website",
        &[
            ("user_id", "ann"),
            ("domain", "panel.example"),
            ("ip", "192.0.2.10"),
        ],
    )?;
    assert_eq!(again.status, 409, "{again:?}");
    let message = again.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("already exists"), "{message}");
    let user_again = partner.post_form("/v1.0/user", &[("id", "ann")])?;
    assert_eq!(user_again.status, 409, "{user_again:?}");
    assert!(
        user_again.json()["message"]
            .as_str()
            .is_some_and(|m| m.contains("already exists")),
        "{user_again:?}"
    );
    Ok(())
}
