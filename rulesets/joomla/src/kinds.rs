//! This rule set's probe of each kind of request every CMS rule set treats alike
//! (`botgate_ruleset_sdk::testing::kinds`), checked by its tests and, beside the other
//! eight, by the cross-set test (`rulesets/agreement`).

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, by_script};
use botgate_ruleset_sdk::testing::{get, post};

/// The probes, one per kind.
pub fn probes() -> Vec<(Kind, Probe)> {
    use Probe::Request as R;
    vec![
        (Kind::InstallerByScript, R(by_script(get("/installation/index.php")))),
        (Kind::InstallerByBrowser, R(get("/installation/index.php").browser())),
        (
            Kind::UpgradeByScript,
            R(by_script(post("/administrator/components/com_joomlaupdate/extract.php"))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(post("/administrator/components/com_joomlaupdate/extract.php")
                .browser()
                .header("origin", "https://www.example.com")),
        ),
        (Kind::UserEnumeration, R(by_script(get("/api/index.php/v1/users")))),
        (Kind::ConfigBackup, R(get("/configuration.php.bak").browser())),
        (
            Kind::SiteDump,
            R(get("/administrator/components/com_akeeba/backup/site-www.example.com-20240101-120000utc.jpa").browser()),
        ),
        (Kind::ScriptedLogin, R(by_script(post("/administrator/index.php")))),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/administrator/index.php")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            R(get("/index.php?option=com_ajax&plugin=RunSchedulerWebcron&group=system&format=json&hash=8f4c2a61d9b3e7f0")
                .machine("curl/8.5.0")),
        ),
        (
            Kind::AppClient,
            R(get("/api/index.php/v1/content/articles")
                .machine("python-requests/2.31.0")
                .header("x-joomla-token", "c2hhMjU2OjQyMzphMWIyYzNkNGU1ZjZhN2I4YzlkMGUxZjJhM2I0YzVkNmU3Zjg=")),
        ),
    ]
}
