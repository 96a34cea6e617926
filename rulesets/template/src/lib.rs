//! The template rule set: a small, complete example of a rule component for authors.
//!
//! It knows a made-up CMS whose admin login lives at `/admin/login`, whose uptime
//! monitor announces itself as `ExampleMonitor/1.0`, and whose backups are written as
//! `backup-*.tar.gz`. Copy the crate, rename it, and replace the rules.

use botgate_ruleset_sdk::{Category, Info, Opinion, Request, Ruleset, opinion};

pub struct Template;

impl Ruleset for Template {
    // The gateway calls this rule set only for requests whose path or query contains
    // one of these (ua:… markers would match the user agent): every rule below needs
    // one, and ordinary page views skip the call.
    const SCOPE: &'static [&'static str] = &["/health", "/backup-", "/admin/login"];

    fn info() -> Info {
        botgate_ruleset_sdk::info!(
            "template",
            "Example rules: admin login brute force, backup probes and a monitor."
        )
    }

    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        // Legitimate machine traffic first: it must never be challenged.
        if req.path_lower() == "/health" && req.user_agent().starts_with("ExampleMonitor/") {
            return opinion(Category::ServicesAndPayments, 90, "template.monitor");
        }
        // Probes for backups are attacks whoever sends them.
        if req.file_name().starts_with("backup-") && req.path_ends_with_any(&[".tar.gz", ".zip"]) {
            return opinion(Category::SecurityIssues, 90, "template.backup-probe");
        }
        // Many login posts in the window from one client: brute force.
        if req.is_method("POST") && req.path_lower() == "/admin/login" {
            if req.behaviour().requests > 20 {
                return opinion(Category::SecurityIssues, 80, "template.login-brute-force");
            }
            if !req.is_browser() {
                return opinion(
                    Category::SuspiciousBehaviour,
                    60,
                    "template.login-non-browser",
                );
            }
        }
        // Everything else: leave it to the classifier.
        None
    }
}

botgate_ruleset_sdk::export_ruleset!(Template);

#[cfg(test)]
mod tests {
    use super::Template;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::testing::*;

    #[test]
    fn visitor_reading_a_page_is_left_to_the_classifier() {
        assert_category::<Template>(get("/blog/hello").browser(), None);
    }

    #[test]
    fn no_opinion_outside_the_scope_on_generated_requests() {
        assert_scope_holds::<Template>(env!("CARGO_MANIFEST_DIR"), 50_000);
    }

    #[test]
    fn ordinary_pages_are_outside_the_scope() {
        assert_outside_scope::<Template>(ORDINARY_PAGES);
        assert_outside_scope::<Template>(&["/admin/", "/backup/"]);
    }

    #[test]
    fn monitor_is_a_service() {
        assert_category::<Template>(
            get("/health").machine("ExampleMonitor/1.0"),
            Some(ServicesAndPayments),
        );
    }

    #[test]
    fn backup_probe_is_a_security_issue() {
        assert_category::<Template>(get("/backup-2024.tar.gz"), Some(SecurityIssues));
    }

    #[test]
    fn one_browser_login_is_fine() {
        assert_category::<Template>(post("/admin/login").browser(), None);
    }

    #[test]
    fn login_brute_force_is_a_security_issue() {
        assert_category::<Template>(
            post("/admin/login").browser().behaviour(40, 1, 0),
            Some(SecurityIssues),
        );
    }

    #[test]
    fn scripted_login_is_suspicious() {
        assert_category::<Template>(
            post("/admin/login").machine("python-requests/2.31"),
            Some(SuspiciousBehaviour),
        );
    }
}
