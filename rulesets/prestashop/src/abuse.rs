//! Abuse of PrestaShop's endpoints: brute force, card testing and form spam.

use crate::services::CALLBACK_NAMES;
use crate::{back_office, core_controller, front_module};
use botgate_ruleset_sdk::signals::{LOGIN_BURST_MACHINE, hammering, login_burst, param};
use botgate_ruleset_sdk::signals::{SpamForm, form_spam};
use botgate_ruleset_sdk::{Category, Opinion, Request, opinion};

/// Payment posts in the window, to a few paths, from which cards are being tested.
const CARD_TESTING_BURST: u32 = 8;

/// Payment modules whose front controllers card testers drive.
const PAYMENT_MODULES: &[&str] = &["stripe_official", "ps_checkout", "paypal"];

const REGISTRATION: SpamForm = SpamForm {
    non_browser: "prestashop.registration-non-browser",
    forged_browser: "prestashop.registration-forged-browser",
    burst: "prestashop.registration-burst",
};

const CONTACT: SpamForm = SpamForm {
    non_browser: "prestashop.contact-non-browser",
    forged_browser: "prestashop.contact-forged-browser",
    burst: "prestashop.contact-burst",
};

const NEWSLETTER: SpamForm = SpamForm {
    non_browser: "prestashop.newsletter-non-browser",
    forged_browser: "prestashop.newsletter-forged-browser",
    burst: "prestashop.newsletter-burst",
};

const REVIEW: SpamForm = SpamForm {
    non_browser: "prestashop.review-non-browser",
    forged_browser: "prestashop.review-forged-browser",
    burst: "prestashop.review-burst",
};

/// The opinion on abuse of PrestaShop's endpoints, if the request is some.
pub fn evaluate(req: &Request<'_>) -> Option<Opinion> {
    if !req.is_method("POST") {
        return None;
    }
    admin_login(req)
        .or_else(|| card_testing(req))
        .or_else(|| customer_forms(req))
        .or_else(|| module_forms(req))
}

/// The back-office login. PrestaShop's login page posts `controller=AdminLogin` and
/// `submitLogin` in the body to `index.php?rand=…` (1.6: `ajax-tab.php?rand=…`);
/// PrestaShop 9's Symfony login posts to `…/login`.
fn admin_login(req: &Request<'_>) -> Option<Opinion> {
    let below = back_office(req)?;
    let query = req.query_lower();
    let script = matches!(below, "" | "index.php" | "ajax-tab.php");
    let login = (script
        && (param(query, "controller") == Some("adminlogin") || param(query, "rand").is_some()))
        || below == "login"
        || below.ends_with("/login");
    if !login {
        return None;
    }
    if login_burst(req) {
        return opinion(
            Category::SecurityIssues,
            90,
            "prestashop.admin-login-brute-force",
        );
    }
    if !req.is_browser() {
        return opinion(
            Category::SuspiciousBehaviour,
            70,
            "prestashop.admin-login-non-browser",
        );
    }
    None
}

/// Bursts of payment attempts through the payment modules' own controllers (provider
/// callbacks were recognised before and are excluded here).
fn card_testing(req: &Request<'_>) -> Option<Opinion> {
    let (module, controller) = front_module(req)?;
    if PAYMENT_MODULES.contains(&module)
        && !CALLBACK_NAMES.contains(&controller)
        && hammering(req, CARD_TESTING_BURST)
    {
        return opinion(Category::SecurityIssues, 85, "prestashop.card-testing");
    }
    None
}

/// Whether the request ends at one of `slugs`, the default friendly URLs of a page.
fn at_page(req: &Request<'_>, slugs: &[&str]) -> bool {
    req.path_ends_with_any(slugs)
}

/// Customer login, registration, password recovery and the contact form.
fn customer_forms(req: &Request<'_>) -> Option<Opinion> {
    let controller = core_controller(req);
    let create_account = param(req.query_lower(), "create_account").is_some();
    let authentication =
        controller == Some("authentication") || at_page(req, &["/login", "/connexion"]);
    if controller == Some("registration")
        || at_page(req, &["/registration", "/inscription"])
        || (authentication && create_account)
    {
        return form_spam(req, &REGISTRATION);
    }
    if authentication {
        if login_burst(req) {
            return opinion(
                Category::SecurityIssues,
                85,
                "prestashop.customer-login-brute-force",
            );
        }
        if !req.is_browser() {
            return opinion(
                Category::SuspiciousBehaviour,
                65,
                "prestashop.customer-login-non-browser",
            );
        }
        return None;
    }
    if controller == Some("password")
        || at_page(req, &["/password-recovery", "/recuperation-mot-de-passe"])
    {
        if !req.is_browser() || hammering(req, LOGIN_BURST_MACHINE) {
            return opinion(
                Category::SuspiciousBehaviour,
                70,
                "prestashop.password-reset-abuse",
            );
        }
        return None;
    }
    if controller == Some("contact") || at_page(req, &["/contact-us", "/nous-contacter"]) {
        return form_spam(req, &CONTACT);
    }
    None
}

/// The newsletter block (`ps_emailsubscription`, 1.6 `blocknewsletter`) and product
/// reviews (`productcomments`' `PostComment`).
fn module_forms(req: &Request<'_>) -> Option<Opinion> {
    match front_module(req)? {
        ("ps_emailsubscription" | "blocknewsletter", _) => form_spam(req, &NEWSLETTER),
        ("productcomments", "postcomment") => form_spam(req, &REVIEW),
        _ => None,
    }
}
