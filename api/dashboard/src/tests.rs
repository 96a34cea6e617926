//! The dashboard's pages and assets through its router, on an embedded store: the
//! headers that keep a key in the address safe, framing only by the owner's panels,
//! the languages, and catalogues that hold every string the script asks for.

use super::*;
use axum::body::Body;
use axum::http::Request;
use botgate_model::{Category, FrameOrigin, KNOWN_RULESETS};
use botgate_store::conformance::{partner, user, website};
use botgate_store::{PartnerChange, StoreConfig};
use http_body_util::BodyExt;
use tower::ServiceExt;

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn get(router: &Router, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = router
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A store with partner `hoster` (panel `https://panel.hoster.example`) owning
/// `shop.example`, and partner `rival` owning `rival.example` with no panel.
async fn dashboard(dir: &std::path::Path) -> Router {
    let store = Arc::new(
        AnyStore::open(&StoreConfig::Embedded(dir.to_path_buf()))
            .await
            .unwrap(),
    );
    for (name, domain, origins) in [
        (
            "hoster",
            "shop.example",
            vec!["https://panel.hoster.example"],
        ),
        ("rival", "rival.example", vec![]),
    ] {
        let partner = partner(name);
        store.put_partner(&partner).await.unwrap();
        let owner = user(&partner, "owner");
        store.create_user(&owner).await.unwrap();
        store
            .create_website(&partner.name, &website(domain, &owner))
            .await
            .unwrap();
        store
            .update_partner(
                &partner.name,
                PartnerChange::FrameOrigins(FrameOrigin::parse_list(&origins).unwrap()),
            )
            .await
            .unwrap();
    }
    router(store)
}

fn header<'a>(answer: &'a Answer, name: &str) -> &'a str {
    answer
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test]
async fn a_page_is_framed_only_by_its_owners_panels_and_never_cached_or_referred() {
    let dir = tempfile::tempdir().unwrap();
    let router = dashboard(dir.path()).await;
    let page = get(
        &router,
        "/en/website/shop.example/edit?api-key=bgu_secret",
        &[],
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    let csp = header(&page, "content-security-policy");
    assert!(
        csp.contains("frame-ancestors https://panel.hoster.example"),
        "{csp}"
    );
    for directive in [
        "default-src 'self'",
        "script-src 'self';",
        "style-src 'self';",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(header(&page, "referrer-policy"), "no-referrer");
    assert_eq!(header(&page, "cache-control"), "no-store");
    assert_eq!(header(&page, "x-content-type-options"), "nosniff");
    assert!(!page.body.contains("bgu_secret"), "the key is never echoed");
    // Scripts only from files, and the catalogue as data.
    for script in page.body.split("<script").skip(1) {
        let tag = script.split('>').next().unwrap();
        assert!(
            tag.contains(" src=\"/dashboard/assets/") || tag.contains("type=\"application/json\""),
            "{tag}"
        );
    }

    // Another partner's website: its own (empty) list; an unknown one: none.
    for path in [
        "/en/website/rival.example/edit",
        "/en/website/nobody.example/statistics",
    ] {
        let page = get(&router, path, &[]).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        let csp = header(&page, "content-security-policy");
        assert!(csp.ends_with("frame-ancestors 'none'"), "{path}: {csp}");
        assert!(!csp.contains("panel.hoster"), "{path}: {csp}");
    }
}

#[tokio::test]
async fn each_page_speaks_its_language_and_an_unknown_one_falls_back_to_english() {
    let dir = tempfile::tempdir().unwrap();
    let router = dashboard(dir.path()).await;
    for page in Page::ALL {
        let english = get(
            &router,
            &format!("/en/website/shop.example/{}", page.as_str()),
            &[],
        )
        .await;
        assert!(
            english
                .body
                .starts_with("<!doctype html>\n<html lang=\"en\">")
        );
        let key = format!("page.{}", page.as_str());
        let title = Language::En.strings().get(&key);
        assert!(
            english
                .body
                .contains(&format!("<title>{title} · shop.example</title>"))
        );
        assert!(
            english
                .body
                .contains(&format!("data-page=\"{}\"", page.as_str()))
        );
        let russian = get(
            &router,
            &format!("/ru/website/shop.example/{}", page.as_str()),
            &[],
        )
        .await;
        assert!(russian.body.contains("<html lang=\"ru\">"));
        assert!(russian.body.contains("Защита от ботов"));
    }
    let german = get(&router, "/de/website/shop.example/edit", &[]).await;
    assert_eq!(german.status, StatusCode::OK);
    assert!(german.body.contains("<html lang=\"en\">"));
    // An address with no such page, or no valid domain: a page that says so.
    for path in [
        "/en/website/shop.example/settings",
        "/ru/website/bad%20name/edit",
    ] {
        let missing = get(&router, path, &[]).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{path}");
        assert!(missing.body.contains("<h1>"), "{path}");
        assert_eq!(header(&missing, "cache-control"), "no-store");
    }
}

#[tokio::test]
async fn assets_are_compiled_in_and_revalidated() {
    let dir = tempfile::tempdir().unwrap();
    let router = dashboard(dir.path()).await;
    for (name, kind) in [
        ("app.js", "text/javascript"),
        ("style.css", "text/css"),
        ("uPlot.iife.min.js", "text/javascript"),
        ("uPlot.min.css", "text/css"),
    ] {
        let path = format!("{ASSET_PATH}/{name}");
        let asset = get(&router, &path, &[]).await;
        assert_eq!(asset.status, StatusCode::OK, "{name}");
        assert!(header(&asset, "content-type").starts_with(kind), "{name}");
        assert!(!asset.body.is_empty());
        let etag = header(&asset, "etag").to_owned();
        let again = get(&router, &path, &[("if-none-match", &etag)]).await;
        assert_eq!(again.status, StatusCode::NOT_MODIFIED, "{name}");
        assert!(again.body.is_empty());
    }
    let missing = get(&router, &format!("{ASSET_PATH}/secret.txt"), &[]).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

/// The keys the script names literally (`t("…")`) and the families it builds from
/// the model's names.
#[test]
fn every_catalogue_holds_every_string_the_dashboard_asks_for() {
    let script = include_str!("../web/app.js");
    let mut wanted: Vec<String> = script
        .match_indices("t(\"")
        .filter(|(at, _)| {
            script[..*at]
                .chars()
                .next_back()
                .is_some_and(|before| !before.is_alphanumeric() && before != '.' && before != '_')
        })
        .filter_map(|(at, _)| script[at + 3..].split('"').next())
        .map(str::to_owned)
        .collect();
    assert!(wanted.len() > 30, "{wanted:?}");
    for category in Category::ALL.map(Category::as_str) {
        wanted.push(format!("category.{category}"));
        wanted.push(format!("category.{category}.help"));
    }
    for ruleset in KNOWN_RULESETS {
        wanted.push(format!("ruleset.{ruleset}"));
        wanted.push(format!("ruleset.{ruleset}.help"));
    }
    // The help of an operator's own rule set (named, not written as `t("…")`).
    assert!(script.contains("\"ruleset.other.help\""));
    wanted.push("ruleset.other.help".to_owned());
    for loadbalancer in serde_json::to_value(botgate_model::Loadbalancer::default())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .filter(|key| *key != "certs_issuer")
    {
        wanted.push(format!("lb.{loadbalancer}"));
        wanted.push(format!("lb.{loadbalancer}.help"));
    }
    for family in [
        "action.grant",
        "action.deny",
        "action.captcha",
        "status.online",
        "status.setup",
        "status.paused",
        "status.error",
        "problem.key.title",
        "problem.nokey.title",
        "problem.session.title",
        "problem.notfound.title",
        "problem.network.title",
        "problem.busy.title",
        "certificate.state.valid",
        "certificate.state.expiring",
        "certificate.state.expired",
        "certificate.state.issuing",
        "certificate.state.none",
        "certificate.acme",
        "certificate.custom",
        "certificate.public",
        "certificate.private",
        "page.edit",
        "page.statistics",
        "page.events",
        "statistics.hour",
        "statistics.week",
    ] {
        wanted.push(family.to_owned());
    }
    let english: Vec<&str> = Language::En.strings().keys().collect();
    for language in Language::ALL {
        let keys: Vec<&str> = language.strings().keys().collect();
        assert_eq!(keys, english, "{} and en hold other keys", language.tag());
        for key in &wanted {
            assert!(
                keys.contains(&key.as_str()),
                "{} has no `{key}`",
                language.tag()
            );
        }
    }
}

#[test]
fn the_catalogue_cannot_end_its_script_element() {
    let json = Language::En.strings().script_json();
    assert!(!json.contains('<') && !json.contains('>'));
    let read: std::collections::BTreeMap<String, String> = serde_json::from_str(json).unwrap();
    assert_eq!(
        read.get("product").map(String::as_str),
        Some("Bot protection")
    );
}
