//! This rule set's probe of each kind of request every CMS rule set treats alike
//! (`botgate_ruleset_sdk::testing::kinds`), checked by its tests and, beside the other
//! eight, by the cross-set test (`rulesets/agreement`).

use botgate_ruleset_sdk::testing::kinds::{Kind, Probe, by_script};
use botgate_ruleset_sdk::testing::{get, post};

/// The probes, one per kind.
pub fn probes() -> Vec<(Kind, Probe)> {
    use Probe::{None as Absent, Request as R};
    vec![
        (Kind::InstallerByScript, R(by_script(get("/install.php")))),
        (Kind::InstallerByBrowser, R(get("/install.php").browser())),
        (
            Kind::UpgradeByScript,
            R(by_script(get("/doku.php?do=admin&page=upgrade"))),
        ),
        (
            Kind::UpgradeByBrowser,
            R(get("/doku.php?do=admin&page=upgrade").browser()),
        ),
        (
            Kind::UserEnumeration,
            Absent(
                "DokuWiki lists no users to visitors; its user manager is an admin page (dokuwiki.admin-probe)",
            ),
        ),
        (Kind::ConfigBackup, R(get("/conf/local.php.bak").browser())),
        (
            Kind::SiteDump,
            R(get("/data/attic/start.1718000000.txt.gz").browser()),
        ),
        (
            Kind::ScriptedLogin,
            R(by_script(post("/doku.php?id=start"))
                .header("content-type", "application/x-www-form-urlencoded")),
        ),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/doku.php?id=start")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            R(get("/lib/exe/taskrunner.php?id=start").machine("Wget/1.21.4")),
        ),
        (
            Kind::AppClient,
            R(post("/lib/exe/xmlrpc.php")
                .machine("DokuWikiXMLRPC/1.0")
                .header("content-type", "text/xml")
                .header("authorization", "Basic Ym90OnNlY3JldA==")),
        ),
    ]
}
