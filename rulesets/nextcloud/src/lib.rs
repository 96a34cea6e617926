//! The Nextcloud rule set: Nextcloud's attack surface and its legitimate machine traffic.
//!
//! Paths are matched below an optional `/nextcloud` or `/owncloud` install folder, and
//! routes with or without the front controller (`/index.php/login` and `/login`).
//!
//! **Security issues** (80–95; any of them with confidence ≥ 50 wins the merge):
//! - the configuration folder (`/config/config.php`, `*.config.php`, backups and swap
//!   files, `CAN_INSTALL`);
//! - the data folder: `/data/nextcloud.log`, `owncloud.db` (SQLite), `.ocdata`, users'
//!   files and `appdata_*` — except Nextcloud's own setup check of `.ocdata` /
//!   `htaccesstest.txt`, which it makes with its `Nextcloud Server Crawler` agent (older
//!   versions from the admin's browser);
//! - the folders and files Nextcloud's `.htaccess` refuses (`/lib/`, `/3rdparty/`,
//!   `/build/`, `/tests/`, `/templates/`, `occ`, `console.php`, `autotest*`, `db_structure.xml`);
//! - from non-browsers (an administrator uses one), the web installer
//!   `setup-nextcloud.php` and the web updater
//!   `/updater/` (and its password guessed without `X-Updater-Auth`);
//! - ownCloud exploit probes that scanners fire at every file cloud (CVE-2023-49103
//!   `apps/graphapi/vendor/…/GetPhpInfo.php`, CVE-2023-49105 `OC-Credential` signed URLs);
//! - brute force on `/login`, on two-factor challenges, on share passwords
//!   (`/s/<token>/authenticate`) and with Basic credentials on WebDAV/OCS from unknown
//!   clients; share-token enumeration; user enumeration through the provisioning API
//!   (`/ocs/v1.php/cloud/users`), sharee search and autocomplete without a session;
//!   webcron floods.
//!
//! **Suspicious behaviour** (60–80): logins from scripts, password-reset bursts,
//! registration (Registration app) and public form (Forms app) spam.
//!
//! **Services and payments** (85–95), only with the client's own marks:
//! - the desktop client (`mirall/3.x`), the Android and iOS apps (`Nextcloud-android`,
//!   `Nextcloud-iOS`) and Talk on WebDAV, OCS, Login Flow v2 (`/login/v2`,
//!   `/login/v2/poll`), push and their other endpoints;
//! - CalDAV/CardDAV/WebDAV clients (DAVx⁵, Thunderbird, iOS `dataaccessd`, macOS
//!   `CalendarAgent`, rclone, Windows' WebDAV redirector, …) on `/remote.php/dav/`,
//!   `/remote.php/webdav/` and `/.well-known/caldav|carddav`; any client with
//!   credentials on WebDAV at a normal rate;
//! - OCS API clients (`OCS-APIRequest: true` with credentials), app APIs with
//!   credentials (News, Deck, Notes, Passwords …), the serverinfo monitoring endpoint
//!   with its `NC-Token`;
//! - federation and OCM between servers (`Nextcloud Server Crawler`);
//! - webcron on `cron.php` and uptime monitors on `status.php`.

mod abuse;
mod probes;
mod services;
mod signals;

use botgate_ruleset_sdk::{Info, Opinion, Request, Ruleset};

/// The Nextcloud rule set.
pub struct Nextcloud;

impl Ruleset for Nextcloud {
    const SCOPE: &'static [&'static str] = &[
        // WebDAV, public shares, CVE-2023-49105 signed URLs.
        "/remote.php/",
        "/public.php/",
        "oc-credential=",
        // The configuration and data folders, logs anywhere (`nextcloud.log`).
        "/config",
        "/data/",
        "cloud.log",
        // Folders and files the .htaccess refuses, installer and updater.
        "/lib/",
        "/3rdparty/",
        "/build/",
        "/tests/",
        "/templates/",
        "/occ",
        "/console.php",
        "/db_structure.xml",
        "/autotest",
        "setup-nextcloud.php",
        "/updater",
        // App APIs, Forms, Registration, CVE-2023-49103 graphapi.
        "/apps/",
        // DAV discovery, OCM and setup checks.
        "/.well-known/",
        "/ocs",
        "/ocm",
        // Login, Login Flow, two-factor, password reset, share passwords.
        "/login",
        "/lostpassword/",
        "/status.php",
        "/cron.php",
        "/s/",
        // services::client_app: Nextcloud's own clients (signals::NEXTCLOUD_CLIENTS,
        // matched ignoring case) with credentials or a session, on any path.
        "ua:mirall/",
        "ua:nextcloud-android/",
        "ua:nextcloud-ios/",
        "ua:nextcloud-talk",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "nextcloud",
            "Nextcloud: config and data-folder leaks, installer and updater probes, login, share and WebDAV brute force, user enumeration, and its sync, mobile, DAV, OCS, federation, cron and monitoring traffic."
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

botgate_ruleset_sdk::export_ruleset!(Nextcloud);

/// The normalised path below the install folder: `/nextcloud/index.php/login` reads
/// `/index.php/login`.
fn root<'r>(req: &'r Request<'_>) -> &'r str {
    let path = req.path_lower();
    for folder in ["/nextcloud", "/owncloud"] {
        if let Some(rest) = path.strip_prefix(folder)
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return if rest.is_empty() { "/" } else { rest };
        }
    }
    path
}

/// The route: [`root`] without the front controller, so `/index.php/login` and
/// `/login` both read `/login`.
fn route<'r>(req: &'r Request<'_>) -> &'r str {
    let root = root(req);
    match root.strip_prefix("/index.php") {
        Some("") => "/",
        Some(rest) if rest.starts_with('/') => rest,
        _ => root,
    }
}

#[cfg(test)]
mod tests;

/// This rule set's probe of each kind of request every CMS rule set treats alike.
#[cfg(not(target_arch = "wasm32"))]
pub mod kinds;

#[cfg(test)]
#[test]
fn every_kind_is_treated_as_every_cms_rule_set_treats_it() {
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Nextcloud>(&kinds::probes());
}
