//! The WordPress rule set: WordPress's attack surface and its legitimate machine traffic.
//!
//! Paths are matched on the normalised path (`Request::path_lower`) and by file name, so a
//! WordPress installed under a folder (`/blog/wp-login.php`) is covered too. The REST API
//! is recognised both as `/wp-json/<route>` and as `?rest_route=<route>`.
//!
//! **Security issues** (80–95; any of them with confidence ≥ 50 wins the merge):
//! - `wp-config.php` and its backups, copies and editor swap files (`wp-config.php.bak`,
//!   `wp-config.php~`, `.wp-config.php.swp`, `wp-config.old`), and queries that point a
//!   file parameter at `wp-config` (the Revolution Slider / Duplicator download LFIs);
//! - leaked logs and backups: `/wp-content/debug.log`, WooCommerce logs
//!   (`/wp-content/uploads/wc-logs/`), UpdraftPlus (`/wp-content/updraft/`),
//!   All-in-One WP Migration (`/wp-content/ai1wm-backups/`), Duplicator
//!   (`/wp-content/backups-dup-lite/`, `/dup-installer/`, `installer-backup.php`),
//!   BackWPup, `*.sql` and `*.wpress` under `/wp-content/`;
//! - PHP executed from `/wp-content/uploads/` (uploaded web shells);
//! - from non-browsers (an administrator uses one): the installer
//!   (`/wp-admin/install.php`, `/wp-admin/setup-config.php`, used to hijack unconfigured
//!   sites), `upgrade.php` and `maint/repair.php`;
//! - exploit paths of known plugin CVEs (File Manager `connector.minimal.php`,
//!   Revolution Slider, Simple File List, Backup Migration `backup-heart.php`,
//!   WP Automatic `csv.php`, Mail Masta, Site Editor, WP Mobile Detector, FormCraft,
//!   Easy WP SMTP debug log, Social Warfare `swp_debug=load_options`, TimThumb remote
//!   `src`, the WooPayments `X-WCPAY-PLATFORM-CHECKOUT-USER` account takeover);
//! - Windows Live Writer manifest probes (`wlwmanifest.xml`, how scanners find WordPress)
//!   and plugin/theme version fingerprinting (`readme.txt`, `changelog.txt`) by non-browsers;
//! - brute force: `wp-login.php` posts, `xmlrpc.php` posts (`system.multicall` hides many
//!   passwords in one body, so behaviour and client marks are what is visible), and
//!   WooCommerce card testing on `?wc-ajax=checkout` and the Store API checkout;
//! - user enumeration: `?author=N` and `/wp-json/wp/v2/users` by non-browsers without
//!   credentials or the editor's `X-WP-Nonce`;
//! - `wp-cron.php` floods and pingback reflection floods
//!   (`WordPress/x; https://site; verifying pingback from …`).
//!
//! **Suspicious behaviour** (60–80): scripted or bursty comment posts
//! (`wp-comments-post.php`), registrations (`wp-login.php?action=register`,
//! `wp-signup.php`), password-reset requests, logins and XML-RPC posts from clients that
//! are not browsers or that forge one, pingback spam and single pingback verifications.
//!
//! **Services and payments** (85–95), only with the client's own marks:
//! - WordPress's own loopback requests: `wp-cron.php` (`WordPress/6.x; https://<this
//!   site>`, or a system cron from a private address, or a cron service), Action
//!   Scheduler and Site Health loopbacks;
//! - Jetpack (`Jetpack by WordPress.com` with the signed `for=jetpack` query);
//! - the REST API with an application password (`Authorization: Basic`);
//! - WooCommerce payment callbacks on `?wc-api=` / `/wc-api/` and REST webhooks:
//!   PayPal IPN (by PayPal's user agent), PayPal webhooks (transmission signature),
//!   Stripe (`Stripe-Signature`), other signed providers;
//! - the WordPress mobile apps (`wp-android/`, `wp-iphone/`) on the REST API with
//!   credentials or on XML-RPC at a normal rate;
//! - feed readers on the feeds.

mod abuse;
mod probes;
mod services;
use botgate_ruleset_sdk::signals;

use botgate_ruleset_sdk::{Info, Opinion, Request, Ruleset};

/// The WordPress rule set.
pub struct Wordpress;

impl Ruleset for Wordpress {
    const SCOPE: &'static [&'static str] = &[
        // Not `wp-`: the assets under /wp-content/ and /wp-includes/ (styles, scripts,
        // images, fonts) are most of a site's traffic and no rule answers them.
        // wp-config.php, its backups and swap files, and queries pointing at it.
        "wp-config",
        // Under /wp-content/: PHP (web shells in uploads, plugin exploits, TimThumb),
        // debug.log, database dumps, migration archives, and plugin and theme readmes
        // and changelogs (version fingerprinting).
        "/wp-content/&.ph",
        "/wp-content/&debug.log",
        "/wp-content/&.sql",
        "/wp-content/&.wpress",
        "/wp-content/&/readme.",
        "/wp-content/&/changelog.",
        // Backup and log folders, any file in them: WooCommerce logs, UpdraftPlus,
        // All-in-One WP Migration, Duplicator, the backup-db folder, BackWPup, Backup Guard.
        "/wc-logs/",
        "/wp-content/updraft/",
        "/ai1wm-backups/",
        "/backups-dup-",
        "/backup-db/",
        "/uploads/backwpup",
        "/backup-guard/",
        // Plugin exploit paths that need not end in PHP: File Manager's and Revolution
        // Slider's upload folders, Mail Masta's `inc/`, the FormCraft and WP Symposium
        // upload handlers (`…/server/php/`), Easy WP SMTP's debug log.
        "/wp-file-manager/lib/files/",
        "/revslider/temp/update_extract/",
        "/mail-masta/inc/",
        "/server/php/",
        "/easy-wp-smtp/&_debug_log.txt",
        // The installer and maintenance scripts, not the rest of /wp-admin/.
        "/wp-admin/install.php",
        "/wp-admin/setup-config.php",
        "/wp-admin/upgrade.php",
        "/wp-admin/maint/repair.php",
        // Duplicator: installer.php, installer-backup.php, /dup-installer/.
        "installer",
        // The REST API (`/wp-json/…`, and by query: `?rest_route=/wp/v2/users`).
        "/wp-json",
        "rest_route",
        "xmlrpc",
        "wp-cron.php",
        // Logins, registrations, password resets and comments: rules answer posts only,
        // so a browser opening the login page stays outside.
        "wp-login.php&method:post",
        "wp-signup.php&method:post",
        "wp-comments-post.php&method:post",
        "wlwmanifest",
        // Exploit parameters: Social Warfare, Revolution Slider, Duplicator.
        "swp_debug",
        "revslider_show_image",
        "duplicator_download",
        // WooCommerce payment callbacks (`?wc-api=`, `/wc-api/`) and classic checkout.
        "wc-api",
        "wc-ajax",
        // User enumeration (`?author=N`).
        "author=",
        // Feeds: `/feed/`, `?feed=rss2`, `/rss`, `/rss2`, `/atom`.
        "feed",
        "/rss",
        "/atom",
        // services::loopback: the site's own agent (`WordPress/6.5; https://…`) from a
        // private address, to any path.
        "ua:wordpress/",
        // abuse::pingback_verification: another WordPress verifying a pingback, any path.
        "ua:verifying pingback from",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "wordpress",
            "WordPress: login and XML-RPC brute force, config and backup leaks, installer and plugin exploit probes, user enumeration, comment and registration spam, and its cron, Jetpack, REST, app and WooCommerce payment traffic."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        // Probes of files and exploit paths are attacks whoever sends them; then the
        // legitimate machine clients, recognised by their own marks; then behaviour.
        probes::evaluate(req)
            .or_else(|| services::evaluate(req))
            .or_else(|| abuse::evaluate(req))
    }
}

botgate_ruleset_sdk::export_ruleset!(Wordpress);

/// The REST route a request addresses (`/wp/v2/users`), from a `/wp-json/` path or a
/// `?rest_route=` query.
fn rest_route<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    let path = req.path_lower();
    if let Some(at) = path.find("/wp-json/") {
        return Some(&path[at + "/wp-json".len()..]);
    }
    if path.ends_with("/wp-json") {
        return Some("/");
    }
    signals::param(req.query_lower(), "rest_route")
}

#[cfg(test)]
mod tests;

/// This rule set's probe of each kind of request every CMS rule set treats alike.
#[cfg(not(target_arch = "wasm32"))]
pub mod kinds;

#[cfg(test)]
#[test]
fn every_kind_is_treated_as_every_cms_rule_set_treats_it() {
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Wordpress>(&kinds::probes());
}
