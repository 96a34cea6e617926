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
            R(by_script(get("/bitrixsetup.php"))),
        ),
        (
            Kind::InstallerByBrowser,
            R(get("/bitrixsetup.php").browser()),
        ),
        (
            Kind::UpgradeByScript,
            R(by_script(get("/bitrix/admin/update_system.php"))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(get("/bitrix/admin/update_system.php").browser()),
        ),
        (
            Kind::UserEnumeration,
            R(by_script(get("/company/personal/user/17/")).behaviour(17, 17, 0)),
        ),
        (
            Kind::ConfigBackup,
            R(get("/bitrix/.settings.php.bak").browser()),
        ),
        (
            Kind::SiteDump,
            R(
                get("/bitrix/backup/www.example.com_20240101_120000_full_a1b2c3d4.tar.gz")
                    .browser(),
            ),
        ),
        (Kind::ScriptedLogin, R(by_script(post("/auth/?login=yes")))),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/bitrix/admin/index.php?login=yes")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            Absent(
                "Bitrix runs its agents from the server's crontab with PHP's command line, not over HTTP",
            ),
        ),
        (
            Kind::AppClient,
            R(
                get("/bitrix/admin/1c_exchange.php?type=catalog&mode=checkauth")
                    .machine("1C+Enterprise/8.3")
                    .header("authorization", "Basic ZXhjaGFuZ2U6c2VjcmV0"),
            ),
        ),
    ]
}
