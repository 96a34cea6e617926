//! The Joomla rule set: the attack surface and the legitimate machine traffic of Joomla
//! 3, 4 and 5 and of its popular extensions.
//!
//! The component is read from `?option=com_x` or from a SEF `/component/x/` path.
//! What it recognises, in the order it checks:
//!
//! * Attacks, whoever sends them (`security_issues`):
//!   - `joomla.cve-2023-23752` (95): `?public=true` on the Web Services API
//!     (`/api/index.php/v1/config/application?public=true` leaks the database password).
//!   - `joomla.config-traversal` (95): a path to `configuration.php` in a query
//!     (`../../configuration.php`: the file download/LFI bugs of com_hdflvplayer,
//!     com_macgallery, com_jdownloads and others).
//!   - `joomla.sqli-cve-2017-8917` (95): SQL in `list[fullordering]` of com_fields.
//!   - `joomla.sqli-cve-2015-7297` (95): `list[select]` on com_contenthistory.
//!   - `joomla.cve-2016-8870-register` (90): `task=user.register`, the account-creation
//!     bug of CVE-2016-8869/8870 (the real form uses `registration.register`).
//!   - `joomla.config-backup-probe` (92): `configuration.php~`, `.bak`, `.old`, `.orig`,
//!     `.save`, `.txt`, `-dist`, `.swp`, `configuration.bak`...
//!   - `joomla.config-probe` (85): `configuration.php` itself (it prints nothing; asking is recon).
//!   - `joomla.backup-archive-probe` (92): Akeeba Backup archives (`*.jpa`, `*.jps`,
//!     `*.j01`..) and its default output folder `administrator/components/com_akeeba*/backup/`.
//!   - `joomla.log-probe` (88): `administrator/logs/` and `logs/` (`error.php`, `everything.php`).
//!   - `joomla.extension-exploit-path` (92): known vulnerable extension files
//!     (`com_sexycontactform`/`com_creativecontactform` `fileupload/`, Fox Contact's
//!     `file-uploader.php`, HD FLV Player's `download.php`, `ofc_upload_image.php`,
//!     `com_joomlaupdate/restore.php` of CVE-2014-7228, `mod_simplefileupload`).
//!   - `joomla.upload-dir-php` (92): a PHP script under `images/`, `tmp/`, `cache/` or
//!     `administrator/cache/` (web shells).
//!   - `joomla.internal-php-probe` (85): PHP under `libraries/`, `includes/`, `layouts/`, `cli/`.
//! * Brute force (`security_issues`):
//!   - `joomla.admin-brute-force` (90): the administrator login (`POST /administrator/index.php`
//!     without a component other than `com_login`) repeated 20 times on few paths (10 by a
//!     non-browser).
//!   - `joomla.login-brute-force` (88): the site login (`task=user.login`, com_users' login view).
//! * Legitimate machine traffic (`services_and_payments`), only with the client's marks:
//!   - `joomla.scheduler-webcron` (90): the Task Scheduler's Web Cron,
//!     `?option=com_ajax&plugin=RunSchedulerWebcron&group=system&format=json&hash=<key>`
//!     (or `/component/ajax/?plugin=...`). The lazy scheduler, triggered by browsers'
//!     JavaScript, is left to the classifier.
//!   - `joomla.webservices-api-client` (90): `/api/index.php/v1/...` or `/api/v1/...` with
//!     `X-Joomla-Token` or `Authorization: Bearer` (API token plugin) or `Basic`.
//!   - `joomla.akeeba-frontend-backup` (88): Akeeba Backup's front-end backup URL, called
//!     by cron: `?option=com_akeeba[backup]&view=backup&key=<secret>`.
//!   - `joomla.payment-notify` (90): a payment gateway's notification from a non-browser
//!     (a form/JSON `POST`, or a `GET` with parameters) to VirtueMart
//!     (`view=pluginresponse|vmplg&task=pluginnotification`), HikaShop
//!     (`ctrl=checkout&task=notify&notif_payment=...`) or J2Store/J2Commerce
//!     (`task=confirmPayment&paction=process|callback|notify`).
//! * Probes by scripts (`security_issues`):
//!   - `joomla.admin-probe` (82): a non-browser under `/administrator`.
//!   - `joomla.installer-probe` (88): a non-browser at a leftover `/installation/` or
//!     Akeeba `kickstart.php` (browsers are let through: an administrator installs with one).
//!   - `joomla.extension-exploit-probe` (90): a non-browser calling components with a known
//!     exploit: JCE's `imgmanager` upload, Fabrik's CSV `import`, AdsManager's `upload`,
//!     Joomla 1.5's `com_user` password reset.
//!   - `joomla.api-sensitive-probe` (85): `/v1/config/...` or `/v1/users` on the API without credentials.
//!   - `joomla.version-probe` (80): extension and core manifests (`*.xml` under
//!     `administrator/manifests/`, `components/`, `modules/`, `plugins/`, `templates/`,
//!     `language/`), `README.txt`, `LICENSE.txt`, `htaccess.txt`, `web.config.txt`.
//! * Spam (`suspicious_behaviour`), from a non-browser or a client repeating its `POST`:
//!   - `joomla.registration-spam` (75): `task=registration.register`, com_users' registration view.
//!   - `joomla.contact-spam` (75): `task=contact.submit`, com_contact.
//!   - `joomla.comment-spam` (72): JComments, Komento, CComment, EasyDiscuss, Kunena.
//!   - `joomla.password-reset-abuse` (70): `task=reset.request`, `task=remind.remind`.
//!   - `joomla.scripted-login` (68): a non-browser posting the site login once.
//!   - `joomla.admin-login-scripted` (70): a non-browser posting the administrator login
//!     once (repeated, it is `joomla.admin-brute-force`).
//!
//! Everything else, page views and media included, is left to the classifier, and so
//! is the CVE-2015-8562 session object-injection payload in `User-Agent` or
//! `X-Forwarded-For`, which any path carries (`classifier.php-object-injection`).

use botgate_ruleset_sdk::signals::{
    guessing_passwords, is_scripted, is_verified_crawler, repeating,
};
use botgate_ruleset_sdk::ua::contains_any_ignore_case;
use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

/// The Joomla rule set.
pub struct Joomla;

impl Ruleset for Joomla {
    const SCOPE: &'static [&'static str] = &[
        // The Web Services API (CVE-2023-23752, API clients and probes).
        "/api/",
        // `configuration.php`, its backups, and paths to it in a query.
        "configuration.",
        // `task=user.register`, `user.login`, `registration.register`, `contact.submit`...
        "task=",
        // The component every component rule names: `?option=com_x` or SEF
        // `/component/x/`; `/media/com_x/` assets stay outside.
        "option=com_",
        "/component/",
        // Extension exploit folders (`com_sexycontactform/fileupload/`...).
        "/fileupload/",
        // PHP under the upload, cache and code folders (`administrator/cache/` and
        // `administrator/includes/` are under `/administrator`), not every PHP request
        // (`/wp-login.php`, `/remote.php/dav/`) nor the images there.
        "/images/&.ph",
        "/tmp/&.ph",
        "/cache/&.ph",
        "/libraries/&.ph",
        "/includes/&.ph",
        "/layouts/&.ph",
        "/cli/&.ph",
        // Extension exploit scripts by name (Fox Contact, HD FLV Player, Joomla Update's
        // `restore.php`, Simple File Upload, Open Flash Chart) and Akeeba `kickstart.php`.
        "/file-uploader.php",
        "/hdflvplayer/download.php",
        "/com_joomlaupdate/restore.php",
        "/elements/udd.php",
        "ofc_upload_image.php",
        "kickstart.php",
        // Akeeba Backup archives: `.jpa`, `.jps`, `.j01`...
        ".jpa",
        ".jps",
        ".j0",
        ".j1",
        ".j2",
        ".j3",
        ".j4",
        ".j5",
        ".j6",
        ".j7",
        ".j8",
        ".j9",
        "/administrator",
        "/logs/",
        "/installation",
        // Version fingerprinting: manifests and root files.
        ".xml",
        "/readme.txt",
        "/license.txt",
        "/htaccess.txt",
        "/web.config.txt",
    ];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "joomla",
            "Recognises Joomla CVE probes, configuration and backup leaks, administrator brute force and spam, and its Web Services API, scheduler and payment traffic."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        let component = component(req);
        let component = component.as_deref().unwrap_or("");
        attack(req, component)
            .or_else(|| brute_force(req, component))
            .or_else(|| service(req, component))
            .or_else(|| probe(req, component))
            .or_else(|| spam(req, component))
    }
}

botgate_ruleset_sdk::export_ruleset!(Joomla);

/// Backup names of `configuration.php` that are not caught by the `configuration.php` prefix.
const CONFIG_BACKUPS: &[&str] = &[
    "configuration.bak",
    "configuration.old",
    "configuration.txt",
    "configuration.orig",
    "configuration.save",
];

/// Files of extensions with a known exploit.
const EXPLOIT_PATHS: &[&str] = &[
    "/components/com_sexycontactform/fileupload/",
    "/components/com_creativecontactform/fileupload/",
    "/components/com_foxcontact/lib/file-uploader.php",
    "/components/com_hdflvplayer/hdflvplayer/download.php",
    "/com_joomlaupdate/restore.php",
    "/mod_simplefileuploadv1.3/elements/udd.php",
    "ofc_upload_image.php",
];

/// Folders that hold uploads and caches, never scripts.
const UPLOAD_DIRS: &[&str] = &["/images/", "/tmp/", "/cache/", "/administrator/cache/"];

/// Folders of code that is only ever included.
const INTERNAL_DIRS: &[&str] = &[
    "/libraries/",
    "/includes/",
    "/layouts/",
    "/cli/",
    "/administrator/includes/",
];

/// Extensions a web server may execute as PHP.
const PHP_EXTENSIONS: &[&str] = &[".php", ".phtml", ".php5", ".php7", ".phar", ".pht"];

/// Folders whose `*.xml` manifests give versions away.
const MANIFEST_DIRS: &[&str] = &[
    "/administrator/manifests/",
    "/administrator/components/",
    "/administrator/modules/",
    "/administrator/templates/",
    "/administrator/language/",
    "/components/",
    "/modules/",
    "/plugins/",
    "/templates/",
    "/language/",
];

/// Root files that give the version away.
const VERSION_FILES: &[&str] = &[
    "/readme.txt",
    "/license.txt",
    "/htaccess.txt",
    "/web.config.txt",
    "/joomla.xml",
];

/// Query parameters of the shops' own notification URLs, not sent by the gateway.
const ROUTING_KEYS: &[&str] = &[
    "option",
    "view",
    "ctrl",
    "task",
    "tmpl",
    "format",
    "lang",
    "itemid",
    "notif_payment",
    "notif_id",
    "pm",
    "paction",
    "orderpayment_type",
    "element",
];

/// Comment and forum components.
const COMMENT_COMPONENTS: &[&str] = &[
    "com_jcomments",
    "com_komento",
    "com_comment",
    "com_easydiscuss",
    "com_kunena",
];

/// The component the request addresses: `?option=`, or a SEF `/component/<name>/` path.
fn component(req: &Request<'_>) -> Option<String> {
    if let Some(option) = req.query_param("option") {
        return Some(option.to_ascii_lowercase());
    }
    let path = req.path_lower();
    let at = path.find("/component/")?;
    let name = path[at + "/component/".len()..].split('/').next()?;
    (!name.is_empty()).then(|| format!("com_{name}"))
}

/// Attacks recognised by what is asked for, whoever asks.
fn attack(req: &Request<'_>, component: &str) -> Option<Opinion> {
    let path = req.path_lower();
    let file = req.file_name();
    let query = req.query_lower();
    if is_api(path) && param_is(req, "public", "true") {
        return opinion(Category::SecurityIssues, 95, "joomla.cve-2023-23752");
    }
    // A path to the file (`../../configuration.php`, `/var/www/configuration.php`), not
    // the bare word a visitor might type into a search box.
    if query.contains("/configuration.php") || query.contains("\\configuration.php") {
        return opinion(Category::SecurityIssues, 95, "joomla.config-traversal");
    }
    if component == "com_fields"
        && query_value(query, "list[fullordering]").is_some_and(|v| {
            ["(", "select", "updatexml", "extractvalue", "sleep"]
                .iter()
                .any(|s| v.contains(s))
        })
    {
        return opinion(Category::SecurityIssues, 95, "joomla.sqli-cve-2017-8917");
    }
    if component == "com_contenthistory" && query.contains("list[select]") {
        return opinion(Category::SecurityIssues, 95, "joomla.sqli-cve-2015-7297");
    }
    if task_is(req, "user.register") {
        return opinion(
            Category::SecurityIssues,
            90,
            "joomla.cve-2016-8870-register",
        );
    }
    if (file.starts_with("configuration.php") && file != "configuration.php")
        || file.starts_with(".configuration.php")
        || CONFIG_BACKUPS.contains(&file)
    {
        return opinion(Category::SecurityIssues, 92, "joomla.config-backup-probe");
    }
    if file == "configuration.php" && !is_verified_crawler(req) {
        return opinion(Category::SecurityIssues, 85, "joomla.config-probe");
    }
    if is_akeeba_archive(file)
        || path.contains("/administrator/components/com_akeeba/backup/")
        || path.contains("/administrator/components/com_akeebabackup/backup/")
    {
        return opinion(Category::SecurityIssues, 92, "joomla.backup-archive-probe");
    }
    if (path.starts_with("/administrator/logs/") || path.starts_with("/logs/"))
        && (file.ends_with(".php") || file.ends_with(".log"))
    {
        return opinion(Category::SecurityIssues, 88, "joomla.log-probe");
    }
    if req.path_contains_any(EXPLOIT_PATHS) {
        return opinion(
            Category::SecurityIssues,
            92,
            "joomla.extension-exploit-path",
        );
    }
    let php = PHP_EXTENSIONS.iter().any(|e| file.ends_with(e));
    if php && req.path_starts_with_any(UPLOAD_DIRS) {
        return opinion(Category::SecurityIssues, 92, "joomla.upload-dir-php");
    }
    if php && req.path_starts_with_any(INTERNAL_DIRS) {
        return opinion(Category::SecurityIssues, 85, "joomla.internal-php-probe");
    }
    None
}

/// Password guessing against the administrator and the site login.
fn brute_force(req: &Request<'_>, component: &str) -> Option<Opinion> {
    if !req.is_method("POST") || !guessing_passwords(req) {
        return None;
    }
    if is_admin_login(req, component) {
        return opinion(Category::SecurityIssues, 90, "joomla.admin-brute-force");
    }
    if is_site_login(req, component) {
        return opinion(Category::SecurityIssues, 88, "joomla.login-brute-force");
    }
    None
}

/// Legitimate machine clients, recognised by path, method and their own marks.
fn service(req: &Request<'_>, component: &str) -> Option<Opinion> {
    let method_ok = req.is_method("GET") || req.is_method("POST") || req.is_method("HEAD");
    if component == "com_ajax"
        && method_ok
        && param_is(req, "plugin", "RunSchedulerWebcron")
        && req.query_param("hash").is_some_and(|h| h.len() >= 8)
    {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "joomla.scheduler-webcron",
        );
    }
    if is_api(req.path_lower()) && has_api_token(req) {
        return opinion(
            Category::ServicesAndPayments,
            90,
            "joomla.webservices-api-client",
        );
    }
    if (component == "com_akeeba" || component == "com_akeebabackup")
        && method_ok
        && param_is(req, "view", "backup")
        && req.query_param("key").is_some_and(|k| !k.is_empty())
    {
        return opinion(
            Category::ServicesAndPayments,
            88,
            "joomla.akeeba-frontend-backup",
        );
    }
    if is_payment_notify(req, component) && !req.is_browser() && is_notification(req) {
        return opinion(Category::ServicesAndPayments, 90, "joomla.payment-notify");
    }
    None
}

/// Probes that are only attacks when a script sends them.
fn probe(req: &Request<'_>, component: &str) -> Option<Opinion> {
    if !is_scripted(req) {
        return None;
    }
    let path = req.path_lower();
    if is_api(path)
        && !has_api_token(req)
        && (path.contains("/v1/config") || path.contains("/v1/users"))
    {
        return opinion(Category::SecurityIssues, 85, "joomla.api-sensitive-probe");
    }
    if is_extension_exploit(req, component) {
        return opinion(
            Category::SecurityIssues,
            90,
            "joomla.extension-exploit-probe",
        );
    }
    if path == "/installation"
        || path.starts_with("/installation/")
        || req.file_name() == "kickstart.php"
    {
        return opinion(Category::SecurityIssues, 88, "joomla.installer-probe");
    }
    if req.is_method("POST") && is_admin_login(req, component) {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "joomla.admin-login-scripted",
        );
    }
    let manifest = req.file_name().ends_with(".xml") && req.path_starts_with_any(MANIFEST_DIRS);
    if manifest || VERSION_FILES.contains(&path) {
        return opinion(Category::SecurityIssues, 80, "joomla.version-probe");
    }
    if path == "/administrator" || path.starts_with("/administrator/") {
        return opinion(Category::SecurityIssues, 82, "joomla.admin-probe");
    }
    None
}

/// Registration, contact, comment and password-reset spam.
fn spam(req: &Request<'_>, component: &str) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    let scripted = !req.is_browser();
    if !scripted && !repeating(req, 10) {
        return None;
    }
    if task_is(req, "registration.register")
        || (component == "com_users" && param_is(req, "view", "registration"))
        || req.path_lower().contains("/component/users/registration")
    {
        return opinion(
            Category::SuspiciousBehaviour,
            75,
            "joomla.registration-spam",
        );
    }
    if task_is(req, "contact.submit") || component == "com_contact" {
        return opinion(Category::SuspiciousBehaviour, 75, "joomla.contact-spam");
    }
    if COMMENT_COMPONENTS.contains(&component) {
        return opinion(Category::SuspiciousBehaviour, 72, "joomla.comment-spam");
    }
    if task_is(req, "reset.request") || task_is(req, "remind.remind") {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "joomla.password-reset-abuse",
        );
    }
    if scripted && is_site_login(req, component) {
        return opinion(Category::SuspiciousBehaviour, 68, "joomla.scripted-login");
    }
    None
}

/// The administrator login posts to `/administrator/index.php` with `option=com_login` in
/// the body; other back-end forms carry their component in the query.
fn is_admin_login(req: &Request<'_>, component: &str) -> bool {
    matches!(
        req.path_lower(),
        "/administrator" | "/administrator/" | "/administrator/index.php"
    ) && (component.is_empty() || component == "com_login")
}

/// The site login: `task=user.login`, or com_users' login view.
fn is_site_login(req: &Request<'_>, component: &str) -> bool {
    !req.path_lower().starts_with("/administrator")
        && (task_is(req, "user.login")
            || (component == "com_users" && param_is(req, "view", "login")))
}

/// The Web Services API entry point (`/api/index.php/v1/...`, or `/api/v1/...` rewritten).
fn is_api(path: &str) -> bool {
    path.strip_prefix("/api/")
        .is_some_and(|rest| rest.starts_with("index.php/v1/") || rest.starts_with("v1/"))
}

/// `X-Joomla-Token`, or `Authorization: Bearer` / `Basic` with credentials.
fn has_api_token(req: &Request<'_>) -> bool {
    req.header("x-joomla-token").is_some_and(|t| !t.is_empty())
        || req.header("authorization").is_some_and(|v| {
            v.split_once(' ').is_some_and(|(scheme, creds)| {
                (scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("basic"))
                    && !creds.trim().is_empty()
            })
        })
}

/// The notification endpoints of VirtueMart, HikaShop and J2Store/J2Commerce.
fn is_payment_notify(req: &Request<'_>, component: &str) -> bool {
    match component {
        "com_virtuemart" => {
            (param_is(req, "view", "pluginresponse") || param_is(req, "view", "vmplg"))
                && task_is(req, "pluginnotification")
        }
        "com_hikashop" => {
            param_is(req, "ctrl", "checkout")
                && task_is(req, "notify")
                && req
                    .query_param("notif_payment")
                    .is_some_and(|p| !p.is_empty())
        }
        "com_j2store" | "com_j2commerce" => {
            task_is(req, "confirmPayment")
                && ["process", "callback", "notify"]
                    .iter()
                    .any(|a| param_is(req, "paction", a))
        }
        _ => false,
    }
}

/// A gateway notification: a form/JSON/XML `POST`, or a `GET` carrying at least two
/// parameters beyond the shop's own routing ones (the gateway's transaction data).
fn is_notification(req: &Request<'_>) -> bool {
    let posted = req.is_method("POST")
        && req.header("content-type").is_some_and(|ct| {
            contains_any_ignore_case(ct, &["application/x-www-form-urlencoded", "json", "xml"])
        });
    let gateway_params = req
        .query()
        .split('&')
        .filter(|pair| {
            let key = pair.split_once('=').map_or(*pair, |(k, _)| k);
            !key.is_empty() && !ROUTING_KEYS.iter().any(|r| key.eq_ignore_ascii_case(r))
        })
        .count();
    posted || (req.is_method("GET") && gateway_params >= 2)
}

/// Extension calls with a published exploit, as scanners send them.
fn is_extension_exploit(req: &Request<'_>, component: &str) -> bool {
    match component {
        "com_jce" => param_is(req, "plugin", "imgmanager"),
        "com_fabrik" => param_is(req, "c", "import") || param_is(req, "view", "import"),
        "com_adsmanager" => task_is(req, "upload"),
        "com_user" => true,
        _ => false,
    }
}

/// Akeeba Backup archives: `.jpa`, `.jps` and split parts `.j01`, `.j02`...
fn is_akeeba_archive(file: &str) -> bool {
    let Some((_, ext)) = file.rsplit_once('.') else {
        return false;
    };
    ext == "jpa"
        || ext == "jps"
        || (ext.len() == 3 && ext.starts_with('j') && ext[1..].bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the `task` parameter is `task` (Joomla compares tasks case-insensitively).
fn task_is(req: &Request<'_>, task: &str) -> bool {
    param_is(req, "task", task)
}

/// Whether query parameter `name` equals `value`, ignoring ASCII case.
fn param_is(req: &Request<'_>, name: &str, value: &str) -> bool {
    req.query_param(name)
        .is_some_and(|v| v.eq_ignore_ascii_case(value))
}

/// The value of `key` in a decoded, lower-case query (for bracketed keys the SDK's
/// exact-name lookup would have to spell percent-encoded).
fn query_value<'q>(query: &'q str, key: &str) -> Option<&'q str> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::Joomla;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::testing::*;

    const API_TOKEN: &str = "c2hhMjU2OjQyMzphMWIyYzNkNGU1ZjZhN2I4YzlkMGUxZjJhM2I0YzVkNmU3Zjg=";

    // Ordinary visitors.

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Joomla>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        // Images and media assets too.
        assert_outside_scope::<Joomla>(ORDINARY_PAGES);
        assert_outside_scope::<Joomla>(&[
            "/images/banners/summer.jpg",
            "/media/com_content/js/admin-articles.min.js",
        ]);
    }

    #[test]
    fn other_applications_entry_points_are_outside_the_scope() {
        // Other applications' PHP entry points and logins: no Joomla rule answers them.
        assert_outside_scope::<Joomla>(&[
            "/wp-login.php",
            "/index.php?id=1%27%20UNION%20SELECT%20NULL,NULL--",
            "/remote.php/dav/files/alice/",
            "/wp-admin/admin-ajax.php",
            "/xmlrpc.php",
            "/user/login",
        ]);
    }

    #[test]
    fn article_view_is_left_to_the_classifier() {
        assert_category::<Joomla>(
            get("/index.php?option=com_content&view=article&id=12&catid=2").browser(),
            None,
        );
        assert_category::<Joomla>(get("/blog/welcome-to-joomla").firefox(), None);
    }

    #[test]
    fn images_and_media_are_left_alone() {
        assert_category::<Joomla>(get("/images/banners/summer.jpg").browser(), None);
        assert_category::<Joomla>(get("/media/system/js/core.min.js?5.1.0").browser(), None);
    }

    #[test]
    fn a_single_browser_administrator_login_is_not_an_attack() {
        assert_category::<Joomla>(post("/administrator/index.php").browser(), None);
    }

    #[test]
    fn administrator_saving_an_article_is_fine() {
        assert_category::<Joomla>(
            post("/administrator/index.php?option=com_content&view=article&layout=edit&id=12")
                .browser()
                .behaviour(40, 25, 0),
            None,
        );
    }

    // Leaks and exploits.

    #[test]
    fn cve_2023_23752_config_leak_is_an_attack() {
        assert_category::<Joomla>(
            get("/api/index.php/v1/config/application?public=true")
                .machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn cve_2023_23752_is_an_attack_even_with_a_token() {
        assert_category::<Joomla>(
            get("/api/v1/users?public=true")
                .machine("curl/8.5.0")
                .header("x-joomla-token", API_TOKEN),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn configuration_backups_are_probes() {
        assert_category::<Joomla>(get("/configuration.php~"), Some(SecurityIssues));
        assert_category::<Joomla>(
            get("/configuration.php.bak").browser(),
            Some(SecurityIssues),
        );
        assert_category::<Joomla>(get("/configuration.old"), Some(SecurityIssues));
        assert_category::<Joomla>(get("/.configuration.php.swp"), Some(SecurityIssues));
    }

    #[test]
    fn configuration_php_itself_is_a_probe() {
        assert_category::<Joomla>(
            get("/configuration.php").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn com_fields_sqli_cve_2017_8917_is_an_attack() {
        assert_category::<Joomla>(
            get(
                "/index.php?option=com_fields&view=fields&layout=modal&list[fullordering]=updatexml(0x23,concat(1,user()),1)",
            ),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn config_file_download_through_an_extension_is_an_attack() {
        assert_category::<Joomla>(
            get("/index.php?option=com_macgallery&view=download&albumid=../../configuration.php"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn searching_for_the_word_configuration_php_is_fine() {
        assert_category::<Joomla>(
            get("/index.php?option=com_search&searchword=configuration.php").browser(),
            None,
        );
    }

    #[test]
    fn registration_bypass_cve_2016_8870_is_an_attack() {
        assert_category::<Joomla>(
            post("/index.php/component/users/?task=user.register")
                .machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn akeeba_backup_archive_is_a_probe() {
        assert_category::<Joomla>(
            get(
                "/administrator/components/com_akeeba/backup/site-www.example.com-20240101-120000utc.jpa",
            ),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn web_shell_in_images_is_an_attack() {
        assert_category::<Joomla>(get("/images/stories/food/shell.php"), Some(SecurityIssues));
    }

    #[test]
    fn php_in_upload_cache_and_code_folders_is_an_attack() {
        for path in [
            "/tmp/x.php",
            "/cache/mod_menu/x.phtml",
            "/administrator/cache/x.php5",
            "/libraries/src/Factory.php",
            "/includes/defines.php",
            "/administrator/includes/framework.php",
            "/layouts/joomla/content/x.pht",
            "/cli/joomla.php",
        ] {
            assert_category::<Joomla>(get(path).browser(), Some(SecurityIssues));
        }
    }

    #[test]
    fn known_vulnerable_extension_files_are_attacks() {
        // Each by its own marker: none of these paths has another one.
        for path in [
            "/components/com_sexycontactform/fileupload/index.php",
            "/components/com_foxcontact/lib/file-uploader.php",
            "/components/com_hdflvplayer/hdflvplayer/download.php",
            "/components/com_joomlaupdate/restore.php",
            "/modules/mod_simplefileuploadv1.3/elements/udd.php",
            "/php-ofc-library/ofc_upload_image.php",
        ] {
            assert_category::<Joomla>(get(path).browser(), Some(SecurityIssues));
        }
        assert_category::<Joomla>(
            post("/administrator/components/com_joomlaupdate/restore.php")
                .machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn kickstart_is_a_probe_from_a_script_only() {
        assert_category::<Joomla>(
            get("/kickstart.php").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
        assert_category::<Joomla>(get("/kickstart.php").browser(), None);
    }

    #[test]
    fn jce_upload_exploit_by_a_script_is_an_attack() {
        assert_category::<Joomla>(
            post("/index.php?option=com_jce&task=plugin&plugin=imgmanager&file=imgmanager&method=form&cid=20")
                .machine("BOT/0.1 (BOT for JCE)"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn installer_and_manifests_probed_by_scripts_are_attacks() {
        assert_category::<Joomla>(
            get("/installation/index.php").machine("Go-http-client/1.1"),
            Some(SecurityIssues),
        );
        assert_category::<Joomla>(
            get("/administrator/manifests/files/joomla.xml").machine("JoomScan"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn admin_panel_probed_by_a_script_is_an_attack() {
        assert_category::<Joomla>(
            get("/administrator/").machine("curl/8.5.0"),
            Some(SecurityIssues),
        );
    }

    // Brute force.

    #[test]
    fn administrator_brute_force_is_an_attack() {
        assert_category::<Joomla>(
            post("/administrator/index.php")
                .browser()
                .behaviour(60, 2, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn one_scripted_administrator_login_is_suspicious() {
        assert_category::<Joomla>(
            post("/administrator/index.php").machine("python-requests/2.31.0"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn site_login_brute_force_is_an_attack() {
        assert_category::<Joomla>(
            post("/component/users/?task=user.login")
                .machine("Mozilla/5.0 (compatible)")
                .behaviour(20, 1, 0),
            Some(SecurityIssues),
        );
    }

    // Legitimate machine clients.

    #[test]
    fn scheduler_web_cron_is_a_service() {
        assert_category::<Joomla>(
            get("/index.php?option=com_ajax&plugin=RunSchedulerWebcron&group=system&format=json&hash=8f4c2a61d9b3e7f0")
                .machine("curl/8.5.0"),
            Some(ServicesAndPayments),
        );
        assert_category::<Joomla>(
            get("/component/ajax/?plugin=RunSchedulerWebcron&group=system&format=json&hash=8f4c2a61d9b3e7f0")
                .machine("Wget/1.21.4"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn web_cron_without_hash_is_not_a_service() {
        assert_category::<Joomla>(
            get("/index.php?option=com_ajax&plugin=RunSchedulerWebcron&group=system&format=json")
                .machine("curl/8.5.0"),
            None,
        );
    }

    #[test]
    fn api_client_with_joomla_token_is_a_service() {
        assert_category::<Joomla>(
            get("/api/index.php/v1/content/articles")
                .machine("python-requests/2.31.0")
                .header("x-joomla-token", API_TOKEN),
            Some(ServicesAndPayments),
        );
        assert_category::<Joomla>(
            post("/api/v1/content/articles")
                .machine("n8n")
                .header("authorization", &format!("Bearer {API_TOKEN}"))
                .header("content-type", "application/json"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn api_call_without_a_token_is_not_a_service() {
        assert_category::<Joomla>(
            get("/api/index.php/v1/content/articles").machine("python-requests/2.31.0"),
            None,
        );
        assert_category::<Joomla>(
            get("/api/index.php/v1/users").machine("python-requests/2.31.0"),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn virtuemart_paypal_ipn_is_a_payment() {
        assert_category::<Joomla>(
            post("/index.php?option=com_virtuemart&view=vmplg&task=pluginNotification&tmpl=component")
                .machine("PayPal IPN ( https://www.paypal.com/ipn )")
                .header("content-type", "application/x-www-form-urlencoded"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn hikashop_notification_is_a_payment() {
        assert_category::<Joomla>(
            post("/index.php?option=com_hikashop&ctrl=checkout&task=notify&notif_payment=paypal&tmpl=component")
                .machine("PayPal IPN ( https://www.paypal.com/ipn )")
                .header("content-type", "application/x-www-form-urlencoded"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn bare_get_of_the_notify_url_is_not_a_payment() {
        assert_category::<Joomla>(
            get("/index.php?option=com_hikashop&ctrl=checkout&task=notify&notif_payment=paypal&tmpl=component")
                .machine("curl/8.5.0"),
            None,
        );
    }

    #[test]
    fn signed_get_notification_is_a_payment() {
        assert_category::<Joomla>(
            get("/index.php?option=com_j2store&view=checkout&task=confirmPayment&orderpayment_type=payment_sberbank&paction=callback&mdOrder=70906e55&orderNumber=1045&checksum=9524FD76")
                .machine("Apache-HttpClient/4.5.13 (Java/1.8.0_292)"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn customer_returning_to_the_shop_is_not_a_payment() {
        assert_category::<Joomla>(
            get("/index.php?option=com_virtuemart&view=vmplg&task=pluginNotification&tmpl=component&on=A1B2")
                .browser(),
            None,
        );
    }

    #[test]
    fn akeeba_frontend_backup_from_cron_is_a_service() {
        assert_category::<Joomla>(
            get("/index.php?option=com_akeeba&view=Backup&key=Sup3rS3cretK3y&profile=1")
                .machine("Wget/1.21.4"),
            Some(ServicesAndPayments),
        );
    }

    // Spam.

    #[test]
    fn scripted_registration_is_spam() {
        assert_category::<Joomla>(
            post("/index.php?option=com_users&task=registration.register")
                .machine("Mozilla/4.0 (compatible; MSIE 6.0)"),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn contact_form_burst_is_spam() {
        assert_category::<Joomla>(
            post("/index.php?option=com_contact&task=contact.submit&id=1")
                .browser()
                .behaviour(16, 2, 0),
            Some(SuspiciousBehaviour),
        );
    }

    #[test]
    fn one_browser_contact_message_is_fine() {
        assert_category::<Joomla>(
            post("/index.php?option=com_contact&task=contact.submit&id=1").browser(),
            None,
        );
    }

    #[test]
    fn info_names_the_component() {
        use botgate_ruleset_sdk::Ruleset;
        assert_eq!(Joomla::info().name, "joomla");
    }

    #[test]
    fn sensitive_paths_are_judged_alike_however_spelled() {
        assert_spellings_agree::<Joomla>(
            |target| get(target).machine("curl/8.5.0"),
            &[
                "/configuration.php.bak",
                "/configuration.php~",
                "/images/stories/food/shell.php",
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
    botgate_ruleset_sdk::testing::kinds::assert_kinds::<Joomla>(&kinds::probes());
}
