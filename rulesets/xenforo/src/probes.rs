//! Probes of XenForo's configuration, internal data, source folders and installer:
//! attacks whoever sends them.

use botgate_ruleset_sdk::signals::{is_php_file, login_burst};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Source folders of XenForo 2 below a forum installed in a folder.
const SOURCE_FOLDERS: &[&str] = &["/src/xf/", "/src/addons/", "/src/vendor/"];

/// The opinion on probes of XenForo's files, if the request is one.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    config(req)
        .or_else(|| protected_folders(req))
        .or_else(|| installer(req))
}

/// `src/config.php` (XenForo 1: `library/config.php`) and copies of it.
fn config(req: &Request<'_>) -> Option<Opinion> {
    if req.path_ends_with_any(&["/src/config.php", "/library/config.php"]) {
        return opinion(Category::SecurityIssues, 95, "xenforo.config-probe");
    }
    let name = req.file_name();
    let copy = (name.starts_with("config.php") && name != "config.php")
        || (name.starts_with('.') && name.contains("config.php"));
    if copy {
        return opinion(Category::SecurityIssues, 95, "xenforo.config-backup-probe");
    }
    None
}

/// Folders XenForo's `.htaccess` and nginx configuration keep private, PHP in the
/// public data folder, and the command-line runner.
fn protected_folders(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    if path.contains("/internal_data/") || path.ends_with("/internal_data") {
        return opinion(Category::SecurityIssues, 95, "xenforo.internal-data-probe");
    }
    if req.path_starts_with_any(&["/src/", "/library/"]) || req.path_contains_any(SOURCE_FOLDERS) {
        return opinion(Category::SecurityIssues, 85, "xenforo.source-probe");
    }
    if path.contains("/data/") && is_php_file(req.file_name()) {
        return opinion(Category::SecurityIssues, 90, "xenforo.data-php-probe");
    }
    if req.file_name() == "cmd.php" {
        return opinion(Category::SecurityIssues, 85, "xenforo.cli-probe");
    }
    None
}

/// The installer and upgrader: administrators run upgrades from a browser, after
/// logging in on `install/index.php?upgrade/login`.
fn installer(req: &Request<'_>) -> Option<Opinion> {
    let path = req.path_lower();
    let install = path.starts_with("/install/")
        || path == "/install"
        || req.path_contains_any(&["/install/index.php"]);
    if !install {
        return None;
    }
    if !req.is_browser() {
        return opinion(Category::SecurityIssues, 85, "xenforo.installer-probe");
    }
    if req.is_method("POST") && login_burst(req) {
        return opinion(
            Category::SecurityIssues,
            90,
            "xenforo.upgrade-login-brute-force",
        );
    }
    None
}
