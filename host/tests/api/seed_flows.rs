//! The specification's example flows, verbatim, in both content types.

use crate::{on_both_backends, partners};
use botgate_tests::http::self_signed;
use serde_json::json;

#[test]
fn a_partner_creates_a_user_and_reads_its_key() {
    on_both_backends(&[], |gateway| {
        let (partner, _) = partners(gateway);
        let created = partner.post_form("/v1.0/user", &[("id", "owner@customer.example")])?;
        assert_eq!(created.status, 201, "{created:?}");
        let user = created.json();
        assert_eq!(user["id"], "owner@customer.example");
        assert_eq!(user["tag"], json!([]));
        assert_eq!(user["server"], json!([]));
        let key = user["api_key"].as_str().unwrap();
        assert!(key.starts_with("bgu_") && key.len() >= 4 + 22, "{key}");

        let read = partner.get("/v1.0/user/owner@customer.example")?;
        assert_eq!(read.status, 200, "{read:?}");
        assert_eq!(read.json(), user, "retrieval returns the same user and key");

        // JSON works too, and a second user gets another key.
        let second = partner.post_json("/v1.0/user", &json!({"id": "second", "tag": ["vip"]}))?;
        assert_eq!(second.status, 201, "{second:?}");
        assert_eq!(second.json()["tag"], json!(["vip"]));
        assert_ne!(second.json()["api_key"], user["api_key"]);
        Ok(())
    });
}

#[test]
fn a_website_is_created_form_style_and_json_style_and_updated_key_by_key() {
    on_both_backends(&[], |gateway| {
        let (partner, _) = partners(gateway);
        crate::create_user(&partner, "owner@customer.example")?;

        // Form style: lists comma-separated, `ip` and `tag` as strings.
        let form = partner.post_form(
            "/v1.0/website",
            &[
                ("user_id", "owner@customer.example"),
                ("domain", "shop.example"),
                ("subdomain", "www,static"),
                ("ip", "192.0.2.10"),
                ("tag", "dc-east"),
                (
                    "callbackUrl",
                    "https://panel.hoster.example/botgate/callback",
                ),
            ],
        )?;
        assert_eq!(form.status, 201, "{form:?}");
        let site = form.json();
        assert_eq!(site["domain"], "shop.example");
        assert_eq!(site["subdomain"], json!(["www", "static"]));
        assert_eq!(site["ip"], json!(["192.0.2.10"]));
        assert_eq!(site["tag"], json!(["dc-east"]));
        assert_eq!(site["status"], "online", "nothing pending: online at once");
        assert_eq!(site["settings"]["rules"]["humans"], "grant");
        assert_eq!(site["settings"]["loadbalancer"]["bot_protection"], true);

        // JSON style with every part the specification shows.
        let (public, private) = self_signed(&["blog.example", "www.blog.example"])?;
        let created = partner.post_json(
            "/v1.0/website",
            &json!({
                "domain": "blog.example",
                "subdomain": [],
                "user_id": "owner@customer.example",
                "ip": ["192.0.2.20", "2001:db8::20"],
                "tag": ["dc-west"],
                "status": "online",
                "certificate": {"public": public, "private": private},
                "settings": {
                    "rulesets": {"wordpress": true},
                    "rules": {
                        "content_scrapers": "deny", "emulated_humans": "captcha",
                        "humans": "grant", "search_engines": "grant",
                        "security_issues": "deny", "services_and_payments": "grant",
                        "social_networks": "grant", "suspicious_behaviour": "captcha"
                    },
                    "loadbalancer": {
                        "upstreams_use_https": true, "enable_http3": false,
                        "force_https": true, "cache_static_files": true,
                        "cache_dynamic_pages": false, "ddos_protection": true,
                        "ddos_protection_advanced": false, "bot_protection": true,
                        "force_subdomains_redirect": false, "certs_issuer": "custom"
                    }
                },
                "callbackUrl": "https://panel.hoster.example/botgate/callback"
            }),
        )?;
        assert_eq!(created.status, 201, "{created:?}");
        let blog = created.json();
        assert_eq!(blog["ip"], json!(["192.0.2.20", "2001:db8::20"]));
        assert_eq!(blog["settings"]["rulesets"]["wordpress"], true);
        assert_eq!(blog["settings"]["rulesets"]["drupal"], false);
        assert_eq!(blog["settings"]["loadbalancer"]["certs_issuer"], "custom");
        assert_eq!(
            blog["settings"]["loadbalancer"]["upstreams_use_https"],
            true
        );
        assert_eq!(blog["certificate"]["public"], public.as_str());
        assert!(
            !created.text.contains("PRIVATE KEY"),
            "the private key is never shown"
        );

        // PUT a single rule key: only that key changes.
        let updated = partner.put_json(
            "/v1.0/website/blog.example",
            &json!({"domain": "blog.example", "subdomain": ["www"],
                    "settings": {"rules": {"humans": "captcha"}}}),
        )?;
        assert_eq!(updated.status, 200, "{updated:?}");
        let after = updated.json();
        assert_eq!(after["settings"]["rules"]["humans"], "captcha");
        let mut expected = blog.clone();
        expected["settings"]["rules"]["humans"] = json!("captcha");
        expected["subdomain"] = json!(["www"]);
        assert_eq!(after, expected, "nothing else changed");

        // PUT `certs_issuer` inside `loadbalancer`.
        let switched = partner.put_json(
            "/v1.0/website/blog.example",
            &json!({"settings": {"loadbalancer": {"certs_issuer": "acme"}}}),
        )?;
        assert_eq!(switched.status, 200, "{switched:?}");
        let switched = switched.json();
        assert_eq!(switched["settings"]["loadbalancer"]["certs_issuer"], "acme");
        assert_eq!(switched["settings"]["loadbalancer"]["force_https"], true);
        assert_eq!(switched["settings"]["rules"], after["settings"]["rules"]);

        // Form PUT: the list sent replaces the list.
        let replaced = partner.put_form("/v1.0/website/shop.example", &[("subdomain", "m,api")])?;
        assert_eq!(replaced.status, 200, "{replaced:?}");
        assert_eq!(replaced.json()["subdomain"], json!(["m", "api"]));
        assert_eq!(replaced.json()["tag"], json!(["dc-east"]));

        // What the updates answered is what is stored.
        assert_eq!(partner.get("/v1.0/website/blog.example")?.json(), switched);
        assert_eq!(
            partner.get("/v1.0/website/shop.example")?.json(),
            replaced.json()
        );
        Ok(())
    });
}

#[test]
fn websites_are_listed_paged_filtered_paused_and_deleted() {
    on_both_backends(&[], |gateway| {
        let (partner, _) = partners(gateway);
        crate::create_user(&partner, "ann")?;
        crate::create_user(&partner, "ben")?;
        for domain in ["a.example", "b.example", "c.example"] {
            crate::create_website(&partner, "ann", domain)?;
        }
        crate::create_website(&partner, "ben", "d.example")?;

        let first = partner.get("/v1.0/website?limit=2")?.json();
        assert_eq!(first["items"].as_array().unwrap().len(), 2);
        let next = first["next"].as_str().unwrap().to_owned();
        let rest = partner
            .get(&format!("/v1.0/website?limit=2&after={next}"))?
            .json();
        let domains: Vec<_> = first["items"]
            .as_array()
            .unwrap()
            .iter()
            .chain(rest["items"].as_array().unwrap())
            .map(|w| w["domain"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            domains,
            ["a.example", "b.example", "c.example", "d.example"]
        );
        assert_eq!(rest["next"], serde_json::Value::Null);
        let bens = partner.get("/v1.0/website?user_id=ben")?.json();
        assert_eq!(bens["items"].as_array().unwrap().len(), 1);

        let paused = partner.put_json("/v1.0/website/a.example", &json!({"status": "paused"}))?;
        assert_eq!(paused.json()["status"], "paused");
        let online = partner.put_form("/v1.0/website/a.example", &[("status", "online")])?;
        assert_eq!(online.json()["status"], "online");

        let deleted = partner.delete("/v1.0/website/b.example")?;
        assert_eq!(deleted.status, 200, "{deleted:?}");
        assert_eq!(deleted.json()["domain"], "b.example");
        assert_eq!(partner.get("/v1.0/website/b.example")?.status, 404);

        let users = partner.get("/v1.0/user")?.json();
        assert_eq!(users["items"].as_array().unwrap().len(), 2);
        let gone = partner.delete("/v1.0/user/ann")?;
        assert_eq!(gone.status, 200, "{gone:?}");
        assert_eq!(
            gone.json()["deleted_websites"],
            json!(["a.example", "c.example"])
        );
        assert_eq!(partner.get("/v1.0/user/ann")?.status, 404);
        assert_eq!(partner.get("/v1.0/website/c.example")?.status, 404);
        assert_eq!(partner.get("/v1.0/website/d.example")?.status, 200);
        Ok(())
    });
}

#[test]
fn unicode_domains_are_stored_as_ascii_and_found_either_way() {
    on_both_backends(&[], |gateway| {
        let (partner, _) = partners(gateway);
        crate::create_user(&partner, "ann")?;
        let created = crate::create_website(&partner, "ann", "Bücher.Example")?;
        assert_eq!(created["domain"], "xn--bcher-kva.example");
        assert_eq!(
            partner.get("/v1.0/website/b%C3%BCcher.example")?.status,
            200
        );
        assert_eq!(
            partner.get("/v1.0/website/xn--bcher-kva.example")?.status,
            200
        );
        Ok(())
    });
}
