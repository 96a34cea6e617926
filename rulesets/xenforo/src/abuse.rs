//! Abuse of XenForo's endpoints: brute force, member enumeration and spam.

use crate::{has_segment, last_segment, route, route_is};
use botgate_ruleset_sdk::signals::{FORM_BURST, LOGIN_BURST_MACHINE, hammering, login_burst};
use botgate_ruleset_sdk::signals::{SpamForm, form_spam};
use botgate_ruleset_sdk::{Category, CrawlerVerification, Opinion, Request, opinion};

/// Distinct paths in the window from which a non-browser on member profiles is
/// walking the member list.
const MEMBER_WALK: u32 = 30;

const REGISTRATION: SpamForm = SpamForm {
    non_browser: "xenforo.registration-non-browser",
    forged_browser: "xenforo.registration-forged-browser",
    burst: "xenforo.registration-burst",
};

const REPLY: SpamForm = SpamForm {
    non_browser: "xenforo.reply-non-browser",
    forged_browser: "xenforo.reply-forged-browser",
    burst: "xenforo.reply-burst",
};

const THREAD: SpamForm = SpamForm {
    non_browser: "xenforo.thread-non-browser",
    forged_browser: "xenforo.thread-forged-browser",
    burst: "xenforo.thread-burst",
};

const CONVERSATION: SpamForm = SpamForm {
    non_browser: "xenforo.conversation-non-browser",
    forged_browser: "xenforo.conversation-forged-browser",
    burst: "xenforo.conversation-burst",
};

const PROFILE_POST: SpamForm = SpamForm {
    non_browser: "xenforo.profile-post-non-browser",
    forged_browser: "xenforo.profile-post-forged-browser",
    burst: "xenforo.profile-post-burst",
};

const CONTACT: SpamForm = SpamForm {
    non_browser: "xenforo.contact-non-browser",
    forged_browser: "xenforo.contact-forged-browser",
    burst: "xenforo.contact-burst",
};

/// The opinion on abuse of XenForo's endpoints, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    if req.is_method("POST") {
        login(req).or_else(|| forms(req))
    } else {
        enumeration(req)
    }
}

/// Password guessing on the forum and admin logins and on two-step verification.
fn login(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    let admin = req.file_name() == "admin.php";
    if route_is(route, "login/login") || (admin && route_is(route, "login")) {
        if login_burst(req) {
            let reason = if admin {
                "xenforo.admin-login-brute-force"
            } else {
                "xenforo.login-brute-force"
            };
            return opinion(Category::SecurityIssues, 90, reason);
        }
        if !req.is_browser() {
            let (confidence, reason) = if admin {
                (70, "xenforo.admin-login-non-browser")
            } else {
                (65, "xenforo.login-non-browser")
            };
            return opinion(Category::SuspiciousBehaviour, confidence, reason);
        }
        return None;
    }
    if route_is(route, "login/two-step") && hammering(req, FORM_BURST) {
        return opinion(Category::SecurityIssues, 90, "xenforo.two-step-brute-force");
    }
    if route_is(route, "lost-password")
        && (!req.is_browser() || hammering(req, LOGIN_BURST_MACHINE))
    {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "xenforo.password-reset-abuse",
        );
    }
    None
}

/// The forms spammers fill: registration, replies, threads, messages, profile posts,
/// the contact form.
fn forms(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    let last = last_segment(route);
    let form = if route_is(route, "register/register") {
        &REGISTRATION
    } else if has_segment(route, "threads") && last == "add-reply" {
        &REPLY
    } else if has_segment(route, "forums") && last == "post-thread" {
        &THREAD
    } else if (has_segment(route, "conversations") || has_segment(route, "direct-messages"))
        && matches!(last, "add" | "add-reply")
    {
        &CONVERSATION
    } else if has_segment(route, "members") && last == "post" {
        &PROFILE_POST
    } else if route_is(route, "misc/contact") {
        &CONTACT
    } else {
        return None;
    };
    form_spam(req, form)
}

/// Harvesting member names: the mention autocomplete (`members/find?q=`) from scripts,
/// and non-browsers walking member profiles.
fn enumeration(req: &Request<'_>) -> Option<Opinion> {
    let route = route(req);
    if req.is_browser() || !has_segment(route, "members") {
        return None;
    }
    if route_is(route, "members/find") {
        return opinion(Category::SecurityIssues, 80, "xenforo.user-enumeration");
    }
    if req.behaviour().distinct_paths >= MEMBER_WALK
        && req.crawler() != CrawlerVerification::VerifiedSearchEngine
    {
        return opinion(Category::SecurityIssues, 80, "xenforo.member-enumeration");
    }
    None
}
