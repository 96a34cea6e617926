//! Probes of PrestaShop's configuration, logs, backups, installer and module exploit
//! paths: attacks whoever sends them.

use crate::services::valid_ws_key;
use crate::{back_office, front_module};
use botgate_ruleset_sdk::signals::{basic_auth, is_php_file, is_scripted, param};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// File names holding the database credentials (1.7+ `parameters.php`, early 1.7
/// `parameters.yml`, 1.6 `settings.inc.php`); any name containing one is a copy.
const CONFIG_FILES: &[&str] = &["parameters.php", "parameters.yml", "settings.inc.php"];

/// Log folders (1.7+ `var/logs`, 1.7.0–1.7.3 `app/logs`).
const LOG_FOLDERS: &[&str] = &["/var/logs/", "/app/logs/"];

/// Cache folders that hold compiled PHP (Symfony and Smarty).
const CACHE_FOLDERS: &[&str] = &["/var/cache/", "/cache/smarty/"];

/// Module scripts with public exploits (mostly unauthenticated uploads).
const MODULE_EXPLOITS: &[&str] = &[
    "/modules/columnadverts/uploadimage.php",
    "/modules/soopamobile/uploadimage.php",
    "/modules/soopabanners/uploadimage.php",
    "/modules/vtermslideshow/uploadimage.php",
    "/modules/vtemslideshow/uploadimage.php",
    "/modules/simpleslideshow/uploadimage.php",
    "/modules/productpageadverts/uploadimage.php",
    "/modules/homepageadvertise/uploadimage.php",
    "/modules/homepageadvertise2/uploadimage.php",
    "/modules/jro_homepageadvertise/uploadimage.php",
    "/modules/attributewizardpro/file_upload.php",
    "/modules/1attributewizardpro/file_upload.php",
    "/modules/attributewizardpro_x/file_upload.php",
    "/modules/advancedslider/ajax_advancedsliderupload.php",
    "/modules/cartabandonmentpro/upload.php",
    "/modules/cartabandonmentproold/upload.php",
    "/modules/videostab/ajax_videostab.php",
    "/modules/wg24themeadministration/",
    "/modules/fieldvmegamenu/ajax/upload.php",
    "/modules/wdoptionpanel/wdoptionpanel_ajax.php",
    "/modules/pk_flexmenu/ajax/upload.php",
    "/modules/nvn_export_orders/upload.php",
    "/modules/megamenu/uploadify/",
    "/modules/tdpsthemeoptionpanel/tdpsthemeoptionpanelajax.php",
    "/modules/psmodthemeoptionpanel/psmodthemeoptionpanel_ajax.php",
    "/modules/lib/redactor/file_upload.php",
    "/modules/bamegamenu/ajax_phpcode.php",
    "/modules/blocktestimonial/addtestimonial.php",
];

/// SQL keywords and syntax that never appear in blockwishlist's sort order.
const SQL_MARKS: &[&str] = &["select", "union", "sleep(", "benchmark(", "(", ";", "--"];

/// The opinion on probes of PrestaShop's files, if the request is one.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    leaks(req)
        .or_else(|| back_office_files(req))
        .or_else(|| installer(req))
        .or_else(|| upgrader(req))
        .or_else(|| customer_enumeration(req))
        .or_else(|| exploits(req))
}

/// 1-Click Upgrade's scripts (in the back office, or the module's folder) called by a
/// script: an administrator upgrades from the back office in a browser.
fn upgrader(req: &Request<'_>) -> Option<Opinion> {
    let upgrade = back_office(req).is_some_and(|below| below.starts_with("autoupgrade/"))
        || req.path_lower().starts_with("/modules/autoupgrade/");
    (upgrade && is_scripted(req))
        .then(|| opinion(Category::SecurityIssues, 85, "prestashop.upgrade-probe"))
        .flatten()
}

/// The webservice's people (customers, employees, their addresses) asked for by a
/// script without a key: listing the shop's users. With a key it is a service.
fn customer_enumeration(req: &Request<'_>) -> Option<Opinion> {
    if !is_scripted(req) || basic_auth(req) {
        return None;
    }
    if param(req.query_lower(), "ws_key").is_some_and(valid_ws_key) {
        return None;
    }
    let path = req.path_lower();
    let resource = match path.strip_prefix("/api/") {
        Some(rest) => rest,
        None if req.path_contains_any(&["/webservice/dispatcher.php"]) => {
            param(req.query_lower(), "url")?
        }
        None => return None,
    };
    let people = ["customers", "employees", "addresses"];
    people
        .iter()
        .any(|p| resource == *p || resource.starts_with(&format!("{p}/")))
        .then(|| opinion(Category::SecurityIssues, 85, "prestashop.user-enumeration"))
        .flatten()
}

/// Credentials, logs, caches and shells in the upload folders.
fn leaks(req: &Request<'_>) -> Option<Opinion> {
    let name = req.file_name();
    if CONFIG_FILES.iter().any(|c| name.contains(c)) {
        return opinion(Category::SecurityIssues, 95, "prestashop.config-probe");
    }
    let path = req.path_lower();
    if req.path_contains_any(LOG_FOLDERS) || (path.starts_with("/log/") && name.ends_with(".log")) {
        return opinion(Category::SecurityIssues, 90, "prestashop.log-probe");
    }
    if req.path_contains_any(CACHE_FOLDERS) {
        return opinion(Category::SecurityIssues, 85, "prestashop.cache-probe");
    }
    // Every PrestaShop folder has an index.php that only redirects; anything else
    // executable under the upload folders is a web shell.
    if req.path_contains_any(&["/upload/", "/download/", "/img/"])
        && is_php_file(name)
        && name != "index.php"
    {
        return opinion(Category::SecurityIssues, 90, "prestashop.upload-dir-php");
    }
    None
}

/// Database dumps, upgrade backups and the old file manager in the back office.
fn back_office_files(req: &Request<'_>) -> Option<Opinion> {
    let below = back_office(req)?;
    if below.starts_with("backups/")
        || (below.starts_with("autoupgrade/") && below.contains("backup"))
    {
        return opinion(Category::SecurityIssues, 95, "prestashop.backup-probe");
    }
    // PrestaShop 1.6's Responsive FileManager, opened from TinyMCE by an employee.
    if below.starts_with("filemanager/") && !req.is_browser() {
        return opinion(Category::SecurityIssues, 90, "prestashop.filemanager-probe");
    }
    None
}

/// The installer, from scripts (PrestaShop refuses to open the back office while it
/// exists; an administrator installs with a browser).
fn installer(req: &Request<'_>) -> Option<Opinion> {
    if req.is_browser() {
        return None;
    }
    let path = req.path_lower();
    if path.starts_with("/install/")
        || path.starts_with("/install-dev/")
        || path == "/install"
        || req.path_contains_any(&["/install/index.php", "/install/index_cli.php"])
    {
        return opinion(Category::SecurityIssues, 90, "prestashop.installer-probe");
    }
    None
}

/// Module exploit paths and exploit parameters.
fn exploits(req: &Request<'_>) -> Option<Opinion> {
    // phpunit shipped in modules' vendor folders: eval-stdin.php runs posted PHP.
    if req.path_contains_any(&["/vendor/phpunit/"]) {
        return opinion(Category::SecurityIssues, 95, "prestashop.phpunit-rce-probe");
    }
    if req.path_contains_any(MODULE_EXPLOITS) {
        return opinion(
            Category::SecurityIssues,
            95,
            "prestashop.module-exploit-probe",
        );
    }
    // CVE-2022-31101: blockwishlist put `order` into SQL unescaped.
    if front_module(req).is_some_and(|(m, _)| m == "blockwishlist")
        && param(req.query_lower(), "order")
            .is_some_and(|o| SQL_MARKS.iter().any(|s| o.contains(s)))
    {
        return opinion(
            Category::SecurityIssues,
            95,
            "prestashop.blockwishlist-sqli",
        );
    }
    None
}
