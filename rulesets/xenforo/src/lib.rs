//! The XenForo rule set: XenForo 2's attack surface and its legitimate machine traffic.
//!
//! Routes are recognised with friendly URLs (`/forum/threads/hello.12/add-reply`) and
//! without them (`/index.php?threads/hello.12/add-reply`, `admin.php?login/login`), so a
//! forum installed under a folder is covered too.
//!
//! **Security issues** (80–95; any of them with confidence ≥ 50 wins the merge):
//! - the database credentials in `/src/config.php` (XenForo 1: `/library/config.php`)
//!   and its backups and swap files; `/internal_data/` (attachments, temp files,
//!   `install-lock.php`, code cache); the source folders `/src/` and `/library/`, which
//!   XenForo's server configuration refuses; PHP requested under `/data/`; `cmd.php`;
//! - the installer/upgrader (`/install/`) from non-browsers, and its upgrade login
//!   under brute force;
//! - brute force on the forum login (`login/login`), the admin control panel login
//!   (`admin.php?login/login`) and two-step verification (`login/two-step`);
//! - member enumeration: `members/find` (the mention autocomplete) from non-browsers and
//!   non-browsers walking member profiles;
//! - `job.php` floods.
//!
//! **Suspicious behaviour** (60–80): scripted, bursty or forged-browser posts of
//! registrations (`register/register`), replies (`threads/…/add-reply`), new threads
//! (`forums/…/post-thread`), conversations / direct messages, profile posts
//! (`members/…/post`) and the contact form (`misc/contact`); password-reset bursts
//! (`lost-password/`); logins from scripts.
//!
//! **Services and payments** (85–95), only with the client's own marks:
//! - the REST API (`/api/`) with an `XF-Api-Key` header;
//! - payment callbacks on `payment_callback.php?_xfProvider=…`: PayPal IPN (PayPal's
//!   agent), PayPal REST webhooks (transmission signature), Stripe (`Stripe-Signature`),
//!   other signed providers;
//! - `job.php` called by a cron service or the server's crontab at a normal rate
//!   (visitors' browsers call it too: those are left to the classifier);
//! - feed readers on the RSS feeds (`forums/-/index.rss`).

mod abuse;
mod probes;
mod services;

use botgate_ruleset_sdk::{Info, Opinion, Request, Ruleset};

/// The XenForo rule set.
pub struct Xenforo;

impl Ruleset for Xenforo {
    // The route can be the first query key (`index.php?login/login`), so route markers
    // are not anchored at `/`.
    const SCOPE: &'static [&'static str] = &[
        // The PHP files rules name: `config.php` and its copies (`config.php.bak`,
        // `.config.php.swp`; not `wp-config.php`), PHP under `/data/` (so avatars and
        // attachments stay outside), `cmd.php`, `job.php`, `payment_callback.php` with
        // its `_xfProvider`.
        "/config.php",
        "/.&config.php",
        "/data/&.ph",
        "/cmd.php",
        "/job.php",
        "/payment_callback.php&_xfprovider",
        "/internal_data",
        "/src/",
        "/library/",
        "/install",
        "/api",
        "index.rss",
        // The forum login and two-step (`login/login`, `login/two-step`) and the admin
        // login (`admin.php?login`), not every `login` (`/wp-login.php`, `/user/login`).
        "login/login",
        "login/two-step",
        "/admin.php&login",
        "lost-password",
        "register/register",
        "add-reply",
        "post-thread",
        "conversations",
        "direct-messages",
        // Profile posts and member enumeration.
        "members",
        "misc/contact",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "xenforo",
            "XenForo: config and internal_data leaks, installer probes, login and admin brute force, member enumeration, registration, reply and message spam, and its API, payment callback, job runner and feed traffic."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        // Probes of files are attacks whoever sends them; then the legitimate machine
        // clients, recognised by their own marks; then behaviour on the endpoints.
        probes::evaluate(req)
            .or_else(|| services::evaluate(req))
            .or_else(|| abuse::evaluate(req))
    }
}

botgate_ruleset_sdk::export_ruleset!(Xenforo);

/// The route a request addresses: without friendly URLs the first query key of
/// `index.php?threads/hello.12/add-reply&…`, otherwise the normalised path.
fn route<'r>(req: &'r Request<'_>) -> &'r str {
    if matches!(req.file_name(), "" | "index.php" | "admin.php") {
        let first = req.query_lower().split('&').next().unwrap_or("");
        if !first.is_empty() && !first.contains('=') {
            return first;
        }
    }
    req.path_lower()
}

/// Whether `route` is `wanted` (`login/login`), whatever folder precedes it and with or
/// without a trailing `/`.
fn route_is(route: &str, wanted: &str) -> bool {
    let route = route.trim_end_matches('/');
    match route.strip_suffix(wanted) {
        Some(before) => before.is_empty() || before.ends_with('/'),
        None => false,
    }
}

/// Whether `route` has the segment `segment` (`threads` in `threads/hello.12/add-reply`).
fn has_segment(route: &str, segment: &str) -> bool {
    route.split('/').any(|s| s == segment)
}

/// The last segment of `route` (`add-reply` in `threads/hello.12/add-reply/`).
fn last_segment(route: &str) -> &str {
    route.trim_end_matches('/').rsplit('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests;

/// This rule set's probe of each kind of request every CMS rule set treats alike.
#[cfg(not(target_arch = "wasm32"))]
pub mod kinds;

#[cfg(test)]
#[test]
fn every_kind_is_treated_as_every_cms_rule_set_treats_it() {
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Xenforo>(&kinds::probes());
}
