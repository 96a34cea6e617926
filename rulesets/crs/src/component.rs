//! The `crs` rule component: the Core Rule Set's verdict on every request, always on.

use crate::{Parts, inspect, seen_clean};
use botgate_ruleset_sdk::{Category, HttpVersion, Info, Opinion, Request, Ruleset, opinion};

/// The Core Rule Set as a rule component.
pub struct CoreRuleSet;

impl Ruleset for CoreRuleSet {
    // Every request: an attack may sit anywhere.
    const SCOPE: &'static [&'static str] = &[];

    /// Also builds every matcher: the gateway asks for `info` once per instance, before
    /// any request, under its warm-up deadline.
    fn info() -> Info {
        crate::matchers::prepare_all();
        botgate_ruleset_sdk::info!(
            "crs",
            "The OWASP Core Rule Set 3.3.4 at paranoia level 1: injection, XSS, LFI/RFI, RCE, PHP, Java, Node.js, session fixation, protocol attacks and scanners in the path, query, cookies and headers."
        )
    }

    /// `security_issues` when the request's anomaly score reaches CRS's threshold, named
    /// by the rule of the highest severity (`crs.942100-sqli`), or when it has more
    /// arguments or cookies than are read (`crs.too-many-arguments`,
    /// `crs.too-many-cookies`); no opinion otherwise.
    fn evaluate(req: &Request<'_>) -> Option<Opinion> {
        let facts = req.facts();
        let protocol = match facts.version {
            HttpVersion::Http10 => "HTTP/1.0",
            HttpVersion::Http11 => "HTTP/1.1",
            HttpVersion::Http2 => "HTTP/2.0",
            HttpVersion::Http3 => "HTTP/3.0",
        };
        // Most requests repeat a request line and a header block already seen clean:
        // answered before the headers are split.
        if seen_clean(&facts.method, &facts.target, protocol, &facts.headers) {
            return None;
        }
        let inspection = inspect(&Parts {
            method: &facts.method,
            target: &facts.target,
            protocol,
            headers: req.headers(),
            header_block: &facts.headers,
        });
        if let Some(limit) = inspection.over {
            return opinion(
                Category::SecurityIssues,
                95,
                &format!("crs.{}", limit.name()),
            );
        }
        let (rule, family) = inspection
            .leading_rule()
            .filter(|_| inspection.is_attack())?;
        opinion(
            Category::SecurityIssues,
            95,
            &format!("crs.{rule}-{}", family.name()),
        )
    }
}

botgate_ruleset_sdk::export_ruleset!(CoreRuleSet);

#[cfg(test)]
mod tests {
    use super::CoreRuleSet;
    use botgate_ruleset_sdk::Category::*;
    use botgate_ruleset_sdk::testing::*;

    #[test]
    fn page_views_get_no_opinion() {
        for page in ORDINARY_PAGES {
            assert_category::<CoreRuleSet>(get(page).browser(), None);
        }
    }

    #[test]
    fn attacks_anywhere_are_security_issues() {
        assert_category::<CoreRuleSet>(
            get("/?id=1%20union%20select%201,2--").browser(),
            Some(SecurityIssues),
        );
        assert_category::<CoreRuleSet>(
            get("/")
                .browser()
                .header("cookie", "s=<script>alert(1)</script>"),
            Some(SecurityIssues),
        );
        assert_category::<CoreRuleSet>(
            get("/")
                .browser()
                .header("user-agent", "() { :; }; /bin/bash -c id"),
            Some(SecurityIssues),
        );
    }

    fn reason(req: RequestBuilder) -> Option<String> {
        evaluate::<CoreRuleSet>(&req).map(|o| o.reason)
    }

    /// `n` arguments (`a0=0&a1=1…`), then `last`.
    fn arguments(n: usize, last: &str) -> String {
        let mut query: Vec<String> = (0..n).map(|i| format!("a{i}={i}")).collect();
        query.push(last.to_owned());
        format!("/search?{}", query.join("&"))
    }

    #[test]
    fn arguments_past_the_bound_are_an_attack_unread() {
        assert_eq!(reason(get(&arguments(254, "q=shoes")).browser()), None);
        assert_eq!(
            reason(get(&arguments(254, "id=1%20union%20select%201,2--")).browser()),
            Some("crs.942100-sqli".into()),
            "the last argument within the bound is read"
        );
        assert_eq!(
            reason(get(&arguments(255, "q=shoes")).browser()),
            Some("crs.too-many-arguments".into())
        );
        // Empty pairs are no arguments, as the rules read them.
        let sparse = format!("{}&&&&", arguments(254, "q=shoes"));
        assert_eq!(reason(get(&sparse).browser()), None);
    }

    #[test]
    fn cookies_past_the_bound_are_an_attack_unread() {
        let cookies = |from: usize, n: usize| {
            (from..from + n)
                .map(|i| format!("c{i}={i}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let within = get("/")
            .browser()
            .header("cookie", &cookies(0, 200))
            .header("cookie", &cookies(200, 55));
        assert_eq!(reason(within.clone()), None);
        assert_eq!(
            reason(
                within
                    .clone()
                    .header("cookie", "s=<script>alert(1)</script>")
            ),
            Some("crs.too-many-cookies".into()),
            "a 256th cookie over three headers"
        );
        assert_eq!(
            reason(
                get("/")
                    .browser()
                    .header("cookie", &cookies(0, 254))
                    .header("cookie", "s=<script>alert(1)</script>")
            ),
            Some("crs.941100-xss".into())
        );
    }
}
