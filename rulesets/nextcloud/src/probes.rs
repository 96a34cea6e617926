//! Probes of Nextcloud's configuration, data and code folders and of its installer and
//! updater: attacks whoever sends them.

use crate::root;
use crate::signals::{hammering, server_crawler};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Folders Nextcloud's `.htaccess` and its documented nginx configuration refuse.
const PROTECTED_FOLDERS: &[&str] = &["/lib/", "/3rdparty/", "/build/", "/tests/", "/templates/"];

/// Root files the same configuration refuses: the command line tools and dev files.
const PROTECTED_FILES: &[&str] = &["/occ", "/console.php", "/db_structure.xml"];

/// Updater posts in the window, without the updater's auth header, from which the
/// updater password is being guessed.
const UPDATER_BURST: u32 = 10;

/// The opinion on probes of Nextcloud's files, if the request is one.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    let root = root(req);
    // WebDAV and public-share paths name users' files, not the server's: a synced
    // `nextcloud.log` is nobody's probe.
    if root.starts_with("/remote.php/") || root.starts_with("/public.php/") {
        return exploits(req);
    }
    if root.starts_with("/config/") || root == "/config" {
        return opinion(Category::SecurityIssues, 95, "nextcloud.config-probe");
    }
    if root.starts_with("/data/") {
        return data_folder(req);
    }
    if matches!(req.file_name(), "nextcloud.log" | "owncloud.log") {
        return opinion(Category::SecurityIssues, 95, "nextcloud.log-probe");
    }
    if PROTECTED_FOLDERS.iter().any(|f| root.starts_with(f))
        || PROTECTED_FILES.contains(&root)
        || root.starts_with("/autotest")
    {
        return opinion(
            Category::SecurityIssues,
            85,
            "nextcloud.protected-path-probe",
        );
    }
    // The web installer, from scripts: an administrator installs with a browser.
    if req.file_name() == "setup-nextcloud.php" && !req.is_browser() {
        return opinion(Category::SecurityIssues, 85, "nextcloud.installer-probe");
    }
    if root.starts_with("/updater/") || root == "/updater" {
        return updater(req);
    }
    exploits(req)
}

/// The data folder: logs, the SQLite database, users' files. Nextcloud checks that it
/// is not served by fetching `.ocdata` itself (or, before Nextcloud 28, from the admin's
/// browser `htaccesstest.txt`).
fn data_folder(req: &Request<'_>) -> Option<Opinion> {
    let name = req.file_name();
    if matches!(name, ".ocdata" | "htaccesstest.txt") && (server_crawler(req) || req.is_browser()) {
        return None;
    }
    if name.ends_with(".log") {
        return opinion(Category::SecurityIssues, 95, "nextcloud.log-probe");
    }
    if req.path_ends_with_any(&[".db", ".sqlite", ".sqlite3"]) {
        return opinion(Category::SecurityIssues, 95, "nextcloud.database-probe");
    }
    opinion(Category::SecurityIssues, 90, "nextcloud.data-dir-probe")
}

/// The web updater: an administrator's browser runs its steps with `X-Updater-Auth`.
fn updater(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_browser() {
        return opinion(Category::SecurityIssues, 85, "nextcloud.updater-probe");
    }
    if req.is_method("POST") && !req.has_header("x-updater-auth") && hammering(req, UPDATER_BURST) {
        return opinion(
            Category::SecurityIssues,
            90,
            "nextcloud.updater-brute-force",
        );
    }
    None
}

/// Exploits of ownCloud that scanners send to every file cloud.
fn exploits(req: &Request<'_>) -> Option<Opinion> {
    // CVE-2023-49103: graphapi's bundled GetPhpInfo.php printed the environment.
    if req.path_contains_any(&["/apps/graphapi/vendor/"]) {
        return opinion(
            Category::SecurityIssues,
            95,
            "nextcloud.owncloud-graphapi-exploit",
        );
    }
    // CVE-2023-49105: ownCloud's pre-signed URLs, forged without a signing key.
    let query = req.query_lower();
    if query.contains("oc-credential=") && query.contains("oc-signature=") {
        return opinion(
            Category::SecurityIssues,
            90,
            "nextcloud.owncloud-presigned-url-exploit",
        );
    }
    None
}
