//! What the dashboard asks of the API: a user key traded for a session token with the
//! key's rights and no more, the partner's panel origins, and a certificate's details.

use super::{assert_error, create_user, create_website, on_both_backends, partners};
use botgate_tests::http::self_signed;
use serde_json::json;

#[test]
fn a_user_key_opens_a_session_with_its_rights_and_no_more() {
    on_both_backends(&[], |gateway| {
        let (hoster, rival) = partners(gateway);
        let ann_key = create_user(&hoster, "ann")?;
        create_user(&hoster, "ben")?;
        create_website(&hoster, "ann", "ann.example")?;
        create_website(&hoster, "ben", "ben.example")?;
        let ann = hoster.with_key(&ann_key);

        let opened = ann.post_json("/v1.0/session", &json!({}))?;
        assert_eq!(opened.status, 201, "{opened:?}");
        assert_eq!(opened.header("cache-control"), Some("no-store"));
        let token = opened.json()["token"].as_str().unwrap().to_owned();
        assert!(token.starts_with("bgs_") && token.len() == 47, "{token}");
        assert_eq!(opened.json()["expires_in"], 7200);
        let session = hoster.with_key(&token);

        // The user's own website, read and changed; nothing else.
        assert_eq!(session.get("/v1.0/website/ann.example")?.status, 200);
        let changed = session.put_json(
            "/v1.0/website/ann.example",
            &json!({"settings": {"rules": {"content_scrapers": "captcha"}}}),
        )?;
        assert_eq!(changed.status, 200, "{changed:?}");
        assert_eq!(
            changed.json()["settings"]["rules"]["content_scrapers"],
            "captcha"
        );
        assert_error(
            &session.get("/v1.0/website/ben.example")?,
            404,
            Some("domain"),
        );
        assert_error(
            &session.put_json("/v1.0/website/ann.example", &json!({"ip": ["192.0.2.9"]}))?,
            403,
            Some("ip"),
        );
        assert_error(&session.get("/v1.0/user/ann")?, 403, None);
        assert_error(&session.get("/v1.0/dashboard")?, 403, None);
        // A session does not open another, and a partner key opens none.
        assert_error(&session.post_json("/v1.0/session", &json!({}))?, 403, None);
        assert_error(&hoster.post_json("/v1.0/session", &json!({}))?, 403, None);
        assert_error(&rival.post_json("/v1.0/session", &json!({}))?, 403, None);

        // Twenty sessions a minute per user; the next waits (the first minute may end
        // meanwhile, so the count starts again: allow for it).
        let mut refused = None;
        for _ in 0..40 {
            let reply = ann.post_json("/v1.0/session", &json!({}))?;
            if reply.status != 201 {
                refused = Some(reply);
                break;
            }
        }
        let refused = refused.expect("a user opens sessions without end");
        assert_error(&refused, 429, None);
        assert!(refused.header("retry-after").is_some(), "{refused:?}");

        // A made-up token, and the token of a deleted user, are refused by name.
        let made_up = hoster.with_key(&format!("bgs_{}", "A".repeat(43)));
        let refused = made_up.get("/v1.0/website/ann.example")?;
        assert_error(&refused, 401, Some("Authorization"));
        assert!(
            refused.json()["message"]
                .as_str()
                .is_some_and(|m| m.contains("session")),
            "{refused:?}"
        );
        hoster.delete("/v1.0/website/ann.example")?;
        assert_eq!(hoster.delete("/v1.0/user/ann")?.status, 200);
        assert_error(&session.get("/v1.0/website")?, 401, Some("Authorization"));
        Ok(())
    });
}

#[test]
fn a_partner_lists_its_panel_origins_and_only_its_own() {
    on_both_backends(&["--dashboard-url", "https://dash.example/"], |gateway| {
        let (hoster, rival) = partners(gateway);
        let settings = hoster.get("/v1.0/dashboard")?;
        assert_eq!(settings.status, 200, "{settings:?}");
        assert_eq!(
            settings.json(),
            json!({"url": "https://dash.example", "frame_origins": []})
        );

        let set = hoster.put_json(
            "/v1.0/dashboard",
            &json!({"frame_origins": ["https://Panel.Example/", "http://127.0.0.1:8080"]}),
        )?;
        assert_eq!(set.status, 200, "{set:?}");
        let listed = json!(["https://panel.example", "http://127.0.0.1:8080"]);
        assert_eq!(set.json()["frame_origins"], listed);
        assert_eq!(
            hoster.get("/v1.0/dashboard")?.json()["frame_origins"],
            listed
        );
        assert_eq!(
            rival.get("/v1.0/dashboard")?.json()["frame_origins"],
            json!([])
        );

        // A form's comma list; anything a CSP header could read as more is refused.
        let form = rival.put_form(
            "/v1.0/dashboard",
            &[("frame_origins", "https://a.example, https://b.example:8443")],
        )?;
        assert_eq!(form.status, 200, "{form:?}");
        assert_eq!(
            form.json()["frame_origins"],
            json!(["https://a.example", "https://b.example:8443"])
        );
        assert_error(
            &hoster.put_json(
                "/v1.0/dashboard",
                &json!({"frame_origins": ["https://ok.example", "https://x.example; script-src *"]}),
            )?,
            400,
            Some("frame_origins[1]"),
        );
        assert_error(
            &hoster.put_json("/v1.0/dashboard", &json!({"origins": []}))?,
            422,
            Some("origins"),
        );
        assert_error(
            &hoster.put_json("/v1.0/dashboard", &json!({}))?,
            400,
            Some("frame_origins"),
        );
        assert_eq!(
            hoster.get("/v1.0/dashboard")?.json()["frame_origins"],
            listed
        );
        // Emptied, and a user key may not change it.
        let ann_key = create_user(&hoster, "ann")?;
        assert_error(
            &hoster
                .with_key(&ann_key)
                .put_json("/v1.0/dashboard", &json!({"frame_origins": []}))?,
            403,
            None,
        );
        let emptied = hoster.put_json("/v1.0/dashboard", &json!({"frame_origins": []}))?;
        assert_eq!(emptied.json()["frame_origins"], json!([]));
        Ok(())
    });
}

/// A user key that leaked is replaced by its partner: the old key and the sessions
/// opened with it stop working at once, the new one has the same rights, and the
/// user's websites stay. Only the user's own partner can, and only with its key.
#[test]
fn a_partner_replaces_a_users_key_and_ends_its_sessions() {
    on_both_backends(&[], |gateway| {
        let (hoster, rival) = partners(gateway);
        let old_key = create_user(&hoster, "ann")?;
        create_website(&hoster, "ann", "kept.example")?;
        let old = hoster.with_key(&old_key);
        let opened = old.post_json("/v1.0/session", &json!({}))?;
        assert_eq!(opened.status, 201, "{opened:?}");
        let session = hoster.with_key(opened.json()["token"].as_str().unwrap());
        assert_eq!(session.get("/v1.0/website/kept.example")?.status, 200);

        // Neither the user itself, nor another partner, nor for a user not there.
        assert_error(&old.post_json("/v1.0/user/ann/key", &json!({}))?, 403, None);
        assert_error(
            &rival.post_json("/v1.0/user/ann/key", &json!({}))?,
            404,
            Some("id"),
        );
        assert_error(
            &hoster.post_json("/v1.0/user/nobody/key", &json!({}))?,
            404,
            Some("id"),
        );
        assert_eq!(old.get("/v1.0/website/kept.example")?.status, 200);

        let replaced = hoster.post_form("/v1.0/user/ann/key", &[])?;
        assert_eq!(replaced.status, 200, "{replaced:?}");
        let new_key = replaced.json()["api_key"].as_str().unwrap().to_owned();
        assert!(
            new_key.starts_with("bgu_") && new_key != old_key,
            "{new_key}"
        );
        assert_eq!(replaced.json()["id"], "ann");
        assert_eq!(
            hoster.get("/v1.0/user/ann")?.json()["api_key"],
            new_key.as_str()
        );
        assert_error(
            &old.get("/v1.0/website/kept.example")?,
            401,
            Some("Authorization"),
        );
        assert_error(
            &session.get("/v1.0/website/kept.example")?,
            401,
            Some("Authorization"),
        );
        let new = hoster.with_key(&new_key);
        let page = new.get("/v1.0/website/kept.example")?;
        assert_eq!(page.status, 200, "{page:?}");
        assert_eq!(new.post_json("/v1.0/session", &json!({}))?.status, 201);
        Ok(())
    });
}

#[test]
fn a_user_uploads_its_certificate_and_reads_its_details() {
    on_both_backends(&[], |gateway| {
        let (hoster, _) = partners(gateway);
        let ann_key = create_user(&hoster, "ann")?;
        create_website(&hoster, "ann", "ann.example")?;
        let ann = hoster.with_key(&ann_key);
        let (public, private) = self_signed(&["ann.example"])?;
        let uploaded = ann.put_json(
            "/v1.0/website/ann.example",
            &json!({"certificate": {"public": public, "private": private},
                    "settings": {"loadbalancer": {"certs_issuer": "custom"}}}),
        )?;
        assert_eq!(uploaded.status, 200, "{uploaded:?}");
        let shown = uploaded.json();
        assert_eq!(shown["settings"]["loadbalancer"]["certs_issuer"], "custom");
        assert_eq!(shown["certificate"]["names"], json!(["ann.example"]));
        assert!(shown["certificate"]["issuer"].is_string(), "{shown}");
        assert!(shown["certificate"]["not_after"].as_i64().unwrap() > 1_700_000_000);
        assert!(shown["certificate"].get("private").is_none(), "{shown}");
        // A certificate for another name is refused beside its field.
        let (other, other_key) = self_signed(&["other.example"])?;
        assert_error(
            &ann.put_json(
                "/v1.0/website/ann.example",
                &json!({"certificate": {"public": other, "private": other_key}}),
            )?,
            422,
            Some("certificate.public"),
        );
        Ok(())
    });
}

/// Statistics read again and again cost the store one read of the week's buckets a
/// minute, and a partner's callers cannot have this gateway read week after week of
/// many websites at once: past a burst, 429 with `Retry-After`.
#[test]
fn statistics_are_computed_once_a_period_and_within_a_partners_budget() {
    let redis = botgate_tests::servers::RedisServer::start().unwrap();
    let gateway = botgate_tests::servers::Gateway::start(
        super::binary(),
        botgate_tests::servers::GatewayStore::Redis(&redis),
        &["hoster", "rival"],
        &[],
    )
    .unwrap();
    let (hoster, rival) = partners(&gateway);
    create_user(&hoster, "ann").unwrap();
    create_user(&rival, "eve").unwrap();
    for n in 0..8 {
        create_website(&hoster, "ann", &format!("s{n}.example")).unwrap();
    }
    create_website(&rival, "eve", "rival.example").unwrap();
    let week = |client: &botgate_tests::http::Client, domain: &str| {
        client
            .get(&format!("/v1.0/website/{domain}/statistics?range=week"))
            .unwrap()
    };
    let reads = || redis.calls("hgetall");
    let before = reads();
    for _ in 0..20 {
        let reply = week(&hoster, "s0.example");
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.json()["times"].as_array().map(Vec::len), Some(168));
    }
    let read = reads() - before;
    assert!(read <= 2 * 168, "{read} buckets read for 20 answers");
    // Four more websites' weeks fit the burst; then the partner waits.
    for n in 1..5 {
        assert_eq!(week(&hoster, &format!("s{n}.example")).status, 200);
    }
    let refused = (5..8)
        .map(|n| week(&hoster, &format!("s{n}.example")))
        .find(|reply| reply.status != 200)
        .expect("a sixth website's week within a second is refused");
    assert_error(&refused, 429, None);
    assert!(refused.header("retry-after").is_some(), "{refused:?}");
    // What was computed is still answered; another partner has its own budget.
    assert_eq!(week(&hoster, "s0.example").status, 200);
    assert_eq!(week(&rival, "rival.example").status, 200);
}
