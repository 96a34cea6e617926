//! Abuse of WordPress's endpoints: brute force, enumeration, card testing and spam.

use crate::rest_route;
use botgate_ruleset_sdk::signals::{
    FORM_BURST, LOGIN_BURST_MACHINE, credentials, hammering, login_burst, param,
};
use botgate_ruleset_sdk::signals::{SpamForm, form_spam};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Requests in the window from which XML-RPC posts are brute force, whatever the client.
const XMLRPC_BURST: u32 = 10;
/// Requests in the window from which checkout posts are card testing.
const CHECKOUT_BURST: u32 = 8;
/// Pingback verifications in the window from which they are a reflection flood.
const PINGBACK_FLOOD: u32 = 3;

/// Desktop publishing clients that still speak XML-RPC, and WordPress's own pingback
/// sender (the Incutio library): not browsers, but not scripts either.
const XMLRPC_CLIENTS: &[&str] = &["Incutio XML-RPC", "MarsEdit", "Live Writer"];

const COMMENT: SpamForm = SpamForm {
    non_browser: "wordpress.comment-non-browser",
    forged_browser: "wordpress.comment-forged-browser",
    burst: "wordpress.comment-burst",
};

const REGISTRATION: SpamForm = SpamForm {
    non_browser: "wordpress.registration-non-browser",
    forged_browser: "wordpress.registration-forged-browser",
    burst: "wordpress.registration-burst",
};

/// The opinion on abuse of WordPress's endpoints, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    if req.is_method("POST") {
        login(req)
            .or_else(|| xmlrpc(req))
            .or_else(|| checkout(req))
            .or_else(|| forms(req))
    } else {
        enumeration(req).or_else(|| pingback_verification(req))
    }
}

/// The `action` of a `wp-login.php` request (`login` when there is none).
fn login_action<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    (req.file_name() == "wp-login.php")
        .then(|| param(req.query_lower(), "action").unwrap_or("login"))
}

/// Password guessing on `wp-login.php`.
fn login(req: &Request<'_>) -> Option<Opinion> {
    if !matches!(login_action(req), Some("login" | "")) {
        return None;
    }
    if login_burst(req) {
        return opinion(Category::SecurityIssues, 90, "wordpress.login-brute-force");
    }
    if !req.is_browser() {
        return opinion(
            Category::SuspiciousBehaviour,
            65,
            "wordpress.login-non-browser",
        );
    }
    None
}

/// XML-RPC posts: `system.multicall` packs hundreds of `wp.getUsersBlogs` guesses into
/// one body, pingback spam, and scripts. Jetpack and the apps were recognised before.
fn xmlrpc(req: &Request<'_>) -> Option<Opinion> {
    if req.file_name() != "xmlrpc.php" {
        return None;
    }
    if hammering(req, XMLRPC_BURST) {
        return opinion(Category::SecurityIssues, 90, "wordpress.xmlrpc-brute-force");
    }
    let ua = req.user_agent();
    if ua.contains("Incutio XML-RPC") && req.behaviour().requests >= 5 {
        return opinion(Category::SuspiciousBehaviour, 70, "wordpress.pingback-spam");
    }
    if req.is_browser() {
        // Browsers never post XML-RPC themselves.
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "wordpress.xmlrpc-forged-browser",
        );
    }
    if !contains_any_ignore_case(ua, XMLRPC_CLIENTS) {
        return opinion(
            Category::SuspiciousBehaviour,
            65,
            "wordpress.xmlrpc-non-browser",
        );
    }
    None
}

/// Card testing: bursts of WooCommerce checkouts, classic (`?wc-ajax=checkout`) or
/// through the Store API (`/wc/store/v1/checkout`).
fn checkout(req: &Request<'_>) -> Option<Opinion> {
    let classic = param(req.query_lower(), "wc-ajax") == Some("checkout");
    let store_api = rest_route(req).is_some_and(|r| {
        r.starts_with("/wc/store/v1/checkout") || r.starts_with("/wc/store/checkout")
    });
    if !classic && !store_api {
        return None;
    }
    if hammering(req, CHECKOUT_BURST) {
        return opinion(
            Category::SecurityIssues,
            85,
            "wordpress.woocommerce-card-testing",
        );
    }
    // A headless storefront sends its Store API cart token; a script does not.
    if !req.is_browser() && !req.has_header("cart-token") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "wordpress.woocommerce-checkout-non-browser",
        );
    }
    None
}

/// Comments, registrations and password resets.
fn forms(req: &Request<'_>) -> Option<Opinion> {
    if req.file_name() == "wp-comments-post.php" {
        return form_spam(req, &COMMENT);
    }
    if req.file_name() == "wp-signup.php" {
        return form_spam(req, &REGISTRATION);
    }
    match login_action(req) {
        Some("register") => form_spam(req, &REGISTRATION),
        Some("lostpassword" | "retrievepassword")
            if !req.is_browser() || hammering(req, LOGIN_BURST_MACHINE) =>
        {
            opinion(
                Category::SuspiciousBehaviour,
                70,
                "wordpress.password-reset-abuse",
            )
        }
        _ => None,
    }
}

/// User enumeration: `?author=N` redirects to `/author/<login>/`, and the users endpoint
/// lists logins to anyone unless a plugin closes it.
fn enumeration(req: &Request<'_>) -> Option<Opinion> {
    let author = param(req.query_lower(), "author")
        .is_some_and(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()));
    if author && (!req.is_browser() || hammering(req, FORM_BURST)) {
        return opinion(Category::SecurityIssues, 85, "wordpress.user-enumeration");
    }
    let users = rest_route(req).is_some_and(|r| r.starts_with("/wp/v2/users"));
    // The block editor asks with its X-WP-Nonce and the login cookie.
    if users && !req.is_browser() && !credentials(req) && !req.has_header("x-wp-nonce") {
        return opinion(
            Category::SecurityIssues,
            85,
            "wordpress.rest-user-enumeration",
        );
    }
    None
}

/// Another WordPress fetching a page to verify a pingback someone sent it in this site's
/// name: once is ordinary, many are the pingback reflection DDoS.
fn pingback_verification(req: &Request<'_>) -> Option<Opinion> {
    if !req.ua_contains("verifying pingback from") {
        return None;
    }
    if req.behaviour().requests >= PINGBACK_FLOOD {
        return opinion(Category::SecurityIssues, 85, "wordpress.pingback-flood");
    }
    opinion(
        Category::SuspiciousBehaviour,
        65,
        "wordpress.pingback-verification",
    )
}
