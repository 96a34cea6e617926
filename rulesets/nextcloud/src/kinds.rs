//! This rule set's probe of each kind of request every CMS rule set treats alike
//! (`botgate_ruleset_sdk::testing::kinds`), checked by its tests and, beside the other
//! eight, by the cross-set test (`rulesets/agreement`).

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, by_script};
use botgate_ruleset_sdk::testing::{get, post, request};

/// The probes, one per kind.
pub fn probes() -> Vec<(Kind, Probe)> {
    use Probe::Request as R;
    vec![
        (Kind::InstallerByScript, R(by_script(get("/setup-nextcloud.php")))),
        (Kind::InstallerByBrowser, R(get("/setup-nextcloud.php").browser())),
        (Kind::UpgradeByScript, R(by_script(get("/updater/index.php")))),
        (Kind::UpgradeByBrowser, R(get("/updater/index.php").browser())),
        (Kind::UserEnumeration, R(by_script(get("/ocs/v1.php/cloud/users")))),
        (Kind::ConfigBackup, R(get("/config/config.php.bak").browser())),
        (Kind::SiteDump, R(get("/data/owncloud.db").browser())),
        (Kind::ScriptedLogin, R(by_script(post("/login")))),
        (Kind::LoginBruteForce, R(by_script(post("/login")).behaviour(30, 1, 0))),
        (
            Kind::Cron,
            R(get("/cron.php")
                .machine("Mozilla/5.0 (compatible; cron-job.org/1.2; +https://cron-job.org/en/faq/)")),
        ),
        (
            Kind::AppClient,
            R(request("PROPFIND", "/remote.php/dav/files/alice/")
                .machine("Mozilla/5.0 (Windows) mirall/3.13.2stable-Win64 (build 20240520) (Nextcloud, windows-10.0.22631 ClientArchitecture: x86_64 OsArchitecture: x86_64)")
                .header("authorization", "Basic YWxpY2U6Q2xQV2YtYnF3Q3gtTmZ0ZEItN1R5a1otWWZuR3A=")
                .header("depth", "1")),
        ),
    ]
}
