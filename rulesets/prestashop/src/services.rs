//! PrestaShop's legitimate machine traffic, recognised by the client's own marks.

use crate::{back_office, front_module, module_script};
use botgate_ruleset_sdk::signals::{
    basic_auth, bearer_auth, hammering, other_payment_signature, param, paypal_ipn,
    paypal_webhook_signed, stripe_signed,
};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Front controller and script names payment modules take provider notifications on.
pub const CALLBACK_NAMES: &[&str] = &[
    "ipn",
    "webhook",
    "webhooks",
    "webhookhandler",
    "notification",
    "notify",
    "callback",
    "validation",
];

/// Module cron scripts that take a `token` (or `secure_key`) in the query.
const CRON_SCRIPTS: &[&str] = &[
    "cronjobs.php",
    "gsitemap-cron.php",
    "ps_facetedsearch-price-indexer.php",
    "ps_facetedsearch-attribute-indexer.php",
    "ps_facetedsearch-url-indexer.php",
    "ps_facetedsearch-clear-cache.php",
    "blocklayered-price-indexer.php",
    "blocklayered-attribute-indexer.php",
    "blocklayered-url-indexer.php",
];

/// Requests in the window from which a cron URL is being flooded.
const CRON_FLOOD: u32 = 30;

/// The opinion on PrestaShop's legitimate machine traffic, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    webservice(req)
        .or_else(|| payment_callback(req))
        .or_else(|| cron(req))
}

/// Whether `ws_key` is a webservice key: 32 letters and digits.
pub(crate) fn valid_ws_key(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The webservice with its key, and the PrestaShop 9 Admin API with a Bearer token.
/// A wrong key is answered 401, so the marks cannot be borrowed to read anything.
fn webservice(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let api = path.starts_with("/api/")
        || path == "/api"
        || req.path_contains_any(&["/webservice/dispatcher.php"]);
    if api && (basic_auth(req) || param(req.query_lower(), "ws_key").is_some_and(valid_ws_key)) {
        return opinion(Category::ServicesAndPayments, 90, "prestashop.webservice");
    }
    if req.path_contains_any(&["/admin-api/"]) && bearer_auth(req) {
        return opinion(Category::ServicesAndPayments, 85, "prestashop.admin-api");
    }
    None
}

/// The payment module and callback name a request addresses, if it is a callback.
pub fn callback_target<'r>(req: &'r Request<'_>) -> Option<(&'r str, &'r str)> {
    front_module(req)
        .or_else(|| module_script(req))
        .filter(|(_, name)| CALLBACK_NAMES.contains(name))
}

/// Payment providers notifying a module, each with its own mark.
fn payment_callback(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    let (module, _) = callback_target(req)?;
    if module.contains("stripe") && stripe_signed(req) {
        return opinion(
            Category::ServicesAndPayments,
            95,
            "prestashop.stripe-webhook",
        );
    }
    if module.contains("paypal") && (paypal_ipn(req) || paypal_webhook_signed(req)) {
        return opinion(
            Category::ServicesAndPayments,
            95,
            "prestashop.paypal-notification",
        );
    }
    if stripe_signed(req) || paypal_webhook_signed(req) || other_payment_signature(req) {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "prestashop.payment-callback",
        );
    }
    None
}

/// Cron URLs, which carry the shop's token.
fn cron(req: &Request<'_>) -> Option<Opinion> {
    let query = req.query_lower();
    let token = ["token", "secure_key"]
        .iter()
        .filter_map(|p| param(query, p))
        .any(|t| t.len() >= 8);
    if !token || hammering(req, CRON_FLOOD) {
        return None;
    }
    let name = req.file_name();
    let module_cron = req.path_contains_any(&["/modules/"])
        && (CRON_SCRIPTS.contains(&name) || name.ends_with("-cron.php"));
    let cronjobs_controller = front_module(req) == Some(("cronjobs", "callback"));
    if module_cron || cronjobs_controller {
        return opinion(Category::ServicesAndPayments, 90, "prestashop.module-cron");
    }
    if back_office(req) == Some("searchcron.php") {
        return opinion(Category::ServicesAndPayments, 90, "prestashop.search-cron");
    }
    None
}
