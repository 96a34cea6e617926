//! Tenant isolation: partners never reach each other's users or websites; a user key
//! reaches its own websites only, to read and to change settings.

use crate::{assert_error, create_user, create_website, on_both_backends, partners, post_website};
use serde_json::json;

#[test]
fn partners_do_not_reach_each_others_users_or_websites() {
    on_both_backends(&[], |gateway| {
        let (hoster, rival) = partners(gateway);
        create_user(&hoster, "ann")?;
        create_website(&hoster, "ann", "ann.example")?;
        create_user(&rival, "ann")?; // the same id under another partner is another user
        create_website(&rival, "ann", "rival.example")?;

        for reply in [
            rival.get("/v1.0/website/ann.example")?,
            rival.put_json(
                "/v1.0/website/ann.example",
                &json!({"settings": {"rules": {"humans": "deny"}}}),
            )?,
            rival.delete("/v1.0/website/ann.example")?,
            hoster.get("/v1.0/website/rival.example")?,
        ] {
            assert_error(&reply, 404, Some("domain"));
        }
        let hosters = hoster.get("/v1.0/website")?.json();
        assert_eq!(hosters["items"].as_array().unwrap().len(), 1);
        assert_eq!(hosters["items"][0]["domain"], "ann.example");
        // Each partner's `ann` is its own: different keys, own websites only.
        let rivals_ann = rival.get("/v1.0/user/ann")?.json();
        assert_ne!(
            rivals_ann["api_key"],
            hoster.get("/v1.0/user/ann")?.json()["api_key"]
        );
        assert_eq!(
            rival.get("/v1.0/website?user_id=ann")?.json()["items"][0]["domain"],
            "rival.example"
        );
        // Deleting rival's ann leaves hoster's alone.
        assert_eq!(rival.delete("/v1.0/user/ann")?.status, 200);
        assert_eq!(hoster.get("/v1.0/website/ann.example")?.status, 200);
        // The untouched website is unchanged.
        let ann = hoster.get("/v1.0/website/ann.example")?.json();
        assert_eq!(ann["settings"]["rules"]["humans"], "grant");
        Ok(())
    });
}

#[test]
fn a_user_key_reads_its_own_websites_and_changes_only_their_settings() {
    on_both_backends(&[], |gateway| {
        let (hoster, _) = partners(gateway);
        let ann_key = create_user(&hoster, "ann")?;
        create_user(&hoster, "ben")?;
        create_website(&hoster, "ann", "ann.example")?;
        create_website(&hoster, "ben", "ben.example")?;
        let ann = hoster.with_key(&ann_key);

        assert_eq!(ann.get("/v1.0/website/ann.example")?.status, 200);
        assert_error(&ann.get("/v1.0/website/ben.example")?, 404, Some("domain"));
        let mine = ann.get("/v1.0/website")?.json();
        assert_eq!(mine["items"].as_array().unwrap().len(), 1);
        assert_error(&ann.get("/v1.0/website?user_id=ben")?, 404, Some("user_id"));

        let changed = ann.put_json(
            "/v1.0/website/ann.example",
            &json!({"settings": {"rules": {"suspicious_behaviour": "deny"}}}),
        )?;
        assert_eq!(changed.status, 200, "{changed:?}");
        assert_eq!(
            changed.json()["settings"]["rules"]["suspicious_behaviour"],
            "deny"
        );
        assert_error(
            &ann.put_json("/v1.0/website/ben.example", &json!({"settings": {}}))?,
            404,
            Some("domain"),
        );
        assert_error(
            &ann.put_json("/v1.0/website/ann.example", &json!({"ip": ["192.0.2.99"]}))?,
            403,
            Some("ip"),
        );
        assert_error(
            &ann.post_form("/v1.0/user", &[("id", "mallory")])?,
            403,
            None,
        );
        assert_error(&ann.get("/v1.0/user/ann")?, 403, None);
        assert_error(&ann.delete("/v1.0/website/ann.example")?, 403, None);
        assert_error(
            &ann.post_json(
                "/v1.0/website",
                &json!({"user_id": "ann", "domain": "x.example", "ip": ["192.0.2.1"]}),
            )?,
            403,
            None,
        );
        assert_eq!(
            hoster.get("/v1.0/website/ann.example")?.json()["ip"],
            json!(["192.0.2.10"])
        );
        Ok(())
    });
}

#[test]
fn a_partner_cannot_take_another_partners_host_names() {
    on_both_backends(&[], |gateway| {
        let (hoster, rival) = partners(gateway);
        create_user(&hoster, "ann")?;
        create_user(&rival, "eve")?;
        post_website(
            &hoster,
            &json!({"user_id": "ann", "domain": "victim.example", "subdomain": ["www"],
                    "ip": ["192.0.2.10"]}),
        )?;
        create_website(&hoster, "ann", "shop.victim2.example")?;
        create_website(&rival, "eve", "rival.example")?;

        let refused = |reply: botgate_tests::http::Reply, field: &str, host: &str| {
            assert_error(&reply, 409, Some(field));
            let message = reply.json()["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            assert!(message.contains(host), "{message}");
            assert!(message.contains("already exists"), "{message}");
            assert!(
                !message.contains("hoster") && !message.contains("ann"),
                "a 409 never names the other owner: {message}"
            );
        };
        let eve_creates = |domain: &str, subdomain: &[&str]| {
            rival.post_json(
                "/v1.0/website",
                &json!({"user_id": "eve", "domain": domain, "subdomain": subdomain,
                        "ip": ["192.0.2.20"]}),
            )
        };
        refused(
            eve_creates("www.victim.example", &[])?,
            "domain",
            "www.victim.example",
        );
        refused(
            eve_creates("login.victim.example", &[])?,
            "domain",
            "login.victim.example",
        );
        refused(
            eve_creates("victim2.example", &["shop"])?,
            "subdomain",
            "shop.victim2.example",
        );
        refused(
            eve_creates("victim2.example", &[])?,
            "domain",
            "victim2.example",
        );
        // Nor a public suffix, which would stand above every partner's domains.
        for suffix in ["co.uk", "github.io"] {
            let reply = eve_creates(suffix, &[])?;
            assert_error(&reply, 422, Some("domain"));
        }
        // In a form as in JSON, and by an update.
        refused(
            rival.post_form(
                "/v1.0/website",
                &[
                    ("user_id", "eve"),
                    ("domain", "www.victim.example"),
                    ("ip", "192.0.2.20"),
                ],
            )?,
            "domain",
            "www.victim.example",
        );
        create_website(&hoster, "ann", "shop.own.example")?;
        create_website(&hoster, "ann", "own.example")?;
        refused(
            hoster.put_form("/v1.0/website/own.example", &[("subdomain", "www,shop")])?,
            "subdomain",
            "shop.own.example",
        );
        assert_eq!(
            hoster.get("/v1.0/website/own.example")?.json()["subdomain"],
            json!([]),
            "a refused update changes nothing"
        );
        // The victim's visitors still reach the victim's website.
        assert_eq!(
            hoster.get("/v1.0/website/victim.example")?.json()["subdomain"],
            json!(["www"])
        );
        Ok(())
    });
}

/// Compiling custom rules' new patterns costs milliseconds each on the threads that
/// serve visitors: one partner's callers have a budget of them (a burst, then one a
/// second; 429 past it), another partner has its own, and patterns already compiled
/// cost nothing.
#[test]
fn new_custom_rule_patterns_are_compiled_within_a_partners_budget() {
    super::on_both_backends(&[], |gateway| {
        let (hoster, rival) = super::partners(gateway);
        super::create_user(&hoster, "ann")?;
        super::create_user(&rival, "eve")?;
        super::create_website(&hoster, "ann", "rules.example")?;
        super::create_website(&rival, "eve", "rival.example")?;
        let rules = |round: usize| {
            let rules: Vec<serde_json::Value> = (0..20)
                .map(|n| {
                    json!({"action": "deny", "conditions": [{"field": "user_agent",
                        "operator": "matches",
                        "value": format!("^bot-{round}-{n}-[a-z]+$")}]})
                })
                .collect();
            json!({"settings": {"custom_rules": rules}})
        };
        let mut refused = None;
        for round in 0..8 {
            let reply = hoster.put_json("/v1.0/website/rules.example", &rules(round))?;
            if reply.status != 200 {
                refused = Some((round, reply));
                break;
            }
        }
        let (round, reply) = refused.expect("a partner compiling 160 new patterns at once");
        assert!((5..=6).contains(&round), "refused at round {round}");
        super::assert_error(&reply, 429, Some("settings.custom_rules"));
        assert!(reply.header("retry-after").is_some(), "{reply:?}");
        // Rules already compiled cost nothing; another partner has its own budget.
        let again = hoster.put_json("/v1.0/website/rules.example", &rules(0))?;
        assert_eq!(again.status, 200, "{again:?}");
        let other = rival.put_json("/v1.0/website/rival.example", &rules(100))?;
        assert_eq!(other.status, 200, "{other:?}");
        Ok(())
    });
}
