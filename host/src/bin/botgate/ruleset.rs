//! `botgate ruleset`: validate components, decide one request, and watch a directory.

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
    let facts = request_facts(request, &client);

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

pub fn watch(registry: Arc<Registry>, dir: PathBuf) -> Result<()> {
    let source = DirectorySource::new(&dir);
    tracing::info!(source = %source.describe(), "watching for rule sets; stop with Ctrl-C");
    let _watcher =
        Watcher::start(registry, source).with_context(|| format!("watching {}", dir.display()))?;
    loop {
        std::thread::park();
    }
}
