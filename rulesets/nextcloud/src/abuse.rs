//! Abuse of Nextcloud's endpoints: brute force, enumeration and spam.

use crate::signals::{
    FORM_BURST, LOGIN_BURST_MACHINE, credentials, hammering, login_burst, nextcloud_client,
};
use crate::{root, route, services::form_submission};
use botgate_ruleset_sdk::signals::{SpamForm, form_spam};
use botgate_ruleset_sdk::{Category, CrawlerVerification, Opinion, Request, opinion};

/// Distinct paths under `/s/` in the window from which a client is guessing share tokens.
const SHARE_ENUMERATION: u32 = 30;

/// User and group listings and searches that need a logged-in user.
const USER_LISTINGS: &[&str] = &[
    "/ocs/v1.php/cloud/users",
    "/ocs/v2.php/cloud/users",
    "/ocs/v1.php/cloud/groups",
    "/ocs/v2.php/cloud/groups",
    "/ocs/v2.php/core/autocomplete/get",
    "/ocs/v1.php/apps/files_sharing/api/v1/sharees",
    "/ocs/v2.php/apps/files_sharing/api/v1/sharees",
];

const REGISTRATION: SpamForm = SpamForm {
    non_browser: "nextcloud.registration-non-browser",
    forged_browser: "nextcloud.registration-forged-browser",
    burst: "nextcloud.registration-burst",
};

const PUBLIC_FORM: SpamForm = SpamForm {
    non_browser: "nextcloud.form-non-browser",
    forged_browser: "nextcloud.form-forged-browser",
    burst: "nextcloud.form-burst",
};

/// The opinion on abuse of Nextcloud's endpoints, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    if req.is_method("POST") {
        login(req).or_else(|| shares(req)).or_else(|| forms(req))
    } else {
        enumeration(req).or_else(|| shares(req))
    }
}

/// Password guessing on the login form and on two-factor challenges.
fn login(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    if route == "/login" {
        if login_burst(req) {
            return opinion(Category::SecurityIssues, 90, "nextcloud.login-brute-force");
        }
        // The apps' Login Flow v1 web view posts this form with the app's agent.
        if !req.is_browser() && !nextcloud_client(req) {
            return opinion(
                Category::SuspiciousBehaviour,
                65,
                "nextcloud.login-non-browser",
            );
        }
        return None;
    }
    if route.starts_with("/login/challenge/") && hammering(req, FORM_BURST) {
        return opinion(
            Category::SecurityIssues,
            90,
            "nextcloud.two-factor-brute-force",
        );
    }
    if route == "/lostpassword/email" && (!req.is_browser() || hammering(req, LOGIN_BURST_MACHINE))
    {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "nextcloud.password-reset-abuse",
        );
    }
    None
}

/// Public shares: password guessing on `/s/<token>/authenticate/…` and token guessing.
fn shares(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    if !route.starts_with("/s/") {
        return None;
    }
    if req.is_method("POST") && route.contains("/authenticate") && login_burst(req) {
        return opinion(
            Category::SecurityIssues,
            90,
            "nextcloud.share-password-brute-force",
        );
    }
    let b = req.behaviour();
    if !req.is_browser()
        && b.distinct_paths >= SHARE_ENUMERATION
        && req.crawler() != CrawlerVerification::VerifiedSearchEngine
    {
        return opinion(Category::SecurityIssues, 80, "nextcloud.share-enumeration");
    }
    None
}

/// Listing users, groups and sharees without a session or credentials.
fn enumeration(req: &Request<'_>) -> Option<Opinion> {
    let root = root(req);
    if USER_LISTINGS.iter().any(|l| root.starts_with(l))
        && !credentials(req)
        && !req.has_header("cookie")
    {
        return opinion(Category::SecurityIssues, 85, "nextcloud.user-enumeration");
    }
    None
}

/// The Registration app's sign-up and the Forms app's public submissions.
fn forms(req: &Request<'_>) -> Option<Opinion> {
    if route(req).starts_with("/apps/registration") {
        return form_spam(req, &REGISTRATION);
    }
    if form_submission(req) {
        return form_spam(req, &PUBLIC_FORM);
    }
    None
}
