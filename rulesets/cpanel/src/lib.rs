//! The cPanel rule set: the attack surface and the legitimate machine traffic of cPanel &
//! WHM hosting, both on the websites of a cPanel account and on its service subdomains
//! (`cpanel.`, `whm.`, `webmail.`) when they are routed through the gateway.
//!
//! What it recognises, in the order it checks:
//!
//! * Attacks, whoever sends them (`security_issues`):
//!   - `cpanel.webcall-xss-probe` (95): markup in a `/cpanelwebcall/` path, the
//!     CVE-2023-29489 reflected XSS in cpsrvd (a real webcall id is 32 letters `a-z`).
//!   - `cpanel.home-dir-leak-probe` (90): the account's home directory seen through a
//!     misconfigured document root: `/.cpanel/`, `/.cphorde/`, `/.cpaddons/`,
//!     `/.htpasswds/`, `/.spamassassin/`, `/.trash/`, `/.cagefs/`, `/.cl.selector/`,
//!     `/.softaculous/`, `/softaculous_backups/`, `/access-logs/`, `/public_ftp/`,
//!     `/public_html/`, `/tmp/awstats/`, `/tmp/webalizer/`, `/tmp/analog/`, mail account
//!     files `/etc/<domain>/shadow|passwd|quota`, and `/.my.cnf`, `/.lastlogin`,
//!     `/.contactemail`, `/.accesshash`, `/.ftpquota`, `/cpbackup-exclude.conf`.
//!   - `cpanel.backup-archive-probe` (92): a cPanel account backup,
//!     `backup-<date>_<user>.tar.gz`.
//!   - `cpanel.legacy-cgi-probe` (88): long-removed `/cgi-sys/` scripts scanners still
//!     try (`entropysearch.cgi`, `entropybanner.cgi`, `guestbook.cgi`, `addalink.cgi`,
//!     `mchat.cgi`, `randhtml.cgi`).
//!   - `cpanel.formmail-relay-probe` (85): `/cgi-sys/FormMail.cgi` (and its clones) called
//!     with a `recipient` in the query: testing the form mailer as an open relay.
//!   - `cpanel.server-status-probe` (85): `/whm-server-status` (Apache's status page,
//!     meant for localhost only) from a public address.
//!   - `cpanel.theme-path-probe` (85): `/frontend/<cPanel theme>/...` without a
//!     `/cpsess<token>/` prefix: old exploit paths of the x3, paper_lantern and jupiter themes.
//! * Brute force (`security_issues`):
//!   - `cpanel.login-brute-force` (90): the cPanel/WHM/Webmail login,
//!     `POST /login/?login_only=1`, repeated 20 times on few paths (10 by a non-browser).
//!   - `cpanel.api-basic-brute-force` (88): HTTP Basic credentials on the APIs repeated 30 times.
//!   - `cpanel.mailman-admin-brute-force` (85): repeated `POST /mailman/admin/<list>`.
//! * Legitimate machine traffic (`services_and_payments`), only with the client's marks:
//!   - `cpanel.autossl-dcv` (92): AutoSSL domain-control validation, a `GET` of
//!     `/.well-known/pki-validation/<MD5>.txt`, `/<MD5>.txt` or
//!     `/.well-known/acme-challenge/<token>` by `Cpanel-HTTP-Client` (cPanel's own
//!     pre-check), `SECTIGO DCV`, `COMODO DCV` or the Let's Encrypt validation server.
//!   - `cpanel.uapi-token-client` (92): UAPI / cPanel API 2 calls (`/execute/`,
//!     `/json-api/`, `/xml-api/`) with `Authorization: cpanel <user>:<token>`.
//!   - `cpanel.whm-api-token-client` (92): WHM API calls with `Authorization: whm <user>:<token>`
//!     (billing systems such as WHMCS create and suspend accounts this way).
//!   - `cpanel.dynamic-dns-webcall` (88): a Dynamic DNS update, `/cpanelwebcall/<32 letters>`.
//! * Probes by scripts (`security_issues`):
//!   - `cpanel.panel-probe` (80): a non-browser at `/cpanel`, `/whm`, `/webmail`,
//!     `/3rdparty/`, or a `/cpsess<token>/` path without a session cookie.
//!   - `cpanel.api-unauthenticated-probe` (80): a non-browser at `/execute/`, `/json-api/`
//!     or `/xml-api/` with neither credentials nor a session cookie.
//! * Spam (`suspicious_behaviour`), from a non-browser or a client repeating its `POST`:
//!   - `cpanel.formmail-spam` (75): posts to FormMail, `cgiemail` or `cgiecho`.
//!   - `cpanel.mailman-subscribe-spam` (72): subscription bombing of `/mailman/subscribe/<list>`.
//!   - `cpanel.password-reset-abuse` (70): posts to `/resetpass`.
//!   - `cpanel.scripted-login` (70): a non-browser posting the panel login once (a
//!     script may log in once; repeated, it is `cpanel.login-brute-force`).
//!
//! Everything else is left to the classifier.

use botgate_ruleset_sdk::signals::{authorization, guessing_passwords, is_scripted, repeating};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

/// The cPanel rule set.
pub struct Cpanel;

impl Ruleset for Cpanel {
    const SCOPE: &'static [&'static str] = &[
        // Home-directory dot folders and files (`/.cpanel/`, `/.my.cnf`...).
        "/.",
        // The panels, `/cpanelwebcall/`, `/whm-server-status`, session paths.
        "/cpanel",
        "/whm",
        "/webmail",
        "/3rdparty",
        "/cpsess",
        // The rest of the home directory.
        "/softaculous_backups",
        "/access-logs",
        "/public_",
        "/tmp/awstats",
        "/tmp/webalizer",
        "/tmp/analog",
        "/cpbackup-exclude.conf",
        "/etc/",
        // Account backups, `backup-<date>_<user>.tar.gz`.
        "/backup-",
        "/cgi-sys/",
        "/frontend/",
        // The panel login, `/login/?login_only=1`.
        "login_only",
        // The APIs.
        "/execute/",
        "/json-api/",
        "/xml-api/",
        "/mailman/",
        "/resetpass",
        // AutoSSL domain-control validation (DCV_AGENTS, matched ignoring case): the
        // check needs one of these agents, so `/<md5>.txt` needs no `.txt` marker.
        "ua:cpanel-http-client",
        "ua:sectigo dcv",
        "ua:comodo dcv",
        "ua:let's encrypt validation server",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "cpanel",
            "Recognises cPanel & WHM exploit paths, home-directory leaks and login brute force, and its AutoSSL, API-token and Dynamic DNS traffic."
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

botgate_ruleset_sdk::export_ruleset!(Cpanel);

/// Home-directory folders and files that are never part of a website.
const HOME_DIRS: &[&str] = &[
    "/.cpanel/",
    "/.cphorde/",
    "/.cpaddons/",
    "/.htpasswds/",
    "/.spamassassin/",
    "/.trash/",
    "/.cagefs/",
    "/.cl.selector/",
    "/.softaculous/",
    "/softaculous_backups/",
    "/access-logs/",
    "/public_ftp/",
    "/public_html/",
    "/tmp/awstats/",
    "/tmp/webalizer/",
    "/tmp/analog/",
];

/// Home-directory files that hold credentials or account details.
const HOME_FILES: &[&str] = &[
    "/.my.cnf",
    "/.lastlogin",
    "/.contactemail",
    "/.accesshash",
    "/.ftpquota",
    "/cpbackup-exclude.conf",
];

/// `/cgi-sys/` scripts cPanel removed long ago.
const LEGACY_CGIS: &[&str] = &[
    "entropysearch.cgi",
    "entropybanner.cgi",
    "guestbook.cgi",
    "addalink.cgi",
    "mchat.cgi",
    "randhtml.cgi",
];

/// The form mailers cPanel ships under `/cgi-sys/`.
const FORM_MAILERS: &[&str] = &[
    "formmail.cgi",
    "formmail.pl",
    "formmail-clone.cgi",
    "formmail",
];

/// cPanel themes past and present.
const THEMES: &[&str] = &[
    "x",
    "x2",
    "x3",
    "x3mail",
    "xmail",
    "xcontroller",
    "rvblue",
    "monsoon",
    "bluelagoon",
    "paper_lantern",
    "jupiter",
];

/// The user agents of domain-control validation.
const DCV_AGENTS: &[&str] = &[
    "Cpanel-HTTP-Client",
    "SECTIGO DCV",
    "COMODO DCV",
    "Let's Encrypt validation server",
];

/// Attacks recognised by what is asked for, whoever asks.
fn attack(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let file = req.file_name();
    if let Some(id) = path.strip_prefix("/cpanelwebcall/")
        && (id.contains(['<', '>', '"', '\'', '(']) || id.contains("javascript:"))
    {
        return opinion(Category::SecurityIssues, 95, "cpanel.webcall-xss-probe");
    }
    if is_home_dir_leak(path, file) {
        return opinion(Category::SecurityIssues, 90, "cpanel.home-dir-leak-probe");
    }
    if file.starts_with("backup-") && file.ends_with(".tar.gz") && file.contains('_') {
        return opinion(Category::SecurityIssues, 92, "cpanel.backup-archive-probe");
    }
    if let Some(cgi) = path.strip_prefix("/cgi-sys/") {
        if LEGACY_CGIS.iter().any(|c| cgi.starts_with(c)) {
            return opinion(Category::SecurityIssues, 88, "cpanel.legacy-cgi-probe");
        }
        if FORM_MAILERS.contains(&file) && req.query_lower().contains("recipient=") {
            return opinion(Category::SecurityIssues, 85, "cpanel.formmail-relay-probe");
        }
    }
    if (path == "/whm-server-status" || path.starts_with("/whm-server-status/"))
        && !req.client_is_private()
    {
        return opinion(Category::SecurityIssues, 85, "cpanel.server-status-probe");
    }
    if let Some(rest) = path.strip_prefix("/frontend/")
        && THEMES.contains(&rest.split('/').next().unwrap_or(""))
    {
        return opinion(Category::SecurityIssues, 85, "cpanel.theme-path-probe");
    }
    None
}

/// Password guessing against the panel login, the APIs and Mailman.
fn brute_force(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    if req.is_method("POST") && is_panel_login(req) && guessing_passwords(req) {
        return opinion(Category::SecurityIssues, 90, "cpanel.login-brute-force");
    }
    if is_api_path(path) && authorization(req, "basic").is_some() && repeating(req, 30) {
        return opinion(Category::SecurityIssues, 88, "cpanel.api-basic-brute-force");
    }
    if req.is_method("POST") && path.starts_with("/mailman/admin") && guessing_passwords(req) {
        return opinion(
            Category::SecurityIssues,
            85,
            "cpanel.mailman-admin-brute-force",
        );
    }
    None
}

/// Legitimate machine clients, recognised by path, method and their own marks.
fn service(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    if (req.is_method("GET") || req.is_method("HEAD"))
        && is_dcv_file(path)
        && contains_any_ignore_case(req.user_agent(), DCV_AGENTS)
    {
        return opinion(Category::ServicesAndPayments, 92, "cpanel.autossl-dcv");
    }
    if is_api_path(path) {
        if authorization(req, "cpanel").is_some_and(is_user_token) {
            return opinion(
                Category::ServicesAndPayments,
                92,
                "cpanel.uapi-token-client",
            );
        }
        if authorization(req, "whm").is_some_and(is_user_token) {
            return opinion(
                Category::ServicesAndPayments,
                92,
                "cpanel.whm-api-token-client",
            );
        }
    }
    // The webcall id is checked on the raw path: it is exactly 32 lower-case letters.
    if let Some(id) = req.path().strip_prefix("/cpanelwebcall/")
        && is_webcall_id(id.strip_suffix('/').unwrap_or(id))
        && (req.is_method("GET") || req.is_method("POST") || req.is_method("HEAD"))
    {
        return opinion(
            Category::ServicesAndPayments,
            88,
            "cpanel.dynamic-dns-webcall",
        );
    }
    None
}

/// Probes that are only attacks when a script sends them.
fn probe(req: &Request<'_>) -> Option<Opinion> {
    if !is_scripted(req) {
        return None;
    }
    let path = req.path_lower();
    if req.is_method("POST") && is_panel_login(req) {
        return opinion(Category::SuspiciousBehaviour, 70, "cpanel.scripted-login");
    }
    let panel = ["/cpanel", "/whm", "/webmail", "/3rdparty"]
        .iter()
        .any(|p| is_dir(path, p));
    let bare_session = session_rest(path).is_some() && !req.has_header("cookie");
    if panel || bare_session {
        return opinion(Category::SecurityIssues, 80, "cpanel.panel-probe");
    }
    if is_api_path(path) && !req.has_header("authorization") && !req.has_header("cookie") {
        return opinion(
            Category::SecurityIssues,
            80,
            "cpanel.api-unauthenticated-probe",
        );
    }
    None
}

/// Form-mail, mailing-list and password-reset abuse.
fn spam(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") || (req.is_browser() && !repeating(req, 10)) {
        return None;
    }
    let path = req.path_lower();
    if let Some(cgi) = path.strip_prefix("/cgi-sys/")
        && (FORM_MAILERS.contains(&req.file_name())
            || cgi.starts_with("cgiemail")
            || cgi.starts_with("cgiecho"))
    {
        return opinion(Category::SuspiciousBehaviour, 75, "cpanel.formmail-spam");
    }
    if path.starts_with("/mailman/subscribe/") {
        return opinion(
            Category::SuspiciousBehaviour,
            72,
            "cpanel.mailman-subscribe-spam",
        );
    }
    if is_dir(path, "/resetpass") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "cpanel.password-reset-abuse",
        );
    }
    None
}

/// Whether the path reaches into the account's home directory.
fn is_home_dir_leak(path: &str, file: &str) -> bool {
    HOME_DIRS
        .iter()
        .any(|d| path.starts_with(d) || path == &d[..d.len() - 1])
        || HOME_FILES.contains(&path)
        || (path.starts_with("/etc/") && matches!(file, "shadow" | "passwd" | "quota"))
}

/// `POST /login/?login_only=1`: the login form of cPanel, WHM and Webmail.
fn is_panel_login(req: &Request<'_>) -> bool {
    is_dir(req.path_lower(), "/login") && req.has_query_param("login_only")
}

/// The API entry points of cpsrvd.
fn is_api_path(path: &str) -> bool {
    path.starts_with("/execute/") || path.starts_with("/json-api/") || path.starts_with("/xml-api/")
}

/// Whether `path` is `dir` itself or something under it.
fn is_dir(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// What follows a `/cpsess<digits>` session prefix.
fn session_rest(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/cpsess")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| &rest[digits..])
}

/// Whether the path is a domain-control validation file.
fn is_dcv_file(path: &str) -> bool {
    if let Some(name) = path.strip_prefix("/.well-known/pki-validation/") {
        return is_md5_txt(name);
    }
    if let Some(token) = path.strip_prefix("/.well-known/acme-challenge/") {
        return token.len() >= 16
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    }
    path.strip_prefix('/').is_some_and(is_md5_txt)
}

/// `<32 hex digits>.txt`, the Sectigo DCV file name.
fn is_md5_txt(name: &str) -> bool {
    name.strip_suffix(".txt")
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A cPanel webcall id: exactly 32 lower-case ASCII letters.
fn is_webcall_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_lowercase())
}

/// `<user>:<token>`, both present.
fn is_user_token(value: &str) -> bool {
    value
        .split_once(':')
        .is_some_and(|(user, token)| !user.is_empty() && !token.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::Cpanel;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::testing::*;

    const LE_UA: &str =
        "Mozilla/5.0 (compatible; Let's Encrypt validation server; +https://www.letsencrypt.org)";
    const WEBCALL_ID: &str = "qwertyuiopasdfghjklzxcvbnmqwerty";

    // Ordinary visitors.

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Cpanel>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        assert_outside_scope::<Cpanel>(ORDINARY_PAGES);
        assert_outside_scope::<Cpanel>(&["/robots.txt"]);
    }

    #[test]
    fn website_page_view_is_left_to_the_classifier() {
        assert_category::<Cpanel>(get("/about-us/").browser(), None);
    }

    #[test]
    fn a_single_browser_login_to_cpanel_is_not_an_attack() {
        assert_category::<Cpanel>(post("/login/?login_only=1").browser(), None);
    }

    #[test]
    fn user_working_in_a_cpanel_session_is_fine() {
        assert_category::<Cpanel>(
            get("/cpsess4471948357/frontend/jupiter/index.html")
                .browser()
                .header("cookie", "cpsession=alice%3aXYZ"),
            None,
        );
    }

    #[test]
    fn suspended_and_default_pages_are_left_alone() {
        assert_category::<Cpanel>(get("/cgi-sys/suspendedpage.cgi").browser(), None);
    }

    // Leaks and exploit paths.

    #[test]
    fn webcall_xss_cve_2023_29489_is_an_attack() {
        assert_category::<Cpanel>(
            get("/cpanelwebcall/%3Cimg%20src=x%20onerror=%22prompt(1)%22%3Eaaaaaaaaaaaa")
                .machine("Mozilla/5.0 httpx"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn home_directory_config_is_a_leak_probe() {
        assert_category::<Cpanel>(
            get("/.cpanel/datastore/_usr_bin_mysql_-V"),
            Some(SecurityIssues),
        );
        assert_category::<Cpanel>(get("/.cphorde/meta/latest"), Some(SecurityIssues));
        assert_category::<Cpanel>(get("/.my.cnf").browser(), Some(SecurityIssues));
    }

    #[test]
    fn mail_account_shadow_file_is_a_leak_probe() {
        assert_category::<Cpanel>(get("/etc/example.com/shadow"), Some(SecurityIssues));
    }

    #[test]
    fn account_backup_archive_is_a_probe() {
        assert_category::<Cpanel>(
            get("/backup-1.15.2025_03-10-22_exampleu.tar.gz"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn old_theme_path_without_session_is_an_exploit_probe() {
        assert_category::<Cpanel>(
            get("/frontend/x3/filemanager/showfile.html?file=../../../../etc/passwd"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn app_frontend_directory_is_not_mistaken_for_a_cpanel_theme() {
        assert_category::<Cpanel>(get("/frontend/web/index.php").browser(), None);
    }

    #[test]
    fn legacy_cgi_is_an_exploit_probe() {
        assert_category::<Cpanel>(
            get("/cgi-sys/entropysearch.cgi?query=%3Cscript%3Ealert(1)%3C/script%3E"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn formmail_relay_test_is_an_attack() {
        assert_category::<Cpanel>(
            get("/cgi-sys/FormMail.cgi?recipient=victim@example.net&subject=hi"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn server_status_from_outside_is_a_probe_but_localhost_is_fine() {
        assert_category::<Cpanel>(get("/whm-server-status"), Some(SecurityIssues));
        assert_category::<Cpanel>(
            get("/whm-server-status?auto")
                .machine("Cpanel-HTTP-Client/1.0")
                .ip("127.0.0.1"),
            None,
        );
    }

    // Brute force and probes.

    #[test]
    fn login_brute_force_is_an_attack() {
        assert_category::<Cpanel>(
            post("/login/?login_only=1").browser().behaviour(50, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn one_scripted_panel_login_is_suspicious() {
        assert_category::<Cpanel>(
            post("/login/?login_only=1").machine("python-requests/2.31.0"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn basic_auth_guessing_on_the_api_is_brute_force() {
        assert_category::<Cpanel>(
            get("/json-api/listaccts?api.version=1")
                .machine("curl/8.5.0")
                .header("authorization", "Basic cm9vdDpodW50ZXIy")
                .behaviour(80, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn unauthenticated_api_call_by_a_script_is_a_probe() {
        assert_category::<Cpanel>(
            get("/json-api/listaccts?api.version=1").machine("Go-http-client/1.1"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn scanner_fetching_the_cpanel_redirect_is_a_probe() {
        assert_category::<Cpanel>(
            get("/cpanel").machine("Mozilla/5.0 zgrab/0.x"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn mailman_admin_password_guessing_is_brute_force() {
        assert_category::<Cpanel>(
            post("/mailman/admin/news_example.com")
                .machine("curl/8.5.0")
                .behaviour(25, 1, 0),
            Some(SecurityIssues),
        );
    }

    // Legitimate machine clients.

    #[test]
    fn autossl_local_dcv_check_is_a_service() {
        assert_category::<Cpanel>(
            get("/.well-known/pki-validation/4221C402112E4831C72C2E004614C47C.txt")
                .machine("Cpanel-HTTP-Client/1.0")
                .http(),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn sectigo_and_lets_encrypt_validation_are_services() {
        assert_category::<Cpanel>(
            get("/.well-known/pki-validation/4F571E4CB76F46E37B8118CEA1DB42BA.txt")
                .machine("SECTIGO DCV"),
            Some(ServicesAndPayments),
        );
        assert_category::<Cpanel>(
            get("/.well-known/acme-challenge/I2I61_4DQ3KA_0XG9NMR937P1-57Z3XQ").machine(LE_UA),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn sectigo_dcv_file_at_the_document_root_is_a_service() {
        assert_category::<Cpanel>(
            get("/4F571E4CB76F46E37B8118CEA1DB42BA.txt").machine("SECTIGO DCV"),
            Some(ServicesAndPayments),
        );
        assert_category::<Cpanel>(
            get("/4F571E4CB76F46E37B8118CEA1DB42BA.txt").machine("curl/8.5.0"),
            None,
        );
    }

    #[test]
    fn dcv_path_fetched_by_an_unknown_client_is_not_claimed() {
        assert_category::<Cpanel>(
            get("/.well-known/pki-validation/4221C402112E4831C72C2E004614C47C.txt")
                .machine("curl/8.5.0"),
            None,
        );
    }

    #[test]
    fn uapi_token_client_is_a_service() {
        assert_category::<Cpanel>(
            get("/execute/Email/list_pops")
                .machine("python-requests/2.31.0")
                .header(
                    "authorization",
                    "cpanel exampleu:U7HMR63FHY282DQZ4H5BIH16JLYSO01M",
                ),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn whm_token_from_a_billing_system_is_a_service() {
        assert_category::<Cpanel>(
            get("/json-api/createacct?api.version=1&username=newuser&domain=new.example")
                .machine("WHMCS/8.10")
                .header("authorization", "whm root:GGF4ZI7PCTU3DV2TK7E4X1S8A9K1XW0J"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn api_path_with_a_token_scheme_but_no_token_is_not_a_service() {
        assert_category::<Cpanel>(
            get("/json-api/listaccts?api.version=1")
                .machine("curl/8.5.0")
                .header("authorization", "whm root:"),
            None,
        );
    }

    #[test]
    fn dynamic_dns_webcall_is_a_service() {
        assert_category::<Cpanel>(
            get(&format!("/cpanelwebcall/{WEBCALL_ID}")).machine("ddclient/3.11.2"),
            Some(ServicesAndPayments),
        );
    }

    // Spam.

    #[test]
    fn scripted_formmail_post_is_spam() {
        assert_category::<Cpanel>(
            post("/cgi-sys/FormMail.cgi")
                .machine("Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn browser_submitting_the_site_contact_form_once_is_fine() {
        assert_category::<Cpanel>(post("/cgi-sys/FormMail.cgi").browser(), None);
    }

    #[test]
    fn mailman_subscription_bombing_is_spam() {
        assert_category::<Cpanel>(
            post("/mailman/subscribe/news_example.com")
                .browser()
                .behaviour(30, 1, 0),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn info_names_the_component() {
        use botgate_ruleset_sdk::Ruleset;
        assert_eq!(Cpanel::info().name, "cpanel");
    }

    #[test]
    fn sensitive_paths_are_judged_alike_however_spelled() {
        assert_spellings_agree::<Cpanel>(
            |target| get(target).machine("curl/8.5.0"),
            &[
                "/.my.cnf",
                "/.cphorde/meta/latest",
                "/whm-server-status?auto",
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
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Cpanel>(&kinds::probes());
}
