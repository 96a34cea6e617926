//! This rule set's probe of each kind of request every CMS rule set treats alike
//! (`botgate_ruleset_sdk::testing::kinds`), checked by its tests and, beside the other
//! eight, by the cross-set test (`rulesets/agreement`).

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, by_script};
use botgate_ruleset_sdk::testing::{get, post};

/// The probes, one per kind.
pub fn probes() -> Vec<(Kind, Probe)> {
    use Probe::{None as Absent, Request as R};
    vec![
        (
            Kind::InstallerByScript,
            R(by_script(get("/install/index.php?install/"))),
        ),
        (
            Kind::InstallerByBrowser,
            R(get("/install/index.php?install/").browser()),
        ),
        (
            Kind::UpgradeByScript,
            R(by_script(get("/install/index.php?upgrade/"))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(get("/install/index.php?upgrade/").browser()),
        ),
        (
            Kind::UserEnumeration,
            R(by_script(get(
                "/index.php?members/find&q=ad&_xfResponseType=json",
            ))),
        ),
        (Kind::ConfigBackup, R(get("/src/config.php.bak").browser())),
        (
            Kind::SiteDump,
            Absent("XenForo writes no dumps or archives under its web root"),
        ),
        (Kind::ScriptedLogin, R(by_script(post("/login/login")))),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/admin.php?login/login")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            R(get("/job.php").machine(
                "Mozilla/5.0 (compatible; cron-job.org/1.2; +https://cron-job.org/en/faq/)",
            )),
        ),
        (
            Kind::AppClient,
            R(post("/api/threads/")
                .machine("Discourse-Importer/1.0")
                .header("xf-api-key", "Tz8vN4kQ2mX7pL9sR3wY6bJ1cF5hD0aE")
                .header("xf-api-user", "1")),
        ),
    ]
}
