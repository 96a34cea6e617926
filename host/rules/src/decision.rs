//! The decision: run the always-on components (the classifier and the OWASP Core Rule
//! Set) and a website's enabled rule sets on one request, merge their opinions by a
//! fixed precedence, and look the category up in the website's policy.
//!
//! # Precedence
//!
//! 1. Opinions of components that failed, timed out or are switched off are dropped
//!    (fail-open); so are rule sets the website enabled that are not loaded. A component
//!    the operator made fail closed refuses the request instead: `security_issues`,
//!    `deny`, reason `<name>.failed`, whatever the others said; so does such a name with
//!    no component loaded, on every request it could judge (it has no scope to narrow
//!    them: every request for an always-on name, the enabling websites' for a rule set).
//!    A rule set
//!    is not called for a request outside its declared scope (see [`super::scope`]):
//!    it abstains there by contract, so this changes no decision.
//! 2. An opinion of `security_issues` with confidence ≥ 50 beats every other category:
//!    attack evidence is never outweighed by a claim of legitimacy.
//! 3. Otherwise the highest confidence wins.
//! 4. Ties go to a CMS rule set (or the Core Rule Set) over the classifier (specific
//!    knowledge beats general knowledge), then to the category whose action under this
//!    website's policy is stricter (`deny` > `captcha` > `grant`), then to the
//!    component name in alphabetical order, so the result never depends on call order.
//! 5. When every component abstains the request counts as `humans`, decided by no
//!    component.

use super::bindings::RequestFacts;
use super::component::{LoadedComponent, Outcome};
use super::registry::RulesetSet;
use botgate_model::{Action, Category, Policy};
use std::sync::Arc;

/// The components that run for every website, whatever its `settings.rulesets`.
pub const ALWAYS_ON: [&str; 2] = botgate_model::ALWAYS_ON_RULESETS;
/// The name of the general classifier, which runs for every website.
pub const CLASSIFIER: &str = ALWAYS_ON[0];
/// The name of the OWASP Core Rule Set component, which runs for every website.
pub const CORE_RULE_SET: &str = ALWAYS_ON[1];

/// The confidence from which `security_issues` overrides every other opinion.
pub const SECURITY_OVERRIDE_CONFIDENCE: u8 = 50;

/// The component whose opinion decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decider {
    pub name: Arc<str>,
    pub version: Arc<str>,
}

/// What the engine decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub category: Category,
    pub action: Action,
    pub confidence: u8,
    /// The deciding component; `None` when every component abstained.
    pub decided_by: Option<Decider>,
    /// The deciding opinion's reason id (`none` when every component abstained).
    pub reason: String,
    /// Components whose call failed or that were switched off for this request.
    pub failed_components: u8,
}

fn strictness(action: Action) -> u8 {
    match action {
        Action::Deny => 2,
        Action::Captcha => 1,
        Action::Grant => 0,
    }
}

/// The precedence key of an opinion: larger wins (see the module documentation).
type PrecedenceKey<'a> = (bool, u8, bool, u8, std::cmp::Reverse<&'a str>);

/// The precedence key of `component`'s opinion (`category`, `confidence`) under `policy`.
fn precedence_key<'a>(
    component: &'a str,
    category: Category,
    confidence: u8,
    policy: &Policy,
) -> PrecedenceKey<'a> {
    (
        category == Category::SecurityIssues && confidence >= SECURITY_OVERRIDE_CONFIDENCE,
        confidence,
        component != CLASSIFIER,
        strictness(policy.action(category)),
        std::cmp::Reverse(component),
    )
}

/// The best opinion so far.
struct Candidate<'a> {
    key: PrecedenceKey<'a>,
    category: Category,
    confidence: u8,
    component: &'a LoadedComponent,
    reason: String,
}

/// The merge of the outcomes of one decision, in any order.
struct Merge<'a> {
    policy: &'a Policy,
    set: &'a RulesetSet,
    best: Option<Candidate<'a>>,
    failed: u8,
    /// The first component that failed closed.
    closed_by: Option<&'a LoadedComponent>,
    /// A name that fails closed, should have judged, and is not loaded.
    missing: Option<&'a Arc<str>>,
}

impl<'a> Merge<'a> {
    fn new(policy: &'a Policy, set: &'a RulesetSet) -> Self {
        Merge {
            policy,
            set,
            best: None,
            failed: 0,
            closed_by: None,
            missing: None,
        }
    }

    /// Notes a name that fails closed and is not loaded, if the request is one it
    /// judges (always-on, or enabled for the website).
    fn require_loaded(&mut self, enabled: &[&str]) {
        let missing = self.set.missing_fail_closed();
        if !missing.is_empty() {
            self.missing = missing
                .iter()
                .find(|name| ALWAYS_ON.contains(&&***name) || enabled.contains(&&***name));
        }
    }

    fn offer(&mut self, component: &'a LoadedComponent, outcome: Outcome) {
        let opinion = match outcome {
            Outcome::Opinion(opinion) => opinion,
            Outcome::Abstain | Outcome::OutOfScope => return,
            Outcome::Disabled | Outcome::Failed(_) => {
                self.failed = self.failed.saturating_add(1);
                if self.closed_by.is_none() && self.set.fails_closed(component.name()) {
                    self.closed_by = Some(component);
                }
                return;
            }
        };
        let category = Category::from(opinion.category);
        let confidence = opinion.confidence;
        let key = precedence_key(component.name(), category, confidence, self.policy);
        if self.best.as_ref().is_none_or(|b| key > b.key) {
            self.best = Some(Candidate {
                key,
                category,
                confidence,
                component,
                reason: opinion.reason,
            });
        }
    }

    fn decision(self) -> Decision {
        let policy = self.policy;
        // A component that fails closed and could not judge refuses the request.
        let closed = match (self.missing, self.closed_by) {
            (Some(name), _) => Some((name.clone(), Arc::from(""), self.failed.saturating_add(1))),
            (None, Some(c)) => Some((c.name_arc().clone(), c.version_arc().clone(), self.failed)),
            (None, None) => None,
        };
        if let Some((name, version, failed_components)) = closed {
            return Decision {
                category: Category::SecurityIssues,
                action: Action::Deny,
                confidence: 100,
                reason: format!("{name}.failed"),
                decided_by: Some(Decider { name, version }),
                failed_components,
            };
        }
        match self.best {
            Some(best) => Decision {
                category: best.category,
                action: policy.action(best.category),
                confidence: best.confidence,
                decided_by: Some(Decider {
                    name: best.component.name_arc().clone(),
                    version: best.component.version_arc().clone(),
                }),
                reason: best.reason,
                failed_components: self.failed,
            },
            None => Decision {
                category: Category::Humans,
                action: policy.action(Category::Humans),
                confidence: 0,
                decided_by: None,
                reason: "none".into(),
                failed_components: self.failed,
            },
        }
    }
}

/// Runs the always-on components and every rule set of `enabled` that `set` holds
/// (each once), merges the opinions and applies `policy`.
///
/// The data plane's path: it walks the components in scope (usually the always-on ones
/// and at most one rule set) and keeps those enabled, rather than looking every
/// enabled name up; [`decide_observed`] decides the same.
pub fn decide(
    set: &RulesetSet,
    facts: &RequestFacts,
    enabled: &[&str],
    policy: &Policy,
) -> Decision {
    let mut merge = Merge::new(policy, set);
    let in_scope = set
        .scopes()
        .matching(&facts.method, &facts.target, &facts.headers);
    for slot in in_scope.iter() {
        let Some(component) = set.by_slot(slot) else {
            continue;
        };
        let name = component.name();
        if ALWAYS_ON.contains(&name) || enabled.contains(&name) {
            let outcome = component.evaluate_unless_closed(facts, || set.fails_closed(name));
            merge.offer(component, outcome);
        }
    }
    merge.require_loaded(enabled);
    merge.decision()
}

/// [`decide`], showing the outcome of the always-on components and of each enabled rule
/// set (`OutOfScope` for those not called) to `observe` as it comes (for `botgate ruleset
/// eval`, debugging and tests).
pub fn decide_observed<'set>(
    set: &'set RulesetSet,
    facts: &RequestFacts,
    enabled: &[&str],
    policy: &Policy,
    mut observe: impl FnMut(&'set LoadedComponent, &Outcome),
) -> Decision {
    // The always-on components, then each enabled rule set once (a name listed twice
    // runs once), in the order given: the merge does not depend on the order. No allocation.
    let names = enabled
        .iter()
        .enumerate()
        .filter(|&(i, name)| !ALWAYS_ON.contains(name) && !enabled[..i].contains(name))
        .map(|(_, name)| *name);

    let mut merge = Merge::new(policy, set);
    let in_scope = set
        .scopes()
        .matching(&facts.method, &facts.target, &facts.headers);
    for name in ALWAYS_ON.into_iter().chain(names) {
        let Some((slot, component)) = set.get_with_slot(name) else {
            continue;
        };
        let outcome = if in_scope.contains(slot) {
            component.evaluate_unless_closed(facts, || set.fails_closed(name))
        } else {
            Outcome::OutOfScope
        };
        observe(component, &outcome);
        merge.offer(component, outcome);
    }
    merge.require_loaded(enabled);
    merge.decision()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Category::*;

    /// The winner among `(component, category, confidence)` opinions.
    fn winner(
        opinions: &[(&'static str, Category, u8)],
        policy: &Policy,
    ) -> (&'static str, Category) {
        let best = opinions
            .iter()
            .max_by_key(|(name, category, confidence)| {
                precedence_key(name, *category, *confidence, policy)
            })
            .unwrap();
        (best.0, best.1)
    }

    #[test]
    fn security_issues_beat_higher_confidence_claims_of_legitimacy() {
        let p = Policy::default();
        let got = winner(
            &[
                ("wordpress", ServicesAndPayments, 95),
                ("classifier", SecurityIssues, 60),
            ],
            &p,
        );
        assert_eq!(got, ("classifier", SecurityIssues));
    }

    #[test]
    fn weak_security_opinion_does_not_override() {
        let p = Policy::default();
        let got = winner(
            &[
                ("classifier", SecurityIssues, 40),
                ("nextcloud", ServicesAndPayments, 90),
            ],
            &p,
        );
        assert_eq!(got, ("nextcloud", ServicesAndPayments));
    }

    #[test]
    fn highest_confidence_wins_otherwise() {
        let p = Policy::default();
        let got = winner(
            &[
                ("classifier", SuspiciousBehaviour, 55),
                ("nextcloud", ServicesAndPayments, 90),
            ],
            &p,
        );
        assert_eq!(got, ("nextcloud", ServicesAndPayments));
        let got = winner(
            &[
                ("classifier", ContentScrapers, 85),
                ("drupal", SuspiciousBehaviour, 60),
            ],
            &p,
        );
        assert_eq!(got, ("classifier", ContentScrapers));
    }

    #[test]
    fn ties_go_to_the_cms_rule_set_then_the_stricter_action_then_the_name() {
        let p = Policy::default();
        assert_eq!(
            winner(
                &[
                    ("classifier", ContentScrapers, 80),
                    ("wordpress", ServicesAndPayments, 80)
                ],
                &p
            ),
            ("wordpress", ServicesAndPayments)
        );
        assert_eq!(
            winner(
                &[("drupal", Humans, 70), ("joomla", SuspiciousBehaviour, 70)],
                &p
            ),
            ("joomla", SuspiciousBehaviour),
            "captcha is stricter than grant"
        );
        let strict_humans = Policy::default().with(Humans, Action::Deny);
        assert_eq!(
            winner(
                &[("drupal", Humans, 70), ("joomla", SuspiciousBehaviour, 70)],
                &strict_humans
            ),
            ("drupal", Humans),
            "strictness follows the website's policy"
        );
        assert_eq!(
            winner(
                &[
                    ("joomla", SuspiciousBehaviour, 70),
                    ("bitrix", SuspiciousBehaviour, 70)
                ],
                &p
            ),
            ("bitrix", SuspiciousBehaviour)
        );
    }
}
