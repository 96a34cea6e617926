//! The Drupal rule set: the attack surface and the legitimate machine traffic of Drupal 7
//! and of Drupal 8 and later.
//!
//! Routes are read from the clean path, or from `?q=` on `/` and `/index.php` (Drupal 7
//! without clean URLs), so `/user/login` and `/?q=user/login` are the same route.
//! What it recognises, in the order it checks:
//!
//! * Attacks, whoever sends them (`security_issues`):
//!   - `drupal.form-api-injection` (95): render-array keys smuggled into input —
//!     `name[#post_render]`-style array keys, the `#post_render`, `#pre_render`,
//!     `#lazy_builder`, `#access_callback` callbacks, `element_parents=.../#value`, a `#`
//!     path segment (`file/ajax/name/#value/...`): Drupalgeddon 2 (CVE-2018-7600) and its
//!     double-encoded follow-up CVE-2018-7602.
//!   - `drupal.phpunit-eval-stdin` (95): `eval-stdin.php` (CVE-2017-9841, PHPUnit shipped in `vendor/`).
//!   - `drupal.settings-file-probe` (95): `settings.php`, `settings.local.php`,
//!     `settings.<env>.php`, `default.settings.php` and their backups; `sites/sites.php`.
//!   - `drupal.database-file-probe` (95): the SQLite database `.ht.sqlite` and SQL dumps
//!     (`*.sql`, `*.mysql`, `*.pgsql`, `*.sql.gz`, ...).
//!   - `drupal.source-file-probe` (88): the files Drupal's `.htaccess` `FilesMatch` denies:
//!     `*.engine|inc|install|make|module|profile|po|sh|theme|twig|tpl.php|xtmpl|yml` (and
//!     their `~`, `.swp`, `.swo`, `.bak`, `.orig`, `.save` copies), backups of PHP files,
//!     `composer.json`, `composer.lock`, `package.json`, `yarn.lock`, `web.config`.
//!   - `drupal.files-dir-php` (92): a PHP script under `sites/*/files/` (web shells; Drupal
//!     never executes PHP there).
//!   - `drupal.vendor-dir-probe` (85): PHP or Composer JSON under `/vendor/` or `/core/vendor/`.
//!   - `drupal.known-exploit-path` (92): contrib exploits — Coder's
//!     `coder_upgrade.run.php` (SA-CONTRIB-2016-039), Open Flash Chart's
//!     `ofc_upload_image.php` (CiviCRM), the Plupload example `upload.php`, the FCKeditor
//!     file manager, elFinder and KCFinder upload connectors.
//!   - `drupal.rest-unserialize-probe` (88): an unauthenticated write with `?_format=hal_json`
//!     (CVE-2019-6340 is sent that way), or a `GET` with a body.
//! * Brute force (`security_issues`):
//!   - `drupal.login-brute-force` (88): `POST /user/login` (form or `?_format=json`),
//!     `/user`, or `/oauth/token` repeated 20 times on few paths (10 by a non-browser).
//!   - `drupal.xmlrpc-abuse` (85): Drupal 7's `POST /xmlrpc.php` repeated the same way.
//!   - `drupal.user-enumeration` (82): a sweep over `/user/<uid>` by a non-browser
//!     (5+ distinct paths in the window) or a browser-looking client (20+).
//! * Legitimate machine traffic (`services_and_payments`), only with the client's marks:
//!   - `drupal.cron-key` (90): `/cron/<cron key>` (Drupal 8+) or `/cron.php?cron_key=<key>`
//!     (Drupal 7), the key being the site's long random secret.
//!   - `drupal.commerce-payment-notify` (90): a gateway's notification from a non-browser
//!     (a form/JSON `POST`, or a `GET` with parameters) to `/payment/notify/<gateway>`
//!     (Commerce 2), `/commerce_paypal/ipn` (Commerce 1) or `/uc_paypal/ipn` (Ubercart).
//!   - `drupal.jsonapi-client` (88), `drupal.rest-client` (88), `drupal.graphql-client` (88):
//!     `/jsonapi/...`, `?_format=json|hal_json|xml|api_json`, `/graphql` with
//!     `Authorization: Bearer` (simple_oauth) or `Basic` (basic_auth).
//!   - `drupal.oauth-token-client` (86): a non-browser form `POST` to `/oauth/token` with
//!     the client's `Basic` credentials.
//! * Probes by scripts (`security_issues`):
//!   - `drupal.maintenance-script-probe` (85): `install.php`, `update.php`, `authorize.php`,
//!     `rebuild.php` (root or `core/`). Browsers are let through: administrators run them.
//!   - `drupal.version-probe` (80): `CHANGELOG.txt`, `core/CHANGELOG.txt`, `INSTALL*.txt`,
//!     `UPGRADE.txt`, `MAINTAINERS.txt`, `COPYRIGHT.txt`, `core/install.php`...
//!   - `drupal.admin-probe` (80): `/admin` and below.
//! * Spam (`suspicious_behaviour`), from a non-browser or a client repeating its `POST`:
//!   - `drupal.registration-spam` (75): `/user/register`.
//!   - `drupal.comment-spam` (75): `/comment/reply/...`.
//!   - `drupal.contact-spam` (75): `/contact`, `/contact/<form>`, `/user/<uid>/contact`,
//!     Webform's `/form/<webform>`.
//!   - `drupal.content-spam` (70): `/node/add/<type>`.
//!   - `drupal.password-reset-abuse` (70): `/user/password`.
//!   - `drupal.scripted-login` (68): a non-browser posting the HTML login form once.
//!
//! Everything else, page views and assets included, is left to the classifier.

use std::borrow::Cow;

use botgate_ruleset_sdk::signals::{
    authorization, guessing_passwords, is_scripted, repeating, walking_pages,
};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

/// The Drupal rule set.
pub struct Drupal;

impl Ruleset for Drupal {
    // Routes can come from `?q=` on `/` and `/index.php`, so a route prefix is written
    // twice, `/user` for the path (and `?q=/user`) and `q=user` for the query, or
    // without its leading `/`.
    const SCOPE: &'static [&'static str] = &[
        // Form API injection: `#` keys and segments, `[%23` (double-encoded, read as
        // `[`), `%23post_render`-style callbacks.
        "#",
        "[",
        "_render",
        "lazy_builder",
        "access_callback",
        // The PHP files a rule names, not PHP as such: settings files
        // (`settings.*.php`, `default.settings.php`), `sites/sites.php`,
        // `eval-stdin.php`, `*.tpl.php`, backups of PHP files (`.php~`, `.php.bak`...).
        "settings.&.php",
        "/sites/&sites.php",
        "eval-stdin.php",
        ".tpl.php",
        ".php.",
        ".php~",
        // PHP under `sites/*/files/` (its images stay outside), in the path or as
        // `/index.php?q=sites/.../files/...`.
        "sites/&/files/&.ph",
        // Contrib exploit scripts: Coder's, and the Open Flash Chart, Plupload and
        // KCFinder uploaders.
        "coder_upgrade.run.php",
        "upload&.php",
        "xmlrpc.php",
        // Databases and dumps.
        ".ht.sqlite",
        ".sql",
        ".mysql",
        ".pgsql",
        // Build files and the extensions Drupal's .htaccess denies.
        "composer.",
        "package.json",
        "yarn.lock",
        "web.config",
        ".engine",
        ".inc",
        ".install",
        ".make",
        ".module",
        ".profile",
        ".po",
        ".sh",
        ".theme",
        ".twig",
        ".xtmpl",
        ".yml",
        "vendor/",
        "fckeditor/editor/filemanager/",
        "elfinder/php/connector",
        // REST formats (clients and the CVE-2019-6340 probe).
        "_format=",
        // Login, registration, password, user enumeration, personal contact forms.
        "/user",
        "q=user",
        "oauth/token",
        "/cron",
        "q=cron",
        "payment/notify/",
        "paypal/ipn",
        "jsonapi",
        "graphql",
        // Maintenance scripts and version files (`install.php`, `install.txt`,
        // `update.php`, `changelog.txt`...).
        "install.",
        "update.",
        "authorize.php",
        "rebuild.php",
        "changelog.txt",
        "upgrade.txt",
        "maintainers.txt",
        "copyright.txt",
        "/admin",
        "q=admin",
        "comment/reply/",
        "/contact",
        "q=contact",
        "/form/",
        "q=form/",
        "node/add/",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "drupal",
            "Recognises Drupal Drupalgeddon and contrib exploits, settings and source leaks, login brute force, user enumeration and spam, and its cron, Commerce and API traffic."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        let route = route(req);
        attack(req, &route)
            .or_else(|| brute_force(req, &route))
            .or_else(|| service(req, &route))
            .or_else(|| probe(req, &route))
            .or_else(|| spam(req, &route))
    }
}

botgate_ruleset_sdk::export_ruleset!(Drupal);

/// Render-array callbacks an attacker smuggles into Form API input (raw and still
/// percent-encoded once, for the double-encoded CVE-2018-7602 variant).
const FORM_API_CALLBACKS: &[&str] = &[
    "#post_render",
    "#pre_render",
    "#lazy_builder",
    "#access_callback",
    "%23post_render",
    "%23pre_render",
    "%23lazy_builder",
    "%23access_callback",
];

/// Extensions Drupal's `.htaccess` denies.
const SOURCE_EXTENSIONS: &[&str] = &[
    ".engine", ".inc", ".install", ".make", ".module", ".profile", ".po", ".sh", ".theme", ".twig",
    ".tpl.php", ".xtmpl", ".yml",
];

/// The editor and backup suffixes Drupal's `.htaccess` also denies.
const BACKUP_SUFFIXES: &[&str] = &["~", ".swp", ".swo", ".bak", ".orig", ".save"];

/// Build files Drupal's `.htaccess` denies.
const BUILD_FILES: &[&str] = &[
    "composer.json",
    "composer.lock",
    "package.json",
    "yarn.lock",
    "web.config",
];

/// Extensions a web server may execute as PHP.
const PHP_EXTENSIONS: &[&str] = &[".php", ".phtml", ".php5", ".php7", ".phar", ".pht"];

/// Contrib exploit paths.
const EXPLOIT_PATHS: &[&str] = &[
    "coder_upgrade.run.php",
    "ofc_upload_image.php",
    "/plupload/examples/upload.php",
    "/fckeditor/editor/filemanager/",
    "/elfinder/php/connector",
    "/kcfinder/upload.php",
];

/// Maintenance scripts, Drupal 7 (root) and Drupal 8+ (`core/`).
const MAINTENANCE_SCRIPTS: &[&str] = &[
    "/install.php",
    "/core/install.php",
    "/update.php",
    "/core/update.php",
    "/authorize.php",
    "/core/authorize.php",
    "/rebuild.php",
    "/core/rebuild.php",
];

/// Text files that give the version away.
const VERSION_FILES: &[&str] = &[
    "/changelog.txt",
    "/core/changelog.txt",
    "/install.txt",
    "/core/install.txt",
    "/install.mysql.txt",
    "/install.pgsql.txt",
    "/install.sqlite.txt",
    "/upgrade.txt",
    "/core/upgrade.txt",
    "/update.txt",
    "/core/update.txt",
    "/maintainers.txt",
    "/core/maintainers.txt",
    "/copyright.txt",
    "/core/copyright.txt",
];

/// Routes that log a user in.
const LOGIN_ROUTES: &[&str] = &[
    "/user/login",
    "/user/login/",
    "/user",
    "/user/",
    "/oauth/token",
];

/// Response formats of the core REST module.
const REST_FORMATS: &[&str] = &["json", "hal_json", "xml", "api_json"];

/// The Drupal route: `?q=` on the front controller, else the normalised path.
fn route<'r>(req: &'r Request<'_>) -> Cow<'r, str> {
    let path = req.path_lower();
    if (path == "/" || path == "/index.php")
        && let Some(q) = req.query_param("q")
    {
        return Cow::Owned(format!("/{}", q.trim_start_matches('/').to_lowercase()));
    }
    Cow::Borrowed(path)
}

/// Attacks recognised by what is asked for, whoever asks.
fn attack(req: &Request<'_>, route: &str) -> Option<Opinion> {
    let file = req.file_name();
    if is_form_api_injection(req, route) {
        return opinion(Category::SecurityIssues, 95, "drupal.form-api-injection");
    }
    if route.contains("eval-stdin.php") {
        return opinion(Category::SecurityIssues, 95, "drupal.phpunit-eval-stdin");
    }
    let settings = (file.starts_with("settings.") && file.contains(".php"))
        || file.starts_with("default.settings.php")
        || (route.starts_with("/sites/") && file.starts_with("sites.php"));
    if settings {
        return opinion(Category::SecurityIssues, 95, "drupal.settings-file-probe");
    }
    if is_database_file(file) {
        return opinion(Category::SecurityIssues, 95, "drupal.database-file-probe");
    }
    if is_source_file(file) {
        return opinion(Category::SecurityIssues, 88, "drupal.source-file-probe");
    }
    if route.starts_with("/sites/")
        && route.contains("/files/")
        && PHP_EXTENSIONS.iter().any(|e| file.ends_with(e))
    {
        return opinion(Category::SecurityIssues, 92, "drupal.files-dir-php");
    }
    // Code and Composer metadata only: a marketplace may have `/vendor/<name>` pages.
    if (route.starts_with("/vendor/") || route.starts_with("/core/vendor/"))
        && (file.contains(".php") || file.ends_with(".json"))
    {
        return opinion(Category::SecurityIssues, 85, "drupal.vendor-dir-probe");
    }
    if EXPLOIT_PATHS.iter().any(|p| route.contains(p)) {
        return opinion(Category::SecurityIssues, 92, "drupal.known-exploit-path");
    }
    if is_unauthenticated_hal_write(req) {
        return opinion(
            Category::SecurityIssues,
            88,
            "drupal.rest-unserialize-probe",
        );
    }
    None
}

/// Password guessing, XML-RPC abuse and user enumeration.
fn brute_force(req: &Request<'_>, route: &str) -> Option<Opinion> {
    if req.is_method("POST") && guessing_passwords(req) {
        if LOGIN_ROUTES.contains(&route) {
            return opinion(Category::SecurityIssues, 88, "drupal.login-brute-force");
        }
        if route == "/xmlrpc.php" {
            return opinion(Category::SecurityIssues, 85, "drupal.xmlrpc-abuse");
        }
    }
    if req.is_read() && user_id_route(route).is_some() && walking_pages(req) {
        return opinion(Category::SecurityIssues, 82, "drupal.user-enumeration");
    }
    None
}

/// Legitimate machine clients, recognised by path, method and their own marks.
fn service(req: &Request<'_>, route: &str) -> Option<Opinion> {
    let method_ok = req.is_method("GET") || req.is_method("POST") || req.is_method("HEAD");
    let cron = match route.strip_prefix("/cron/") {
        Some(key) => is_secret_key(key),
        None => {
            route == "/cron.php"
                && req
                    .query_param("cron_key")
                    .is_some_and(|k| is_secret_key(&k))
        }
    };
    if cron && method_ok {
        return opinion(Category::ServicesAndPayments, 90, "drupal.cron-key");
    }
    let notify = route.starts_with("/payment/notify/")
        || route.starts_with("/commerce_paypal/ipn")
        || route.starts_with("/uc_paypal/ipn");
    if notify && !req.is_browser() && is_notification(req) {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "drupal.commerce-payment-notify",
        );
    }
    if has_api_credentials(req) {
        if route.starts_with("/jsonapi") {
            return opinion(Category::ServicesAndPayments, 88, "drupal.jsonapi-client");
        }
        if route.starts_with("/graphql") {
            return opinion(Category::ServicesAndPayments, 88, "drupal.graphql-client");
        }
        if req
            .query_param("_format")
            .is_some_and(|f| REST_FORMATS.iter().any(|r| f.eq_ignore_ascii_case(r)))
        {
            return opinion(Category::ServicesAndPayments, 88, "drupal.rest-client");
        }
    }
    if route == "/oauth/token"
        && req.is_method("POST")
        && !req.is_browser()
        && authorization(req, "basic").is_some()
        && content_type_has(req, &["application/x-www-form-urlencoded"])
    {
        return opinion(
            Category::ServicesAndPayments,
            86,
            "drupal.oauth-token-client",
        );
    }
    None
}

/// Probes that are only attacks when a script sends them.
fn probe(req: &Request<'_>, route: &str) -> Option<Opinion> {
    if !is_scripted(req) {
        return None;
    }
    if MAINTENANCE_SCRIPTS.contains(&route) {
        return opinion(
            Category::SecurityIssues,
            85,
            "drupal.maintenance-script-probe",
        );
    }
    if VERSION_FILES.contains(&route) {
        return opinion(Category::SecurityIssues, 80, "drupal.version-probe");
    }
    if route == "/admin" || route.starts_with("/admin/") {
        return opinion(Category::SecurityIssues, 80, "drupal.admin-probe");
    }
    None
}

/// Registration, comment, contact and content spam.
fn spam(req: &Request<'_>, route: &str) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    let scripted = !req.is_browser();
    if !scripted && !repeating(req, 10) {
        return None;
    }
    if route.starts_with("/user/register") {
        return opinion(
            Category::SuspiciousBehaviour,
            75,
            "drupal.registration-spam",
        );
    }
    if route.starts_with("/comment/reply/") {
        return opinion(Category::SuspiciousBehaviour, 75, "drupal.comment-spam");
    }
    let personal_contact = user_id_route(route).is_some_and(|rest| rest.starts_with("/contact"));
    if route == "/contact"
        || route.starts_with("/contact/")
        || personal_contact
        || route.starts_with("/form/")
    {
        return opinion(Category::SuspiciousBehaviour, 75, "drupal.contact-spam");
    }
    if route.starts_with("/node/add/") {
        return opinion(Category::SuspiciousBehaviour, 70, "drupal.content-spam");
    }
    if route.starts_with("/user/password") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "drupal.password-reset-abuse",
        );
    }
    if scripted && route.starts_with("/user/login") && req.query_param("_format").is_none() {
        return opinion(Category::SuspiciousBehaviour, 68, "drupal.scripted-login");
    }
    None
}

/// Render-array keys in the input: `name[#post_render]` array keys, a render callback
/// anywhere, `element_parents=.../#value`, or a `#`-segment in the route
/// (`file/ajax/name/#value/...`). Hashtags in a search box carry none of these shapes.
fn is_form_api_injection(req: &Request<'_>, route: &str) -> bool {
    let query = req.query_lower();
    query.contains("[#")
        || query.contains("[%23")
        || FORM_API_CALLBACKS
            .iter()
            .any(|k| query.contains(k) || route.contains(k))
        || req
            .query_param("element_parents")
            .is_some_and(|p| p.contains('#'))
        || route.contains("/#")
}

/// For `/user/<uid>...`, what follows the uid.
fn user_id_route(route: &str) -> Option<&str> {
    let rest = route.strip_prefix("/user/")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let tail = &rest[digits..];
    (digits > 0 && (tail.is_empty() || tail.starts_with('/'))).then_some(tail)
}

/// A cron key: Drupal generates 43 (Drupal 7) or 74 (Drupal 8+) base64url characters.
fn is_secret_key(key: &str) -> bool {
    key.len() >= 20
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// SQL dumps and the SQLite database.
fn is_database_file(file: &str) -> bool {
    if file.starts_with(".ht.sqlite") {
        return true;
    }
    let base = ["gz", "zip", "bz2", "xz"]
        .iter()
        .find_map(|c| file.strip_suffix(c).and_then(|f| f.strip_suffix('.')))
        .unwrap_or(file);
    base.ends_with(".sql") || base.ends_with(".mysql") || base.ends_with(".pgsql")
}

/// A file Drupal's `.htaccess` `FilesMatch` denies.
fn is_source_file(file: &str) -> bool {
    if BUILD_FILES.contains(&file)
        || (file.starts_with('#') && file.ends_with('#') && file.len() > 1)
    {
        return true;
    }
    let base = BACKUP_SUFFIXES
        .iter()
        .find_map(|s| file.strip_suffix(s))
        .unwrap_or(file);
    let backup = base.len() < file.len();
    SOURCE_EXTENSIONS.iter().any(|e| base.ends_with(e)) || (backup && base.ends_with(".php"))
}

/// An unauthenticated write with `?_format=hal_json`, or a `GET` with a body.
fn is_unauthenticated_hal_write(req: &Request<'_>) -> bool {
    if !req
        .query_param("_format")
        .is_some_and(|f| f.eq_ignore_ascii_case("hal_json"))
    {
        return false;
    }
    let write = ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .any(|m| req.is_method(m))
        || (req.is_method("GET") && req.has_header("content-type"));
    write && !req.has_header("authorization") && !req.has_header("x-csrf-token")
}

/// A gateway notification: a form/JSON `POST`, or a `GET` carrying parameters.
fn is_notification(req: &Request<'_>) -> bool {
    (req.is_method("POST")
        && content_type_has(req, &["application/x-www-form-urlencoded", "json", "xml"]))
        || (req.is_method("GET") && !req.query().is_empty())
}

/// Whether the `content-type` contains any of `needles`.
fn content_type_has(req: &Request<'_>, needles: &[&str]) -> bool {
    req.header("content-type")
        .is_some_and(|ct| contains_any_ignore_case(ct, needles))
}

/// `Authorization: Bearer` or `Basic` with credentials.
fn has_api_credentials(req: &Request<'_>) -> bool {
    authorization(req, "bearer").is_some() || authorization(req, "basic").is_some()
}

#[cfg(test)]
mod tests {
    use super::Drupal;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::CrawlerVerification;
    use botgate_ruleset_sdk::testing::*;

    const CRON_KEY: &str =
        "rSXGpSjmcbsgBqLVr3x8iWZ_H6h2k1cE_Rz3S5vUy2MHXFYb0c4QnDaeK7oPwTt9LgJf1m0AbCdEfGhIjK";
    const BEARER: &str = "Bearer eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJkcnVwYWwifQ.c2ln";

    // Ordinary visitors.

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Drupal>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        // Images under sites/*/files/ too: only PHP there is a probe.
        assert_outside_scope::<Drupal>(ORDINARY_PAGES);
        assert_outside_scope::<Drupal>(&[
            "/sites/default/files/styles/large/public/2024-06/mug.jpg",
            "/core/misc/drupal.js?v=10.3",
        ]);
    }

    #[test]
    fn other_php_entry_points_are_outside_the_scope() {
        // WordPress, a generic front controller, Nextcloud's WebDAV: no Drupal rule
        // answers them, so PHP as such is not in the scope.
        assert_outside_scope::<Drupal>(&[
            "/wp-login.php",
            "/index.php?id=1",
            "/remote.php/dav/files/alice/",
        ]);
    }

    #[test]
    fn php_files_a_rule_names_are_inside_the_scope() {
        let curl = "curl/8.5.0";
        for target in [
            "/index.php?q=sites/default/files/shell",
            "/themes/bartik/templates/page.tpl.php",
            "/index.php~",
            "/sites/sites.php",
            "/sites/all/libraries/plupload/examples/upload.php",
            "/sites/all/modules/ofc/php-ofc-library/ofc_upload_image.php",
            "/?q=rebuild.php",
        ] {
            assert_category::<Drupal>(get(target).machine(curl), Some(SecurityIssues));
        }
        assert_category::<Drupal>(
            post("/xmlrpc.php").machine(curl).behaviour(30, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn routes_read_from_q_are_inside_the_scope() {
        let script = "python-requests/2.31.0";
        assert_category::<Drupal>(
            post("/?q=user/login").machine(script).behaviour(30, 1, 0),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(
            get("/?q=admin/reports/status").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(
            post("/?q=contact").machine(script),
            Some(SuspiciousBehaviour),
        );
        assert_category::<Drupal>(
            post("/?q=/form/contact-us").machine(script),
            Some(SuspiciousBehaviour),
        );
        assert_category::<Drupal>(
            get("/?q=cron/Xv3wJk8pQ2mZr7TnL5yB9cH4dF6gA1sE0uWqRtYiOpK").machine("curl/8.5.0"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn article_view_is_left_to_the_classifier() {
        assert_category::<Drupal>(get("/node/42").browser(), None);
        assert_category::<Drupal>(get("/blog/2024/spring-release").firefox(), None);
    }

    #[test]
    fn core_assets_are_left_alone() {
        assert_category::<Drupal>(
            get("/core/assets/vendor/jquery/jquery.min.js?v=3.7.1").browser(),
            None,
        );
    }

    #[test]
    fn a_single_browser_login_is_not_an_attack() {
        assert_category::<Drupal>(post("/user/login").browser(), None);
        assert_category::<Drupal>(post("/?q=user/login").firefox(), None);
    }

    #[test]
    fn administrator_running_update_php_in_a_browser_is_fine() {
        assert_category::<Drupal>(get("/update.php").browser(), None);
    }

    // Leaks and exploits.

    #[test]
    fn drupalgeddon2_is_an_attack() {
        assert_category::<Drupal>(
            post("/user/register?element_parents=account/mail/%23value&ajax_form=1&_wrapper_format=drupal_ajax")
                .machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn drupalgeddon2_drupal7_variant_is_an_attack() {
        assert_category::<Drupal>(
            post(
                "/?q=user/password&name[%23post_render][]=passthru&name[%23type]=markup&name[%23markup]=id",
            ),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn managed_file_upload_ajax_is_not_drupalgeddon() {
        assert_category::<Drupal>(
            post("/node/add/article?element_parents=field_image/widget/0&ajax_form=1&_wrapper_format=drupal_ajax")
                .browser(),
            None,
        );
    }

    #[test]
    fn searching_for_a_hashtag_is_not_an_injection() {
        assert_category::<Drupal>(get("/search/node?keys=%23value+%23markup").browser(), None);
    }

    #[test]
    fn settings_php_and_backups_are_probes() {
        assert_category::<Drupal>(get("/sites/default/settings.php"), Some(SecurityIssues));
        assert_category::<Drupal>(
            get("/sites/default/settings.local.php.bak").browser(),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn sqlite_database_and_sql_dump_are_probes() {
        assert_category::<Drupal>(get("/sites/default/files/.ht.sqlite"), Some(SecurityIssues));
        assert_category::<Drupal>(get("/drupal_backup.sql.gz"), Some(SecurityIssues));
    }

    #[test]
    fn module_source_and_services_yml_are_probes() {
        assert_category::<Drupal>(
            get("/modules/contrib/views/views.module"),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(get("/sites/default/services.yml"), Some(SecurityIssues));
        assert_category::<Drupal>(get("/composer.lock"), Some(SecurityIssues));
    }

    #[test]
    fn php_in_files_directory_is_a_web_shell() {
        assert_category::<Drupal>(
            get("/sites/default/files/pictures/x.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn vendor_code_is_a_probe_but_a_vendor_page_is_not() {
        assert_category::<Drupal>(get("/vendor/composer/installed.json"), Some(SecurityIssues));
        assert_category::<Drupal>(get("/vendor/acme-farm-shop").browser(), None);
    }

    #[test]
    fn phpunit_eval_stdin_is_an_attack() {
        assert_category::<Drupal>(
            post("/vendor/phpunit/phpunit/src/Util/PHP/eval-stdin.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn coder_module_rce_is_an_attack() {
        assert_category::<Drupal>(
            post("/sites/all/modules/coder/coder_upgrade/scripts/coder_upgrade.run.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn unauthenticated_hal_json_write_is_cve_2019_6340() {
        assert_category::<Drupal>(
            post("/node?_format=hal_json")
                .machine("python-requests/2.31.0")
                .header("content-type", "application/hal+json"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn changelog_version_probe_by_a_script_is_an_attack() {
        assert_category::<Drupal>(
            get("/CHANGELOG.txt").machine("WPScan v3.8"),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(
            get("/core/CHANGELOG.txt").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn installer_probed_by_a_script_is_an_attack() {
        assert_category::<Drupal>(
            get("/core/install.php").machine("Go-http-client/1.1"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn admin_probe_by_a_script_is_an_attack() {
        assert_category::<Drupal>(
            get("/admin/config").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    // Brute force and enumeration.

    #[test]
    fn login_brute_force_is_an_attack() {
        assert_category::<Drupal>(
            post("/user/login").browser().behaviour(35, 2, 0),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(
            post("/user/login?_format=json")
                .machine("axios/1.6.2")
                .behaviour(15, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn user_id_sweep_by_a_script_is_enumeration() {
        assert_category::<Drupal>(
            get("/user/17")
                .machine("python-requests/2.31.0")
                .behaviour(17, 17, 0),
            Some(SecurityIssues),
        );
        assert_category::<Drupal>(
            get("/?q=user/9").machine("curl/8.5.0").behaviour(9, 9, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn verified_crawler_reading_profiles_is_not_enumeration() {
        assert_category::<Drupal>(
            get("/user/17")
                .ua("Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)")
                .crawler(CrawlerVerification::VerifiedSearchEngine)
                .behaviour(40, 40, 0),
            None,
        );
    }

    #[test]
    fn visitor_opening_one_profile_is_fine() {
        assert_category::<Drupal>(get("/user/3").browser().behaviour(12, 9, 0), None);
    }

    // Legitimate machine clients.

    #[test]
    fn cron_with_key_is_a_service() {
        assert_category::<Drupal>(
            get(&format!("/cron/{CRON_KEY}")).machine("Wget/1.21.4"),
            Some(ServicesAndPayments),
        );
        assert_category::<Drupal>(
            get("/cron.php?cron_key=Qm9vOoKc3sJ2dKx9vW1hTz5yUe7rIbAaPnLfGgHjK0M")
                .machine("curl/8.5.0"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn cron_without_key_is_not_a_service() {
        assert_category::<Drupal>(get("/cron.php").machine("curl/8.5.0"), None);
        assert_category::<Drupal>(get("/cron/abc").machine("curl/8.5.0"), None);
    }

    #[test]
    fn commerce_gateway_notification_is_a_payment() {
        assert_category::<Drupal>(
            post("/payment/notify/paypal_checkout")
                .machine("PayPal IPN ( https://www.paypal.com/ipn )")
                .header("content-type", "application/x-www-form-urlencoded"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn browser_on_the_notify_route_is_not_a_payment() {
        assert_category::<Drupal>(get("/payment/notify/paypal_checkout?x=1").browser(), None);
    }

    #[test]
    fn jsonapi_client_with_bearer_token_is_a_service() {
        assert_category::<Drupal>(
            get("/jsonapi/node/article?page[limit]=50")
                .machine("node-fetch/3.3")
                .header("accept", "application/vnd.api+json")
                .header("authorization", BEARER),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn jsonapi_request_without_credentials_is_not_a_service() {
        assert_category::<Drupal>(get("/jsonapi/node/article").machine("node-fetch/3.3"), None);
    }

    #[test]
    fn rest_client_with_basic_auth_is_a_service() {
        assert_category::<Drupal>(
            post("/node?_format=hal_json")
                .machine("Java/17.0.9")
                .header("content-type", "application/hal+json")
                .header("authorization", "Basic ZWRpdG9yOnNlY3JldA=="),
            Some(ServicesAndPayments),
        );
    }

    // Spam.

    #[test]
    fn scripted_registration_is_spam() {
        assert_category::<Drupal>(
            post("/user/register").machine("Mozilla/4.0 (compatible; MSIE 8.0; Windows NT 6.1)"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn scripted_comment_is_spam() {
        assert_category::<Drupal>(
            post("/comment/reply/node/42/comment").machine("libwww-perl/6.72"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn contact_form_burst_is_spam() {
        assert_category::<Drupal>(
            post("/contact/feedback").browser().behaviour(18, 2, 0),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn one_browser_comment_is_fine() {
        assert_category::<Drupal>(post("/comment/reply/node/42/comment").browser(), None);
    }

    #[test]
    fn info_names_the_component() {
        use botgate_ruleset_sdk::Ruleset;
        assert_eq!(Drupal::info().name, "drupal");
    }

    #[test]
    fn sensitive_paths_are_judged_alike_however_spelled() {
        assert_spellings_agree::<Drupal>(
            |target| get(target).machine("curl/8.5.0"),
            &[
                "/sites/default/settings.php",
                "/sites/default/files/.ht.sqlite",
                "/sites/default/services.yml",
            ],
        );
    }
}

/// This rule set's probe of each kind of request every CMS rule set treats alike.
#[cfg(not(target_arch = "wasm32"))]
pub mod kinds;

#[cfg(test)]
#[test]
fn every_kind_is_treated_as_every_cms_rule_set_treats_it() {
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Drupal>(&kinds::probes());
}
