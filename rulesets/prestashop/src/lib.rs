//! The PrestaShop rule set: PrestaShop's attack surface and its legitimate machine traffic.
//!
//! The back office lives in a renamed folder (`/admin123abc/`, `/admin-dev/`); any
//! `/admin*/` folder is treated as one. Front controllers are recognised both with
//! friendly URLs (`/module/paypal/ipn`, `/en/login`) and as
//! `index.php?controller=…` / `?fc=module&module=…&controller=…`.
//!
//! **Security issues** (80–95; any of them with confidence ≥ 50 wins the merge):
//! - database credentials and their backups: `/app/config/parameters.php` (1.7/8/9),
//!   `parameters.yml` (early 1.7), `/config/settings.inc.php` (1.6), with `.bak`, `~`,
//!   `.swp`, `.old` … variants;
//! - logs and caches: `/var/logs/`, `/app/logs/`, `/log/*.log`, `/var/cache/`,
//!   `/cache/smarty/` (compiled templates, abused by the CVE-2022-31181 chain);
//! - back-office backups (`/admin*/backups/`, 1-Click Upgrade's `/admin*/autoupgrade/backup/`)
//!   and, from non-browsers, the old back-office file manager (`/admin*/filemanager/`);
//! - from scripts (an administrator uses a browser): the installer left on the server
//!   (`/install/`, `/install-dev/`) and 1-Click Upgrade's scripts (`/admin*/autoupgrade/`,
//!   `/modules/autoupgrade/`);
//! - user enumeration: the webservice's customers, employees and addresses asked for by
//!   a script without a key;
//! - module exploit paths scanned in the wild: phpunit's `eval-stdin.php` shipped in
//!   modules' `vendor/` (2020 advisory), the `uploadimage.php` family (columnadverts,
//!   soopamobile, homepageadvertise, …), attributewizardpro, advancedslider,
//!   cartabandonmentpro, videostab, wg24themeadministration, bamegamenu
//!   `ajax_phpcode.php` and others, and SQL in blockwishlist's `order` (CVE-2022-31101);
//! - PHP requested from the upload folders (`/upload/`, `/download/`, `/img/`);
//! - brute force on the back-office login (`AdminLogin`, posted to `index.php` or
//!   `ajax-tab.php?rand=…`), credential stuffing on the customer login
//!   (`controller=authentication`, `/login`, `/connexion`), card testing through the
//!   payment modules (Stripe, PrestaShop Checkout, PayPal).
//!
//! **Suspicious behaviour** (60–80): scripted or bursty customer registrations (fake
//! accounts), contact form, newsletter (`ps_emailsubscription`) and product review
//! (`productcomments`) posts, password-recovery bursts, logins from scripts.
//!
//! **Services and payments** (85–95), only with the client's own marks:
//! - the webservice (`/api/`, `/webservice/dispatcher.php`) with the key as
//!   `Authorization: Basic` or a well-formed `ws_key`, and the PrestaShop 9 Admin API
//!   (`/admin-api/`) with a Bearer token;
//! - payment callbacks on module front controllers or legacy scripts (`ipn`, `webhook`,
//!   `notification`, `validation`, `callback`, …): PayPal IPN (PayPal's agent), PayPal
//!   webhooks (transmission signature), Stripe (`Stripe-Signature`), other signed providers;
//! - cron URLs with their token: the cronjobs module (`/modules/cronjobs/cronjobs.php`),
//!   Google sitemap (`gsitemap-cron.php`), faceted search indexers, the back office's
//!   `searchcron.php`.

mod abuse;
mod probes;
mod services;
use botgate_ruleset_sdk::signals;

use botgate_ruleset_sdk::{Info, Opinion, Request, Ruleset};
use signals::param;

/// The PrestaShop rule set.
pub struct Prestashop;

impl Ruleset for Prestashop {
    const SCOPE: &'static [&'static str] = &[
        // Credentials: `parameters.php`, `parameters.yml`, `settings.inc.php` and copies.
        "parameters.",
        "settings.inc.php",
        "/logs/",
        "/log/",
        "/var/cache/",
        "/cache/smarty/",
        // PHP under the upload folders (product images stay outside).
        "/upload/&.ph",
        "/download/&.ph",
        "/img/&.ph",
        // The back office (`/admin*/`): backups, the file manager, the login's `rand`
        // (`controller=AdminLogin`, `…/login`: markers further down), `searchcron.php`;
        // the Admin API. Other CMSs' `/admin.php`, `/wp-admin/`, `/administrator/` stay out.
        "/admin&/backups/",
        // 1-Click Upgrade (its backups, and its scripts called by scripts).
        "/admin&/autoupgrade/",
        "/modules/autoupgrade/",
        "/admin&/filemanager/",
        "/admin&rand",
        "/admin&/searchcron.php",
        "/admin-api/",
        "/install",
        "/vendor/phpunit/",
        // Module front controllers (`/module/x/y`, `?fc=module`); module assets under
        // `/modules/` stay outside.
        "/module/",
        "fc=module",
        // Module exploit scripts: the upload family (`uploadimage.php`, `file_upload.php`,
        // `upload.php`…), the ajax ones (`ajax_videostab.php`, `*optionpanel*ajax.php`,
        // `ajax_phpcode.php`), the rest by name or folder.
        "/modules/&upload&.ph",
        "/modules/&ajax&.ph",
        "/modules/wg24themeadministration/",
        "/modules/megamenu/uploadify/",
        "addtestimonial.php",
        // Modules' own payment callback scripts (`/modules/paypal/ipn.php`).
        "/modules/&/ipn.php",
        "/modules/&/webhook&.php",
        "/modules/&/notif&.php",
        "/modules/&/callback.php",
        "/modules/&/validation.php",
        // Module cron scripts (cronjobs, `*-cron.php`, faceted search indexers).
        "/modules/&cronjobs.php",
        "/modules/&-cron.php",
        "/modules/&-indexer.php",
        "/modules/&-clear-cache.php",
        // The webservice.
        "/api",
        "/webservice/dispatcher.php",
        // Core front controllers (`?controller=authentication`...) and their friendly URLs.
        "controller=",
        "/login",
        "/connexion",
        "/registration",
        "/inscription",
        "/password-recovery",
        "/recuperation-mot-de-passe",
        "/contact-us",
        "/nous-contacter",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "prestashop",
            "PrestaShop: config, log and backup leaks, installer and module exploit probes, back-office and customer login brute force, card testing, form spam, and its webservice, payment callback and cron traffic."
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

botgate_ruleset_sdk::export_ruleset!(Prestashop);

/// The path below a back-office folder: `/admin123abc/index.php` reads `index.php`.
/// PrestaShop renames `admin` to `admin` plus random characters at install time.
fn back_office<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    let path = req.path_lower();
    path.match_indices("/admin").find_map(|(at, _)| {
        let rest = &path[at + 1..];
        let (folder, below) = rest.split_once('/')?;
        let name_ok = folder
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        (name_ok && folder != "admin-api").then_some(below)
    })
}

/// The module front controller a request addresses, as `(module, controller)`:
/// `/module/<module>/<controller>` or `?fc=module&module=…&controller=…`.
fn front_module<'r>(req: &'r Request<'_>) -> Option<(&'r str, &'r str)> {
    let path = req.path_lower();
    if let Some(at) = path.find("/module/") {
        let mut parts = path[at + "/module/".len()..].split('/');
        let module = parts.next().unwrap_or("");
        if !module.is_empty() {
            return Some((module, parts.next().unwrap_or("")));
        }
    }
    let query = req.query_lower();
    if param(query, "fc") == Some("module") {
        let module = param(query, "module")?;
        return Some((module, param(query, "controller").unwrap_or("")));
    }
    None
}

/// A module's own PHP script, as `(module, file stem)`: `/modules/paypal/ipn.php` reads
/// `("paypal", "ipn")`.
fn module_script<'r>(req: &'r Request<'_>) -> Option<(&'r str, &'r str)> {
    let path = req.path_lower();
    let at = path.find("/modules/")?;
    let module = path[at + "/modules/".len()..].split('/').next()?;
    let stem = req.file_name().strip_suffix(".php")?;
    (!module.is_empty()).then_some((module, stem))
}

/// The core front controller of an `index.php?controller=…` request (no module).
fn core_controller<'r>(req: &'r Request<'_>) -> Option<&'r str> {
    let query = req.query_lower();
    if param(query, "fc").is_some() {
        return None;
    }
    param(query, "controller")
}

#[cfg(test)]
mod tests;

/// This rule set's probe of each kind of request every CMS rule set treats alike.
#[cfg(not(target_arch = "wasm32"))]
pub mod kinds;

#[cfg(test)]
#[test]
fn every_kind_is_treated_as_every_cms_rule_set_treats_it() {
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Prestashop>(&kinds::probes());
}
