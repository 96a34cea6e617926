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
            R(by_script(get("/core/install.php"))),
        ),
        (
            Kind::InstallerByBrowser,
            R(get("/core/install.php").browser()),
        ),
        (Kind::UpgradeByScript, R(by_script(get("/update.php")))),
        (Kind::UpgradeByBrowser, R(get("/update.php").browser())),
        (
            Kind::UserEnumeration,
            R(by_script(get("/user/17")).behaviour(17, 17, 0)),
        ),
        (
            Kind::ConfigBackup,
            R(get("/sites/default/settings.php.bak").browser()),
        ),
        (Kind::SiteDump, R(get("/drupal_backup.sql.gz").browser())),
        (Kind::ScriptedLogin, R(by_script(post("/user/login")))),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/user/login")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            R(get("/cron/Qm9vOoKc3sJ2dKx9vW1hTz5yUe7rIbAaPnLfGgHjK0M").machine("Wget/1.21.4")),
        ),
        (
            Kind::AppClient,
            R(get("/jsonapi/node/article?page[limit]=50")
                .machine("node-fetch/3.3")
                .header("accept", "application/vnd.api+json")
                .header(
                    "authorization",
                    "Bearer eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJkcnVwYWwifQ.c2ln",
                )),
        ),
    ]
}
