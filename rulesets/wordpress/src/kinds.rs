//! This rule set's probe of each kind of request every CMS rule set treats alike
//! (`botgate_ruleset_sdk::testing::kinds`), checked by its tests and, beside the other
//! eight, by the cross-set test (`rulesets/agreement`).

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, by_script};
use botgate_ruleset_sdk::testing::{get, post};

/// The probes, one per kind.
pub fn probes() -> Vec<(Kind, Probe)> {
    use Probe::Request as R;
    vec![
        (
            Kind::InstallerByScript,
            R(by_script(get("/wp-admin/install.php"))),
        ),
        (
            Kind::InstallerByBrowser,
            R(get("/wp-admin/install.php").browser()),
        ),
        (
            Kind::UpgradeByScript,
            R(by_script(get("/wp-admin/upgrade.php"))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(get("/wp-admin/upgrade.php").browser()),
        ),
        (Kind::UserEnumeration, R(by_script(get("/?author=1")))),
        (Kind::ConfigBackup, R(get("/wp-config.php.bak").browser())),
        (
            Kind::SiteDump,
            R(get("/wp-content/uploads/backup-2024.sql").browser()),
        ),
        (Kind::ScriptedLogin, R(by_script(post("/wp-login.php")))),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/wp-login.php")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            R(post("/wp-cron.php?doing_wp_cron=1718000000.1234560000")
                .machine("WordPress/6.7.1; https://www.example.com")),
        ),
        (
            Kind::AppClient,
            R(get("/wp-json/wp/v2/posts?context=edit&status=draft")
                .machine("wp-iphone/24.9")
                .header(
                    "authorization",
                    "Basic YWRtaW46YWJjZCBlZmdoIGlqa2wgbW5vcCBxcnN0IHV2d3g=",
                )),
        ),
    ]
}
