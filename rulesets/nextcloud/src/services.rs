//! Nextcloud's legitimate machine traffic, recognised by the client's own marks.

use crate::signals::{
    credentials, dav_client, hammering, monitor, nextcloud_client, server_crawler,
};
use crate::{root, route};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Requests in the window, focused on a few paths, from which a client that is none of
/// the known ones is guessing Basic credentials on WebDAV or an API.
const CREDENTIAL_BURST: u32 = 20;
/// Requests in the window from which `cron.php` from a public address is a flood
/// (webcron runs every five minutes).
const CRON_FLOOD: u32 = 20;

/// WebDAV, CalDAV and CardDAV entry points, with the service discovery redirects.
const DAV_ROOTS: &[&str] = &[
    "/remote.php/dav",
    "/remote.php/webdav",
    "/remote.php/caldav",
    "/remote.php/carddav",
    "/public.php/webdav",
    "/public.php/dav",
    "/.well-known/caldav",
    "/.well-known/carddav",
];

/// Endpoints servers call on each other: Open Cloud Mesh, federated shares, discovery.
const FEDERATION_ROOTS: &[&str] = &[
    "/ocm/",
    "/index.php/ocm/",
    "/ocm-provider",
    "/.well-known/ocm",
    "/ocs/v1.php/cloud/shares",
    "/ocs/v2.php/cloud/shares",
    "/ocs/v2.php/federation/",
    "/ocs/v1.php/cloud/capabilities",
    "/ocs/v2.php/cloud/capabilities",
    "/ocs-provider/",
];

/// The opinion on Nextcloud's legitimate machine traffic, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    dav(req)
        .or_else(|| ocs(req))
        .or_else(|| login_flow(req))
        .or_else(|| status(req))
        .or_else(|| cron(req))
        .or_else(|| federation(req))
        .or_else(|| client_app(req))
        .or_else(|| app_api(req))
}

/// Whether a request carries credentials from a client that is none of the known ones
/// and keeps retrying the same few paths: password guessing over Basic auth.
fn guessing_credentials(req: &Request<'_>) -> bool {
    !nextcloud_client(req) && !dav_client(req) && hammering(req, CREDENTIAL_BURST)
}

/// WebDAV, CalDAV and CardDAV. Clients discover the service without credentials first
/// (PROPFIND answered 401), so a known client counts even before it authenticates.
fn dav(req: &Request<'_>) -> Option<Opinion> {
    let root = root(req);
    if !DAV_ROOTS.iter().any(|d| root.starts_with(d)) {
        return None;
    }
    if nextcloud_client(req) {
        return opinion(Category::ServicesAndPayments, 95, "nextcloud.sync-client");
    }
    if dav_client(req) {
        return opinion(Category::ServicesAndPayments, 95, "nextcloud.dav-client");
    }
    if server_crawler(req) {
        return opinion(Category::ServicesAndPayments, 85, "nextcloud.federation");
    }
    if credentials(req) {
        if guessing_credentials(req) {
            return opinion(Category::SecurityIssues, 85, "nextcloud.webdav-brute-force");
        }
        return opinion(
            Category::ServicesAndPayments,
            85,
            "nextcloud.webdav-authenticated",
        );
    }
    None
}

/// Whether the request posts a public form of the Forms app (left to the spam rules).
pub fn form_submission(req: &Request<'_>) -> bool {
    let route = route(req);
    req.is_method("POST") && route.contains("/apps/forms/") && route.contains("submission")
}

/// The OCS API: clients mark their calls with `OCS-APIRequest: true`; the serverinfo
/// app's monitoring endpoint takes an `NC-Token` instead.
fn ocs(req: &Request<'_>) -> Option<Opinion> {
    let root = root(req);
    if !root.starts_with("/ocs/v1.php/") && !root.starts_with("/ocs/v2.php/") {
        return None;
    }
    if root.contains("/apps/serverinfo/api/v1/info")
        && req.header("nc-token").is_some_and(|t| !t.is_empty())
    {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "nextcloud.serverinfo-monitoring",
        );
    }
    let api = req
        .header("ocs-apirequest")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !api || form_submission(req) {
        return None;
    }
    if nextcloud_client(req) && (credentials(req) || req.has_header("cookie")) {
        return opinion(Category::ServicesAndPayments, 95, "nextcloud.client-api");
    }
    if credentials(req) {
        if guessing_credentials(req) {
            return opinion(Category::SecurityIssues, 85, "nextcloud.api-brute-force");
        }
        return opinion(
            Category::ServicesAndPayments,
            90,
            "nextcloud.ocs-api-client",
        );
    }
    None
}

/// Login Flow v1 and v2: the client opens the flow, then polls for the app password.
fn login_flow(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    let flow = matches!(route, "/login/v2" | "/login/v2/poll") || route.starts_with("/login/flow");
    if flow && nextcloud_client(req) {
        return opinion(Category::ServicesAndPayments, 90, "nextcloud.login-flow");
    }
    None
}

/// `status.php`: clients check it before every sync, servers before federating,
/// uptime monitors all day.
fn status(req: &Request<'_>) -> Option<Opinion> {
    if root(req) != "/status.php" || !req.is_read() {
        return None;
    }
    let known = nextcloud_client(req)
        || dav_client(req)
        || server_crawler(req)
        || monitor(req)
        || req.client_is_private();
    if known {
        return opinion(Category::ServicesAndPayments, 90, "nextcloud.status-check");
    }
    None
}

/// `cron.php` in webcron mode, called by a cron service or the server's crontab. In
/// AJAX mode visitors' browsers call it: those are left to the classifier.
fn cron(req: &Request<'_>) -> Option<Opinion> {
    if root(req) != "/cron.php" || req.is_browser() {
        return None;
    }
    if req.client_is_private() {
        return opinion(Category::ServicesAndPayments, 90, "nextcloud.webcron");
    }
    if hammering(req, CRON_FLOOD) {
        return opinion(Category::SecurityIssues, 80, "nextcloud.cron-flood");
    }
    if req.is_method("GET") || req.is_method("POST") {
        return opinion(Category::ServicesAndPayments, 85, "nextcloud.webcron");
    }
    None
}

/// Servers talking to each other (Open Cloud Mesh, federated shares) and Nextcloud's
/// own setup checks of its `.well-known` redirects.
fn federation(req: &Request<'_>) -> Option<Opinion> {
    if !server_crawler(req) {
        return None;
    }
    let root = root(req);
    if FEDERATION_ROOTS.iter().any(|f| root.starts_with(f)) {
        return opinion(Category::ServicesAndPayments, 85, "nextcloud.federation");
    }
    if root.starts_with("/.well-known/") {
        return opinion(Category::ServicesAndPayments, 85, "nextcloud.setup-check");
    }
    None
}

/// Nextcloud's own clients on their other endpoints (avatars, previews, notifications,
/// the notify_push socket), with their credentials or session. Logins are not
/// included: a borrowed client agent does not excuse password guessing.
fn client_app(req: &Request<'_>) -> Option<Opinion> {
    if !nextcloud_client(req) {
        return None;
    }
    let route = route(req);
    if route.starts_with("/push/") {
        return opinion(Category::ServicesAndPayments, 90, "nextcloud.client-app");
    }
    let login = route == "/login" || route.starts_with("/login/");
    if !login && (credentials(req) || req.has_header("cookie")) {
        return opinion(Category::ServicesAndPayments, 90, "nextcloud.client-app");
    }
    None
}

/// Apps' own REST APIs with credentials: News (`/apps/news/api/v1-3/`), Deck, Notes,
/// Passwords, Bookmarks, Cookbook and the OAuth2 token endpoint.
fn app_api(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    if !route.starts_with("/apps/")
        || !route.contains("/api/")
        || !credentials(req)
        || form_submission(req)
    {
        return None;
    }
    if guessing_credentials(req) {
        return opinion(Category::SecurityIssues, 85, "nextcloud.api-brute-force");
    }
    opinion(
        Category::ServicesAndPayments,
        85,
        "nextcloud.app-api-client",
    )
}
