//! The kinds of request every CMS rule set treats alike, whatever the CMS: each rule
//! set lists its own probe of each kind (or why the CMS has none), its tests check the
//! category, and a cross-set test checks that equivalent probes of the nine agree.

use super::{RequestBuilder, evaluate};
use crate::{Category, Ruleset};

/// A kind of request, with the category every CMS rule set gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A script at the web installer of an installed site: `security_issues`.
    InstallerByScript,
    /// A browser at the installer: no opinion (an administrator installs or migrates
    /// with one; the classifier and the Core Rule Set still judge it).
    InstallerByBrowser,
    /// A script at the upgrade or update script: `security_issues`.
    UpgradeByScript,
    /// A browser at the upgrade script: no opinion (an administrator runs it).
    UpgradeByBrowser,
    /// A script listing users or walking their profiles: `security_issues`.
    UserEnumeration,
    /// A backup or copy of the configuration file (database credentials), asked for by
    /// a browser: `security_issues` whoever asks.
    ConfigBackup,
    /// A database dump or a site archive, asked for by a browser: `security_issues`
    /// whoever asks.
    SiteDump,
    /// One login post from a script: `suspicious_behaviour` (a script may log in once,
    /// an attack repeats).
    ScriptedLogin,
    /// The administrators' login post repeated by a script (password guessing):
    /// `security_issues`.
    LoginBruteForce,
    /// The CMS's scheduled tasks called with their marks (the site's own agent, a
    /// secret key, a cron service): `services_and_payments`.
    Cron,
    /// The CMS's own apps, sync or API clients, with their credentials:
    /// `services_and_payments`. (Update checks are outgoing for every CMS here, the
    /// site asking its vendor, so the gateway in front of it sees none.)
    AppClient,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 11] = [
        Kind::InstallerByScript,
        Kind::InstallerByBrowser,
        Kind::UpgradeByScript,
        Kind::UpgradeByBrowser,
        Kind::UserEnumeration,
        Kind::ConfigBackup,
        Kind::SiteDump,
        Kind::ScriptedLogin,
        Kind::LoginBruteForce,
        Kind::Cron,
        Kind::AppClient,
    ];

    /// The category every rule set gives the kind (`None`: no opinion).
    pub const fn expected(self) -> Option<Category> {
        match self {
            Kind::InstallerByBrowser | Kind::UpgradeByBrowser => None,
            Kind::ScriptedLogin => Some(Category::SuspiciousBehaviour),
            Kind::Cron | Kind::AppClient => Some(Category::ServicesAndPayments),
            Kind::InstallerByScript
            | Kind::UpgradeByScript
            | Kind::UserEnumeration
            | Kind::ConfigBackup
            | Kind::SiteDump
            | Kind::LoginBruteForce => Some(Category::SecurityIssues),
        }
    }
}

/// A rule set's probe of one kind.
pub enum Probe {
    /// The CMS's request of this kind.
    Request(RequestBuilder),
    /// The CMS has no such request, and why.
    None(&'static str),
}

/// `req` sent by a script (Python's `requests`), as most probes are.
pub fn by_script(req: RequestBuilder) -> RequestBuilder {
    req.machine("python-requests/2.32.3")
}

/// What `R` makes of each probe of `probes`: the kind, the category (`None` for no
/// opinion or no such request), and whether the CMS has such a request.
pub fn judge_kinds<R: Ruleset>(probes: &[(Kind, Probe)]) -> Vec<(Kind, Option<Category>, bool)> {
    probes
        .iter()
        .map(|(kind, probe)| match probe {
            Probe::Request(req) => (*kind, evaluate::<R>(req).map(|o| o.category), true),
            Probe::None(_) => (*kind, None, false),
        })
        .collect()
}

/// Asserts that `probes` lists every [`Kind`] exactly once and that `R` gives each
/// request its kind's category.
#[track_caller]
pub fn assert_kinds<R: Ruleset>(probes: &[(Kind, Probe)]) {
    for kind in Kind::ALL {
        let listed = probes.iter().filter(|(k, _)| *k == kind).count();
        assert_eq!(listed, 1, "{kind:?} is listed {listed} times");
    }
    let mut wrong = Vec::new();
    for (kind, probe) in probes {
        if let Probe::Request(req) = probe {
            let got = evaluate::<R>(req);
            if got.as_ref().map(|o| o.category) != kind.expected() {
                let facts = req.build();
                wrong.push(format!(
                    "{kind:?}: expected {:?}, got {got:?} for {} {}",
                    kind.expected(),
                    facts.method,
                    facts.target
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
