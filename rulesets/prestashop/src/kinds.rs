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
            R(by_script(get("/install/index.php"))),
        ),
        (
            Kind::InstallerByBrowser,
            R(get("/install/index.php").browser()),
        ),
        (
            Kind::UpgradeByScript,
            R(by_script(post(
                "/admin634qwxo3b/autoupgrade/ajax-upgradetab.php",
            ))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(post("/admin634qwxo3b/autoupgrade/ajax-upgradetab.php")
                .browser()
                .header("origin", "https://www.example.com")),
        ),
        (Kind::UserEnumeration, R(by_script(get("/api/customers")))),
        (
            Kind::ConfigBackup,
            R(get("/app/config/parameters.php.bak").browser()),
        ),
        (
            Kind::SiteDump,
            R(get("/admin634qwxo3b/backups/1718000000-3f9a2c1b.sql.bz2").browser()),
        ),
        (
            Kind::ScriptedLogin,
            R(by_script(post("/en/login?back=my-account"))),
        ),
        (
            Kind::LoginBruteForce,
            R(
                by_script(post("/admin634qwxo3b/ajax-tab.php?rand=1718000000123"))
                    .behaviour(30, 1, 0),
            ),
        ),
        (
            Kind::Cron,
            R(get("/modules/cronjobs/cronjobs.php?token=0c3f1e7d9a2b4c6e").machine("curl/8.5.0")),
        ),
        (
            Kind::AppClient,
            R(get("/api/products?display=full&output_format=JSON")
                .machine("GuzzleHttp/7")
                .header(
                    "authorization",
                    "Basic WTZKWFRQRjdONFhLSDJRVldSQzlEM0I4TE01WkExRUc6",
                )),
        ),
    ]
}
