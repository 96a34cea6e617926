//! WordPress's legitimate machine traffic, recognised by the client's own marks.

use crate::rest_route;
use botgate_ruleset_sdk::signals::{
    LOGIN_BURST_MACHINE, basic_auth, credentials, feed_reader, hammering, other_payment_signature,
    param, paypal_ipn, paypal_webhook_signed, stripe_signed,
};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Requests in the window from which `wp-cron.php` from a public address is a flood:
/// WordPress spawns cron at most once a minute (`WP_CRON_LOCK_TIMEOUT`).
const CRON_FLOOD: u32 = 30;

/// User-agent tokens of external cron services that site owners point at `wp-cron.php`.
const CRON_SERVICES: &[&str] = &["cron-job.org", "easycron", "setcronjob", "cronless"];

/// The opinion on WordPress's legitimate machine traffic, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    cron(req)
        .or_else(|| jetpack(req))
        .or_else(|| payment_callback(req))
        .or_else(|| loopback(req))
        .or_else(|| rest_client(req))
        .or_else(|| feeds(req))
}

/// Whether the user agent is the one WordPress itself sends for this site:
/// `WordPress/6.5.2; https://www.example.com` (`http_headers_useragent`).
pub fn own_user_agent(req: &Request<'_>) -> bool {
    let Some(rest) = req.user_agent().strip_prefix("WordPress/") else {
        return false;
    };
    let Some((_, url)) = rest.split_once("; ") else {
        return false;
    };
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .unwrap_or(url);
    let host = host.split(['/', ':', ';', ' ']).next().unwrap_or("");
    !host.is_empty() && host.eq_ignore_ascii_case(req.host())
}

/// `wp-cron.php`: WordPress's loopback spawn, a system cron, or a cron service — and the
/// flood that is none of them.
fn cron(req: &Request<'_>) -> Option<Opinion> {
    if req.file_name() != "wp-cron.php" || req.is_browser() {
        return None;
    }
    let flood = hammering(req, CRON_FLOOD) && !req.client_is_private();
    if own_user_agent(req) && !flood {
        return opinion(Category::ServicesAndPayments, 95, "wordpress.cron-loopback");
    }
    if req.client_is_private() {
        return opinion(Category::ServicesAndPayments, 90, "wordpress.cron-system");
    }
    if flood {
        return opinion(Category::SecurityIssues, 80, "wordpress.cron-flood");
    }
    if req.is_read() && contains_any_ignore_case(req.user_agent(), CRON_SERVICES) {
        return opinion(Category::ServicesAndPayments, 85, "wordpress.cron-service");
    }
    None
}

/// Jetpack's requests from WordPress.com: its user agent and the signed query
/// (`for=jetpack&token=…&timestamp=…&nonce=…&signature=…`) on XML-RPC or the REST API.
fn jetpack(req: &Request<'_>) -> Option<Opinion> {
    if !req.ua_contains("Jetpack by WordPress.com") {
        return None;
    }
    let q = req.query_lower();
    let for_jetpack = param(q, "for") == Some("jetpack") || param(q, "_for") == Some("jetpack");
    let signed = ["token", "timestamp", "nonce", "signature"]
        .iter()
        .all(|p| param(q, p).is_some_and(|v| !v.is_empty()));
    let endpoint = req.file_name() == "xmlrpc.php" || rest_route(req).is_some();
    if for_jetpack && signed && endpoint {
        return opinion(Category::ServicesAndPayments, 90, "wordpress.jetpack");
    }
    None
}

/// The WooCommerce API endpoint a request addresses: `?wc-api=<name>` or `/wc-api/<name>`.
fn wc_api<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    if let Some(name) = param(req.query_lower(), "wc-api") {
        return Some(name);
    }
    let path = req.path_lower();
    let at = path.find("/wc-api/")?;
    path[at + "/wc-api/".len()..].split('/').next()
}

/// Payment providers calling WooCommerce back, each with its own mark.
fn payment_callback(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    if let Some(api) = wc_api(req) {
        if api.contains("stripe") && stripe_signed(req) {
            return opinion(
                Category::ServicesAndPayments,
                95,
                "wordpress.woocommerce-stripe-webhook",
            );
        }
        if api.contains("paypal") && (paypal_ipn(req) || paypal_webhook_signed(req)) {
            return opinion(
                Category::ServicesAndPayments,
                95,
                "wordpress.woocommerce-paypal-ipn",
            );
        }
        if stripe_signed(req) || paypal_webhook_signed(req) || other_payment_signature(req) {
            return opinion(
                Category::ServicesAndPayments,
                90,
                "wordpress.woocommerce-payment-callback",
            );
        }
        return None;
    }
    // WooCommerce PayPal Payments and other gateways that take webhooks on the REST API.
    let route = rest_route(req)?;
    if route.starts_with("/paypal/") && paypal_webhook_signed(req) {
        return opinion(
            Category::ServicesAndPayments,
            95,
            "wordpress.woocommerce-paypal-webhook",
        );
    }
    if stripe_signed(req) || other_payment_signature(req) {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "wordpress.woocommerce-payment-callback",
        );
    }
    None
}

/// WordPress calling itself: Site Health checks, Action Scheduler's async runner and
/// background-processing libraries post to `admin-ajax.php` with the site's own agent.
fn loopback(req: &Request<'_>) -> Option<Opinion> {
    if !own_user_agent(req) {
        return None;
    }
    if req.client_is_private() {
        return opinion(Category::ServicesAndPayments, 90, "wordpress.loopback");
    }
    let async_runner = req.file_name() == "admin-ajax.php" && req.is_method("POST");
    let site_health = rest_route(req).is_some_and(|r| r.starts_with("/wp-site-health/"));
    if (async_runner || site_health) && !hammering(req, CRON_FLOOD) {
        return opinion(Category::ServicesAndPayments, 85, "wordpress.loopback");
    }
    None
}

/// REST API clients with an application password, and the WordPress mobile apps.
fn rest_client(req: &Request<'_>) -> Option<Opinion> {
    let app = contains_any_ignore_case(req.user_agent(), &["wp-android/", "wp-iphone/"]);
    if rest_route(req).is_some() {
        if app && credentials(req) {
            return opinion(Category::ServicesAndPayments, 90, "wordpress.mobile-app");
        }
        // WordPress answers 401 to a wrong application password, so the header cannot
        // be borrowed to read anything.
        if basic_auth(req) {
            return opinion(
                Category::ServicesAndPayments,
                90,
                "wordpress.rest-application-password",
            );
        }
        return None;
    }
    // Older app versions publish through XML-RPC; the password is in the body, so a
    // burst falls through to the brute-force rule instead.
    if app
        && req.file_name() == "xmlrpc.php"
        && req.is_method("POST")
        && !hammering(req, LOGIN_BURST_MACHINE)
    {
        return opinion(Category::ServicesAndPayments, 85, "wordpress.mobile-app");
    }
    None
}

/// Feed readers polling the feeds (`/feed/`, `/comments/feed/`, `?feed=rss2`).
fn feeds(req: &Request<'_>) -> Option<Opinion> {
    let is_feed = req.path_ends_with_any(&["/feed", "/feed/", "/rss2", "/atom", "/rss"])
        || req.path_contains_any(&["/feed/"])
        || param(req.query_lower(), "feed").is_some();
    if is_feed && req.is_read() && feed_reader(req) {
        return opinion(Category::ServicesAndPayments, 85, "wordpress.feed-reader");
    }
    None
}
