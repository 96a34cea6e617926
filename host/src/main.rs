//! The `botgate` command: the operator's and rule author's entry point.

use anyhow::{Context, Result, bail};
use botgate_host::rules::facts::{ip_address, request_facts};
use botgate_host::rules::{
    CLASSIFIER, DirectorySource, Outcome, Registry, RulesetSource, Sandbox, SandboxConfig, Watcher,
    bindings::{AlpnProtocol, HttpVersion, Scheme, TlsFacts, TlsVersion},
    decide_observed,
};
use botgate_model::Policy;
use clap::{Parser, Subcommand};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// botgate: a bot-protection gateway with sandboxed WebAssembly rule components.
#[derive(Parser)]
#[command(name = "botgate", version, about)]
struct Cli {
    /// Where compiled rule components are cached [env: BOTGATE_CACHE_DIR; default:
    /// $XDG_CACHE_HOME/botgate or ~/.cache/botgate].
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Work with rule components (Wasm rule sets).
    #[command(subcommand)]
    Ruleset(RulesetCommand),
}

#[derive(Subcommand)]
enum RulesetCommand {
    /// Validate rule components as the gateway would load them: compile, check the
    /// world and imports, check `info`, run the smoke request.
    Check {
        /// `.wasm` files; each file's stem is the component's name.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Decide one request with the components of a directory, and show every opinion.
    Eval {
        /// Directory of `<name>.wasm` components.
        #[arg(long)]
        dir: PathBuf,
        /// Rule sets enabled for the website, comma-separated (the classifier always runs).
        #[arg(long, value_delimiter = ',')]
        enable: Vec<String>,
        /// Request method.
        #[arg(short = 'X', long, default_value = "GET")]
        method: String,
        /// A request header, `name: value`; repeat for more.
        #[arg(short = 'H', long = "header")]
        headers: Vec<String>,
        /// The client address.
        #[arg(long, default_value = "203.0.113.10")]
        ip: IpAddr,
        /// The request URL, `https://host/path?query`.
        url: String,
    },
    /// Load a directory of components and hot-reload it on every change until stopped.
    Watch {
        /// Directory of `<name>.wasm` components.
        dir: PathBuf,
    },
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,wasmtime=warn,cranelift=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let cache_dir = cli.cache_dir.or_else(default_cache_dir);
    let sandbox = Sandbox::new(SandboxConfig::default()).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let registry = Arc::new(Registry::new(sandbox, cache_dir));
    match cli.command {
        Command::Ruleset(RulesetCommand::Check { files }) => check(&registry, &files),
        Command::Ruleset(RulesetCommand::Eval {
            dir,
            enable,
            method,
            headers,
            ip,
            url,
        }) => eval(&registry, dir, &enable, &method, &headers, ip, &url),
        Command::Ruleset(RulesetCommand::Watch { dir }) => watch(registry, dir),
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BOTGATE_CACHE_DIR") {
        return Some(dir.into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("botgate"))
}

fn check(registry: &Registry, files: &[PathBuf]) -> Result<()> {
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

fn eval(
    registry: &Registry,
    dir: PathBuf,
    enable: &[String],
    method: &str,
    headers: &[String],
    ip: IpAddr,
    url: &str,
) -> Result<()> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("https://") {
        (Scheme::Https, rest)
    } else if let Some(rest) = url.strip_prefix("http://") {
        (Scheme::Http, rest)
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
    let mut facts = request_facts(
        method,
        scheme,
        host,
        path,
        query,
        HttpVersion::Http11,
        parsed.iter().map(|(n, v)| (n.as_str(), v.as_bytes())),
        ip,
    );
    facts.client_ip = ip_address(ip);
    if scheme == Scheme::Https {
        facts.version = HttpVersion::Http2;
        facts.tls = Some(TlsFacts {
            version: TlsVersion::Tls13,
            alpn: AlpnProtocol::H2,
            ja4: String::new(),
        });
    }

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

fn watch(registry: Arc<Registry>, dir: PathBuf) -> Result<()> {
    let source = DirectorySource::new(&dir);
    tracing::info!(source = %source.describe(), "watching for rule sets; stop with Ctrl-C");
    let _watcher =
        Watcher::start(registry, source).with_context(|| format!("watching {}", dir.display()))?;
    loop {
        std::thread::park();
    }
}
