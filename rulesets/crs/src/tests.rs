//! The rules against the corpora: the Core Rule Set's own regression samples (attacks
//! and its benign ones) and benign traffic of browsers, API clients and CMS admins.

use super::*;
use std::collections::BTreeMap;

/// One request of a corpus file.
struct Sample {
    test: String,
    rule: u32,
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

fn corpus(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a corpus line");
            Sample {
                test: v["test"].as_str().unwrap_or_default().to_string(),
                rule: v["rule"].as_u64().unwrap_or(0) as u32,
                method: v["method"].as_str().unwrap_or("GET").to_string(),
                target: v["target"].as_str().unwrap_or("/").to_string(),
                headers: v["headers"]
                    .as_array()
                    .map(|h| {
                        h.iter()
                            .map(|pair| {
                                let text =
                                    |i: usize| pair[i].as_str().unwrap_or_default().to_string();
                                (text(0), text(1))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

fn run(sample: &Sample) -> Inspection {
    let headers: Vec<(&str, &str)> = sample
        .headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let block: String = headers.iter().map(|(n, v)| format!("{n}: {v}\n")).collect();
    inspect(&Parts {
        method: &sample.method,
        target: &sample.target,
        protocol: "HTTP/1.1",
        headers: &headers,
        header_block: &block,
    })
}

/// `GET target` with a browser's headers and `extra`, as a test sample.
fn browser(target: &str, extra: &[(&str, &str)]) -> Sample {
    let mut headers = vec![
        ("host", "shop.example"),
        (
            "user-agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
        ),
        ("accept", "text/html,application/xhtml+xml"),
        ("cookie", "session=5f1c0de; theme=dark"),
    ];
    headers.extend_from_slice(extra);
    Sample {
        test: target.into(),
        rule: 0,
        method: "GET".into(),
        target: target.into(),
        headers: headers
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

/// A header block or a request line remembered clean hides no attack in the other.
#[test]
fn a_block_or_line_seen_clean_hides_no_attack_in_the_other() {
    let page = browser("/catalog/chairs?page=2", &[]);
    for _ in 0..2 {
        assert!(!run(&page).is_attack());
    }
    let in_line = browser(
        "/catalog/chairs?page=2%20union%20select%20password%20from%20users--",
        &[],
    );
    assert!(run(&in_line).is_attack());
    let in_block = browser(
        "/catalog/chairs?page=2",
        &[("referer", "<script>alert(document.cookie)</script>")],
    );
    assert!(run(&in_block).is_attack());
    for _ in 0..2 {
        assert!(!run(&page).is_attack());
        assert!(run(&in_line).is_attack());
        assert!(run(&in_block).is_attack());
    }
}

fn family_of(rule: u32) -> &'static str {
    match rule / 1000 {
        913 => "scanner",
        921 => "protocol-attack",
        930 => "lfi",
        931 => "rfi",
        932 => "rce",
        933 => "php",
        934 => "nodejs",
        941 => "xss",
        942 => "sqli",
        943 => "session-fixation",
        944 => "java",
        _ => "other",
    }
}

/// The second inspection of a request (its values remembered) finds what the first did.
#[test]
fn remembered_values_give_the_same_inspection() {
    let samples = corpus(include_str!("../corpus/attacks.jsonl"));
    let benign = corpus(include_str!("../corpus/benign.jsonl"));
    let all: Vec<&Sample> = samples.iter().chain(&benign).collect();
    let first: Vec<Inspection> = all.iter().map(|s| run(s)).collect();
    for (sample, first) in all.iter().zip(&first) {
        assert_eq!(&run(sample), first, "{}", sample.test);
    }
}

#[test]
fn every_pattern_compiles() {
    for slot in 0..generated::REGEX_COUNT {
        assert!(
            matchers::regex_compiles(slot),
            "pattern {slot} does not compile"
        );
    }
}

#[test]
fn crs_attack_samples_are_stopped() {
    let samples = corpus(include_str!("../corpus/attacks.jsonl"));
    let mut by_family: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut missed = Vec::new();
    for sample in &samples {
        let entry = by_family.entry(family_of(sample.rule)).or_default();
        entry.1 += 1;
        if run(sample).is_attack() {
            entry.0 += 1;
        } else {
            missed.push(format!(
                "{} {} {}",
                sample.test, sample.method, sample.target
            ));
        }
    }
    let stopped: usize = by_family.values().map(|(s, _)| s).sum();
    for (family, (s, n)) in &by_family {
        eprintln!(
            "{family:>18}: {s:>4} of {n:>4} stopped ({:.1}%)",
            100.0 * *s as f64 / *n as f64
        );
    }
    eprintln!(
        "{:>18}: {stopped:>4} of {:>4} stopped ({:.1}%)",
        "all",
        samples.len(),
        100.0 * stopped as f64 / samples.len() as f64
    );
    for m in &missed {
        eprintln!("missed: {m}");
    }
    assert!(
        stopped * 100 >= samples.len() * 90,
        "{stopped} of {} stopped",
        samples.len()
    );
}

/// CRS's own negative samples say one rule must not fire on them (some are attacks
/// that other rules catch, or that libinjection is known to miss).
#[test]
fn crs_negative_samples_do_not_fire_their_rule() {
    let samples = corpus(include_str!("../corpus/crs-benign.jsonl"));
    let fired: Vec<String> = samples
        .iter()
        .filter(|s| run(s).matched.iter().any(|(id, _)| *id == s.rule))
        .map(|s| format!("{} {}", s.test, s.target))
        .collect();
    assert!(
        fired.is_empty(),
        "rules fired on their negative samples: {fired:#?}"
    );
}

#[test]
fn benign_traffic_passes() {
    let samples = corpus(include_str!("../corpus/benign.jsonl"));
    let stopped: Vec<String> = samples
        .iter()
        .filter_map(|s| {
            let inspection = run(s);
            inspection
                .is_attack()
                .then(|| format!("{} {} {:?}", s.test, s.target, inspection.matched))
        })
        .collect();
    eprintln!(
        "benign: {} of {} pass",
        samples.len() - stopped.len(),
        samples.len()
    );
    for s in &stopped {
        eprintln!("stopped: {s}");
    }
    assert!(
        stopped.len() * 100 <= samples.len(),
        "{} of {} benign requests stopped",
        stopped.len(),
        samples.len()
    );
}
