//! XenForo's legitimate machine traffic, recognised by the client's own marks.

use crate::{last_segment, route};
use botgate_ruleset_sdk::signals::{
    feed_reader, hammering, other_payment_signature, param, paypal_ipn, paypal_webhook_signed,
    stripe_signed,
};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Requests in the window from which `job.php` from a public address is a flood.
const JOB_FLOOD: u32 = 30;

/// The opinion on XenForo's legitimate machine traffic, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    api(req)
        .or_else(|| payment_callback(req))
        .or_else(|| job_runner(req))
        .or_else(|| feeds(req))
}

/// The REST API with a key. XenForo answers a wrong key with an error, so the header
/// cannot be borrowed to read anything.
fn api(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let api = path.contains("/api/") || path.ends_with("/api");
    let key = req.header("xf-api-key").is_some_and(|k| {
        k.len() >= 16
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if api && key {
        return opinion(Category::ServicesAndPayments, 90, "xenforo.api-client");
    }
    None
}

/// Payment providers notifying `payment_callback.php?_xfProvider=…`, each with its mark.
fn payment_callback(req: &Request<'_>) -> Option<Opinion> {
    if req.file_name() != "payment_callback.php" || !req.is_method("POST") {
        return None;
    }
    let provider = param(req.query_lower(), "_xfprovider")?;
    if provider.contains("stripe") && stripe_signed(req) {
        return opinion(Category::ServicesAndPayments, 95, "xenforo.stripe-webhook");
    }
    if provider.contains("paypal") && (paypal_ipn(req) || paypal_webhook_signed(req)) {
        return opinion(
            Category::ServicesAndPayments,
            95,
            "xenforo.paypal-notification",
        );
    }
    if stripe_signed(req) || paypal_webhook_signed(req) || other_payment_signature(req) {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "xenforo.payment-callback",
        );
    }
    None
}

/// `job.php`, XenForo's job and cron runner. Every page view makes visitors' browsers
/// post to it; some boards have a cron service or the server's crontab call it instead.
fn job_runner(req: &Request<'_>) -> Option<Opinion> {
    if req.file_name() != "job.php" || req.is_browser() {
        return None;
    }
    if req.client_is_private() {
        return opinion(Category::ServicesAndPayments, 90, "xenforo.job-runner");
    }
    if hammering(req, JOB_FLOOD) {
        return opinion(Category::SecurityIssues, 80, "xenforo.job-flood");
    }
    if req.is_method("GET") || req.is_method("POST") {
        return opinion(Category::ServicesAndPayments, 85, "xenforo.job-runner");
    }
    None
}

/// Feed readers on the RSS feeds (`forums/-/index.rss`, `forums/<forum>.<id>/index.rss`).
fn feeds(req: &Request<'_>) -> Option<Opinion> {
    let is_feed = last_segment(route(req)) == "index.rss";
    if is_feed && req.is_read() && feed_reader(req) {
        return opinion(Category::ServicesAndPayments, 85, "xenforo.feed-reader");
    }
    None
}
