//! Probes of WordPress files and exploit paths: attacks whoever sends them.

use crate::rest_route;
use botgate_ruleset_sdk::signals::{is_php_file, param};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Backup and log locations of WordPress and its best-known backup plugins.
const BACKUP_DIRS: &[&str] = &[
    "/wp-content/uploads/wc-logs/",
    "/wp-content/updraft/",
    "/wp-content/ai1wm-backups/",
    "/wp-content/backups-dup-lite/",
    "/wp-content/backups-dup-pro/",
    "/wp-content/backup-db/",
    "/wp-content/uploads/backwpup",
    "/wp-content/backup-guard/",
    "/wp-content/uploads/backup-guard/",
    "/dup-installer/",
];

/// Exploit paths of widely scanned plugin vulnerabilities, with their reason ids.
const PLUGIN_EXPLOITS: &[(&str, &str)] = &[
    // CVE-2020-25213: unauthenticated upload through elFinder's connector.
    (
        "/wp-content/plugins/wp-file-manager/lib/php/connector.minimal.php",
        "wordpress.file-manager-exploit",
    ),
    (
        "/wp-content/plugins/wp-file-manager/lib/files/",
        "wordpress.file-manager-exploit",
    ),
    // Revolution Slider: shells dropped by the update_plugin upload.
    (
        "/wp-content/plugins/revslider/temp/update_extract/",
        "wordpress.revslider-exploit",
    ),
    // Simple File List: unauthenticated upload and rename to .php.
    (
        "/wp-content/plugins/simple-file-list/ee-upload-engine.php",
        "wordpress.simple-file-list-exploit",
    ),
    (
        "/wp-content/plugins/simple-file-list/ee-file-engine.php",
        "wordpress.simple-file-list-exploit",
    ),
    // CVE-2023-6553: Backup Migration remote code execution.
    (
        "/wp-content/plugins/backup-backup/includes/backup-heart.php",
        "wordpress.backup-migration-exploit",
    ),
    // CVE-2024-27956: WP Automatic SQL injection.
    (
        "/wp-content/plugins/wp-automatic/inc/csv.php",
        "wordpress.wp-automatic-exploit",
    ),
    // Mail Masta local file inclusion (count_of_send.php?pl=, csvexport.php?pl=).
    (
        "/wp-content/plugins/mail-masta/inc/",
        "wordpress.mail-masta-lfi",
    ),
    // CVE-2018-7422: Site Editor local file inclusion.
    (
        "/wp-content/plugins/site-editor/editor/extensions/pagebuilder/includes/ajax_shortcode_pattern.php",
        "wordpress.site-editor-lfi",
    ),
    // WP Mobile Detector remote file upload via resize.php?src=.
    (
        "/wp-content/plugins/wp-mobile-detector/resize.php",
        "wordpress.mobile-detector-exploit",
    ),
    // FormCraft unauthenticated file upload.
    (
        "/wp-content/plugins/formcraft/file-upload/server/php/",
        "wordpress.formcraft-upload-exploit",
    ),
    // WP Symposium unauthenticated file upload.
    (
        "/wp-content/plugins/wp-symposium/server/php/",
        "wordpress.wp-symposium-upload-exploit",
    ),
];

/// The opinion on probes of WordPress files and exploit paths, if the request is one.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    config_probe(req)
        .or_else(|| leak_probe(req))
        .or_else(|| installer_probe(req))
        .or_else(|| exploit_probe(req))
        .or_else(|| fingerprint_probe(req))
}

/// Whether a file name is `wp-config` with an extension, a backup suffix or an editor's
/// mark: `wp-config.php`, `wp-config.php.bak`, `wp-config.php~`, `.wp-config.php.swp`,
/// `wp-config.old`, `wp-config-sample.php`, `wp-config_backup.php`. A post slug such as
/// `wp-config-explained` or `how-to-edit-wp-config` is not one.
fn is_config_file(name: &str) -> bool {
    let Some(rest) = name.trim_start_matches('.').strip_prefix("wp-config") else {
        return false;
    };
    rest.starts_with(['.', '~', '_'])
        || ["-sample", "-backup", "-bak", "-old", "-orig", "-copy"]
            .iter()
            .any(|s| rest.starts_with(s))
}

/// `wp-config.php`, its backups and swap files, and parameters pointing at it.
fn config_probe(req: &Request<'_>) -> Option<Opinion> {
    let name = req.file_name();
    if is_config_file(name) {
        // wp-config.php and wp-config-sample.php execute and print nothing, but nobody
        // but a scanner asks for them; a backup or swap file is served as text.
        if name.starts_with("wp-config") && name.ends_with(".php") {
            return opinion(Category::SecurityIssues, 85, "wordpress.config-probe");
        }
        return opinion(
            Category::SecurityIssues,
            95,
            "wordpress.config-backup-probe",
        );
    }
    // ?img=../wp-config.php, ?file=../../wp-config.php, ?path=wp-config.php: LFI
    // attempts. A search (`?s=`) for it on a blog about WordPress is not.
    let pointing = req.query_lower().split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or(("", pair));
        key != "s" && value.contains("wp-config")
    });
    if pointing {
        return opinion(Category::SecurityIssues, 95, "wordpress.config-traversal");
    }
    None
}

/// Leaked logs, database dumps, migration archives and web shells in uploads.
fn leak_probe(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let name = req.file_name();
    if !path.contains("/wp-content/") && !path.contains("/dup-installer/") {
        return match name {
            // Duplicator's copy of its installer, left behind after a migration.
            "installer-backup.php" => {
                opinion(Category::SecurityIssues, 90, "wordpress.backup-probe")
            }
            // Duplicator's installer itself, run by an admin's browser during a move.
            "installer.php" if !req.is_browser() => {
                opinion(Category::SecurityIssues, 85, "wordpress.backup-probe")
            }
            _ => None,
        };
    }
    if name == "debug.log" {
        return opinion(Category::SecurityIssues, 95, "wordpress.debug-log-probe");
    }
    if req.path_contains_any(BACKUP_DIRS)
        || req.path_ends_with_any(&[".sql", ".sql.gz", ".sql.zip", ".wpress"])
    {
        return opinion(Category::SecurityIssues, 90, "wordpress.backup-probe");
    }
    if path.contains("/wp-content/uploads/") && is_php_file(name) {
        return opinion(Category::SecurityIssues, 90, "wordpress.uploads-php-probe");
    }
    None
}

/// The installer (hijacks unconfigured sites) and maintenance scripts, from scripts: an
/// administrator installs, upgrades and repairs with a browser.
fn installer_probe(req: &Request<'_>) -> Option<Opinion> {
    if req.path_ends_with_any(&["/wp-admin/install.php", "/wp-admin/setup-config.php"])
        && !req.is_browser()
    {
        return opinion(Category::SecurityIssues, 85, "wordpress.installer-probe");
    }
    if req.path_ends_with_any(&["/wp-admin/upgrade.php", "/wp-admin/maint/repair.php"])
        && !req.is_browser()
    {
        return opinion(
            Category::SecurityIssues,
            80,
            "wordpress.maintenance-script-probe",
        );
    }
    None
}

/// Known plugin exploit paths and exploit parameters.
fn exploit_probe(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    if path.contains("/wp-content/plugins/")
        && let Some((_, reason)) = PLUGIN_EXPLOITS.iter().find(|(p, _)| path.contains(p))
    {
        return opinion(Category::SecurityIssues, 95, reason);
    }
    // Easy WP SMTP wrote its debug log, with mail credentials, next to the plugin.
    if path.contains("/wp-content/plugins/easy-wp-smtp/")
        && req.file_name().ends_with("_debug_log.txt")
    {
        return opinion(
            Category::SecurityIssues,
            95,
            "wordpress.easy-wp-smtp-log-leak",
        );
    }
    let query = req.query_lower();
    if !query.is_empty() {
        // CVE-2019-9978: Social Warfare loads remote "options" and evaluates them.
        if param(query, "swp_debug") == Some("load_options") {
            return opinion(Category::SecurityIssues, 95, "wordpress.social-warfare-rce");
        }
        // Revolution Slider arbitrary file download.
        if param(query, "action") == Some("revslider_show_image") {
            return opinion(Category::SecurityIssues, 95, "wordpress.revslider-exploit");
        }
        // CVE-2020-11738: Duplicator download with a traversal in `file`.
        if param(query, "action") == Some("duplicator_download")
            && param(query, "file").is_some_and(|f| f.contains(".."))
        {
            return opinion(Category::SecurityIssues, 95, "wordpress.duplicator-exploit");
        }
        // TimThumb fetching a remote "image" (a PHP file) into its cache.
        if matches!(req.file_name(), "timthumb.php" | "thumb.php")
            && path.contains("/wp-content/")
            && param(query, "src").is_some_and(|s| s.contains("://"))
        {
            return opinion(Category::SecurityIssues, 90, "wordpress.timthumb-rfi");
        }
    }
    // CVE-2023-28121: WooPayments trusted this header to log in as any user, and the
    // public exploit creates an administrator through the users endpoint.
    if req.has_header("x-wcpay-platform-checkout-user")
        && rest_route(req).is_some_and(|r| r.starts_with("/wp/v2/users"))
    {
        return opinion(
            Category::SecurityIssues,
            95,
            "wordpress.woopayments-exploit",
        );
    }
    None
}

/// Discovery and version fingerprinting that only scanners do.
fn fingerprint_probe(req: &Request<'_>) -> Option<Opinion> {
    let name = req.file_name();
    // The Windows Live Writer manifest: the client is long dead (Open Live Writer still
    // asks for it), scanners request it under every prefix to find WordPress.
    if name == "wlwmanifest.xml" && !req.ua_contains("Live Writer") {
        return opinion(Category::SecurityIssues, 80, "wordpress.wlwmanifest-probe");
    }
    // WPScan and friends read plugin and theme readmes to learn versions.
    if matches!(
        name,
        "readme.txt" | "readme.md" | "changelog.txt" | "changelog.md"
    ) && req.path_contains_any(&["/wp-content/plugins/", "/wp-content/themes/"])
        && !req.is_browser()
    {
        return opinion(
            Category::SecurityIssues,
            80,
            "wordpress.plugin-fingerprinting",
        );
    }
    None
}
