//! `botgate ruleset`: validate components, decide one request, test a component against
//! labelled requests, and watch a directory.

use anyhow::{Context, Result, bail};
use botgate_host::client::{Alpn, ClientFacts, TlsInfo, TlsVersion};
use botgate_host::rules::facts::{RequestParts, request_facts};
use botgate_host::rules::{
    CLASSIFIER, DirectorySource, Outcome, Registry, RulesetSource, Watcher, decide_observed,
};
use botgate_model::Policy;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub fn check(registry: &Registry, files: &[PathBuf]) -> Result<()> {
    let mut refused = 0;
    for file in files {
        let name = DirectorySource::component_name(file)
            .with_context(|| format!("{}: expected a `<name>.wasm` file", file.display()))?;
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        match registry.check(name, &bytes, &file.display().to_string()) {
            Ok(c) => println!(
                "ok       {} {} ({}): {}",
                c.name(),
                c.version(),
                file.display(),
                c.description()
            ),
            Err(err) => {
                refused += 1;
                println!("refused  {}: {err}", file.display());
            }
        }
    }
    if refused > 0 {
        bail!("{refused} of {} components refused", files.len());
    }
    Ok(())
}

pub fn eval(
    registry: &Registry,
    dir: PathBuf,
    enable: &[String],
    method: &str,
    headers: &[String],
    ip: IpAddr,
    url: &str,
) -> Result<()> {
    let facts = facts_for(method, headers, ip, url)?;

    let report = registry.sync(&DirectorySource::new(&dir));
    if !report.refused.is_empty() {
        eprintln!(
            "warning: {} components refused (see the log)",
            report.refused.len()
        );
    }
    let set = registry.snapshot();
    if set.get(CLASSIFIER).is_none() {
        eprintln!("warning: no classifier.wasm in {}", dir.display());
    }
    let enabled: Vec<&str> = enable.iter().map(String::as_str).collect();
    let decision = decide_observed(
        &set,
        &facts,
        &enabled,
        &Policy::default(),
        |component, outcome| {
            let name = component.name();
            match outcome {
                Outcome::Opinion(o) => println!(
                    "{name:<12} {:<22} confidence {:>3}  {}",
                    botgate_model::Category::from(o.category).as_str(),
                    o.confidence,
                    o.reason
                ),
                Outcome::Abstain => println!("{name:<12} abstains"),
                Outcome::Disabled => println!("{name:<12} switched off"),
                Outcome::OutOfScope => println!("{name:<12} not called (outside its scope)"),
                Outcome::Failed(failure) => println!("{name:<12} failed: {failure}"),
            }
        },
    );
    for name in enable.iter().filter(|n| set.get(n).is_none()) {
        println!("{name:<12} not loaded");
    }
    println!(
        "decision     {} -> {} (by {}, reason {}, confidence {})",
        decision.category,
        decision.action,
        decision
            .decided_by
            .map(|d| format!("{} {}", d.name, d.version))
            .unwrap_or_else(|| "nobody".into()),
        decision.reason,
        decision.confidence
    );
    Ok(())
}

/// The facts of the request `method url` with `headers` (`name: value`) from `ip`, as a
/// browser sends it: over HTTPS, HTTP/2 over TLS 1.3.
fn facts_for(
    method: &str,
    headers: &[String],
    ip: IpAddr,
    url: &str,
) -> Result<botgate_host::rules::RequestFacts> {
    let (https, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (false, rest)
    } else {
        bail!("the URL must start with http:// or https://: {url}");
    };
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut parsed = vec![("host".to_owned(), host.to_owned())];
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("a header is `name: value`, got {header:?}"))?;
        parsed.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    // Over HTTPS, as a browser comes: HTTP/2 over TLS 1.3.
    let tls = TlsInfo {
        version: TlsVersion::Tls13,
        alpn: Alpn::H2,
        ja4: String::new(),
    };
    let request = RequestParts {
        method,
        https,
        host,
        path,
        query,
        version: if https {
            http::Version::HTTP_2
        } else {
            http::Version::HTTP_11
        },
        headers: parsed.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
        client_ip: ip,
    };
    let client = ClientFacts {
        tls: https.then_some(&tls),
        ..ClientFacts::default()
    };
    Ok(request_facts(request, &client))
}

pub fn watch(registry: Arc<Registry>, dir: PathBuf) -> Result<()> {
    let source = DirectorySource::new(&dir);
    tracing::info!(source = %source.describe(), "watching for rule sets; stop with Ctrl-C");
    let _watcher =
        Watcher::start(registry, source).with_context(|| format!("watching {}", dir.display()))?;
    loop {
        std::thread::park();
    }
}

/// One labelled request of a `--cases` file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// A label for the report (the line number otherwise).
    #[serde(default)]
    name: Option<String>,
    #[serde(default = "get")]
    method: String,
    url: String,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
    #[serde(default = "client_ip")]
    ip: IpAddr,
    expect: Expected,
}

fn get() -> String {
    "GET".into()
}

fn client_ip() -> IpAddr {
    IpAddr::from([203, 0, 113, 10])
}

/// What a case wants: a category (or `abstain`), and optionally the reason and a least
/// confidence.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Expected {
    Category(String),
    Detailed {
        category: String,
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        min_confidence: Option<u8>,
    },
}

/// `botgate ruleset test FILE --cases CASES.jsonl`: every labelled request against the
/// component, as the gateway would call it (outside its scope it is not called: an
/// abstention); every mismatch reported. An error when any case fails.
pub fn test(registry: &Registry, file: &PathBuf, cases: &PathBuf) -> Result<()> {
    let name = DirectorySource::component_name(file)
        .with_context(|| format!("{}: expected a `<name>.wasm` file", file.display()))?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let component = registry
        .check(name, &bytes, &file.display().to_string())
        .map_err(|e| anyhow::anyhow!("{}: refused: {e}", file.display()))?;
    let version = component.version().to_owned();
    registry.install(Arc::new(component));
    let set = registry.snapshot();
    let (slot, component) = set
        .get_with_slot(name)
        .context("the component just loaded")?;
    let text =
        std::fs::read_to_string(cases).with_context(|| format!("reading {}", cases.display()))?;
    let (mut total, mut failed) = (0, 0);
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = format!("{}:{}", cases.display(), number + 1);
        let case: Case = serde_json::from_str(line).with_context(|| format!("{at}: not a case"))?;
        let headers: Vec<String> = case
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect();
        let facts =
            facts_for(&case.method, &headers, case.ip, &case.url).with_context(|| at.clone())?;
        let in_scope = set
            .scopes()
            .matching(&facts.method, &facts.target, &facts.headers)
            .contains(slot);
        let outcome = match in_scope {
            true => component.evaluate(&facts),
            false => Outcome::OutOfScope,
        };
        let (category, reason, confidence) = match &outcome {
            Outcome::Opinion(o) => (
                botgate_model::Category::from(o.category)
                    .as_str()
                    .to_owned(),
                o.reason.clone(),
                o.confidence,
            ),
            Outcome::Abstain | Outcome::OutOfScope => ("abstain".into(), String::new(), 0),
            Outcome::Failed(failure) => (format!("failed ({failure})"), String::new(), 0),
            Outcome::Disabled => ("switched off".into(), String::new(), 0),
        };
        let (wanted, wanted_reason, least) = match &case.expect {
            Expected::Category(category) => (category.as_str(), None, None),
            Expected::Detailed {
                category,
                reason,
                min_confidence,
            } => (category.as_str(), reason.as_deref(), *min_confidence),
        };
        let label = case.name.unwrap_or_else(|| format!("line {}", number + 1));
        let mut wrong = Vec::new();
        if category != wanted {
            wrong.push(format!("category {category}, not {wanted}"));
        }
        if let Some(wanted_reason) = wanted_reason.filter(|r| *r != reason) {
            wrong.push(format!("reason {reason:?}, not {wanted_reason:?}"));
        }
        if let Some(least) = least.filter(|least| confidence < *least) {
            wrong.push(format!("confidence {confidence}, under {least}"));
        }
        total += 1;
        if wrong.is_empty() {
            println!(
                "ok    {label}: {category}{}",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({reason}, {confidence})")
                }
            );
        } else {
            failed += 1;
            println!("FAIL  {at} {label}: {}", wrong.join("; "));
        }
    }
    println!("{name} {version}: {total} cases, {failed} mismatches");
    if failed > 0 {
        bail!("{failed} of {total} cases do not match");
    }
    Ok(())
}
