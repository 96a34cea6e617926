//! Request signals CMS rule sets combine: client behaviour, browser marks, credentials,
//! payment-provider signatures and feed readers. Cheap, allocation-free checks over
//! [`Request`].

use crate::ua::contains_any_ignore_case;
use crate::{Category, CrawlerVerification, Opinion, Request, opinion};

/// Requests in the window from which a login endpoint is under brute force when the
/// client claims a browser (a person mistyping a password a few times stays far below).
pub const LOGIN_BURST_BROWSER: u32 = 20;
/// The same for clients that do not claim a browser: scripts have no reason to retry.
pub const LOGIN_BURST_MACHINE: u32 = 8;
/// Requests in the window from which repeated posts to a form are a burst.
pub const FORM_BURST: u32 = 10;

/// Whether the client sent at least `threshold` requests in the window while sticking to
/// a few paths (at most one distinct path per four requests). A person's page views
/// spread over pages and assets; a script retrying one endpoint does not.
pub fn hammering(req: &Request<'_>, threshold: u32) -> bool {
    let b = req.behaviour();
    b.requests >= threshold && b.distinct_paths.saturating_mul(4) <= b.requests
}

/// [`hammering`] with the login thresholds: lower for clients that are not browsers.
pub fn login_burst(req: &Request<'_>) -> bool {
    let threshold = if req.is_browser() {
        LOGIN_BURST_BROWSER
    } else {
        LOGIN_BURST_MACHINE
    };
    hammering(req, threshold)
}

/// Whether a request claims a browser but carries neither `Origin` nor `Referer`: real
/// browsers send at least one of them with every form post, scripts that copy a
/// browser's user agent often forget both.
pub fn forged_browser_post(req: &Request<'_>) -> bool {
    req.is_browser() && !req.has_header("origin") && !req.has_header("referer")
}

/// The value of the query parameter `name` (give it lower case) in the decoded,
/// lower-case query, without allocating; `Some("")` for a parameter without value.
pub fn param<'q>(query_lower: &'q str, name: &str) -> Option<&'q str> {
    query_lower.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        (key == name).then_some(value)
    })
}

/// Whether `Authorization` carries credentials of `scheme` (`Basic`, `Bearer`) that are
/// at least long enough to be real.
fn authorization_is(req: &Request<'_>, scheme: &str) -> bool {
    req.header("authorization")
        .and_then(|value| value.split_once(' '))
        .is_some_and(|(s, token)| s.eq_ignore_ascii_case(scheme) && token.trim().len() >= 8)
}

/// Whether the request carries `Authorization: Basic …` (application passwords, API keys).
pub fn basic_auth(req: &Request<'_>) -> bool {
    authorization_is(req, "basic")
}

/// Whether the request carries `Authorization: Bearer …` (OAuth2 and API tokens).
pub fn bearer_auth(req: &Request<'_>) -> bool {
    authorization_is(req, "bearer")
}

/// Whether the request carries `Authorization: Basic …` or `Authorization: Bearer …`.
pub fn credentials(req: &Request<'_>) -> bool {
    basic_auth(req) || bearer_auth(req)
}

/// Whether the request carries Stripe's webhook signature, `Stripe-Signature: t=…,v1=…`.
pub fn stripe_signed(req: &Request<'_>) -> bool {
    req.header("stripe-signature")
        .is_some_and(|v| v.starts_with("t=") && v.contains(",v1="))
}

/// Whether the request carries the headers PayPal signs its REST webhooks with.
pub fn paypal_webhook_signed(req: &Request<'_>) -> bool {
    [
        "paypal-transmission-sig",
        "paypal-transmission-id",
        "paypal-transmission-time",
    ]
    .iter()
    .all(|h| req.has_header(h))
}

/// Whether the user agent is PayPal's IPN notifier (`PayPal IPN ( https://www.paypal.com/ipn )`).
pub fn paypal_ipn(req: &Request<'_>) -> bool {
    req.user_agent().starts_with("PayPal IPN")
}

/// Signature headers of other payment providers' webhooks: Razorpay, Square,
/// Authorize.net, Coinbase Commerce, Paddle, Checkout.com.
const OTHER_PAYMENT_SIGNATURES: &[&str] = &[
    "x-razorpay-signature",
    "x-square-hmacsha256-signature",
    "x-anet-signature",
    "x-cc-webhook-signature",
    "paddle-signature",
    "cko-signature",
];

/// Whether the request carries the signature of another payment provider's webhook.
pub fn other_payment_signature(req: &Request<'_>) -> bool {
    OTHER_PAYMENT_SIGNATURES.iter().any(|h| req.has_header(h))
}

/// User-agent tokens of feed readers and feed services.
const FEED_READERS: &[&str] = &[
    "rss",
    "feed",
    "miniflux",
    "netnewswire",
    "newsblur",
    "inoreader",
    "theoldreader",
];

/// Whether the user agent is a feed reader's.
pub fn feed_reader(req: &Request<'_>) -> bool {
    !req.is_browser() && contains_any_ignore_case(req.user_agent(), FEED_READERS)
}

/// Whether the file name ends with an extension PHP executes.
pub fn is_php_file(file_name: &str) -> bool {
    [
        ".php", ".phtml", ".php3", ".php4", ".php5", ".php7", ".phar", ".pht",
    ]
    .iter()
    .any(|ext| file_name.ends_with(ext))
}

/// Whether the host verified the client as a search-engine or social-network crawler.
pub fn is_verified_crawler(req: &Request<'_>) -> bool {
    matches!(
        req.crawler(),
        CrawlerVerification::VerifiedSearchEngine | CrawlerVerification::VerifiedSocialNetwork
    )
}

/// A client that is neither a real browser nor a crawler the host verified.
pub fn is_scripted(req: &Request<'_>) -> bool {
    !req.is_browser() && !is_verified_crawler(req)
}

/// At least `min` requests in the window on at most half as many distinct paths: a
/// loop over one form rather than a visitor loading pages and their assets.
pub fn repeating(req: &Request<'_>, min: u32) -> bool {
    let b = req.behaviour();
    b.requests >= min && b.distinct_paths.saturating_mul(2) <= b.requests
}

/// A walk over many different pages (user profiles, say): 5 distinct paths in the window
/// from anything but a browser, 20 from a browser-looking client; never a crawler the
/// host verified.
pub fn walking_pages(req: &Request<'_>) -> bool {
    let b = req.behaviour();
    if is_verified_crawler(req) {
        return false;
    }
    if req.is_browser() {
        b.requests >= 20 && b.distinct_paths >= 20
    } else {
        b.distinct_paths >= 5
    }
}

/// The shape of password guessing by [`repeating`]: 20 repeats from a browser, 10 from
/// anything else.
pub fn guessing_passwords(req: &Request<'_>) -> bool {
    repeating(req, if req.is_browser() { 20 } else { 10 })
}

/// The credentials of an `Authorization: <scheme> <credentials>` header when the scheme
/// is `scheme` (compared ignoring case) and the credentials are not empty.
pub fn authorization<'a>(req: &Request<'a>, scheme: &str) -> Option<&'a str> {
    let (s, creds) = req.header("authorization")?.split_once(' ')?;
    let creds = creds.trim();
    (s.eq_ignore_ascii_case(scheme) && !creds.is_empty()).then_some(creds)
}

/// The reason ids of one spam-prone form (registration, comment, contact...), for
/// [`form_spam`].
pub struct SpamForm {
    /// A client that is not a browser posts the form.
    pub non_browser: &'static str,
    /// A browser user agent posts it without `Origin` or `Referer`.
    pub forged_browser: &'static str,
    /// One client posts it [`FORM_BURST`] times on few paths.
    pub burst: &'static str,
}

/// The opinion on a post to a spam-prone form: a burst (75), a non-browser (75), or a
/// forged browser (65), all `suspicious_behaviour`; `None` for an ordinary browser post.
pub fn form_spam(req: &Request<'_>, form: &SpamForm) -> Option<Opinion> {
    if hammering(req, FORM_BURST) {
        return opinion(Category::SuspiciousBehaviour, 75, form.burst);
    }
    if !req.is_browser() {
        return opinion(Category::SuspiciousBehaviour, 75, form.non_browser);
    }
    if forged_browser_post(req) {
        return opinion(Category::SuspiciousBehaviour, 65, form.forged_browser);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{get, post};

    fn with<T>(builder: crate::testing::RequestBuilder, f: impl Fn(&Request<'_>) -> T) -> T {
        let facts = builder.build();
        f(&Request::new(&facts))
    }

    #[test]
    fn hammering_needs_volume_on_few_paths() {
        assert!(with(post("/login").behaviour(40, 2, 0), |r| hammering(
            r, 20
        )));
        assert!(!with(post("/login").behaviour(40, 30, 0), |r| hammering(
            r, 20
        )));
        assert!(!with(post("/login").behaviour(5, 1, 0), |r| hammering(
            r, 20
        )));
    }

    #[test]
    fn login_burst_is_stricter_for_scripts() {
        assert!(with(
            post("/login").machine("curl/8").behaviour(8, 1, 0),
            login_burst
        ));
        assert!(!with(
            post("/login").browser().behaviour(8, 1, 0),
            login_burst
        ));
    }

    #[test]
    fn credentials_need_a_real_token() {
        assert!(with(
            get("/").header("authorization", "Bearer abcdefgh12"),
            credentials
        ));
        assert!(with(
            get("/").header("authorization", "basic YWxpY2U6c2VjcmV0"),
            basic_auth
        ));
        assert!(!with(
            get("/").header("authorization", "Bearer x"),
            credentials
        ));
        assert!(!with(get("/"), credentials));
    }

    #[test]
    fn payment_signatures_are_recognised() {
        assert!(with(
            post("/hook").header("stripe-signature", "t=1,v1=abc"),
            stripe_signed
        ));
        assert!(!with(
            post("/hook").header("stripe-signature", "v1=abc"),
            stripe_signed
        ));
        assert!(with(
            post("/hook").header("x-razorpay-signature", "abc"),
            other_payment_signature
        ));
    }

    #[test]
    fn param_reads_the_lower_case_query() {
        assert_eq!(
            param("a=1&rest_route=/wp/v2&x", "rest_route"),
            Some("/wp/v2")
        );
        assert_eq!(param("a=1&x", "x"), Some(""));
        assert_eq!(param("a=1", "b"), None);
    }
}
