//! Website-change webhooks end to end: a change sent with `callbackUrl` ends in a POST
//! of the website to a real receiver, signed the Standard Webhooks way (checked with
//! the Standard Webhooks library, as a partner would); the secret is read and rotated
//! over the API; a receiver that is down gets the webhook once it is back, across a
//! gateway crash, with one id; private addresses and redirects are refused.

use crate::{ALLOW_LOOPBACK, binary, create_user, on_both_backends, partners, post_website};
use anyhow::{Context, Result, ensure};
use botgate_tests::http::Client;
use botgate_tests::receiver::{Received, Receiver};
use botgate_tests::servers::{Gateway, GatewayStore, free_port};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Whether `received` carries a valid signature by `secret`.
fn signed_by(received: &Received, secret: &str) -> bool {
    let mut headers = http::HeaderMap::new();
    for (name, value) in &received.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            headers.insert(name, value);
        }
    }
    standardwebhooks::Webhook::new(secret)
        .and_then(|webhook| webhook.verify(received.body.as_bytes(), &headers))
        .is_ok()
}

fn secret(partner: &Client) -> Result<String> {
    let reply = partner.get("/v1.0/webhook-secret")?;
    ensure!(reply.status == 200, "{reply:?}");
    Ok(reply.json()["secret"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

/// A gateway on the embedded store whose webhooks may go to loopback, and its partner's
/// client with the user `ann` created.
fn loopback_gateway_with_ann() -> Result<(Gateway, Client)> {
    let gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &ALLOW_LOOPBACK,
    )?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    Ok((gateway, partner))
}

/// Waits until the gateway's log contains `text`.
fn wait_for_log(gateway: &Gateway, text: &str) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !gateway.log().contains(text) {
        ensure!(
            Instant::now() < deadline,
            "no `{text}` in the log:\n{}",
            gateway.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

#[test]
fn a_finished_change_is_posted_signed_to_its_callback_url() {
    on_both_backends(&ALLOW_LOOPBACK, |gateway| {
        let receiver = Receiver::start(0)?;
        let (partner, _) = partners(gateway);
        let user_key = create_user(&partner, "ann")?;
        let first_secret = secret(&partner)?;
        ensure!(first_secret.starts_with("whsec_"), "{first_secret}");

        post_website(
            &partner,
            &json!({"user_id": "ann", "domain": "hooked.example", "ip": ["192.0.2.10"],
                    "callbackUrl": receiver.url("/hooks/created?from=botgate")}),
        )?;
        let got = receiver.wait_for(1, Duration::from_secs(20))?;
        let hook = &got[0];
        assert_eq!(hook.method, "POST");
        assert_eq!(hook.path, "/hooks/created?from=botgate");
        assert!(hook.headers["webhook-id"].starts_with("msg_"), "{hook:?}");
        assert_eq!(hook.headers["content-type"], "application/json");
        assert!(signed_by(hook, &first_secret), "{hook:?}");
        let body: Value = serde_json::from_str(&hook.body)?;
        let stored = partner.get("/v1.0/website/hooked.example")?.json();
        assert_eq!(body, stored, "the full website object, as stored");
        assert_eq!(body["status"], "online");

        // Webhooks are the partner's: a user's key may change the settings, but not
        // ask for a webhook (it would have the partner's signature sent anywhere).
        let user = partner.with_key(&user_key);
        let refused = user.put_json(
            "/v1.0/website/hooked.example",
            &json!({"settings": {"rules": {"humans": "captcha"}},
                    "callbackUrl": receiver.url("/hooks/by-user")}),
        )?;
        assert_eq!(refused.status, 403, "{refused:?}");
        assert_eq!(refused.json()["field"], "callbackUrl");
        // A change: its own webhook, its own id.
        let changed = partner.put_json(
            "/v1.0/website/hooked.example",
            &json!({"settings": {"rules": {"humans": "captcha"}},
                    "callbackUrl": receiver.url("/hooks/changed")}),
        )?;
        ensure!(changed.status == 200, "{changed:?}");
        let got = receiver.wait_for(2, Duration::from_secs(20))?;
        let hook = &got[1];
        assert_eq!(hook.path, "/hooks/changed");
        assert_ne!(hook.headers["webhook-id"], got[0].headers["webhook-id"]);
        let body: Value = serde_json::from_str(&hook.body)?;
        assert_eq!(body["settings"]["rules"]["humans"], "captcha");
        assert!(signed_by(hook, &first_secret));

        // The secret is the partner's to read and rotate, not a user's.
        assert_eq!(user.get("/v1.0/webhook-secret")?.status, 403);
        assert_eq!(
            user.post_json("/v1.0/webhook-secret", &json!({}))?.status,
            403
        );
        let rotated = partner.post_json("/v1.0/webhook-secret", &json!({}))?;
        ensure!(rotated.status == 200, "{rotated:?}");
        let new_secret = rotated.json()["secret"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_ne!(new_secret, first_secret);
        assert_eq!(secret(&partner)?, new_secret);
        let changed = partner.put_form(
            "/v1.0/website/hooked.example",
            &[
                ("tag", "rotated"),
                ("callbackUrl", &receiver.url("/hooks/form")),
            ],
        )?;
        ensure!(changed.status == 200, "{changed:?}");
        let got = receiver.wait_for(3, Duration::from_secs(20))?;
        assert_eq!(got[2].path, "/hooks/form");
        assert!(
            signed_by(&got[2], &new_secret),
            "signed with the new secret"
        );
        assert!(!signed_by(&got[2], &first_secret), "not with the old one");

        // A change without callbackUrl sends nothing; nothing is sent twice.
        partner.put_form("/v1.0/website/hooked.example", &[("tag", "quiet")])?;
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(receiver.received().len(), 3, "{:?}", receiver.received());
        Ok(())
    });
}

#[test]
fn a_receiver_that_is_down_gets_the_webhook_once_it_is_back_even_across_a_crash() -> Result<()> {
    let port = free_port();
    let mut gateway = Gateway::start(
        binary(),
        GatewayStore::Embedded,
        &["hoster"],
        &[
            ALLOW_LOOPBACK[0],
            ALLOW_LOOPBACK[1],
            "--webhook-retry-base-ms",
            "400",
        ],
    )?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "patient.example", "ip": ["192.0.2.10"],
                "callbackUrl": format!("http://127.0.0.1:{port}/hooks")}),
    )?;
    // Down: the attempt fails and is rescheduled; then the gateway dies.
    wait_for_log(&gateway, "webhook not delivered; retrying later")?;
    gateway.restart()?;
    // Up, but failing at first: a non-2xx answer is retried too.
    let receiver = Receiver::start(port)?;
    receiver.answer(503);
    // If the crash came while an attempt was in flight, that delivery waits out its
    // lease (the 15 s timeout and 30 s more) before the restarted gateway takes it.
    receiver.wait_for(1, Duration::from_secs(75))?;
    receiver.answer(204);
    let got = receiver.wait_for(2, Duration::from_secs(30))?;
    std::thread::sleep(Duration::from_millis(2000));
    let got_all = receiver.received();
    assert_eq!(
        got_all.len(),
        got.len(),
        "nothing after the 2xx: {got_all:?}"
    );
    let id = &got[0].headers["webhook-id"];
    assert!(
        got.iter().all(|hook| &hook.headers["webhook-id"] == id),
        "one id on every attempt: {got:?}"
    );
    let secret = secret(&partner)?;
    assert!(got.iter().all(|hook| signed_by(hook, &secret)));
    assert!(
        gateway.log().contains("webhook delivered"),
        "{}",
        gateway.log()
    );
    Ok(())
}

/// A receiver that takes connections and never answers: its URL, and how many
/// connections it took so far.
fn silent_receiver() -> Result<(String, impl Fn() -> usize)> {
    use std::sync::{Arc, Mutex};
    let silent = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("http://{}/hooks", silent.local_addr()?);
    let held = Arc::new(Mutex::new(Vec::new()));
    let holding = held.clone();
    std::thread::spawn(move || {
        for stream in silent.incoming().flatten() {
            holding.lock().unwrap().push(stream);
        }
    });
    Ok((url, move || held.lock().unwrap().len()))
}

/// A gateway on the embedded store for `partners`, calling loopback receivers, whose
/// API takes a flood of changes.
fn flooding_gateway(partners: &[&str]) -> Result<Gateway> {
    Gateway::start(
        binary(),
        GatewayStore::Embedded,
        partners,
        &[
            ALLOW_LOOPBACK[0],
            ALLOW_LOOPBACK[1],
            "--api-rate",
            "5000",
            "--api-burst",
            "5000",
        ],
    )
}

/// A partner whose receiver takes connections and never answers ties up a few of a
/// gateway's delivery slots, never all, and its backlog of waiting webhooks waits
/// behind others: another partner's webhook goes out while the stalled partner's first
/// attempts still wait for their 15 s timeout.
#[test]
fn a_receiver_that_never_answers_does_not_hold_up_other_partners_webhooks() -> Result<()> {
    let (silent_url, connections) = silent_receiver()?;
    let gateway = flooding_gateway(&["stalled", "prompt"])?;
    let (stalled, prompt) = partners(&gateway);
    create_user(&stalled, "ann")?;
    create_user(&prompt, "bob")?;
    // A backlog far beyond what a gateway attempts at once (32), due before the other
    // partner's webhook: passing it a claim at a time, a look a second, would take
    // longer than the stalled attempts' timeout.
    for n in 0..600 {
        post_website(
            &stalled,
            &json!({"user_id": "ann", "domain": format!("stalled{n}.example"),
                    "ip": ["192.0.2.10"], "callbackUrl": silent_url}),
        )?;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while connections() < botgate_webhooks::IN_FLIGHT_PER_PARTNER {
        ensure!(Instant::now() < deadline, "{}", gateway.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let stalled_since = Instant::now();
    let receiver = Receiver::start(0)?;
    post_website(
        &prompt,
        &json!({"user_id": "bob", "domain": "prompt.example", "ip": ["192.0.2.10"],
                "callbackUrl": receiver.url("/hooks")}),
    )?;
    receiver
        .wait_for(1, Duration::from_secs(40))
        .with_context(|| gateway.log())?;
    // Delivered before the stalled partner's first attempts timed out (which would
    // have let more of its webhooks connect): it never had more than its share.
    assert_eq!(
        connections(),
        botgate_webhooks::IN_FLIGHT_PER_PARTNER,
        "{:?} after the stall began",
        stalled_since.elapsed()
    );
    Ok(())
}

/// Four partners whose receivers never answer hold every delivery slot of a gateway
/// (their share each); a fifth partner's webhook, due after all their backlogs, takes
/// the first slot one of them frees, before their backlogs have had a first attempt.
#[test]
fn partners_whose_receivers_never_answer_cannot_keep_a_slot_from_another() -> Result<()> {
    let (silent_url, connections) = silent_receiver()?;
    let gateway = flooding_gateway(&["stalled1", "stalled2", "stalled3", "stalled4", "prompt"])?;
    let clients: Vec<Client> = gateway
        .partner_keys
        .iter()
        .map(|key| Client::new(&gateway.api, Some(key)))
        .collect();
    for client in &clients {
        create_user(client, "ann")?;
    }
    // Thirty webhooks each: 120 in all against 32 slots, more than two rounds of them.
    const EACH: usize = 30;
    for n in 0..EACH {
        for (p, client) in clients[..4].iter().enumerate() {
            post_website(
                client,
                &json!({"user_id": "ann", "domain": format!("s{p}-{n}.example"),
                        "ip": ["192.0.2.10"], "callbackUrl": silent_url}),
            )?;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while connections() < 4 * botgate_webhooks::IN_FLIGHT_PER_PARTNER {
        ensure!(Instant::now() < deadline, "{}", gateway.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let receiver = Receiver::start(0)?;
    post_website(
        &clients[4],
        &json!({"user_id": "ann", "domain": "prompt.example", "ip": ["192.0.2.10"],
                "callbackUrl": receiver.url("/hooks")}),
    )?;
    receiver
        .wait_for(1, Duration::from_secs(40))
        .with_context(|| gateway.log())?;
    // Oldest due first would have given every freed slot to the stalled partners'
    // backlogs until each of their 120 webhooks had been tried once.
    let tried = connections();
    ensure!(
        tried < 4 * EACH,
        "{tried} attempts of the stalled partners came first"
    );
    Ok(())
}

#[test]
fn private_addresses_and_redirects_are_refused() -> Result<()> {
    let receiver = Receiver::start(0)?;
    // Without the operator's leave, a loopback receiver is not called.
    let gateway = Gateway::start(binary(), GatewayStore::Embedded, &["hoster"], &[])?;
    let partner = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&partner, "ann")?;
    post_website(
        &partner,
        &json!({"user_id": "ann", "domain": "private.example", "ip": ["192.0.2.10"],
                "callbackUrl": receiver.url("/hooks")}),
    )?;
    wait_for_log(&gateway, "webhooks may not go to")?;
    assert!(receiver.received().is_empty(), "{:?}", receiver.received());
    drop(gateway);

    // Allowed, but the receiver redirects: not followed, retried later.
    receiver.answer(307);
    let (gateway, partner) = loopback_gateway_with_ann()?;
    partner
        .post_json(
            "/v1.0/website",
            &json!({"user_id": "ann", "domain": "redirected.example", "ip": ["192.0.2.10"],
                    "callbackUrl": receiver.url("/hooks")}),
        )
        .context("creating the website")?;
    wait_for_log(&gateway, "redirects are not followed")?;
    assert!(receiver.received().iter().all(|hook| hook.path == "/hooks"));
    Ok(())
}

#[test]
fn a_website_in_setup_collects_a_bounded_set_of_callback_urls() -> Result<()> {
    let receiver = Receiver::start(0)?;
    let (_gateway, partner) = loopback_gateway_with_ann()?;
    let created = partner.post_json(
        "/v1.0/website",
        &json!({"user_id": "ann", "domain": "waiting.example", "ip": ["192.0.2.10"],
                "status": "setup", "callbackUrl": receiver.url("/hooks/0")}),
    )?;
    ensure!(created.status == 201, "{created:?}");
    let change = |n: usize| {
        partner.put_json(
            "/v1.0/website/waiting.example",
            &json!({"tag": [format!("t{n}")], "callbackUrl": receiver.url(&format!("/hooks/{n}"))}),
        )
    };
    // Sixteen different addresses wait; one sent again adds nothing; a seventeenth is
    // refused, naming the field, and changes nothing.
    for n in 1..16 {
        let reply = change(n)?;
        ensure!(reply.status == 200, "{n}: {reply:?}");
    }
    let again = change(3)?;
    ensure!(again.status == 200, "{again:?}");
    let refused = change(16)?;
    assert_eq!(refused.status, 422, "{refused:?}");
    assert_eq!(refused.json()["field"], "callbackUrl");
    assert!(
        refused.json()["message"]
            .as_str()
            .unwrap_or_default()
            .contains("16 different `callbackUrl`s"),
        "{refused:?}"
    );
    assert_eq!(
        partner.get("/v1.0/website/waiting.example")?.json()["tag"],
        json!(["t3"])
    );
    // The end of the setup sends each waiting address its webhook, once.
    let online = partner.put_json(
        "/v1.0/website/waiting.example",
        &json!({"status": "online"}),
    )?;
    ensure!(online.status == 200, "{online:?}");
    let got = receiver.wait_for(16, Duration::from_secs(30))?;
    std::thread::sleep(Duration::from_millis(1500));
    let mut paths: Vec<String> = receiver.received().into_iter().map(|r| r.path).collect();
    paths.sort();
    let mut expected: Vec<String> = (0..16).map(|n| format!("/hooks/{n}")).collect();
    expected.sort();
    assert_eq!(paths, expected, "{got:?}");
    Ok(())
}

/// The `callbackUrl`s a partner's websites hold in `setup` go into the outbox unrefused
/// when the work ends, so they are bounded when they are accepted: past
/// [`botgate_webhooks::HELD_PER_PARTNER`] a create or change that adds one is refused
/// with 429, naming the field, and changes nothing; another partner is not held up, and
/// a website leaving `setup` (its webhook sent) makes room.
#[test]
fn the_callbacks_a_partners_websites_hold_in_setup_are_bounded() -> Result<()> {
    const HELD: usize = botgate_webhooks::HELD_PER_PARTNER;
    let receiver = Receiver::start(0)?;
    let gateway = flooding_gateway(&["holder", "neighbour"])?;
    let (holder, neighbour) = partners(&gateway);
    create_user(&holder, "ann")?;
    create_user(&neighbour, "bob")?;
    let held = |user: &str, n: usize| {
        json!({"user_id": user, "domain": format!("held{n}.{user}.example"),
               "ip": ["192.0.2.10"], "status": "setup",
               "callbackUrl": receiver.url(&format!("/hooks/{user}/{n}"))})
    };
    for n in 0..HELD {
        post_website(&holder, &held("ann", n))?;
    }
    assert_callback_refused(
        &holder,
        &held("ann", HELD),
        "held0.ann.example",
        &receiver.url("/hooks/ann/more"),
        &format!("{HELD} `callbackUrl`s wait"),
    )?;
    // Without `callbackUrl` a create goes through.
    let mut plain = held("ann", HELD + 1);
    plain.as_object_mut().map(|body| body.remove("callbackUrl"));
    post_website(&holder, &plain)?;
    post_website(&neighbour, &held("bob", 0)).context("another partner holds its own")?;
    // Online: the held webhook goes out, and there is room for one more.
    let online = holder.put_json(
        "/v1.0/website/held0.ann.example",
        &json!({"status": "online"}),
    )?;
    ensure!(online.status == 200, "{online:?}");
    let got = receiver.wait_for(1, Duration::from_secs(20))?;
    assert_eq!(got[0].path, "/hooks/ann/0");
    post_website(&holder, &held("ann", HELD)).context("room again")?;
    Ok(())
}

/// A `callbackUrl` a website holds in `setup` is queued when the website leaves it,
/// whatever the outbox holds then; so held ones are accepted only while the partner's
/// outbox has room. A partner cycling websites through `setup` (sixteen held
/// `callbackUrl`s each, then online) towards a receiver that never answers fills its
/// outbox to [`botgate_webhooks::WAITING_PER_PARTNER`] and no further: then a create
/// or change sending `callbackUrl` is refused with 429 and changes nothing.
#[test]
fn released_callbacks_cannot_grow_a_partners_outbox_without_bound() -> Result<()> {
    const WAITING: usize = botgate_webhooks::WAITING_PER_PARTNER;
    let (silent_url, _connections) = silent_receiver()?;
    let gateway = flooding_gateway(&["cycler"])?;
    let cycler = Client::new(&gateway.api, Some(&gateway.partner_keys[0]));
    create_user(&cycler, "ann")?;
    let url = |n: usize, k: usize| format!("{silent_url}/{n}/{k}");
    let mut released = 0;
    let mut n = 0;
    while released < WAITING {
        let domain = format!("cycle{n}.example");
        post_website(
            &cycler,
            &json!({"user_id": "ann", "domain": domain, "ip": ["192.0.2.10"],
                    "status": "setup", "callbackUrl": url(n, 0)}),
        )?;
        for k in 1..16 {
            let added = cycler.put_json(
                &format!("/v1.0/website/{domain}"),
                &json!({"callbackUrl": url(n, k)}),
            )?;
            ensure!(added.status == 200, "{added:?}");
        }
        let online = cycler.put_json(
            &format!("/v1.0/website/{domain}"),
            &json!({"status": "online"}),
        )?;
        ensure!(online.status == 200, "{online:?}");
        released += 16;
        n += 1;
    }
    assert_callback_refused(
        &cycler,
        &json!({"user_id": "ann", "domain": "one-more.example", "ip": ["192.0.2.10"],
                "status": "setup", "callbackUrl": url(n, 0)}),
        "cycle0.example",
        &url(0, 99),
        &format!("{WAITING} of this partner's webhooks wait"),
    )
}

/// Asserts that `partner` creating `created` (which sends a `callbackUrl`), and changing
/// the tags of its website `existing` with `callback`, are refused with 429 on
/// `callbackUrl`, saying `says`, and change nothing.
fn assert_callback_refused(
    partner: &Client,
    created: &serde_json::Value,
    existing: &str,
    callback: &str,
    says: &str,
) -> Result<()> {
    let refused = partner.post_json("/v1.0/website", created)?;
    ensure!(refused.status == 429, "{refused:?}");
    ensure!(refused.json()["field"] == "callbackUrl", "{refused:?}");
    let message = refused.json()["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    ensure!(message.contains(says), "{refused:?}");
    let absent = partner.get(&format!(
        "/v1.0/website/{}",
        created["domain"].as_str().unwrap_or_default()
    ))?;
    ensure!(absent.status == 404, "nothing was created: {absent:?}");
    let refused = partner.put_json(
        &format!("/v1.0/website/{existing}"),
        &json!({"tag": ["more"], "callbackUrl": callback}),
    )?;
    ensure!(refused.status == 429, "{refused:?}");
    let tags = partner.get(&format!("/v1.0/website/{existing}"))?.json()["tag"].clone();
    ensure!(tags == json!([]), "the change was refused whole: {tags}");
    Ok(())
}
