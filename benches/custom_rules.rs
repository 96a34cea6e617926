//! What a website's custom rules can cost one request at most: the limits' worst
//! (50 rules of 10 conditions: 20 patterns and 480 `contains`, none matching) against a
//! request whose `User-Agent` fills a 60 KiB head. Each text is lower-cased once a
//! request and each pattern is a DFA (one step a byte), so the cost is the conditions
//! times the text, never the pattern's size times the text.
//!
//! Run: `cargo bench -p botgate-benches --bench custom_rules`.

use botgate_host::gateway::connection::ConnectionInfo;
use botgate_host::gateway::custom_rules::RuleSubject;
use botgate_host::gateway::geoip::GeoIp;
use botgate_model::Action;
use botgate_model::custom_rules::{
    CustomRules, MAX_CONDITIONS, MAX_PATTERNS, MAX_RULES, Subject, TextSource,
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use std::hint::black_box;

/// The worst rules the limits allow on one header: every condition reads it.
fn worst_rules() -> CustomRules {
    let mut patterns = 0;
    let rules: Vec<Value> = (0..MAX_RULES)
        .map(|rule| {
            let conditions: Vec<Value> = (0..MAX_CONDITIONS)
                .map(|condition| {
                    let n = rule * MAX_CONDITIONS + condition;
                    if patterns < MAX_PATTERNS && condition == 0 {
                        patterns += 1;
                        json!({"field": "user_agent", "operator": "matches",
                               "value": format!("(sqlmap|nikto|scan{n})[0-9]{{1,5}}x")})
                    } else {
                        json!({"field": "user_agent", "operator": "contains",
                               "value": format!("n{n}")})
                    }
                })
                .collect();
            json!({"conditions": conditions, "action": "deny"})
        })
        .collect();
    CustomRules::parse(&Value::Array(rules)).expect("the limits' worst rules")
}

fn worst_case(c: &mut Criterion) {
    let rules = worst_rules();
    // Mixed case, so that lower-casing copies.
    let agent: String = (0..60 * 1024)
        .map(|i| if i % 7 == 0 { 'A' } else { 'b' })
        .collect();
    let request = http::Request::builder()
        .uri("/page?x=1")
        .header("user-agent", agent)
        .body(())
        .expect("a request");
    let connection = ConnectionInfo::new("192.0.2.9:5000".parse().unwrap(), true, false, None);
    let geoip = GeoIp::default();
    c.bench_function("custom rules: the limits' worst, 60 KiB user agent", |b| {
        b.iter(|| {
            let subject = RuleSubject::new(&request, "example.com", &connection, &geoip);
            black_box(rules.first_match(&[&subject], |_| Action::Deny).is_some())
        })
    });
    // For comparison: the same subject lower-casing each text for every condition.
    c.bench_function(
        "custom rules: the limits' worst, 60 KiB user agent, lower-cased per condition",
        |b| {
            b.iter(|| {
                let subject = Uncached(RuleSubject::new(
                    &request,
                    "example.com",
                    &connection,
                    &geoip,
                ));
                black_box(rules.first_match(&[&subject], |_| Action::Deny).is_some())
            })
        },
    );
}

/// A subject that keeps no lower-cased texts (the trait's own `any_lower_text`).
struct Uncached<'a>(RuleSubject<'a>);

impl Subject for Uncached<'_> {
    fn client_ip(&self) -> std::net::IpAddr {
        self.0.client_ip()
    }
    fn country(&self) -> Option<[u8; 2]> {
        self.0.country()
    }
    fn asn(&self) -> Option<u32> {
        self.0.asn()
    }
    fn any_text(&self, source: &TextSource, visit: &mut dyn FnMut(&str) -> bool) -> bool {
        self.0.any_text(source, visit)
    }
}

criterion_group!(benches, worst_case);
criterion_main!(benches);
