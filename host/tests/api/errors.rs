//! Every error class answers the one JSON error body with the field named; bad input
//! never yields a 5xx.

use crate::{assert_error, create_user, create_website, on_both_backends, partners};
use botgate_tests::http::{Body, Client, self_signed};
use serde_json::json;

#[test]
fn keys_are_required_and_checked() {
    on_both_backends(&[], |gateway| {
        let anonymous = Client::new(&gateway.api, None);
        let missing = anonymous.get("/v1.0/user")?;
        assert_error(&missing, 401, Some("Authorization"));
        assert!(
            missing
                .header("www-authenticate")
                .is_some_and(|v| v.starts_with("Bearer"))
        );
        let wrong_partner = anonymous.with_key("bgp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        assert_error(
            &wrong_partner.get("/v1.0/user")?,
            401,
            Some("Authorization"),
        );
        let wrong_user = anonymous.with_key("bgu_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        assert_error(
            &wrong_user.get("/v1.0/website")?,
            401,
            Some("Authorization"),
        );
        let basic = anonymous.send(
            "GET",
            "/v1.0/user",
            Body::None,
            &[("authorization", "Basic dXNlcjpwYXNz")],
        )?;
        assert_error(&basic, 401, Some("Authorization"));
        // The partner key still works, and a deleted user's key stops working.
        let (partner, _) = partners(gateway);
        let key = create_user(&partner, "ann")?;
        assert_eq!(partner.with_key(&key).get("/v1.0/website")?.status, 200);
        partner.delete("/v1.0/user/ann")?;
        assert_error(
            &partner.with_key(&key).get("/v1.0/website")?,
            401,
            Some("Authorization"),
        );
        Ok(())
    });
}

#[test]
fn refused_values_name_their_field() {
    on_both_backends(&[], |gateway| {
        let (partner, _) = partners(gateway);
        create_user(&partner, "ann")?;
        create_website(&partner, "ann", "taken.example")?;
        let site = |extra: serde_json::Value| {
            let mut body = json!({"user_id": "ann", "domain": "new.example", "ip": ["192.0.2.1"]});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            partner.post_json("/v1.0/website", &body)
        };
        // 400: malformed.
        assert_error(&site(json!({"ip": ["300.1.2.3"]}))?, 400, Some("ip"));
        assert_error(&site(json!({"ip": []}))?, 400, Some("ip"));
        assert_error(
            &site(json!({"domain": "not a domain"}))?,
            400,
            Some("domain"),
        );
        assert_error(
            &site(json!({"domain": "xn--zz.example"}))?,
            400,
            Some("domain"),
        );
        assert_error(&site(json!({"domain": "192.0.2.1"}))?, 400, Some("domain"));
        assert_error(&site(json!({"tag": [7]}))?, 400, Some("tag[0]"));
        assert_error(
            &partner.send(
                "POST",
                "/v1.0/website",
                Body::Raw("application/json", b"{\"domain\":"),
                &[],
            )?,
            400,
            Some("body"),
        );
        assert_error(
            &partner.post_json("/v1.0/website", &json!({"domain": "x.example"}))?,
            400,
            Some("user_id"),
        );
        assert_error(&partner.get("/v1.0/website?limit=0")?, 400, Some("limit"));
        assert_error(
            &partner.get("/v1.0/website?colour=red")?,
            400,
            Some("colour"),
        );
        // 422: well-formed, not accepted.
        assert_error(
            &site(json!({"settings": {"rules": {"humans": "maybe"}}}))?,
            422,
            Some("settings.rules.humans"),
        );
        assert_error(
            &site(json!({"settings": {"rules": {"robots": "deny"}}}))?,
            422,
            Some("settings.rules.robots"),
        );
        assert_error(
            &site(json!({"settings": {"loadbalancer": {"turbo": true}}}))?,
            422,
            Some("settings.loadbalancer.turbo"),
        );
        assert_error(
            &site(json!({"settings": {"loadbalancer": {"certs_issuer": "custom"}}}))?,
            422,
            Some("certificate"),
        );
        assert_error(&site(json!({"status": "error"}))?, 422, Some("status"));
        // A bad certificate upload: each problem answers 422 and says what is wrong.
        let (public, private) = self_signed(&["new.example"])?;
        let (other_public, other_private) = self_signed(&["elsewhere.example"])?;
        for (certificate, field, says) in [
            (
                json!({"public": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", "private": private}),
                "certificate.public",
                "not a valid X.509 certificate",
            ),
            (
                json!({"public": public, "private": other_private}),
                "certificate.private",
                "does not belong",
            ),
            (
                json!({"public": other_public, "private": other_private}),
                "certificate.public",
                "does not cover `new.example`",
            ),
        ] {
            let reply = site(json!({"certificate": certificate}))?;
            assert_error(&reply, 422, Some(field));
            let message = reply.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(message.contains(says), "{message}");
        }
        let reply = site(
            json!({"subdomain": ["www"], "certificate": {"public": public, "private": private}}),
        )?;
        assert_error(&reply, 422, Some("certificate.public"));
        assert!(
            reply.json()["message"]
                .as_str()
                .unwrap_or_default()
                .contains("`www.new.example`")
        );
        assert_error(
            &site(json!({"callbackUrl": "ftp://hooks.example/x"}))?,
            422,
            Some("callbackUrl"),
        );
        assert_error(&site(json!({"colour": "red"}))?, 422, Some("colour"));
        assert_error(&site(json!({"user_id": "nobody"}))?, 422, Some("user_id"));
        assert_error(
            &partner.put_json(
                "/v1.0/website/taken.example",
                &json!({"domain": "other.example"}),
            )?,
            422,
            Some("domain"),
        );
        // 409: taken.
        assert_error(
            &site(json!({"domain": "Taken.Example"}))?,
            409,
            Some("domain"),
        );
        assert_error(
            &partner.post_form("/v1.0/user", &[("id", "ann")])?,
            409,
            Some("id"),
        );
        // 404: nothing there.
        assert_error(
            &partner.get("/v1.0/website/missing.example")?,
            404,
            Some("domain"),
        );
        assert_error(&partner.get("/v1.0/user/nobody")?, 404, Some("id"));
        assert_error(&partner.get("/v2/user")?, 404, None);
        // 405 for a method a path does not have, with `Allow`.
        let patch = partner.send("PATCH", "/v1.0/website/taken.example", Body::None, &[])?;
        assert_error(&patch, 405, None);
        assert!(patch.header("allow").is_some_and(|a| a.contains("PUT")));
        // 413: a value over its limit, and a body over the limit.
        let tags: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
        assert_error(&site(json!({"tag": tags}))?, 413, Some("tag"));
        let huge = format!("{{\"domain\":\"{}\"}}", "a".repeat(300 * 1024));
        assert_error(
            &partner.send(
                "PUT",
                "/v1.0/website/taken.example",
                Body::Raw("application/json", huge.as_bytes()),
                &[],
            )?,
            413,
            Some("body"),
        );
        // 415: neither JSON nor form, and rules management as a form.
        assert_error(
            &partner.send(
                "POST",
                "/v1.0/user",
                Body::Raw("text/plain", b"id=zed"),
                &[],
            )?,
            415,
            Some("Content-Type"),
        );
        let form_rules = partner.put_form(
            "/v1.0/website/taken.example",
            &[("settings[rules][humans]", "deny")],
        )?;
        assert_error(&form_rules, 415, Some("settings[rules][humans]"));
        assert!(
            form_rules.json()["message"]
                .as_str()
                .unwrap()
                .contains("application/json")
        );
        // Nothing refused was stored.
        assert_eq!(partner.get("/v1.0/website/new.example")?.status, 404);
        let kept = partner.get("/v1.0/website/taken.example")?.json();
        assert_eq!(kept["settings"]["rules"]["humans"], "grant");
        assert!(!gateway.log().contains("panicked"), "{}", gateway.log());
        Ok(())
    });
}

#[test]
fn a_key_over_its_rate_gets_429_with_retry_after() {
    on_both_backends(&["--api-rate", "1", "--api-burst", "3"], |gateway| {
        let (hoster, rival) = partners(gateway);
        for _ in 0..3 {
            assert_eq!(hoster.get("/v1.0/user")?.status, 200);
        }
        let limited = hoster.get("/v1.0/user")?;
        assert_error(&limited, 429, None);
        assert!(
            limited
                .header("retry-after")
                .is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1))
        );
        assert_eq!(
            rival.get("/v1.0/user")?.status,
            200,
            "other keys are not limited"
        );
        Ok(())
    });
}

#[test]
fn an_address_that_keeps_presenting_unknown_keys_is_stopped_before_any_look_up() {
    on_both_backends(
        &[
            "--api-failed-keys-per-minute",
            "6",
            "--api-failed-keys-burst",
            "5",
        ],
        |gateway| {
            let (hoster, _) = partners(gateway);
            assert_eq!(hoster.get("/v1.0/user")?.status, 200);
            let stranger = Client::new(&gateway.api, Some("bgp_not-a-key-of-anyone"));
            // Five within the burst, and the sixth, which runs the budget dry.
            for _ in 0..6 {
                assert_error(&stranger.get("/v1.0/user")?, 401, Some("Authorization"));
            }
            let stopped = stranger.get("/v1.0/user")?;
            assert_error(&stopped, 429, Some("Authorization"));
            assert!(stopped.header("retry-after").is_some(), "{stopped:?}");
            // The address waits (about ten seconds at six a minute): a key not seen
            // lately is not looked up meanwhile, one that authenticated goes on working.
            let (_, rival) = partners(gateway);
            assert_error(&rival.get("/v1.0/user")?, 429, Some("Authorization"));
            assert_eq!(hoster.get("/v1.0/user")?.status, 200);
            Ok(())
        },
    );
}

/// A website record this server cannot read (written by a later release while a cluster
/// is upgraded) is left out of its partner's listing, which still answers; read alone it
/// is a 503 with `Retry-After`, never a 500.
#[test]
fn a_record_this_release_cannot_read_is_left_out_of_listings_and_read_alone_is_503() {
    use botgate_tests::servers::{Gateway, GatewayStore, RedisServer};
    let redis = RedisServer::start().expect("starting redis-server");
    let gateway = Gateway::start(
        crate::binary(),
        GatewayStore::Redis(&redis),
        &["hoster", "rival"],
        &[],
    )
    .expect("starting botgate on Redis");
    let (partner, rival) = partners(&gateway);
    let ann = partner.with_key(&create_user(&partner, "ann").unwrap());
    let bob = partner.with_key(&create_user(&partner, "bob").unwrap());
    for domain in ["kept.example", "later.example"] {
        create_website(&partner, "ann", domain).unwrap();
    }
    let key = "botgate:website:later.example";
    let botgate_tests::servers::Resp::Bulk(Some(stored)) =
        redis.command(&["HGET", key, "website"]).unwrap()
    else {
        panic!("no stored website");
    };
    let mut later: serde_json::Value = serde_json::from_str(&stored).unwrap();
    later["status"] = "archived".into();
    redis
        .command(&["HSET", key, "website", &later.to_string()])
        .unwrap();
    for listing in ["/v1.0/website", "/v1.0/website?user_id=ann"] {
        let listed = partner.get(listing).unwrap();
        assert_eq!(listed.status, 200, "{listed:?}");
        let body = listed.json();
        let domains: Vec<&str> = body["items"]
            .as_array()
            .map(|items| items.iter().filter_map(|w| w["domain"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(domains, ["kept.example"], "{listed:?}");
    }
    for owner in [&partner, &ann] {
        let alone = owner.get("/v1.0/website/later.example").unwrap();
        assert_error(&alone, 503, None);
        assert_eq!(alone.header("retry-after"), Some("60"), "{alone:?}");
    }
    // Whoever does not reach it is told what they would be told of no website at all.
    for stranger in [&rival, &bob] {
        let alone = stranger.get("/v1.0/website/later.example").unwrap();
        assert_error(&alone, 404, Some("domain"));
    }
    assert_eq!(
        partner.get("/v1.0/website/kept.example").unwrap().status,
        200
    );
}

/// A partner holds at most the operator's quota of users and of websites: one more is
/// 403 naming the partner and the count; a deleted one makes room; another partner is
/// not held up.
#[test]
fn a_partner_past_its_quotas_is_refused_with_403() {
    on_both_backends(
        &[
            "--max-users-per-partner",
            "2",
            "--max-websites-per-partner",
            "2",
        ],
        |gateway| {
            let (partner, rival) = partners(gateway);
            create_user(&partner, "ann")?;
            create_user(&partner, "bob")?;
            let refused = partner.post_form("/v1.0/user", &[("id", "cat")])?;
            assert_error(&refused, 403, None);
            let message = refused.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(
                message.contains("partner hoster holds 2 users"),
                "{message}"
            );
            create_user(&rival, "cat")?;
            create_website(&partner, "ann", "one.quota.example")?;
            create_website(&partner, "bob", "two.quota.example")?;
            let refused = partner.post_json(
                "/v1.0/website",
                &json!({"user_id": "ann", "domain": "three.quota.example", "ip": ["192.0.2.10"]}),
            )?;
            assert_error(&refused, 403, None);
            assert!(
                refused.json()["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("holds 2 websites")),
                "{refused:?}"
            );
            assert_eq!(
                partner.get("/v1.0/website/three.quota.example")?.status,
                404
            );
            create_website(&rival, "cat", "three.quota.example")?;
            // A deleted user's websites, and the user, make room.
            assert_eq!(partner.delete("/v1.0/user/bob")?.status, 200);
            create_user(&partner, "dan")?;
            create_website(&partner, "dan", "four.quota.example")?;
            Ok(())
        },
    );
}
