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
            Absent("cPanel is installed from the server's shell, not over the web"),
        ),
        (
            Kind::InstallerByBrowser,
            Absent("cPanel is installed from the server's shell, not over the web"),
        ),
        (
            Kind::UpgradeByScript,
            Absent("cPanel updates itself on the server (upcp), not over the web"),
        ),
        (
            Kind::UpgradeByBrowser,
            Absent("cPanel updates itself on the server (upcp), not over the web"),
        ),
        (
            Kind::UserEnumeration,
            Absent(
                "cPanel lists no accounts without a session; its APIs need one (cpanel.api-unauthenticated-probe)",
            ),
        ),
        (Kind::ConfigBackup, R(get("/.my.cnf").browser())),
        (
            Kind::SiteDump,
            R(get("/backup-1.15.2025_03-10-22_exampleu.tar.gz").browser()),
        ),
        (
            Kind::ScriptedLogin,
            R(by_script(post("/login/?login_only=1"))),
        ),
        (
            Kind::LoginBruteForce,
            R(by_script(post("/login/?login_only=1")).behaviour(30, 1, 0)),
        ),
        (
            Kind::Cron,
            Absent("cPanel's cron jobs run on the server, not over HTTP"),
        ),
        (
            Kind::AppClient,
            R(get("/execute/Email/list_pops")
                .machine("python-requests/2.31.0")
                .header(
                    "authorization",
                    "cpanel exampleu:U7HMR63FHY282DQZ4H5BIH16JLYSO01M",
                )),
        ),
    ]
}
