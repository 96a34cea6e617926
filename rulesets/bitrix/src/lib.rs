//! The Bitrix rule set: the attack surface and the legitimate machine traffic of
//! 1C-Bitrix Site Manager and self-hosted Bitrix24.
//!
//! What it recognises, in the order it checks:
//!
//! * Attacks, whoever sends them (`security_issues`):
//!   - `bitrix.vote-uf-rce` (95): the CVE-2022-27228 exploit of the vote module,
//!     `/bitrix/tools/vote/uf.php?attachId[ENTITY_TYPE]=CFileUploader&attachId[ENTITY_ID][events]...`.
//!   - `bitrix.config-file-probe` (92): `.settings.php`, `.settings_extra.php`,
//!     `dbconn.php`, `after_connect.php`, `after_connect_d7.php`, `license_key.php` and
//!     their backups (`dbconn.php.bak`, `.settings.php~`, ...), wherever they are asked for.
//!   - `bitrix.backup-probe` (92): anything under `/bitrix/backup/`, where the backup
//!     module writes full site archives.
//!   - `bitrix.protected-dir-probe` (88): directories Bitrix's own `.htaccess` and the
//!     BitrixVM nginx config deny: `/bitrix/modules/`, `/bitrix/php_interface/`,
//!     `/local/php_interface/`, `/local/modules/`, `/bitrix/managed_cache/`,
//!     `/bitrix/stack_cache/`, `/bitrix/updates/`, and PHP cache files under `/bitrix/cache/`.
//!   - `bitrix.upload-php-exec` (92): a PHP script under `/upload/` (a web shell dropped
//!     through an upload form; Bitrix never serves PHP from there).
//!   - `bitrix.log-probe` (88): `*.log` files under `/bitrix/`.
//!   - `bitrix.include-file-probe` (85): the per-folder include files Bitrix keeps in
//!     the document root (`.access.php`, `.section.php`, `.top.menu.php`, ...).
//! * Brute force (`security_issues`): `bitrix.login-brute-force` (88), a client that
//!   repeats its login `POST` (`?login=yes`, or the admin login at `/bitrix/admin/`)
//!   20 times in the window on few paths (10 times when it is not a browser);
//!   `bitrix.user-enumeration` (82), a sweep over user profiles
//!   (`/company/personal/user/<id>/`, `/forum/user/<id>/`, `/club/user/<id>/`) by a
//!   non-browser (5+ distinct paths in the window) or a browser-looking client (20+).
//! * Legitimate machine traffic (`services_and_payments`), only with the client's marks:
//!   - `bitrix.1c-exchange` (92): 1C:Enterprise accounting synchronisation,
//!     `/bitrix/admin/1c_exchange.php?type=...&mode=...` sent with the `1C+Enterprise` user agent.
//!   - `bitrix.payment-callback` (90): a payment gateway's server-to-server notification
//!     to `/bitrix/tools/sale_ps_result.php` (or another `sale_ps_*result.php`), from a
//!     non-browser, as a form/JSON/XML `POST` or carrying a gateway signature parameter
//!     (`SignatureValue`, `checksum`, `md5`, `sha1_hash`, `LMI_HASH`, `signature`, `sign`,
//!     `hash`). A browser returning from the gateway, or a bare `GET` without a signature,
//!     is left to the classifier. `sale_ps_success.php` and `sale_ps_fail.php` are the
//!     customer's browser coming back, so they are left alone too.
//!   - `bitrix.rest-webhook` (88): a Bitrix24 inbound webhook, `/rest/<user id>/<token>/<method>`.
//!   - `bitrix.rest-oauth-client` (88): `/rest/<method>` with an `auth` token or a bearer token.
//!   - `bitrix.desktop-app` (88) and `bitrix.mobile-app` (88): the Bitrix24 desktop
//!     (`BitrixDesktop/`) and mobile (`BitrixMobile`, `Bitrix24/Janative`) apps calling
//!     their endpoints (`/desktop_app/`, `/mobile/`, `/mobileapp/`, `/rest/`,
//!     `/bitrix/services/`, `/bitrix/tools/`, `/bitrix/components/`, the push server).
//! * Probes by scripts (`security_issues`):
//!   - `bitrix.admin-probe` (82): a non-browser in `/bitrix/admin/` (outside the 1C exchange above).
//!   - `bitrix.installer-probe` (88): a non-browser asking for a leftover `/bitrixsetup.php`
//!     or `/restore.php` (a browser is let through: an administrator uses them during a migration).
//!   - `bitrix.html-editor-upload-probe` (88): a non-browser at `/bitrix/tools/html_editor_action.php`.
//! * Spam (`suspicious_behaviour`), from a non-browser or a client repeating its `POST`:
//!   - `bitrix.registration-spam` (75): `?register=yes`, `/auth/registration`.
//!   - `bitrix.password-reset-abuse` (70): `?forgot_password=yes`, `?change_password=yes`.
//!   - `bitrix.comment-spam` (72): forum, blog, review and feedback/web-form posts.
//!   - `bitrix.scripted-login` (68): a non-browser posting the public login form once.
//!   - `bitrix.open-redirect-abuse` (65): `/bitrix/redirect.php` or `/bitrix/rk.php` with a
//!     `goto` to another site, not clicked from this site (spam and phishing links use
//!     these redirectors).
//!
//! Everything else, page views and static files included, is left to the classifier.

use botgate_ruleset_sdk::signals::{guessing_passwords, is_scripted, repeating, walking_pages};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

/// The Bitrix rule set.
pub struct Bitrix;

impl Ruleset for Bitrix {
    const SCOPE: &'static [&'static str] = &[
        // The PHP files rules name: the config files and their backups, include files
        // (`/.access.php`...), PHP under `/upload/` and `/bitrix/cache/` (images and
        // cached CSS there stay outside), the scripts under `/bitrix/tools/` (the vote
        // exploit, payment results, the HTML editor), redirectors and installers.
        ".settings",
        "dbconn.",
        "after_connect",
        "license_key.",
        "/.&.php",
        "/upload/&.ph",
        "/bitrix/cache/&.ph",
        "/bitrix/tools/",
        "/bitrix/redirect.",
        "/bitrix/rk.",
        "bitrixsetup.",
        "/restore.",
        "/bitrix/backup",
        "/bitrix/modules/",
        "/bitrix/php_interface/",
        "/bitrix/managed_cache/",
        "/bitrix/stack_cache/",
        "/bitrix/updates/",
        "/local/php_interface/",
        "/local/modules/",
        // `*.log` under `/bitrix/`.
        "/bitrix/&.log",
        // The admin login and admin probes.
        "/bitrix/admin",
        // Posts only: the public login (`?login=yes`), registration (`?register=yes`,
        // `/auth/registration`), password reset (`forgot_password=`, `change_password=`).
        "login=yes&method:post",
        "regist&method:post",
        "_password=&method:post",
        // REST webhooks and OAuth clients.
        "/rest/",
        // Comment spam: scripted posts under these (page views stay outside).
        "/forum/&method:post",
        "/blog/&method:post",
        "/reviews/&method:post",
        "/feedback/&method:post",
        "/bitrix/components/bitrix/forum.&method:post",
        "/bitrix/components/bitrix/blog.&method:post",
        "/bitrix/components/bitrix/main.feedback&method:post",
        "/bitrix/components/bitrix/form.result.new&method:post",
        "web_form_id&method:post",
        // User profiles (Bitrix24's intranet, the forum, the social network), walked
        // by enumerators.
        "/personal/user/",
        "/forum/user/",
        "/club/user/",
        // The desktop and mobile apps, recognised by their agents on their endpoints.
        "ua:bitrixdesktop/",
        "ua:bitrixmobile",
        "ua:bitrix24/janative",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "bitrix",
            "Recognises 1C-Bitrix and Bitrix24 config and backup leaks, CVE probes, login brute force and spam, and its 1C, payment, REST and app traffic."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        attack(req)
            .or_else(|| brute_force(req))
            .or_else(|| service(req))
            .or_else(|| probe(req))
            .or_else(|| spam(req))
    }
}

botgate_ruleset_sdk::export_ruleset!(Bitrix);

/// Configuration files (matched as file-name prefixes, so backups match too).
const CONFIG_FILES: &[&str] = &[
    ".settings.php",
    ".settings_extra.php",
    "dbconn.php",
    "after_connect.php",
    "after_connect_d7.php",
    "license_key.php",
];

/// Directories Bitrix never serves.
const PROTECTED_DIRS: &[&str] = &[
    "/bitrix/modules/",
    "/bitrix/php_interface/",
    "/local/php_interface/",
    "/local/modules/",
    "/bitrix/managed_cache/",
    "/bitrix/stack_cache/",
    "/bitrix/updates/",
];

/// Extensions a web server may execute as PHP.
const PHP_EXTENSIONS: &[&str] = &[
    ".php", ".phtml", ".php3", ".php4", ".php5", ".php7", ".phar", ".pht",
];

/// Query parameters payment gateways sign their notifications with.
const SIGNATURE_PARAMS: &[&str] = &[
    "SignatureValue", // Robokassa
    "checksum",       // Sberbank
    "md5",            // YooMoney / Yandex.Kassa HTTP notifications
    "sha1_hash",      // YooMoney wallet notifications
    "LMI_HASH",       // WebMoney
    "signature",      // LiqPay and others
    "sign",
    "hash",
];

/// Endpoints the Bitrix24 desktop and mobile apps call.
const APP_PATHS: &[&str] = &[
    "/desktop_app/",
    "/mobile/",
    "/mobileapp/",
    "/rest/",
    "/bitrix/services/",
    "/bitrix/tools/",
    "/bitrix/components/",
    "/bitrix/sub/",
    "/bitrix/subws/",
    "/bitrix/rest/",
];

/// Paths that receive comments, reviews and form submissions.
const COMMENT_PATHS: &[&str] = &[
    "/forum/",
    "/blog/",
    "/reviews/",
    "/feedback/",
    "/bitrix/components/bitrix/forum.",
    "/bitrix/components/bitrix/blog.",
    "/bitrix/components/bitrix/main.feedback",
    "/bitrix/components/bitrix/form.result.new",
];

/// Attacks recognised by what is asked for, whoever asks.
fn attack(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let file = req.file_name();
    if path == "/bitrix/tools/vote/uf.php" {
        let query = req.query_lower();
        if ["cfileuploader", "[events]", "onuploaderisinited"]
            .iter()
            .any(|n| query.contains(n))
        {
            return opinion(Category::SecurityIssues, 95, "bitrix.vote-uf-rce");
        }
    }
    if CONFIG_FILES.iter().any(|c| file.starts_with(c)) {
        return opinion(Category::SecurityIssues, 92, "bitrix.config-file-probe");
    }
    if path.starts_with("/bitrix/backup/") || path == "/bitrix/backup" {
        return opinion(Category::SecurityIssues, 92, "bitrix.backup-probe");
    }
    if req.path_starts_with_any(PROTECTED_DIRS)
        || (path.starts_with("/bitrix/cache/") && file.ends_with(".php"))
    {
        return opinion(Category::SecurityIssues, 88, "bitrix.protected-dir-probe");
    }
    if path.starts_with("/upload/") && is_php(file) {
        return opinion(Category::SecurityIssues, 92, "bitrix.upload-php-exec");
    }
    if path.starts_with("/bitrix/") && file.ends_with(".log") {
        return opinion(Category::SecurityIssues, 88, "bitrix.log-probe");
    }
    if file.starts_with('.') && file.contains(".php") {
        return opinion(Category::SecurityIssues, 85, "bitrix.include-file-probe");
    }
    None
}

/// Password guessing against the public or the admin login form, and a sweep over
/// user profiles.
fn brute_force(req: &Request<'_>) -> Option<Opinion> {
    if req.is_method("POST")
        && (is_admin_login(req) || is_public_login(req))
        && guessing_passwords(req)
    {
        return opinion(Category::SecurityIssues, 88, "bitrix.login-brute-force");
    }
    if req.is_read() && is_user_profile(req.path_lower()) && walking_pages(req) {
        return opinion(Category::SecurityIssues, 82, "bitrix.user-enumeration");
    }
    None
}

/// A user's profile page: `/company/personal/user/17/`, `/forum/user/17/`,
/// `/club/user/17/` (a numeric id after `/user/`).
fn is_user_profile(path: &str) -> bool {
    ["/personal/user/", "/forum/user/", "/club/user/"]
        .iter()
        .find_map(|folder| path.find(folder).map(|at| &path[at + folder.len()..]))
        .and_then(|rest| rest.split('/').next())
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Legitimate machine clients, recognised by path, method and their own marks.
fn service(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let reads_or_posts = req.is_method("GET") || req.is_method("POST");
    if path == "/bitrix/admin/1c_exchange.php"
        && reads_or_posts
        && req.has_query_param("type")
        && req.has_query_param("mode")
        && contains_any_ignore_case(req.user_agent(), &["1C+Enterprise", "1C:Enterprise"])
    {
        return opinion(Category::ServicesAndPayments, 92, "bitrix.1c-exchange");
    }
    if is_payment_result_script(req) && !req.is_browser() && is_signed_notification(req) {
        return opinion(Category::ServicesAndPayments, 90, "bitrix.payment-callback");
    }
    if let Some(rest) = path.strip_prefix("/rest/") {
        if reads_or_posts && is_webhook(rest) {
            return opinion(Category::ServicesAndPayments, 88, "bitrix.rest-webhook");
        }
        let has_token =
            req.query_param("auth").is_some_and(|t| t.len() >= 16) || bearer_token(req).is_some();
        if reads_or_posts && has_token {
            return opinion(
                Category::ServicesAndPayments,
                88,
                "bitrix.rest-oauth-client",
            );
        }
    }
    if reads_or_posts && req.path_starts_with_any(APP_PATHS) {
        if req.ua_contains("BitrixDesktop/") {
            return opinion(Category::ServicesAndPayments, 88, "bitrix.desktop-app");
        }
        if req.ua_contains("BitrixMobile") || req.ua_contains("Bitrix24/Janative") {
            return opinion(Category::ServicesAndPayments, 88, "bitrix.mobile-app");
        }
    }
    None
}

/// Probes that are only attacks when a script sends them.
fn probe(req: &Request<'_>) -> Option<Opinion> {
    if !is_scripted(req) {
        return None;
    }
    let path = req.path_lower();
    if path.starts_with("/bitrix/admin") {
        return opinion(Category::SecurityIssues, 82, "bitrix.admin-probe");
    }
    if path == "/bitrixsetup.php" || path == "/restore.php" {
        return opinion(Category::SecurityIssues, 88, "bitrix.installer-probe");
    }
    if path == "/bitrix/tools/html_editor_action.php" {
        return opinion(
            Category::SecurityIssues,
            88,
            "bitrix.html-editor-upload-probe",
        );
    }
    None
}

/// Form spam, and redirectors used as spam links.
fn spam(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    if (path == "/bitrix/redirect.php" || path == "/bitrix/rk.php") && is_offsite_redirect(req) {
        return opinion(
            Category::SuspiciousBehaviour,
            65,
            "bitrix.open-redirect-abuse",
        );
    }
    if !req.is_method("POST") {
        return None;
    }
    let scripted = !req.is_browser();
    if !scripted && !repeating(req, 10) {
        return None;
    }
    if param_is(req, "register", "yes") || path.contains("/auth/registration") {
        return opinion(
            Category::SuspiciousBehaviour,
            75,
            "bitrix.registration-spam",
        );
    }
    if param_is(req, "forgot_password", "yes") || param_is(req, "change_password", "yes") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "bitrix.password-reset-abuse",
        );
    }
    if req.path_contains_any(COMMENT_PATHS) || req.has_query_param("WEB_FORM_ID") {
        return opinion(Category::SuspiciousBehaviour, 72, "bitrix.comment-spam");
    }
    if scripted && is_public_login(req) {
        return opinion(Category::SuspiciousBehaviour, 68, "bitrix.scripted-login");
    }
    None
}

/// The admin login form posts to the admin desktop.
fn is_admin_login(req: &Request<'_>) -> bool {
    matches!(
        req.path_lower(),
        "/bitrix/admin" | "/bitrix/admin/" | "/bitrix/admin/index.php"
    )
}

/// The public authorisation form posts to the current page with `?login=yes`.
fn is_public_login(req: &Request<'_>) -> bool {
    param_is(req, "login", "yes")
}

/// `/bitrix/tools/sale_ps_result.php` and its per-gateway variants.
fn is_payment_result_script(req: &Request<'_>) -> bool {
    let file = req.file_name();
    req.path_lower().starts_with("/bitrix/tools/")
        && file.starts_with("sale_ps_")
        && file.ends_with("result.php")
}

/// A gateway notification: a form/JSON/XML `POST`, or a signature in the query.
fn is_signed_notification(req: &Request<'_>) -> bool {
    let posted_body = req.is_method("POST")
        && req.header("content-type").is_some_and(|ct| {
            contains_any_ignore_case(
                ct,
                &[
                    "application/x-www-form-urlencoded",
                    "multipart/form-data",
                    "json",
                    "xml",
                ],
            )
        });
    posted_body || has_signed_param(req)
}

/// Whether the query carries a non-empty gateway signature parameter (any case).
fn has_signed_param(req: &Request<'_>) -> bool {
    req.query().split('&').any(|pair| {
        pair.split_once('=').is_some_and(|(key, value)| {
            !value.is_empty() && SIGNATURE_PARAMS.iter().any(|n| key.eq_ignore_ascii_case(n))
        })
    })
}

/// `<user id>/<token>/<method>` of an inbound webhook.
fn is_webhook(rest: &str) -> bool {
    let mut parts = rest.split('/');
    let user = parts.next().unwrap_or("");
    let token = parts.next().unwrap_or("");
    let method = parts.next().unwrap_or("");
    !user.is_empty()
        && user.bytes().all(|b| b.is_ascii_digit())
        && (8..=64).contains(&token.len())
        && token.bytes().all(|b| b.is_ascii_alphanumeric())
        && !method.is_empty()
}

/// The credentials of an `Authorization: Bearer` header.
fn bearer_token<'a>(req: &Request<'a>) -> Option<&'a str> {
    let (scheme, token) = req.header("authorization")?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// A redirector hit whose `goto` leaves the site and that was not clicked on this site.
fn is_offsite_redirect(req: &Request<'_>) -> bool {
    let Some(goto) = req.query_param("goto") else {
        return false;
    };
    let Some(target) = url_host(&goto) else {
        return false;
    };
    let host = req.host();
    if target.eq_ignore_ascii_case(host) {
        return false;
    }
    let from_here = req
        .header("referer")
        .and_then(url_host)
        .is_some_and(|r| r.eq_ignore_ascii_case(host));
    !from_here
}

/// The host of an absolute (`scheme://host/...`) or protocol-relative (`//host/...`) URL.
fn url_host(url: &str) -> Option<&str> {
    let url = url.trim();
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => url.strip_prefix("//")?,
    };
    let end = rest.find(['/', '?', '#', ':']).unwrap_or(rest.len());
    let host = &rest[..end];
    let host = host.rsplit('@').next().unwrap_or(host);
    (!host.is_empty()).then_some(host)
}

/// Whether query parameter `name` equals `value`.
fn param_is(req: &Request<'_>, name: &str, value: &str) -> bool {
    req.query_param(name)
        .is_some_and(|v| v.eq_ignore_ascii_case(value))
}

/// Whether `file` is a script PHP would execute.
fn is_php(file: &str) -> bool {
    PHP_EXTENSIONS.iter().any(|e| file.ends_with(e))
}

#[cfg(test)]
mod tests {
    use super::Bitrix;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::CrawlerVerification;
    use botgate_ruleset_sdk::testing::*;

    const ONE_C_UA: &str = "1C+Enterprise/8.3";
    const DESKTOP_UA: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) BitrixDesktop/16.0.23.78 Chrome/114.0.5735.289 Safari/537.36";
    const GOOGLEBOT: &str =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

    // Ordinary visitors.

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        // Uploaded images and the core and template assets too, and blog and forum
        // pages: only a post there can be comment spam.
        assert_outside_scope::<Bitrix>(&[
            "/",
            "/blog/2024/06/summer-sale/",
            "/forum/topic/12/",
            "/auth/registration/",
            "/product/blue-mug/",
            "/cart/",
            "/assets/app.js?v=3",
            "/?s=garden+chairs",
            "/upload/iblock/3f2/mug.jpg",
            "/bitrix/js/main/core/core.min.js?1700000000",
            "/local/templates/shop/styles.css",
        ]);
    }

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Bitrix>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn other_applications_php_entry_points_are_outside_the_scope() {
        assert_outside_scope::<Bitrix>(&[
            "/wp-login.php",
            "/index.php?id=1",
            "/remote.php/dav/files/alice/",
            "/wp-content/debug.log",
            "/wp-content/uploads/2024/06/x.php",
        ]);
    }

    #[test]
    fn catalog_page_view_is_left_to_the_classifier() {
        assert_category::<Bitrix>(get("/catalog/phones/iphone-15/").browser(), None);
    }

    #[test]
    fn merged_css_from_the_bitrix_cache_is_left_alone() {
        assert_category::<Bitrix>(
            get("/bitrix/cache/css/s1/main/template_3f1a.css?17000000001234").browser(),
            None,
        );
    }

    #[test]
    fn a_single_browser_login_is_not_an_attack() {
        assert_category::<Bitrix>(post("/personal/?login=yes").browser(), None);
        assert_category::<Bitrix>(post("/bitrix/admin/index.php?login=yes").firefox(), None);
    }

    #[test]
    fn administrator_browsing_the_admin_panel_is_fine() {
        assert_category::<Bitrix>(
            get("/bitrix/admin/iblock_list_admin.php?IBLOCK_ID=2&type=catalog").browser(),
            None,
        );
    }

    // Leaked files and protected directories.

    #[test]
    fn settings_file_and_its_backup_are_probes() {
        assert_category::<Bitrix>(get("/bitrix/.settings.php"), Some(SecurityIssues));
        assert_category::<Bitrix>(
            get("/bitrix/.settings.php.bak").browser(),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn dbconn_and_its_editor_backup_are_probes() {
        assert_category::<Bitrix>(
            get("/bitrix/php_interface/dbconn.php").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
        assert_category::<Bitrix>(get("/dbconn.php~"), Some(SecurityIssues));
    }

    #[test]
    fn backup_archive_download_is_a_probe() {
        assert_category::<Bitrix>(
            get("/bitrix/backup/www.example.com_20240101_120000_full_a1b2c3d4.tar.gz"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn module_sources_and_managed_cache_are_protected() {
        assert_category::<Bitrix>(
            get("/bitrix/modules/main/classes/general/version.php"),
            Some(SecurityIssues),
        );
        assert_category::<Bitrix>(
            get("/bitrix/managed_cache/MYSQL/b_option/8a/8a1b.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn php_in_upload_is_a_web_shell() {
        assert_category::<Bitrix>(get("/upload/iblock/1a2/shell.php"), Some(SecurityIssues));
    }

    #[test]
    fn folder_access_file_is_a_probe() {
        assert_category::<Bitrix>(get("/.access.php"), Some(SecurityIssues));
    }

    #[test]
    fn updater_log_is_a_probe() {
        assert_category::<Bitrix>(get("/bitrix/modules/updater.log"), Some(SecurityIssues));
        assert_category::<Bitrix>(get("/bitrix/php_errors.log"), Some(SecurityIssues));
    }

    // Known exploits and probes.

    #[test]
    fn vote_module_rce_cve_2022_27228_is_an_attack() {
        assert_category::<Bitrix>(
            post("/bitrix/tools/vote/uf.php?attachId[ENTITY_TYPE]=CFileUploader&attachId[ENTITY_ID][events][onUploaderIsInited][]=CAllAgent&attachId[MODULE_ID]=vote&action=vote")
                .machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn leftover_restore_script_probed_by_a_scanner_is_an_attack() {
        assert_category::<Bitrix>(
            get("/restore.php").machine("Go-http-client/1.1"),
            Some(SecurityIssues),
        );
        assert_category::<Bitrix>(get("/bitrixsetup.php").browser(), None);
    }

    #[test]
    fn admin_panel_probed_by_a_script_is_an_attack() {
        assert_category::<Bitrix>(
            get("/bitrix/admin/").machine("Mozilla/5.0 zgrab/0.x"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn verified_crawler_on_the_admin_login_is_left_alone() {
        assert_category::<Bitrix>(
            get("/bitrix/admin/")
                .ua(GOOGLEBOT)
                .crawler(CrawlerVerification::VerifiedSearchEngine),
            None,
        );
    }

    // Brute force.

    #[test]
    fn admin_login_brute_force_is_an_attack() {
        assert_category::<Bitrix>(
            post("/bitrix/admin/index.php?login=yes")
                .browser()
                .behaviour(45, 2, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn scripted_public_login_loop_is_brute_force() {
        assert_category::<Bitrix>(
            post("/auth/?login=yes")
                .machine("python-requests/2.31.0")
                .behaviour(12, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn busy_shopper_logging_in_after_browsing_is_not_brute_force() {
        assert_category::<Bitrix>(
            post("/personal/?login=yes").browser().behaviour(60, 48, 0),
            None,
        );
    }

    // Legitimate machine clients.

    #[test]
    fn one_c_exchange_is_a_service() {
        assert_category::<Bitrix>(
            get("/bitrix/admin/1c_exchange.php?type=catalog&mode=checkauth")
                .machine(ONE_C_UA)
                .header("authorization", "Basic ZXhjaGFuZ2U6c2VjcmV0"),
            Some(ServicesAndPayments),
        );
        assert_category::<Bitrix>(
            post("/bitrix/admin/1c_exchange.php?type=sale&mode=query").machine(ONE_C_UA),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn curl_posing_as_one_c_without_its_user_agent_is_an_admin_probe() {
        assert_category::<Bitrix>(
            get("/bitrix/admin/1c_exchange.php?type=catalog&mode=checkauth").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn payment_gateway_post_notification_is_a_payment() {
        assert_category::<Bitrix>(
            post("/bitrix/tools/sale_ps_result.php")
                .machine("YooKassa")
                .header("content-type", "application/json"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn signed_get_notification_is_a_payment() {
        assert_category::<Bitrix>(
            get("/bitrix/tools/sale_ps_result.php?mdOrder=70906e55&orderNumber=1045&operation=deposited&status=1&checksum=9524FD765FB1BABFB1F42E4BC6EF5A4B")
                .machine("Apache-HttpClient/4.5.13 (Java/1.8.0_292)"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn payment_callback_without_signature_is_not_a_payment() {
        assert_category::<Bitrix>(
            get("/bitrix/tools/sale_ps_result.php?orderNumber=1045").machine("curl/8.5.0"),
            None,
        );
    }

    #[test]
    fn browser_on_the_payment_callback_is_not_a_payment() {
        assert_category::<Bitrix>(
            get("/bitrix/tools/sale_ps_result.php?orderNumber=1045&checksum=ABCDEF").browser(),
            None,
        );
        assert_category::<Bitrix>(
            get("/bitrix/tools/sale_ps_success.php?orderId=1045").browser(),
            None,
        );
    }

    #[test]
    fn inbound_rest_webhook_is_a_service() {
        assert_category::<Bitrix>(
            post("/rest/1/u8v5qpjz1a2b3c4d/crm.lead.add.json")
                .machine("python-requests/2.31.0")
                .header("content-type", "application/json"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn rest_call_without_token_is_not_a_service() {
        assert_category::<Bitrix>(post("/rest/crm.lead.list").machine("curl/8.5.0"), None);
    }

    #[test]
    fn oauth_rest_client_is_a_service() {
        assert_category::<Bitrix>(
            get("/rest/user.current.json?auth=7c5e2c6500561a4b0051e6e2000000010000030b1c9b7f3e")
                .machine("okhttp/4.12.0"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn bitrix24_apps_are_services() {
        assert_category::<Bitrix>(
            post("/desktop_app/im.ajax.php?GET_LAST_MESSAGE").ua(DESKTOP_UA),
            Some(ServicesAndPayments),
        );
        assert_category::<Bitrix>(
            post("/bitrix/services/main/ajax.php?action=mobile.tabs.get")
                .machine("Bitrix24/Janative"),
            Some(ServicesAndPayments),
        );
        // On endpoints that are not PHP files: in the scope by their agents.
        assert_category::<Bitrix>(
            get("/bitrix/subws/?CHANNEL_ID=a1b2c3d4e5f6/1700000000").ua(DESKTOP_UA),
            Some(ServicesAndPayments),
        );
        assert_category::<Bitrix>(
            get("/mobileapp/jn/im.messenger/?version=2").machine("Bitrix24/Janative"),
            Some(ServicesAndPayments),
        );
    }

    // Spam.

    #[test]
    fn scripted_registration_is_spam() {
        assert_category::<Bitrix>(
            post("/auth/?register=yes").machine("Mozilla/4.0 (compatible; MSIE 6.0)"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn registration_burst_from_a_browser_is_spam() {
        assert_category::<Bitrix>(
            post("/auth/?register=yes").browser().behaviour(14, 2, 0),
            Some(SuspiciousBehaviour),
        );
        assert_category::<Bitrix>(post("/auth/?register=yes").browser(), None);
    }

    #[test]
    fn scripted_forum_post_is_spam() {
        assert_category::<Bitrix>(
            post("/forum/messages/forum1/topic12/").machine("libwww-perl/6.72"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn scripted_public_login_once_is_suspicious() {
        assert_category::<Bitrix>(
            post("/auth/?login=yes&backurl=%2Fpersonal%2F").machine("python-requests/2.31.0"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn redirector_to_another_site_from_a_mail_link_is_suspicious() {
        assert_category::<Bitrix>(
            get("/bitrix/redirect.php?event1=news_out&goto=https%3A%2F%2Fcheap-pills.example%2F")
                .browser(),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn banner_click_on_the_site_itself_is_fine() {
        assert_category::<Bitrix>(
            get("/bitrix/rk.php?id=7&goto=https%3A%2F%2Fpartner.example.org%2F")
                .browser()
                .header("referer", "https://www.example.com/news/"),
            None,
        );
    }

    #[test]
    fn info_names_the_component() {
        use botgate_ruleset_sdk::Ruleset;
        assert_eq!(Bitrix::info().name, "bitrix");
    }

    #[test]
    fn sensitive_paths_are_judged_alike_however_spelled() {
        assert_spellings_agree::<Bitrix>(
            |target| get(target).machine("curl/8.5.0"),
            &[
                "/bitrix/.settings.php",
                "/bitrix/.settings.php.bak",
                "/upload/iblock/1a2/shell.php",
                "/.access.php",
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
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Bitrix>(&kinds::probes());
}
