//! The DokuWiki rule set: the attack surface and the legitimate machine traffic of DokuWiki.
//!
//! Paths are matched wherever the wiki is installed (`/doku.php` or `/wiki/doku.php`).
//! What it recognises, in the order it checks:
//!
//! * Attacks, whoever sends them (`security_issues`):
//!   - `dokuwiki.config-cascade-lfi` (95): a `config_cascade` query parameter, the
//!     CVE-2009-1960 local file inclusion.
//!   - `dokuwiki.user-db-probe` (95): `users.auth.php` (the plain-auth user database with
//!     password hashes) or `acl.auth.php`, and their backups, anywhere.
//!   - `dokuwiki.config-probe` (90): PHP or `.conf` files in `conf/` (`local.php`,
//!     `local.protected.php`, `plugins.local.php`, `dokuwiki.php`, backups of them...).
//!   - `dokuwiki.data-dir-probe` (90): direct access to `data/pages/` (raw page source,
//!     bypassing ACLs), `data/attic/`, `data/meta/`, `data/media/`, `data/media_meta/`,
//!     `data/media_attic/`, `data/cache/`, `data/index/`, `data/locks/`, `data/tmp/`, `data/log/`.
//!     `data/security.png`, which the admin page loads to test that `data/` is
//!     protected, is left alone.
//!   - `dokuwiki.internal-dir-probe` (85): PHP under `inc/`, `bin/` (the CLI tools) or `vendor/`.
//!   - `dokuwiki.path-traversal-probe` (90): `../` in the query of `doku.php` or a `lib/exe/` script.
//!   - `dokuwiki.fetch-ssrf-probe` (88): `lib/exe/fetch.php?media=<external URL>` without
//!     the `tok` DokuWiki signs its own external-media links with.
//!   - `dokuwiki.legacy-exploit-probe` (88): `lib/exe/spellcheck.php` (CVE-2006-2878, removed long ago).
//! * Brute force (`security_issues`): `dokuwiki.login-brute-force` (86), an anonymous
//!   client (no `DW<md5>` auth cookie) repeating `POST`s to the wiki 20 times on few paths
//!   (10 by a non-browser) — the login form posts to `doku.php?id=<page>` with `do=login`
//!   in the body; and `dokuwiki.rpc-brute-force` (85), an anonymous client repeating
//!   XML-RPC/JSON-RPC calls (`dokuwiki.login` guessing).
//! * Legitimate machine traffic (`services_and_payments`), only with the client's marks:
//!   - `dokuwiki.xmlrpc-client` (88) / `dokuwiki.jsonrpc-client` (88): a `POST` to
//!     `lib/exe/xmlrpc.php` or `lib/exe/jsonrpc.php` with an XML/JSON body and credentials
//!     (`Authorization: Basic`/`Bearer`, or the auth cookie of an earlier `dokuwiki.login`).
//!   - `dokuwiki.taskrunner-cron` (85): a cron job (`Wget`, `curl`, cron-job.org, EasyCron)
//!     fetching `lib/exe/taskrunner.php` (or its old name `indexer.php`). Browsers load it
//!     as an image on every page; they are left to the classifier.
//! * Probes by scripts (`security_issues`):
//!   - `dokuwiki.installer-probe` (88): a non-browser asking for `install.php`.
//!   - `dokuwiki.version-probe` (80): a non-browser asking for the `VERSION` file.
//!   - `dokuwiki.admin-probe` (80): a non-browser reading `?do=admin`.
//! * Spam (`suspicious_behaviour`), from a non-browser or a client repeating its `POST`:
//!   - `dokuwiki.registration-spam` (75): `do=register`.
//!   - `dokuwiki.password-reset-abuse` (70): `do=resendpwd`.
//!   - `dokuwiki.scripted-post` (70): any other non-browser `POST` to the wiki (page edits,
//!     discussion comments, login attempts), which real editors make from a browser.
//!
//! Everything else, page views, media and the web-bug included, is left to the classifier.

use botgate_ruleset_sdk::signals::{authorization, guessing_passwords, is_scripted, repeating};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

/// The DokuWiki rule set.
pub struct Dokuwiki;

impl Ruleset for Dokuwiki {
    const SCOPE: &'static [&'static str] = &[
        // CVE-2009-1960 (`?config_cascade[...]`), `users.auth.php`, `acl.auth.php`.
        "config_cascade",
        ".auth.php",
        // conf/, data/ and the code folders.
        "/conf/",
        "/data/",
        "/inc/",
        "/bin/",
        "/vendor/",
        // fetch.php, spellcheck.php, XML-RPC, JSON-RPC, taskrunner.php.
        "/lib/exe/",
        "/install.php",
        // The release file `/VERSION`.
        "/version",
        // The front controller and page URLs with `do` or `id` (login brute force,
        // scripted posts, `do=admin`, `do=register`, `do=resendpwd`); `is_wiki_entry`
        // counts them only with a value.
        "doku.php",
        "do=",
        "id=",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "dokuwiki",
            "Recognises DokuWiki conf/ and data/ leaks, exploit probes, login brute force and edit spam, and its XML-RPC, JSON-RPC and cron traffic."
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

botgate_ruleset_sdk::export_ruleset!(Dokuwiki);

/// Sub-directories of `data/`, all denied by DokuWiki's `.htaccess`.
const DATA_DIRS: &[&str] = &[
    "/data/pages/",
    "/data/attic/",
    "/data/meta/",
    "/data/media/",
    "/data/media_meta/",
    "/data/media_attic/",
    "/data/cache/",
    "/data/index/",
    "/data/locks/",
    "/data/tmp/",
    "/data/log/",
];

/// User agents of cron jobs and cron services.
const CRON_AGENTS: &[&str] = &["Wget/", "curl/", "cron-job.org", "EasyCron"];

/// URL schemes `fetch.php` must not be pointed at by strangers.
const EXTERNAL_MEDIA: &[&str] = &[
    "http://", "https://", "ftp://", "//", "file:", "gopher:", "dict:",
];

/// Attacks recognised by what is asked for, whoever asks.
fn attack(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let file = req.file_name();
    if req.query_lower().contains("config_cascade") {
        return opinion(Category::SecurityIssues, 95, "dokuwiki.config-cascade-lfi");
    }
    if file.starts_with("users.auth.php") || file.starts_with("acl.auth.php") {
        return opinion(Category::SecurityIssues, 95, "dokuwiki.user-db-probe");
    }
    if path.contains("/conf/") && (file.contains(".php") || file.ends_with(".conf")) {
        return opinion(Category::SecurityIssues, 90, "dokuwiki.config-probe");
    }
    if req.path_contains_any(DATA_DIRS) {
        return opinion(Category::SecurityIssues, 90, "dokuwiki.data-dir-probe");
    }
    if (path.contains("/inc/") || path.contains("/bin/") || path.contains("/vendor/"))
        && file.contains(".php")
    {
        return opinion(Category::SecurityIssues, 85, "dokuwiki.internal-dir-probe");
    }
    let script = exe_script(path);
    if (script.is_some() || file == "doku.php") && req.query_lower().contains("../") {
        return opinion(
            Category::SecurityIssues,
            90,
            "dokuwiki.path-traversal-probe",
        );
    }
    match script {
        Some("fetch.php") if is_unsigned_external_fetch(req) => {
            opinion(Category::SecurityIssues, 88, "dokuwiki.fetch-ssrf-probe")
        }
        Some("spellcheck.php") => opinion(
            Category::SecurityIssues,
            88,
            "dokuwiki.legacy-exploit-probe",
        ),
        _ => None,
    }
}

/// Password guessing against the login form or the RPC `dokuwiki.login` call.
fn brute_force(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") || has_auth_cookie(req) || !guessing_passwords(req) {
        return None;
    }
    if is_rpc(req).is_some() {
        if authorization(req, "basic").is_none() && authorization(req, "bearer").is_none() {
            return opinion(Category::SecurityIssues, 85, "dokuwiki.rpc-brute-force");
        }
        return None;
    }
    if is_wiki_entry(req) {
        return opinion(Category::SecurityIssues, 86, "dokuwiki.login-brute-force");
    }
    None
}

/// Legitimate machine clients, recognised by path, method and their own marks.
fn service(req: &Request<'_>) -> Option<Opinion> {
    if let Some(rpc) = is_rpc(req) {
        let authenticated = authorization(req, "basic").is_some()
            || authorization(req, "bearer").is_some()
            || has_auth_cookie(req);
        let body = req.header("content-type").is_some_and(|ct| {
            contains_any_ignore_case(ct, if rpc == Rpc::Xml { &["xml"] } else { &["json"] })
        });
        if req.is_method("POST") && authenticated && body {
            return match rpc {
                Rpc::Xml => opinion(Category::ServicesAndPayments, 88, "dokuwiki.xmlrpc-client"),
                Rpc::Json => opinion(Category::ServicesAndPayments, 88, "dokuwiki.jsonrpc-client"),
            };
        }
    }
    if matches!(
        exe_script(req.path_lower()),
        Some("taskrunner.php" | "indexer.php")
    ) && (req.is_method("GET") || req.is_method("HEAD"))
        && contains_any_ignore_case(req.user_agent(), CRON_AGENTS)
    {
        return opinion(
            Category::ServicesAndPayments,
            85,
            "dokuwiki.taskrunner-cron",
        );
    }
    None
}

/// Probes that are only attacks when a script sends them.
fn probe(req: &Request<'_>) -> Option<Opinion> {
    if !is_scripted(req) {
        return None;
    }
    if req.file_name() == "install.php" {
        return opinion(Category::SecurityIssues, 88, "dokuwiki.installer-probe");
    }
    // The release file is upper case; page ids are always lower case, so no page clashes.
    if req.path().ends_with("/VERSION") {
        return opinion(Category::SecurityIssues, 80, "dokuwiki.version-probe");
    }
    if req.is_read() && do_is(req, "admin") {
        return opinion(Category::SecurityIssues, 80, "dokuwiki.admin-probe");
    }
    None
}

/// Registration, password-reset and edit spam.
fn spam(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    let scripted = !req.is_browser();
    if !scripted && !repeating(req, 10) {
        return None;
    }
    if do_is(req, "register") {
        return opinion(
            Category::SuspiciousBehaviour,
            75,
            "dokuwiki.registration-spam",
        );
    }
    if do_is(req, "resendpwd") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "dokuwiki.password-reset-abuse",
        );
    }
    if scripted && is_wiki_entry(req) {
        return opinion(Category::SuspiciousBehaviour, 70, "dokuwiki.scripted-post");
    }
    None
}

/// The two remote APIs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rpc {
    Xml,
    Json,
}

/// Which remote API the request addresses, if any.
fn is_rpc(req: &Request<'_>) -> Option<Rpc> {
    match exe_script(req.path_lower()) {
        Some("xmlrpc.php") => Some(Rpc::Xml),
        Some("jsonrpc.php") => Some(Rpc::Json),
        _ => None,
    }
}

/// The script name of a `lib/exe/<script>[/<path info>]` request (JSON-RPC takes the
/// method as path info: `lib/exe/jsonrpc.php/core.getPage`).
fn exe_script(path: &str) -> Option<&str> {
    let at = path.rfind("/lib/exe/")?;
    let script = path[at + "/lib/exe/".len()..].split('/').next()?;
    script.ends_with(".php").then_some(script)
}

/// A request to the wiki's front controller: `doku.php`, or a rewritten page URL
/// carrying DokuWiki's `do` or `id` parameter with a value (DokuWiki always sends one;
/// a bare `?id` is not its, and the scope's `do=` / `id=` markers rely on the value).
fn is_wiki_entry(req: &Request<'_>) -> bool {
    let valued = |name| req.query_param(name).is_some_and(|v| !v.is_empty());
    req.file_name() == "doku.php" || valued("do") || valued("id")
}

/// Whether the `do` action is `action`.
fn do_is(req: &Request<'_>, action: &str) -> bool {
    req.query_param("do")
        .is_some_and(|d| d.eq_ignore_ascii_case(action))
}

/// `fetch.php?media=<external URL>` without DokuWiki's signing `tok`.
fn is_unsigned_external_fetch(req: &Request<'_>) -> bool {
    let external = req.query_param("media").is_some_and(|m| {
        let m = m.trim_start();
        EXTERNAL_MEDIA
            .iter()
            .any(|s| m.get(..s.len()).is_some_and(|p| p.eq_ignore_ascii_case(s)))
    });
    external && req.query_param("tok").is_none_or(|t| t.is_empty())
}

/// Whether the client holds DokuWiki's auth cookie, `DW` + the md5 of the base path.
fn has_auth_cookie(req: &Request<'_>) -> bool {
    req.header_values("cookie").any(|line| {
        line.split(';').any(|pair| {
            let name = pair.split_once('=').map_or(pair, |(n, _)| n).trim();
            name.len() == 34
                && name.starts_with("DW")
                && name[2..].bytes().all(|b| b.is_ascii_hexdigit())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::Dokuwiki;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::testing::*;

    const AUTH_COOKIE: &str =
        "DokuWiki=8k2m0fqv1d3b; DW68700bfd16c2027de7de74a5a8202a6f=YWxpY2U%3D%7C0%7CZmFrZQ%3D%3D";

    // Ordinary visitors.

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Dokuwiki>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        assert_outside_scope::<Dokuwiki>(ORDINARY_PAGES);
        assert_outside_scope::<Dokuwiki>(&["/lib/tpl/dokuwiki/images/logo.png"]);
    }

    #[test]
    fn reading_a_page_is_left_to_the_classifier() {
        assert_category::<Dokuwiki>(get("/doku.php?id=wiki:syntax").browser(), None);
        assert_category::<Dokuwiki>(get("/wiki/start").firefox(), None);
    }

    #[test]
    fn media_and_web_bug_loaded_by_a_browser_are_fine() {
        assert_category::<Dokuwiki>(
            get("/lib/exe/fetch.php?w=300&tok=4b1e3a&media=wiki:dokuwiki-128.png").browser(),
            None,
        );
        assert_category::<Dokuwiki>(
            get("/lib/exe/taskrunner.php?id=start&1700000000").browser(),
            None,
        );
    }

    #[test]
    fn admin_security_check_image_is_not_a_data_probe() {
        assert_category::<Dokuwiki>(get("/data/security.png").browser(), None);
    }

    #[test]
    fn a_single_browser_login_is_not_an_attack() {
        assert_category::<Dokuwiki>(post("/doku.php?id=start").browser(), None);
    }

    #[test]
    fn signed_external_image_proxy_is_fine() {
        assert_category::<Dokuwiki>(
            get("/lib/exe/fetch.php?tok=9f3ab1&media=https%3A%2F%2Fexample.org%2Flogo.png")
                .browser(),
            None,
        );
    }

    // Leaks and exploits.

    #[test]
    fn user_database_is_a_probe() {
        assert_category::<Dokuwiki>(get("/conf/users.auth.php"), Some(SecurityIssues));
        assert_category::<Dokuwiki>(
            get("/wiki/conf/users.auth.php.bak").browser(),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn local_config_backup_is_a_probe() {
        assert_category::<Dokuwiki>(get("/conf/local.php~"), Some(SecurityIssues));
    }

    #[test]
    fn raw_page_source_in_data_is_a_probe() {
        assert_category::<Dokuwiki>(
            get("/data/pages/private/salaries.txt"),
            Some(SecurityIssues),
        );
        assert_category::<Dokuwiki>(
            get("/wiki/data/attic/start.1700000000.txt.gz"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn cli_tools_are_protected() {
        assert_category::<Dokuwiki>(get("/bin/dwpage.php"), Some(SecurityIssues));
    }

    #[test]
    fn config_cascade_lfi_is_an_attack() {
        assert_category::<Dokuwiki>(
            get("/doku.php?config_cascade[main][default][]=/etc/passwd"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn unsigned_external_fetch_is_ssrf() {
        assert_category::<Dokuwiki>(
            get("/lib/exe/fetch.php?media=http://169.254.169.254/latest/meta-data/")
                .machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn media_path_traversal_is_an_attack() {
        assert_category::<Dokuwiki>(
            get("/lib/exe/fetch.php?media=..%2F..%2Fconf%2Flocal.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn installer_and_version_probed_by_scripts_are_attacks() {
        assert_category::<Dokuwiki>(
            get("/install.php").machine("Go-http-client/1.1"),
            Some(SecurityIssues),
        );
        assert_category::<Dokuwiki>(
            get("/VERSION").machine("Nuclei - Open-source project"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn admin_page_read_by_a_script_is_a_probe() {
        assert_category::<Dokuwiki>(
            get("/doku.php?id=start&do=admin").machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    // Brute force.

    #[test]
    fn login_brute_force_is_an_attack() {
        assert_category::<Dokuwiki>(
            post("/doku.php?id=start").browser().behaviour(40, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn rpc_login_guessing_is_brute_force() {
        assert_category::<Dokuwiki>(
            post("/lib/exe/xmlrpc.php")
                .machine("python-requests/2.31.0")
                .header("content-type", "text/xml")
                .behaviour(60, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn logged_in_editor_saving_often_is_not_brute_force() {
        assert_category::<Dokuwiki>(
            post("/doku.php?id=projects:roadmap")
                .browser()
                .header("cookie", AUTH_COOKIE)
                .behaviour(30, 3, 0),
            None,
        );
    }

    // Legitimate machine clients.

    #[test]
    fn authenticated_xmlrpc_client_is_a_service() {
        assert_category::<Dokuwiki>(
            post("/lib/exe/xmlrpc.php")
                .machine("DokuWikiXMLRPC/1.0")
                .header("content-type", "text/xml")
                .header("authorization", "Basic Ym90OnNlY3JldA=="),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn sync_client_with_session_cookie_keeps_syncing_as_a_service() {
        assert_category::<Dokuwiki>(
            post("/wiki/lib/exe/xmlrpc.php")
                .machine("python-requests/2.31.0")
                .header("content-type", "text/xml")
                .header("cookie", AUTH_COOKIE)
                .behaviour(90, 1, 0),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn jsonrpc_token_client_is_a_service() {
        assert_category::<Dokuwiki>(
            post("/lib/exe/jsonrpc.php/core.getPage")
                .machine("node-fetch/3.3")
                .header("content-type", "application/json")
                .header(
                    "authorization",
                    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJkb2t1d2lraSJ9.c2ln",
                ),
            Some(ServicesAndPayments),
        );
        assert_category::<Dokuwiki>(
            post("/lib/exe/jsonrpc.php")
                .machine("node-fetch/3.3")
                .header("content-type", "application/json")
                .header(
                    "authorization",
                    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJkb2t1d2lraSJ9.c2ln",
                ),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn rpc_call_without_credentials_is_not_a_service() {
        assert_category::<Dokuwiki>(
            post("/lib/exe/xmlrpc.php")
                .machine("python-requests/2.31.0")
                .header("content-type", "text/xml"),
            None,
        );
    }

    #[test]
    fn cron_taskrunner_is_a_service() {
        assert_category::<Dokuwiki>(
            get("/lib/exe/taskrunner.php?id=start").machine("Wget/1.21.4"),
            Some(ServicesAndPayments),
        );
    }

    // Spam.

    #[test]
    fn scripted_registration_is_spam() {
        assert_category::<Dokuwiki>(
            post("/doku.php?id=start&do=register").machine("Mozilla/4.0 (compatible; MSIE 7.0)"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn scripted_page_edit_is_spam() {
        assert_category::<Dokuwiki>(
            post("/doku.php?id=playground:playground").machine("libwww-perl/6.72"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn scripted_post_to_a_rewritten_page_url_is_spam() {
        assert_category::<Dokuwiki>(
            post("/playground/playground?do=edit&id=playground:playground")
                .machine("libwww-perl/6.72"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn bare_do_or_id_keys_are_not_dokuwiki() {
        // DokuWiki always gives `do` and `id` a value: a bare key is another site's.
        assert_category::<Dokuwiki>(post("/api/items?id").machine("libwww-perl/6.72"), None);
        assert_category::<Dokuwiki>(post("/shop/cart?do").machine("libwww-perl/6.72"), None);
    }

    #[test]
    fn info_names_the_component() {
        use botgate_ruleset_sdk::Ruleset;
        assert_eq!(Dokuwiki::info().name, "dokuwiki");
    }

    #[test]
    fn sensitive_paths_are_judged_alike_however_spelled() {
        assert_spellings_agree::<Dokuwiki>(
            |target| get(target).machine("curl/8.5.0"),
            &[
                "/conf/users.auth.php",
                "/conf/local.php~",
                "/bin/dwpage.php",
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
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Dokuwiki>(&kinds::probes());
}
